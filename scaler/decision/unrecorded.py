"""The prewarm spend a restarted scaler cannot see in the shared record, bounded. Pure.

The ledger is rebuilt from the spend counter Prometheus scrapes from every scaler pod. Spend
charged after a pod's last scrape is lost when that pod dies (SIGKILL, OOM, node loss; a
SIGTERM too, as no scrape follows it), and the rebuild reads the counter on a grid of
`sample_step`, so a scrape newer than the last grid point is missed as well. Every lost charge
is therefore stamped within `scrape_interval + sample_step` before the rebuild, and a decision
charges at most `max_prewarm_replicas` for one step. The engine books that much against the
window when it rebuilds a ledger: the scaler reserves it, so the cap stays strict.
"""

from __future__ import annotations

HOUR = 3600.0


def unrecorded_spend(
    *, max_prewarm_replicas: int, step: float, scrape_interval: float, sample_step: float
) -> float:
    """Replica-hours of prewarm that may have been charged but never reached the record:
    decisions within `scrape_interval + sample_step` (one more for the partial step at either
    end), each at most `max_prewarm_replicas` for `step` seconds."""
    unseen = max(scrape_interval, 0.0) + max(sample_step, 0.0)
    return max(max_prewarm_replicas, 0) * (unseen + step) / HOUR
