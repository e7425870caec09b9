"""What earlier scaler replicas spent on prewarming, backfilled into the test Prometheus: the
record a freshly started scaler rebuilds its prewarm ledger from.

Two triggers on the llm trace, each with a 24-unit daily budget; both spent 20 replica-hours
over the last 5 hours, recorded by two scaler pods, one of which restarted 2 hours before the
end (a counter reset). `HOURS` is budgeted in replica-hours (4 left); `MONEY` at 1.2 USD per
replica-hour, so the 20 replica-hours cost the whole 24 USD (nothing left).
"""

from __future__ import annotations

import numpy as np

from scaler import spec
from tests.integration.prometheus_server import CounterSeries

NAMESPACE = "gpu"
BUDGET = 24.0
SPENT_HOURS = 20.0
QUERY = 'sum(trace_llm_serving_10min{job="trace",trace="llm_serving_10min"})'
HOURS = {"query": QUERY, "threshold": "60", "model": "seasonal", "prewarmBudget": "24"}
MONEY = {**HOURS, "costPerReplicaHour": "1.2"}
NAMES = {"spender": HOURS, "spender-money": MONEY}

SCRAPE = 60.0
SPENDING = 5 * 3600.0
RESTART_BEFORE_END = 2 * 3600.0
RECORDED = 26 * 3600.0
"""Longer than the budget window, so both pods' counters predate the window the scaler reads."""


def key(name: str) -> str:
    """The target key the scaler labels its spend counter with."""
    return spec.parse(NAMESPACE, name, NAMES[name]).key


def counters(*, end: float) -> list[CounterSeries]:
    """Both pods' `scaler_prewarm_replica_hours_total` for every trigger of NAMES, up to `end`."""
    times = np.arange(end - RECORDED, end + 1e-6, SCRAPE)
    spent = np.clip((times - (end - SPENDING)) / SPENDING, 0.0, 1.0) * SPENT_HOURS
    restart = times >= end - RESTART_BEFORE_END
    at_restart = spent[restart][0] - (spent[restart][1] - spent[restart][0])
    pods = {
        "scaler-a": 100.0 + spent,
        "scaler-b": np.where(restart, spent - at_restart, 7.0 + spent),
    }
    return [
        CounterSeries(
            "scaler_prewarm_replica_hours",
            {"job": "scaler", "pod": pod, "target": key(name)},
            times,
            values,
        )
        for name in NAMES
        for pod, values in pods.items()
    ]
