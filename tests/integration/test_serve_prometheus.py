"""`scaler serve` against a real Prometheus holding weeks of backfilled real load."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import replace

import grpc
import numpy as np
import pytest

from scaler._pb import externalscaler_pb2 as pb
from scaler._pb import externalscaler_pb2_grpc as pb_grpc
from scaler.clock import ReplayClock
from tests.integration.prometheus_server import PrometheusServer
from tests.integration.scaler_server import RunningScaler, eventually, fast_settings, refused

pytestmark = pytest.mark.prometheus


@pytest.fixture(scope="module")
def scaler(prometheus_server: PrometheusServer) -> Iterator[RunningScaler]:
    settings = fast_settings("prometheus")
    settings = replace(
        settings,
        prometheus=replace(settings.prometheus, url=prometheus_server.url, timeout=5.0),
        engine=replace(settings.engine, model_step=300.0, history=28 * 86400.0),
    )
    # The backfilled traces end just before the session started; run the scaler's clock from
    # the newest sample on, in real time, so the data is as fresh as a live scrape.
    end = max(t.end for t in prometheus_server.traces.values())
    with RunningScaler(settings, clock=ReplayClock(start=end + 1, speed=1.0)) as running:
        yield running


@pytest.fixture()
def stub(scaler: RunningScaler) -> Iterator[pb_grpc.ExternalScalerStub]:
    with grpc.insecure_channel(scaler.address) as channel:
        yield pb_grpc.ExternalScalerStub(channel)


def target(name: str, query: str, **meta: str) -> pb.ScaledObjectRef:
    return pb.ScaledObjectRef(
        name=name, namespace="gpu", scalerMetadata={"query": query, "threshold": "60", **meta}
    )


def test_serve_fits_on_prometheus_history_and_answers_at_least_reactive(
    stub: pb_grpc.ExternalScalerStub, scaler: RunningScaler, prometheus_server: PrometheusServer
) -> None:
    trace = prometheus_server.traces["llm_serving_10min"]
    ref = target("llm", f"sum({trace.selector})", model="seasonal")
    stub.GetMetricSpec(ref)
    request = pb.GetMetricsRequest(scaledObjectRef=ref, metricName="m")
    assert scaler.engine is not None
    state = next(s for s in scaler.engine.targets.values() if s.spec.name == "llm")
    answer = eventually(lambda: stub.GetMetrics(request), timeout=30)
    deadline = time.monotonic() + 30  # the fit runs beside the loop; wait for it
    while state.model is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert state.model is not None, state.model_note
    assert state.history is not None
    # 14 days of 10-minute samples read back at the 5-minute model step: each sample is seen
    # (Prometheus' 5-minute lookback), none is invented.
    assert 14 * 144 - 2 <= state.history.observed <= 14 * 144 * 2
    assert state.decision is not None
    newest = trace.values[~np.isnan(trace.values)][-1]
    # The reactive floor is the highest load of the HPA's 5 minutes: never below the newest.
    assert state.decision.load >= newest - 1e-9
    assert state.decision.reactive >= math.ceil(newest / 60)
    assert answer.metricValues[0].metricValue >= math.ceil(newest / 60) - 1
    assert state.decision.desired >= state.decision.reactive


def test_a_query_with_several_series_is_invalid_argument_naming_query_and_the_fix(
    stub: pb_grpc.ExternalScalerStub,
) -> None:
    ref = target("many", '{job="trace"}')
    stub.GetMetricSpec(ref)
    request = pb.GetMetricsRequest(scaledObjectRef=ref, metricName="m")
    err = refused(lambda: stub.GetMetrics(request), says="wrap it in sum() or max()")
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert """gpu/many: scalerMetadata key 'query' = '{job="trace"}'""" in str(err.details())


def test_an_unreachable_prometheus_is_unavailable_while_other_targets_keep_working(
    stub: pb_grpc.ExternalScalerStub, prometheus_server: PrometheusServer
) -> None:
    down = target("down", "sum(up)", serverAddress="http://127.0.0.1:9")
    stub.GetMetricSpec(down)
    err = refused(lambda: stub.IsActive(down), says="http://127.0.0.1:9")
    assert err.code() == grpc.StatusCode.UNAVAILABLE
    nyc = prometheus_server.traces["nyc_taxi_30min"]
    ok = target("nyc", f"max({nyc.selector})", threshold="1000")
    assert eventually(lambda: stub.IsActive(ok), timeout=30).result is True
