"""The real ExternalScaler server over a real gRPC channel: every rpc, stream, health, errors."""

from __future__ import annotations

import math
import shutil
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from scaler._pb import externalscaler_pb2 as pb
from scaler._pb import externalscaler_pb2_grpc as pb_grpc
from scaler.sources.file import bundled_trace
from tests.integration.scaler_server import (
    RunningScaler,
    eventually,
    fast_settings,
    ref,
    refused,
)


def write_wake_up_trace(folder: Path, *, idle: int) -> None:
    """20 minutes at 1 s; the replay starts half-way (the default warm-up), idle for `idle`
    seconds more, then busy: a pool at zero that must wake up."""
    rows = ["timestamp,value"] + [
        f"2024-01-01 00:{i // 60:02d}:{i % 60:02d},{0 if i < 600 + idle else 100}"
        for i in range(1200)
    ]
    (folder / "wakes_up.csv").write_text("\n".join(rows) + "\n")


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("traces")
    shutil.copy(bundled_trace(), folder / "llm_serving_10min.csv")
    write_wake_up_trace(folder, idle=3)
    return folder


@pytest.fixture(scope="module")
def scaler(traces: Path) -> Iterator[RunningScaler]:
    with RunningScaler(fast_settings(f"file:{traces}")) as running:
        yield running


@pytest.fixture()
def stub(scaler: RunningScaler) -> Iterator[pb_grpc.ExternalScalerStub]:
    with grpc.insecure_channel(scaler.address) as channel:
        yield pb_grpc.ExternalScalerStub(channel)


def test_get_metric_spec_returns_one_metric_with_target_one(
    stub: pb_grpc.ExternalScalerStub,
) -> None:
    spec = stub.GetMetricSpec(ref(metricName="llm-replicas"))
    assert len(spec.metricSpecs) == 1
    metric = spec.metricSpecs[0]
    assert (metric.metricName, metric.targetSize, metric.targetSizeFloat) == (
        "llm-replicas",
        1,
        1.0,
    )


def test_default_metric_name_is_stable_and_differs_between_triggers(
    stub: pb_grpc.ExternalScalerStub,
) -> None:
    first = stub.GetMetricSpec(ref()).metricSpecs[0].metricName
    again = stub.GetMetricSpec(ref()).metricSpecs[0].metricName
    other = stub.GetMetricSpec(ref(threshold="70")).metricSpecs[0].metricName
    assert first == again
    assert first != other
    assert first.startswith("predictive-llm-serve-")


def test_get_metrics_answers_the_desired_replicas_never_below_reactive(
    stub: pb_grpc.ExternalScalerStub, scaler: RunningScaler
) -> None:
    target = ref()
    stub.GetMetricSpec(target)
    answer = eventually(
        lambda: stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=target, metricName="m"))
    )
    assert len(answer.metricValues) == 1
    value = answer.metricValues[0]
    assert value.metricName == "m"
    assert value.metricValue == math.ceil(value.metricValueFloat)
    assert scaler.engine is not None
    state = next(s for s in scaler.engine.targets.values() if s.spec.threshold == 60.0)
    assert state.decision is not None
    load = state.decision.load
    assert load > 0
    assert value.metricValueFloat >= math.ceil(load / 60.0) - 1  # a newer step may have landed


def test_is_active_follows_the_activation_threshold(stub: pb_grpc.ExternalScalerStub) -> None:
    busy = ref(name="busy")
    quiet = ref(name="quiet", activationThreshold="1000000000")
    assert eventually(lambda: stub.IsActive(busy)).result is True
    assert eventually(lambda: stub.IsActive(quiet)).result is False


def test_stream_is_active_sends_the_state_then_true_when_the_pool_wakes(tmp_path: Path) -> None:
    # its own server: the replay clock starts with it, so the idle seconds before the wake-up
    # are not eaten by the tests that ran before on a busy machine
    write_wake_up_trace(tmp_path, idle=6)
    target = ref(name="sleepy", query="wakes_up", activationThreshold="50", threshold="10")
    with (
        RunningScaler(fast_settings(f"file:{tmp_path}")) as running,
        grpc.insecure_channel(running.address) as channel,
    ):
        stream = pb_grpc.ExternalScalerStub(channel).StreamIsActive(target, timeout=20)
        first = next(stream)
        assert first.result is False
        woke = next(stream)
        assert woke.result is True
        stream.cancel()


def test_a_stream_opened_while_the_data_is_stale_waits_for_fresh_data_instead_of_ending(
    tmp_path: Path,
) -> None:
    """KEDA reopens an ended stream after a backoff that grows to a minute: a stream ended
    with UNAVAILABLE while Prometheus is down delays the wake-up `true` once it is back."""
    rows = ["timestamp,value"]  # replayed from row 600: load for 12 s, none for 10 s, load
    for i in range(1200):
        value = "" if 612 <= i < 622 else "100"
        rows.append(f"2024-01-01 00:{i // 60:02d}:{i % 60:02d},{value}")
    (tmp_path / "gap.csv").write_text("\n".join(rows) + "\n")
    settings = fast_settings(f"file:{tmp_path}")
    settings = replace(settings, engine=replace(settings.engine, staleness=2.0))
    target = ref(name="gap", query="gap", activationThreshold="50", threshold="10")
    with (
        RunningScaler(settings) as running,
        grpc.insecure_channel(running.address) as channel,
    ):
        stub = pb_grpc.ExternalScalerStub(channel)
        assert eventually(lambda: stub.IsActive(target)).result is True
        deadline = time.monotonic() + 20
        while True:  # until the last decision is older than the staleness: UNAVAILABLE
            try:
                stub.IsActive(target)
            except grpc.RpcError as exc:
                if "old" in str(exc.details()):
                    break
            assert time.monotonic() < deadline, "the answers never went stale"
            time.sleep(0.1)
        stream = stub.StreamIsActive(target, timeout=30)
        first = next(stream)  # sent once the data is back, not an UNAVAILABLE that ends it
        assert first.result is True
        stream.cancel()


def test_bad_metadata_is_invalid_argument_naming_the_key_and_others_keep_serving(
    stub: pb_grpc.ExternalScalerStub,
) -> None:
    with pytest.raises(grpc.RpcError) as err:
        stub.GetMetricSpec(ref(threshold="0"))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "threshold" in str(err.value.details())
    with pytest.raises(grpc.RpcError) as err:
        stub.IsActive(ref(maxReplica="3"))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "maxReplica" in str(err.value.details())
    assert stub.GetMetricSpec(ref()).metricSpecs


@pytest.mark.parametrize(
    ("name", "namespace", "says"),
    [
        ("", "", "ScaledObjectRef has no name and no namespace"),
        ("llm-serve", "", "ScaledObjectRef 'llm-serve' has no namespace"),
        ("", "team-a", "ScaledObjectRef in namespace 'team-a' has no name"),
        (" ", "team-a", "ScaledObjectRef in namespace 'team-a' has no name"),
    ],
)
def test_a_ref_without_name_or_namespace_is_invalid_argument_not_a_target_named_slash(
    name: str, namespace: str, says: str, stub: pb_grpc.ExternalScalerStub, scaler: RunningScaler
) -> None:
    target = ref(name=name, namespace=namespace)
    calls = [
        lambda: stub.GetMetricSpec(target),
        lambda: stub.IsActive(target),
        lambda: stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=target, metricName="m")),
        lambda: next(stub.StreamIsActive(target, timeout=5)),
    ]
    for call in calls:
        with pytest.raises(grpc.RpcError) as err:
            call()
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert says in str(err.value.details())
    assert scaler.engine is not None
    assert all(
        s.spec.name.strip() and s.spec.namespace.strip() for s in scaler.engine.targets.values()
    )


def test_a_query_naming_no_trace_is_invalid_argument_naming_query_never_zero(
    stub: pb_grpc.ExternalScalerStub,
) -> None:
    target = ref(name="ghost", query="no_such_trace")
    stub.GetMetricSpec(target)
    request = pb.GetMetricsRequest(scaledObjectRef=target, metricName="x")
    err = refused(lambda: stub.GetMetrics(request), says="no trace of that name")
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "key 'query' = 'no_such_trace'" in str(err.details())
    assert "set it to one of" in str(err.details())
    assert stub.GetMetricSpec(ref()).metricSpecs  # the server keeps serving the others


def test_stream_metric_spec_is_unimplemented(stub: pb_grpc.ExternalScalerStub) -> None:
    with pytest.raises(grpc.RpcError) as err:
        next(stub.StreamMetricSpec(ref()))
    assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_health_service_reports_serving(scaler: RunningScaler) -> None:
    with grpc.insecure_channel(scaler.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "externalscaler.ExternalScaler"):
            reply = health.Check(health_pb2.HealthCheckRequest(service=service))
            assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_http_port_serves_metrics_and_health(
    stub: pb_grpc.ExternalScalerStub, scaler: RunningScaler
) -> None:
    eventually(lambda: stub.IsActive(ref()))
    base = f"http://127.0.0.1:{scaler.http_port}"
    for path in ("/healthz", "/readyz"):
        with urllib.request.urlopen(f"{base}{path}", timeout=5) as reply:
            assert reply.status == 200
    with urllib.request.urlopen(f"{base}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    assert "scaler_desired_replicas{" in text
    assert 'scaler_rpc_duration_seconds_count{code="OK",method="IsActive"}' in text


def test_shadow_mode_answers_reactive_and_books_its_prewarm_apart(
    stub: pb_grpc.ExternalScalerStub, scaler: RunningScaler
) -> None:
    target = ref(name="shadowed", mode="shadow", threshold="10", maxReplicas="1000")
    stub.GetMetricSpec(target)
    request = pb.GetMetricsRequest(scaledObjectRef=target, metricName="m")
    eventually(lambda: stub.GetMetrics(request))
    assert scaler.engine is not None
    state = next(s for s in scaler.engine.targets.values() if s.spec.name == "shadowed")
    deadline = time.monotonic() + 20  # until the model is fitted and the forecast prewarms
    while state.predictive is None or state.predictive.prewarm == 0:
        assert time.monotonic() < deadline, "the predictive decision never prewarmed"
        time.sleep(0.1)
    served = state.decision
    assert served is not None and served.prewarm == 0
    assert served.desired == served.reactive
    assert stub.GetMetrics(request).metricValues[0].metricValue <= served.reactive + 1
    registry = scaler.engine.telemetry.registry
    labels = {"target": state.spec.key}
    assert (registry.get_sample_value("scaler_shadow_prewarm_replica_hours_total", labels) or 0) > 0
    assert not registry.get_sample_value("scaler_prewarm_replica_hours_total", labels)


def test_a_new_auto_target_forecasts_from_the_baseline_while_auto_selects(
    stub: pb_grpc.ExternalScalerStub, scaler: RunningScaler
) -> None:
    target = ref(name="impatient", threshold="55")
    stub.GetMetricSpec(target)
    assert scaler.engine is not None
    state = next(s for s in scaler.engine.targets.values() if s.spec.name == "impatient")
    seen_quick = False
    deadline = time.monotonic() + 30
    while not (state.model is not None and state.fitted_at > 0):  # until the selection stuck
        assert time.monotonic() < deadline, state.model_note
        # `or`: auto's pick is on the state a moment before its fitted_at is (fitting._fit), so
        # a poll in between sees the selected kind (pooled, ensemble) with the quick fit's -inf
        if state.model is not None and state.fitted_at == -math.inf:
            seen_quick = seen_quick or state.model.kind == "seasonal"
        time.sleep(0.01)
    assert seen_quick, "no baseline model while auto was selecting"


def test_a_target_past_max_targets_is_refused_and_the_ones_served_keep_their_answers(
    traces: Path,
) -> None:
    settings = fast_settings(f"file:{traces}")
    settings = replace(settings, engine=replace(settings.engine, max_targets=2))
    with (
        RunningScaler(settings) as running,
        grpc.insecure_channel(running.address) as channel,
    ):
        stub = pb_grpc.ExternalScalerStub(channel)
        served = [ref(name=f"llm-{i}") for i in range(2)]
        for target in served:
            assert stub.GetMetricSpec(target).metricSpecs[0].targetSize == 1
        with pytest.raises(grpc.RpcError) as refused:
            stub.GetMetricSpec(ref(name="llm-2"))
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "team-a/llm-2: this scaler already serves 2 targets, its --max-targets" in str(
            refused.value.details()
        )
        for target in served:  # the two it holds still answer
            request = pb.GetMetricsRequest(scaledObjectRef=target, metricName="m")
            assert eventually(lambda r=request: stub.GetMetrics(r)).metricValues[0].metricValue >= 0
        assert running.engine is not None and len(running.engine.targets) == 2


def test_a_targets_file_past_max_targets_warms_up_what_fits_and_serves(
    traces: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    documents = [
        "kind: ScaledObject\n"
        f"metadata: {{name: llm-{i}, namespace: team-a}}\n"
        "spec: {triggers: [{type: external, metadata: "
        "{query: llm_serving_10min, threshold: '60'}}]}\n"
        for i in range(3)
    ]
    (tmp_path / "targets.yaml").write_text("---\n".join(documents))
    settings = fast_settings(f"file:{traces}")
    settings = replace(
        settings,
        engine=replace(settings.engine, max_targets=2),
        targets_file=tmp_path / "targets.yaml",
    )
    with RunningScaler(settings) as running:  # SERVING: the warm-up finished
        assert running.engine is not None and len(running.engine.targets) == 2
    assert "1 of 3 targets not warmed up: team-a/llm-2: this scaler already serves 2" in caplog.text
