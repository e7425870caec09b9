"""What earlier scaler replicas spent on prewarming, backfilled into the test Prometheus: the
record a freshly started scaler rebuilds its prewarm ledger from.

Two triggers on the llm trace, each with a 24-unit daily budget; both spent 20 replica-hours
over the last 5 hours, recorded by two scaler pods, one of which restarted 2 hours before the
end (a counter reset). `HOURS` is budgeted in replica-hours (4 left); `MONEY` at 1.2 USD per
replica-hour, so the 20 replica-hours cost the whole 24 USD (nothing left), as its exported
price says. `SHADOW` is `HOURS` in
`mode: shadow`, its spend in the shadow counter. `SHARE` is budgeted
at 10 % of the reactive replica-hours, which the same pods recorded at REACTIVE_PER_HOUR for
longer than a day: 10 % of 300 replica-hours in the window, 10 left.
"""

from __future__ import annotations

import numpy as np

from scaler.decision import spec
from tests.integration.prometheus_server import CounterSeries

NAMESPACE = "gpu"
BUDGET = 24.0
SPENT_HOURS = 20.0
QUERY = 'sum(trace_llm_serving_10min{job="trace",trace="llm_serving_10min"})'
HOURS = {"query": QUERY, "threshold": "60", "model": "seasonal", "prewarmBudget": "24"}
MONEY = {**HOURS, "costPerReplicaHour": "1.2"}
SHARE = {**HOURS, "prewarmBudget": "10%"}
SHADOW = {**HOURS, "mode": "shadow"}
NAMES = {"spender": HOURS, "spender-money": MONEY, "spender-share": SHARE, "spender-shadow": SHADOW}
REACTIVE_PER_HOUR = 12.5
"""Reactive replica-hours per hour every trigger recorded: 300 in a day."""

SCRAPE = 60.0
SPENDING = 5 * 3600.0
RESTART_BEFORE_END = 2 * 3600.0
RECORDED = 26 * 3600.0
"""Longer than the budget window, so both pods' counters predate the window the scaler reads."""


def key(name: str) -> str:
    """The target key the scaler labels its spend counter with."""
    return spec.parse(NAMESPACE, name, NAMES[name]).key


def counters(*, end: float) -> list[CounterSeries]:
    """Both pods' `scaler_prewarm_replica_hours_total` and
    `scaler_reactive_replica_hours_total` for every trigger of NAMES, up to `end`, and the
    `scaler_cost_per_replica_hour` gauge of a priced one (the price its spend was paid at)."""
    times = np.arange(end - RECORDED, end + 1e-6, SCRAPE)
    spent = np.clip((times - (end - SPENDING)) / SPENDING, 0.0, 1.0) * SPENT_HOURS
    used = (times - times[0]) / 3600.0 * REACTIVE_PER_HOUR
    return [
        CounterSeries(family, {"job": "scaler", "pod": pod, "target": key(name)}, times, values)
        for name, meta in NAMES.items()
        for family, total in (
            (_prewarm_family(meta), spent),
            ("scaler_reactive_replica_hours", used),
        )
        for pod, values in _pods(times, total, end=end).items()
    ] + [
        CounterSeries(
            "scaler_cost_per_replica_hour",
            {"job": "scaler", "pod": pod, "target": key(name)},
            times,
            np.full_like(times, float(meta["costPerReplicaHour"])),
            kind="gauge",
        )
        for name, meta in NAMES.items()
        if "costPerReplicaHour" in meta
        for pod in ("scaler-a", "scaler-b")
    ]


def _prewarm_family(meta: dict[str, str]) -> str:
    """A shadow trigger records what it would have spent in its own counter."""
    if meta.get("mode") == "shadow":
        return "scaler_shadow_prewarm_replica_hours"
    return "scaler_prewarm_replica_hours"


def _pods(times: np.ndarray, total: np.ndarray, *, end: float) -> dict[str, np.ndarray]:
    """Two pods' counters of the same `total`: one steady, one restarted from 0 (its first
    value after the restart is that step's increment)."""
    restart = times >= end - RESTART_BEFORE_END
    at_restart = total[restart][0] - (total[restart][1] - total[restart][0])
    return {
        "scaler-a": 100.0 + total,
        "scaler-b": np.where(restart, total - at_restart, 7.0 + total),
    }
