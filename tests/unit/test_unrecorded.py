"""The bound on prewarm spend a killed pod charged but no scrape recorded: simulated pods that
charge every step, a Prometheus scraping them at any phase, a rebuild at any time after the kill,
read through the ledger's own `spent_per_step`."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.decision import budget, unrecorded
from scaler.serving.ledgerrebuild import LEDGER_STEP

WINDOW = 86400.0


def lost_spend(
    *, replicas: int, step: float, interval: float, phase: float, death: float, delay: float
) -> float:
    """Replica-hours a pod charged before `death` that a rebuild `delay` later cannot see."""
    start_charging = death - 1800.0  # half an hour of prewarm before the kill
    charges = [t for t in _grid(start_charging, step, death)]  # one decision per step
    spent = [replicas * step / budget.HOUR for _ in charges]

    def counter(at: float) -> float:
        return sum(h for t, h in zip(charges, spent, strict=True) if t <= at)

    scrapes = _grid(phase, interval, death)  # a dead pod is scraped no more
    now = death + delay
    start = now - WINDOW
    samples = []
    for g in _grid(start, LEDGER_STEP, now):
        seen = [s for s in scrapes if s <= g]
        if seen:
            samples.append((g, counter(seen[-1])))
    recorded = sum(h for _, h in budget.spent_per_step([samples], start=start))
    return sum(spent) - recorded


def _grid(first: float, step: float, end: float) -> list[float]:
    return [first + k * step for k in range(math.floor((end - first) / step) + 1)]


@settings(max_examples=60, deadline=None)
@given(
    replicas=st.integers(1, 20),
    step=st.sampled_from([10.0, 30.0, 60.0]),
    interval=st.sampled_from([15.0, 30.0, 60.0]),
    phase=st.floats(0.0, 59.0),
    death=st.floats(4 * 3600.0, 5 * 3600.0),
    delay=st.floats(0.0, 300.0),
)
def test_what_a_killed_pod_spent_unrecorded_never_exceeds_the_reserve(
    replicas: int, step: float, interval: float, phase: float, death: float, delay: float
) -> None:
    lost = lost_spend(
        replicas=replicas, step=step, interval=interval, phase=phase, death=death, delay=delay
    )
    reserve = unrecorded.unrecorded_spend(
        max_prewarm_replicas=replicas, step=step, scrape_interval=interval, sample_step=LEDGER_STEP
    )
    assert -1e-9 <= lost <= reserve + 1e-9


def test_without_the_reserve_a_kill_just_before_a_scrape_loses_about_one_scrape_interval() -> None:
    # The ablation: a pod killed just before its next scrape (due 1 s after each decision),
    # its ledger rebuilt at once: its last decision's charge is in no record.
    lost = lost_spend(
        replicas=10, step=30.0, interval=30.0, phase=29.0, death=5 * 3600.0 + 28.5, delay=0.0
    )
    assert lost >= 10 * 30.0 / budget.HOUR - 1e-9  # one replica-step per prewarm replica
    reserve = unrecorded.unrecorded_spend(
        max_prewarm_replicas=10, step=30.0, scrape_interval=30.0, sample_step=LEDGER_STEP
    )
    assert lost <= reserve


def test_the_reserve_is_nothing_when_no_prewarm_is_allowed() -> None:
    assert (
        unrecorded.unrecorded_spend(
            max_prewarm_replicas=0, step=30.0, scrape_interval=30.0, sample_step=LEDGER_STEP
        )
        == 0.0
    )
