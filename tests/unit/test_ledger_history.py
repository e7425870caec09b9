"""bench/ledger_history.py: the counters a day-old fleet leaves read back as its ledger."""

from __future__ import annotations

import pytest

from bench import ledger_history
from scaler.decision import budget
from tests.integration.prometheus_server import CounterSeries

HOUR = 3600.0


def samples(series: CounterSeries) -> list[tuple[float, float]]:
    return list(zip(series.times.tolist(), series.values.tolist(), strict=True))


def test_every_key_and_pod_has_both_counters_a_sample_a_minute() -> None:
    found = ledger_history.counters(["a/x#1", "b/y#2"], pods=2, end=10 * HOUR, span=2 * HOUR)
    assert len(found) == 2 * 2 * 2
    names = {(c.family, c.labels["target"], c.labels["pod"]) for c in found}
    assert len(names) == 8
    assert {c.family for c in found} == {
        "scaler_prewarm_replica_hours",
        "scaler_reactive_replica_hours",
    }
    for c in found:
        assert c.kind == "counter"
        assert c.times[0] == 8 * HOUR and c.times[-1] == 10 * HOUR
        assert len(c.times) == 2 * 60 + 1


def test_read_back_as_the_engine_does_the_window_holds_the_rates() -> None:
    """Two pods charging the same decisions: the ledger counts them once (max over pods)."""
    found = ledger_history.counters(["a/x#1"], pods=2, end=30 * HOUR, span=25 * HOUR)
    start = 30 * HOUR - 24 * HOUR
    spent = [samples(c) for c in found if c.family == ledger_history.PREWARM_FAMILY]
    used = [samples(c) for c in found if c.family == ledger_history.REACTIVE_FAMILY]
    window = [[(t, v) for t, v in s if t >= start] for s in spent]
    assert sum(v for _, v in budget.spent_per_step(window, start=start)) == pytest.approx(24.0)
    window = [[(t, v) for t, v in s if t >= start] for s in used]
    assert sum(v for _, v in budget.reactive_per_step(window, start=start)) == pytest.approx(240.0)


def test_log_counts_split_at_the_warm_up_end() -> None:
    lines = [
        "INFO t1: prewarm ledger rebuilt from 4 series",
        "WARNING t2: prewarm budget unknown, staying reactive",
        "INFO scaler.serving.warmup: warm in 5.7s: 2 targets",
        "INFO t2: prewarm ledger rebuilt from 4 series",
        "WARNING t3: refresh took longer than its 30s deadline",
    ]
    assert ledger_history.log_counts(lines) == {
        "read_at_serving": 1,
        "read_total": 2,
        "unknown_at_serving": 1,
        "unknown_total": 1,
        "deadline_at_serving": 0,
        "deadline_total": 1,
    }
