"""What the serving replicas say about a target's drift fallback, read for `scaler retrain`
from the gauge they export: a model the job promotes carries it (`fallback_at_fit`), as serve's
own fits do.

Must not: decide anything with it (retrain.py records it with the model).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from scaler.decision.spec import TargetSpec

if TYPE_CHECKING:
    from scaler.sources.prometheus import PrometheusSource

DRIFT_GAUGE = "scaler_drift_fallback"
"""What every serve replica exports per target, 1 while in drift fallback (serving/telemetry.py)."""
LiveFallback = Callable[[TargetSpec, float], "bool | None"]
"""(target, time) -> whether the serving replicas hold it in drift fallback; None: unknown."""


def live_fallback(source: PrometheusSource) -> LiveFallback:
    """Whether the replicas hold a target in drift fallback now, from the gauge they export
    (DRIFT_GAUGE, max over replicas: they agree) in the Prometheus that scrapes them, the
    default one (the ledger's): a refit made in fallback starts in it on every replica
    (scaler/serving/driftstate.py `carried_fallback`), as with serve's own fits. None when no
    replica exported it (never served, or that Prometheus does not scrape the scaler)."""

    def read(spec: TargetSpec, at: float) -> bool | None:
        target = spec.key.replace("\\", "\\\\").replace('"', '\\"')
        query = f'max({DRIFT_GAUGE}{{target="{target}"}})'
        found = source.values(replace(spec, server_address=None), query, at=at)
        return None if not found else max(found) >= 1.0

    return read
