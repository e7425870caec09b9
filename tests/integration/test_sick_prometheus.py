"""Sick Prometheus endpoints beside healthy targets, through the real gRPC server (issue 10).

The scaler runs with its real engine and a real Prometheus (backfilled); the sick endpoints are
real sockets on loopback (sick_endpoints.py). While each kind of sickness is served, a watcher
polls the healthy targets over a real channel: they must never turn UNAVAILABLE, and a target
registered meanwhile must answer before a single sick request could have timed out.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import replace

import grpc
import pytest

from scaler._pb import externalscaler_pb2 as pb
from scaler._pb import externalscaler_pb2_grpc as pb_grpc
from scaler.clock import ReplayClock
from scaler.decision import spec
from scaler.errors import SourceUnavailable
from scaler.sources.prometheus import PrometheusSource
from tests.integration import sick_endpoints
from tests.integration.prometheus_server import PrometheusServer
from tests.integration.scaler_server import RunningScaler, eventually, fast_settings, refused

pytestmark = pytest.mark.prometheus

TIMEOUT = 1.5
"""Seconds per Prometheus request."""
DEADLINE = 3 * TIMEOUT
"""Seconds per refresh: a ledger read, a history read and a latest read."""
STALENESS = 4 * TIMEOUT
"""Short enough that a loop held up by sick endpoints would show as UNAVAILABLE."""
SILENT = 40
"""Silent endpoints, as in the issue."""


@pytest.fixture(scope="module")
def scaler(prometheus_server: PrometheusServer) -> Iterator[RunningScaler]:
    settings = fast_settings("prometheus")
    settings = replace(
        settings,
        prometheus=replace(settings.prometheus, url=prometheus_server.url, timeout=TIMEOUT),
        engine=replace(
            settings.engine,
            model_step=300.0,
            history=7 * 86400.0,
            staleness=STALENESS,
            refresh_deadline=DEADLINE,
        ),
    )
    end = max(t.end for t in prometheus_server.traces.values())
    with RunningScaler(settings, clock=ReplayClock(start=end + 1, speed=1.0)) as running:
        yield running


@pytest.fixture()
def stub(scaler: RunningScaler) -> Iterator[pb_grpc.ExternalScalerStub]:
    with grpc.insecure_channel(scaler.address) as channel:
        yield pb_grpc.ExternalScalerStub(channel)


def target(name: str, query: str, **meta: str) -> pb.ScaledObjectRef:
    return pb.ScaledObjectRef(
        name=name,
        namespace="gpu",
        scalerMetadata={"query": query, "threshold": "60", "model": "seasonal", **meta},
    )


def request(ref: pb.ScaledObjectRef) -> pb.GetMetricsRequest:
    return pb.GetMetricsRequest(scaledObjectRef=ref, metricName="m")


@pytest.fixture()
def healthy(
    prometheus_server: PrometheusServer, stub: pb_grpc.ExternalScalerStub
) -> list[pb.ScaledObjectRef]:
    """Two targets on the healthy Prometheus, each answering before the test begins."""
    llm = prometheus_server.traces["llm_serving_10min"]
    nyc = prometheus_server.traces["nyc_taxi_30min"]
    refs = [
        target("healthy-llm", f"sum({llm.selector})"),
        target("healthy-nyc", f"max({nyc.selector})", threshold="1000"),
    ]
    for ref in refs:
        eventually(lambda ref=ref: stub.GetMetrics(request(ref)), timeout=30)
    return refs


class Watcher:
    """Polls targets' GetMetrics from a thread of its own, on a channel of its own, and keeps
    every refusal."""

    def __init__(self, address: str, refs: list[pb.ScaledObjectRef]) -> None:
        self.refs = refs
        self.answers = 0
        self.refusals: list[tuple[str, grpc.StatusCode, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, args=(address,), daemon=True)

    def __enter__(self) -> Watcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _poll(self, address: str) -> None:
        with grpc.insecure_channel(address) as channel:
            stub = pb_grpc.ExternalScalerStub(channel)
            while not self._stop.is_set():
                for ref in self.refs:
                    try:
                        stub.GetMetrics(request(ref), timeout=5)
                        self.answers += 1
                    except grpc.RpcError as exc:
                        self.refusals.append((ref.name, exc.code(), str(exc.details())))
                self._stop.wait(0.05)


def register(stub: pb_grpc.ExternalScalerStub, refs: list[pb.ScaledObjectRef]) -> None:
    for ref in refs:
        stub.GetMetricSpec(ref)


def first_answer_seconds(stub: pb_grpc.ExternalScalerStub, ref: pb.ScaledObjectRef) -> float:
    began = time.monotonic()
    stub.GetMetricSpec(ref)
    eventually(lambda: stub.GetMetrics(request(ref)), timeout=30)
    return time.monotonic() - began


@pytest.fixture(scope="module")
def silent() -> Iterator[list[sick_endpoints.SickEndpoint]]:
    """SILENT endpoints that accept and never answer, open as long as the module's scaler: the
    targets registered against them stay in it and keep asking, so a port closed at the end of
    their test could be handed to a later test's endpoint, whose log count then mixed in theirs
    (seen once in CI: gpu/silent-28 asking the wrong-shaped JSON endpoint)."""
    with ExitStack() as stack:
        yield [stack.enter_context(sick_endpoints.silent()) for _ in range(SILENT)]


def test_forty_silent_endpoints_never_cost_a_healthy_target_an_answer_nor_delay_a_new_one(
    scaler: RunningScaler,
    stub: pb_grpc.ExternalScalerStub,
    healthy: list[pb.ScaledObjectRef],
    prometheus_server: PrometheusServer,
    silent: list[sick_endpoints.SickEndpoint],
) -> None:
    nasa = prometheus_server.traces["nasa_http_5min"]
    sick = [target(f"silent-{i}", "sum(up)", serverAddress=e.url) for i, e in enumerate(silent)]
    with Watcher(scaler.address, healthy) as watcher:
        register(stub, sick)
        time.sleep(0.5)  # their first requests are now in flight, each for TIMEOUT
        newcomer = target("newcomer", f"sum({nasa.selector})", threshold="10")
        took = first_answer_seconds(stub, newcomer)
        err = refused(lambda: stub.GetMetrics(request(sick[0])), says=silent[0].url)
        time.sleep(STALENESS * 1.5)  # longer than any answer may go stale
        assert err.code() == grpc.StatusCode.UNAVAILABLE
        assert watcher.answers > 0
        assert watcher.refusals == []
        assert took < TIMEOUT, f"the new target waited {took:.2f}s, behind sick requests"
        assert scaler.engine is not None
        assert set(scaler.engine.isolation.open_endpoints()) == {e.url for e in silent}


@pytest.mark.parametrize(
    ("make", "code", "says"),
    [
        (sick_endpoints.garbage, grpc.StatusCode.UNAVAILABLE, "is unavailable for gpu/sick"),
        (
            lambda: sick_endpoints.answering(200, sick_endpoints.WRONG_SHAPE),
            grpc.StatusCode.UNAVAILABLE,
            "JSON of the wrong shape (ValueError: not enough values to unpack (expected 2, "
            'got 1)); expected {"data": {"result": [{"metric": {...}, "values": [[time',
        ),
        (
            lambda: sick_endpoints.answering(400, sick_endpoints.BAD_DATA),
            grpc.StatusCode.INVALID_ARGUMENT,
            "scalerMetadata key 'query' = 'sum(up)': Prometheus at {url} rejected it (HTTP 400): "
            'invalid parameter "query": 1:9: parse error: unexpected "("',
        ),
    ],
    ids=["garbage bytes", "wrong-shaped JSON", "400 bad_data"],
)
def test_a_sick_endpoint_is_refused_with_its_reason_while_healthy_targets_keep_answering(
    scaler: RunningScaler,
    stub: pb_grpc.ExternalScalerStub,
    healthy: list[pb.ScaledObjectRef],
    make: type[sick_endpoints.SickEndpoint],
    code: grpc.StatusCode,
    says: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with make() as endpoint, Watcher(scaler.address, healthy) as watcher:
        sick = target("sick", "sum(up)", serverAddress=endpoint.url)
        with caplog.at_level(logging.WARNING):
            register(stub, [sick])
            err = refused(
                lambda: stub.GetMetrics(request(sick)), says=says.replace("{url}", endpoint.url)
            )
            time.sleep(STALENESS)  # dozens of steps of the same problem
        assert err.code() == code
        assert endpoint.url in str(err.details())
        assert watcher.answers > 0
        assert watcher.refusals == []
    # Logged once per change, not once per step: the target's problem, and its endpoint's
    # breaker opening; never with a traceback.
    about = [r for r in caplog.records if endpoint.url in r.getMessage()]
    by_module = Counter(r.name for r in about)
    assert by_module["scaler.serving.problems"] == 1, [r.getMessage() for r in about]
    assert by_module["scaler.serving.isolation"] <= 1, [r.getMessage() for r in about]
    assert all(r.exc_info is None for r in about)


def test_a_real_promql_syntax_error_is_invalid_argument_quoting_prometheus(
    stub: pb_grpc.ExternalScalerStub,
) -> None:
    broken = target("typo", "sum(rate(gpu_requests_total[5m]")
    register(stub, [broken])
    err = refused(lambda: stub.GetMetrics(request(broken)), says="parse error")
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "gpu/typo: scalerMetadata key 'query' = 'sum(rate(gpu_requests_total[5m]'" in str(
        err.details()
    )
    with pytest.raises(grpc.RpcError) as raised:  # IsActive says the same
        stub.IsActive(broken)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_a_query_prometheus_refused_is_not_asked_again_every_step(
    scaler: RunningScaler, stub: pb_grpc.ExternalScalerStub
) -> None:
    with sick_endpoints.answering(400, sick_endpoints.BAD_DATA) as endpoint:
        refusing = target("refused-once", "sum(up)", serverAddress=endpoint.url)
        register(stub, [refusing])
        err = refused(lambda: stub.GetMetrics(request(refusing)), says="rejected it")
        asked = endpoint.served
        time.sleep(STALENESS)  # dozens of steps
        with pytest.raises(grpc.RpcError) as again:
            stub.GetMetrics(request(refusing))
    assert err.code() == again.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert endpoint.served == asked, "the refused query was sent again before BAD_QUERY_RETRY"


def test_an_empty_result_and_an_unreachable_server_stay_unavailable_with_the_reason(
    stub: pb_grpc.ExternalScalerStub,
) -> None:
    empty = target("empty", 'sum(no_such_metric{job="trace"})')
    closed = sick_endpoints.silent()
    closed.close()  # nothing listens there any more: connections are refused
    down = target("down", "sum(up)", serverAddress=closed.url)
    register(stub, [empty, down])
    err = refused(lambda: stub.GetMetrics(request(empty)), says="no_such_metric")
    assert err.code() == grpc.StatusCode.UNAVAILABLE
    assert "check the metric name and labels" in str(err.details())
    err = refused(lambda: stub.GetMetrics(request(down)), says=closed.url)
    assert err.code() == grpc.StatusCode.UNAVAILABLE
    assert "is unavailable" in str(err.details())


def test_a_slow_answer_just_inside_the_timeout_is_used_and_costs_no_one_an_answer(
    scaler: RunningScaler,
    stub: pb_grpc.ExternalScalerStub,
    healthy: list[pb.ScaledObjectRef],
    prometheus_server: PrometheusServer,
) -> None:
    llm = prometheus_server.traces["llm_serving_10min"]
    with sick_endpoints.delayed(prometheus_server.url, delay=0.7 * TIMEOUT) as slow:
        lagging = target("slow", f"sum({llm.selector})", serverAddress=slow.url)
        register(stub, [lagging])
        answer = eventually(lambda: stub.GetMetrics(request(lagging)), timeout=30)
        with Watcher(scaler.address, [*healthy, lagging]) as watcher:
            time.sleep(STALENESS * 1.5)
    assert answer.metricValues[0].metricValueFloat >= 1
    assert watcher.answers > 0
    assert watcher.refusals == []
    assert scaler.engine is not None
    assert slow.url not in scaler.engine.isolation.open_endpoints()


def test_an_answer_that_trickles_forever_is_cut_at_the_request_timeout_and_no_one_else_pays(
    scaler: RunningScaler,
    stub: pb_grpc.ExternalScalerStub,
    healthy: list[pb.ScaledObjectRef],
) -> None:
    with sick_endpoints.trickling(every=TIMEOUT / 3) as endpoint:
        # The source alone: no read waits longer than the timeout, yet the request ends at it
        # (requests' own timeout is per read, and held the thread for as long as bytes came).
        source = PrometheusSource(endpoint.url, timeout=TIMEOUT)
        probe = spec.parse("gpu", "t", {"query": "up", "threshold": "1"})
        began = time.monotonic()
        with pytest.raises(SourceUnavailable, match=f"did not answer within {TIMEOUT:g}s"):
            source.latest(probe, at=time.time())
        alone = time.monotonic() - began
        source.close()
        # In the scaler: the target is refused, naming the endpoint, and no one else pays.
        trickle = target("trickle", "sum(up)", serverAddress=endpoint.url)
        with Watcher(scaler.address, healthy) as watcher:
            began = time.monotonic()
            register(stub, [trickle])
            err = refused(lambda: stub.GetMetrics(request(trickle)), says="within")
            took = time.monotonic() - began
            time.sleep(STALENESS)
    assert TIMEOUT <= alone < TIMEOUT + 1.0
    assert err.code() == grpc.StatusCode.UNAVAILABLE
    assert endpoint.url in str(err.details())
    assert took < DEADLINE * 2
    assert watcher.answers > 0
    assert watcher.refusals == []
