"""How many queries the engine sends Prometheus per target: the figure a Prometheus operator
asks first. Counted by scaler_prometheus_requests_total on a scaler serving real targets."""

from __future__ import annotations

import time
from dataclasses import replace

import grpc
import pytest

from scaler._pb import externalscaler_pb2 as pb
from scaler._pb import externalscaler_pb2_grpc as pb_grpc
from scaler.clock import ReplayClock
from tests.integration.prometheus_server import PrometheusServer
from tests.integration.scaler_server import RunningScaler, eventually, fast_settings

pytestmark = pytest.mark.prometheus

TARGETS = 8
STEP = 30.0
"""Seconds of replayed time between decisions, as in production (0.5 s of wall time)."""


def requests(scaler: RunningScaler) -> dict[tuple[str, str], float]:
    assert scaler.engine is not None
    counter = scaler.engine.telemetry.prometheus_requests
    return {
        (s.labels["kind"], s.labels["outcome"]): s.value
        for metric in counter.collect()
        for s in metric.samples
        if s.name.endswith("_total")
    }


def test_each_target_costs_at_most_one_instant_and_one_range_query_a_step(
    prometheus_server: PrometheusServer,
) -> None:
    trace = prometheus_server.traces["llm_serving_10min"]
    settings = fast_settings("prometheus")
    settings = replace(
        settings,
        prometheus=replace(settings.prometheus, url=prometheus_server.url),
        # Replayed time runs 60 times faster: no target may expire while the test registers.
        engine=replace(settings.engine, step=STEP, model_step=300.0, idle_expiry=1e9),
        ledger_source="none",
    )
    # The last hour replayed 60 times faster than real time: a model step (300 s) every 5 s.
    clock = ReplayClock(start=trace.end - 3600.0, speed=60.0)
    with (
        RunningScaler(settings, clock=clock) as scaler,
        grpc.insecure_channel(scaler.address) as channel,
    ):
        stub = pb_grpc.ExternalScalerStub(channel)
        for i in range(TARGETS):
            meta = {
                "query": f"{i + 1} * sum({trace.selector})",
                "threshold": "60",
                "model": "seasonal",
            }
            ref = pb.ScaledObjectRef(name=f"t{i}", namespace="gpu", scalerMetadata=meta)
            request = pb.GetMetricsRequest(scaledObjectRef=ref, metricName="m")
            eventually(lambda r=request: stub.GetMetrics(r), timeout=30)  # type: ignore[misc]
        before, began = requests(scaler), clock.now()
        time.sleep(20.0)
        after, ended = requests(scaler), clock.now()
    steps = (ended - began) / STEP
    model_steps = (ended - began) / 300.0
    per_target = {k: (after.get(k, 0.0) - before.get(k, 0.0)) / TARGETS for k in after}
    print(f"per target over {steps:.0f} steps: {per_target}")
    # At most one instant query a step (fewer when a loaded machine makes the engine skip
    # steps), and at most one range query a refresh: on an idle machine one a model step
    # (measured 4.0 in 4), on a loaded one up to one a refresh (measured 16-21 in 4).
    instant, ranged = per_target.get(("instant", "ok"), 0), per_target.get(("range", "ok"), 0)
    assert 0 < instant <= steps + 1
    assert 0 < ranged <= steps + 1
    assert instant + ranged <= 2 * (steps + 1)
    assert ranged >= min(model_steps, instant) - 1
    assert not any(outcome != "ok" for _, outcome in after)
