"""A share budget (`prewarmBudget: "10%"`) through the real gRPC server: refused with
INVALID_ARGUMENT naming the key when out of range, and served otherwise, with the reactive
replica-hours it is a share of exported on /metrics."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import grpc
import pytest

from scaler._pb import externalscaler_pb2 as pb
from scaler._pb import externalscaler_pb2_grpc as pb_grpc
from tests.integration.scaler_server import RunningScaler, eventually, fast_settings, ref


@pytest.fixture(scope="module")
def scaler() -> Iterator[RunningScaler]:
    with RunningScaler(fast_settings("file:")) as running:
        yield running


@pytest.fixture()
def stub(scaler: RunningScaler) -> Iterator[pb_grpc.ExternalScalerStub]:
    with grpc.insecure_channel(scaler.address) as channel:
        yield pb_grpc.ExternalScalerStub(channel)


@pytest.mark.parametrize("value", ["150%", "0%", "ten%", "1e1%"])
def test_a_share_out_of_range_is_invalid_argument_naming_the_key(
    stub: pb_grpc.ExternalScalerStub, value: str
) -> None:
    with pytest.raises(grpc.RpcError) as err:
        stub.GetMetricSpec(ref(prewarmBudget=value))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    details = str(err.value.details())
    assert "prewarmBudget" in details and "10%" in details


def test_a_share_budget_is_served_and_its_reactive_hours_exported(
    scaler: RunningScaler, stub: pb_grpc.ExternalScalerStub
) -> None:
    target = ref(name="shared", prewarmBudget="10%")
    stub.GetMetricSpec(target)
    request = pb.GetMetricsRequest(scaledObjectRef=target, metricName="m")
    answer = eventually(lambda: stub.GetMetrics(request))
    assert answer.metricValues[0].metricValue >= 0
    assert scaler.engine is not None
    state = next(s for s in scaler.engine.targets.values() if s.spec.name == "shared")
    assert state.spec.prewarm_budget_share == pytest.approx(0.1)
    assert state.ledger.share == pytest.approx(0.1) and state.ledger.reactive
    # never below one full-size wake-up: maxPrewarmReplicas (10) for leadTime + horizon (25 min)
    assert state.ledger.wake_hours == pytest.approx(10 * 1500 / 3600)
    with urllib.request.urlopen(f"http://127.0.0.1:{scaler.http_port}/metrics", timeout=5) as r:
        exported = r.read().decode()
    line = next(
        x
        for x in exported.splitlines()
        if x.startswith("scaler_reactive_replica_hours_total") and state.spec.key in x
    )
    assert float(line.split()[-1]) > 0
