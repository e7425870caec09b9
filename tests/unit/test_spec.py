"""scalerMetadata -> TargetSpec: defaults, durations, and a clear error for every bad value."""

from __future__ import annotations

import pytest

from scaler import spec as specs
from scaler.errors import SpecError

BASE = {"query": "sum(rate(http_requests_total[2m]))", "threshold": "50"}


def parse(**extra: str) -> specs.TargetSpec:
    return specs.parse("gpu", "llm-serve", {**BASE, **extra})


def test_minimal_metadata_gets_documented_defaults() -> None:
    spec = parse()
    assert spec.threshold == 50.0
    assert spec.lead_time == 600.0 and spec.horizon == 900.0
    assert spec.quantile == 0.95
    assert spec.prewarm_budget_window == 86400.0
    assert spec.model == "auto" and spec.mode == "active"
    assert spec.server_address is None
    assert spec.metric_name.startswith("predictive-llm-serve-")


def test_every_key_is_read() -> None:
    spec = parse(
        serverAddress="http://prom.monitoring:9090/",
        activationThreshold="5",
        leadTime="8m",
        horizon="1h30m",
        quantile="0.9",
        minReplicas="1",
        maxReplicas="12",
        maxPrewarmReplicas="3",
        prewarmBudget="6.5",
        prewarmBudgetWindow="12h",
        costPerReplicaHour="2.48",
        currency="EUR",
        model="seasonal",
        mode="shadow",
        metricName="llm-replicas",
        scalerAddress="scaler.keda:9000",
    )
    assert spec.server_address == "http://prom.monitoring:9090"
    assert (spec.activation_threshold, spec.lead_time, spec.horizon) == (5.0, 480.0, 5400.0)
    assert (spec.quantile, spec.min_replicas, spec.max_replicas) == (0.9, 1, 12)
    assert (spec.max_prewarm_replicas, spec.prewarm_budget) == (3, 6.5)
    assert spec.prewarm_budget_window == 43200.0
    assert (spec.cost_per_replica_hour, spec.currency) == (2.48, "EUR")
    assert (spec.model, spec.mode, spec.metric_name) == ("seasonal", "shadow", "llm-replicas")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("10m", 600),
        ("1h30m", 5400),
        ("14d", 14 * 86400),
        ("1w", 604800),
        ("500ms", 0.5),
        ("1.5h", 5400),
    ],
)
def test_durations_are_read_as_prometheus_writes_them(text: str, seconds: float) -> None:
    assert specs.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "10", "m10", "10 m", "1h-5m", "ten minutes", "10M"])
def test_malformed_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        specs.parse_duration(text)


BAD = [
    ({"query": ""}, "query"),
    ({"threshold": ""}, "threshold"),
    ({"threshold": "0"}, "threshold"),
    ({"threshold": "-1"}, "threshold"),
    ({"threshold": "abc"}, "threshold"),
    ({"threshold": "NaN"}, "threshold"),
    ({"threshold": "inf"}, "threshold"),
    ({"quantile": "0.5"}, "quantile"),
    ({"quantile": "1"}, "quantile"),
    ({"quantile": "95"}, "quantile"),
    ({"model": "lstm"}, "model"),
    ({"mode": "dry-run"}, "mode"),
    ({"minReplicas": "5", "maxReplicas": "2"}, "maxReplicas"),
    ({"maxReplicas": "2.5"}, "maxReplicas"),
    ({"maxPrewarmReplicas": "-1"}, "maxPrewarmReplicas"),
    ({"prewarmBudget": "-3"}, "prewarmBudget"),
    ({"prewarmBudgetWindow": "0s"}, "prewarmBudgetWindow"),
    ({"leadTime": "10"}, "leadTime"),
    ({"horizon": "soon"}, "horizon"),
    ({"activationThreshold": "-2"}, "activationThreshold"),
    ({"costPerReplicaHour": "cheap"}, "costPerReplicaHour"),
    ({"currency": "dollars"}, "currency"),
    ({"serverAddress": "prometheus:9090"}, "serverAddress"),
    ({"metricName": "Has Spaces"}, "metricName"),
    ({"maxReplica": "4"}, "maxReplica"),
]


@pytest.mark.parametrize(
    ("meta", "key"), BAD, ids=[f"{k}={list(m.values())[-1]!r}" for m, k in BAD]
)
def test_bad_values_name_the_key_the_value_and_a_fix(meta: dict[str, str], key: str) -> None:
    with pytest.raises(SpecError) as err:
        specs.parse("gpu", "llm-serve", {**BASE, **meta})
    assert err.value.key == key
    message = str(err.value)
    assert repr(key) in message
    assert err.value.fix  # a non-empty hint
    if meta.get(key):
        assert meta[key] in message


def test_missing_query_is_an_error_even_without_the_key() -> None:
    with pytest.raises(SpecError, match="query"):
        specs.parse("gpu", "llm-serve", {"threshold": "5"})


def test_fingerprint_ignores_scaler_address_but_not_the_query() -> None:
    a = parse(scalerAddress="a:9000")
    b = parse(scalerAddress="b:9000")
    c = parse(query="sum(up)")
    assert a.key == b.key
    assert a.key != c.key


def test_format_duration_round_trips() -> None:
    for seconds in (30, 600, 5400, 90061):
        assert specs.parse_duration(specs.format_duration(seconds)) == seconds
