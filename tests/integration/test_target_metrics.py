"""The per-target metrics of a live scaler, read from its /metrics endpoint over HTTP after KEDA's
calls over a real gRPC channel: the scaler replays the bundled trace 300 times faster than the
wall clock, so forecasts meet their actuals within seconds."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from dataclasses import replace

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from scaler._pb import externalscaler_pb2 as pb
from scaler._pb import externalscaler_pb2_grpc as pb_grpc
from scaler.clock import ReplayClock
from scaler.decision import policy
from scaler.serving.scorecard import horizons as scored_horizons
from scaler.sources.file import bundled_trace
from tests.integration.scaler_server import RunningScaler, eventually, fast_settings, ref

SPEED = 300.0
"""Replay seconds per wall-clock second."""
PRICE = 2.5
TARGET = ref(
    name="llm-serve",
    threshold="60",
    costPerReplicaHour=str(PRICE),
    monthlyBudget="20000",
    prewarmBudget="24",
    leadTime="10m",
)

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def live_settings() -> object:
    settings = fast_settings(f"file:{bundled_trace()}")
    engine = replace(settings.engine, step=60.0, idle_expiry=30 * 86400.0)
    return replace(settings, engine=engine)


@pytest.fixture(scope="module")
def scaler() -> Iterator[RunningScaler]:
    settings = live_settings()
    clock = ReplayClock(start=time.time(), speed=SPEED)
    with RunningScaler(settings, clock=clock) as running:  # type: ignore[arg-type]
        yield running


def scrape(scaler: RunningScaler) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{scaler.http_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def of(samples: Samples, name: str, **labels: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of `name` whose labels include `labels`."""
    return {
        key: value
        for (n, key), value in samples.items()
        if n == name and set(labels.items()) <= set(key)
    }


@pytest.fixture(scope="module")
def samples(scaler: RunningScaler) -> Samples:
    """/metrics once the target's forecasts have met their actuals at the lead time."""
    with grpc.insecure_channel(scaler.address) as channel:
        stub = pb_grpc.ExternalScalerStub(channel)
        stub.GetMetricSpec(TARGET)
        request = pb.GetMetricsRequest(scaledObjectRef=TARGET, metricName="m")
        eventually(lambda: stub.GetMetrics(request), timeout=60)
        deadline = time.monotonic() + 90
        while True:
            found = scrape(scaler)
            scored = of(found, "scaler_forecast_scored_total", horizon="600")
            if scored and min(scored.values()) >= 3:
                stub.GetMetrics(request)  # an RPC histogram sample of each kind we use
                return scrape(scaler)
            assert time.monotonic() < deadline, "no forecast was scored at the lead time"
            time.sleep(0.2)


def key_of(scaler: RunningScaler) -> str:
    assert scaler.engine is not None
    return next(iter(scaler.engine.targets))


def test_target_info_names_the_scaled_object_its_metric_mode_and_currency(
    samples: Samples, scaler: RunningScaler
) -> None:
    info = of(samples, "scaler_target_info", target=key_of(scaler))
    assert len(info) == 1
    labels = dict(next(iter(info)))
    assert labels["namespace"] == "team-a" and labels["name"] == "llm-serve"
    assert scaler.engine is not None
    spec = scaler.engine.targets[key_of(scaler)].spec
    assert labels["metric"] == spec.metric_name and labels["mode"] == "active"
    assert labels["currency"] == "USD"


def test_exactly_one_decision_reason_is_current_out_of_the_fixed_set(
    samples: Samples, scaler: RunningScaler
) -> None:
    reasons = of(samples, "scaler_decision_reason", target=key_of(scaler))
    assert {dict(k)["reason"] for k in reasons} == {r.value for r in policy.Reason}
    assert sorted(reasons.values()) == [0.0] * (len(reasons) - 1) + [1.0]


def test_budget_and_gpu_spend_agree_in_replica_hours_and_money(
    samples: Samples, scaler: RunningScaler
) -> None:
    target = key_of(scaler)

    def one(name: str) -> float:
        (value,) = of(samples, name, target=target).values()
        return value

    assert one("scaler_prewarm_budget_cost") == pytest.approx(24)
    assert one("scaler_prewarm_budget_replica_hours") == pytest.approx(24 / PRICE)
    spent = one("scaler_prewarm_budget_spent_cost")
    left = one("scaler_prewarm_budget_remaining_cost")
    assert spent + left == pytest.approx(24)
    assert one("scaler_prewarm_budget_remaining_replica_hours") == pytest.approx(left / PRICE)
    hours = one("scaler_gpu_replica_hours_total")
    assert hours > 0
    assert one("scaler_gpu_cost_total") == pytest.approx(hours * PRICE)
    assert one("scaler_cost_per_replica_hour") == PRICE
    assert one("scaler_monthly_budget_cost") == 20000


def test_forecast_and_its_scores_by_horizon_are_consistent(
    samples: Samples, scaler: RunningScaler
) -> None:
    target = key_of(scaler)
    median, upper = (
        of(samples, "scaler_forecast_load", target=target, bound=b) for b in ("median", "upper")
    )
    assert 0 <= next(iter(median.values())) <= next(iter(upper.values()))
    horizons = {dict(k)["horizon"] for k in of(samples, "scaler_forecast_scored_total")}
    assert "600" in horizons
    assert scaler.engine is not None
    step = scaler.engine.settings.model_step  # each horizon is a whole number of model steps
    fixed = scored_horizons(600.0, step, points=10_000).values()
    assert horizons <= {f"{h:.0f}" for h in fixed}
    for h in horizons:
        scored = of(samples, "scaler_forecast_scored_total", target=target, horizon=h)
        covered = of(samples, "scaler_forecast_covered_total", target=target, horizon=h)
        assert 0 <= next(iter(covered.values())) <= next(iter(scored.values()))
        error = of(samples, "scaler_forecast_absolute_error_total", target=target, horizon=h)
        assert next(iter(error.values())) >= 0
    (pinball,) = of(samples, "scaler_forecast_pinball_loss", target=target).values()
    assert pinball >= 0
    (quantile,) = of(samples, "scaler_forecast_quantile", target=target).values()
    assert quantile == 0.95


def test_model_kind_version_and_age_are_exported(samples: Samples, scaler: RunningScaler) -> None:
    target = key_of(scaler)
    assert scaler.engine is not None
    state = scaler.engine.targets[target]
    assert state.model is not None
    (labels,) = of(samples, "scaler_model_info", target=target)
    assert dict(labels)["model"] == state.model.kind
    assert dict(labels)["version"] == state.model.fingerprint
    (trained,) = of(samples, "scaler_model_trained_until_timestamp_seconds", target=target).values()
    assert trained <= scaler.clock.now()


def test_rpc_latency_histograms_and_process_metrics_are_exported(samples: Samples) -> None:
    buckets = of(samples, "scaler_rpc_duration_seconds_bucket", method="GetMetrics", code="OK")
    assert buckets and max(buckets.values()) >= 1
    assert of(samples, "process_cpu_seconds_total")
    assert of(samples, "process_resident_memory_bytes")
    assert of(samples, "python_info")
