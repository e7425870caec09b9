"""The ledger's history as a serving fleet leaves it in Prometheus: both counters a fresh replica
rebuilds its ledgers from (`scaler_prewarm_replica_hours_total`,
`scaler_reactive_replica_hours_total`, serving/telemetry.py), for each target key and scaler pod,
one scraped sample a minute, as CounterSeries for tests/integration/prometheus_server.py to
backfill with promtool.

Each pod has run since `end - span` and charged the same decisions (replicas agree), so each of
its counters grows at a constant rate from 0: `reactive` replicas and `prewarm` of them above
reactive, in replica-hours. Used by bench/ledger_window.py and bench/replicas.py
`--ledger-history`, which also counts what a replica's log says of its ledgers (`log_counts`).
Must not: start Prometheus or read anything.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from tests.integration.prometheus_server import CounterSeries

PREWARM_FAMILY = "scaler_prewarm_replica_hours"
REACTIVE_FAMILY = "scaler_reactive_replica_hours"
SCRAPE = 60.0
"""Seconds between two scraped samples of a counter."""
REACTIVE = 10.0
"""Reactive replicas of every target, all the time."""
PREWARM = 1.0
"""Replicas prewarmed above reactive (a 30 % share budget allows 3 of 10)."""


def counters(
    keys: Iterable[str],
    *,
    pods: int,
    end: float,
    span: float,
    reactive: float = REACTIVE,
    prewarm: float = PREWARM,
    scrape: float = SCRAPE,
) -> list[CounterSeries]:
    """Both counters of every target key (the engine's `target` label) and pod, sampled every
    `scrape` seconds over [end - span, end], labelled as Prometheus scrapes them (job, pod)."""
    times = np.arange(end - span, end + 1e-6, scrape)
    hours = (times - times[0]) / 3600.0
    out = []
    for key in keys:
        for pod in range(pods):
            labels = {"job": "scaler", "pod": f"scaler-{pod}", "target": key}
            out.append(
                CounterSeries("scaler_reactive_replica_hours", labels, times, reactive * hours)
            )
            out.append(
                CounterSeries("scaler_prewarm_replica_hours", labels, times, prewarm * hours)
            )
    return out


LOGGED = {
    "read": "prewarm ledger rebuilt",
    "unknown": "prewarm budget unknown",
    "deadline": "refresh took longer than",
}
"""What the engine logs (serving/engine.py, ledgerrebuild.py) when a target's ledger is
rebuilt, when its read failed (the target decides reactive, budget_unknown, and retries each
step), and when a refresh ran past its deadline (no decision that step)."""


def log_counts(lines: list[str]) -> dict[str, int]:
    """How many of a replica's log `lines` say each of LOGGED, before the warm-up's end (the line
    "warm in", logged as health turns SERVING) and in all."""
    end = next((i for i, line in enumerate(lines) if "warm in" in line), len(lines))
    out = {}
    for name, text in LOGGED.items():
        out[f"{name}_at_serving"] = sum(text in line for line in lines[:end])
        out[f"{name}_total"] = sum(text in line for line in lines)
    return out
