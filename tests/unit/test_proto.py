"""The generated stubs match protos/externalscaler.proto (run `make proto` when this fails)."""

from __future__ import annotations

from pathlib import Path

from scaler._pb import externalscaler_pb2 as pb
from scaler._pb.generate import OUT_DIR, generate


def test_generated_stubs_match_the_proto(tmp_path: Path) -> None:
    generate(tmp_path)
    for name in ("externalscaler_pb2.py", "externalscaler_pb2_grpc.py", "externalscaler_pb2.pyi"):
        assert (tmp_path / name).read_text() == (OUT_DIR / name).read_text(), (
            f"scaler/_pb/{name} is stale; run `make proto`"
        )


def test_wire_contract_field_numbers_match_keda() -> None:
    def numbers(message: type) -> dict[str, int]:
        return {f.name: f.number for f in message.DESCRIPTOR.fields}  # type: ignore[attr-defined]

    assert pb.DESCRIPTOR.package == "externalscaler"
    assert numbers(pb.ScaledObjectRef) == {"name": 1, "namespace": 2, "scalerMetadata": 3}
    assert numbers(pb.IsActiveResponse) == {"result": 1}
    assert numbers(pb.GetMetricSpecResponse) == {"metricSpecs": 1}
    assert numbers(pb.MetricSpec) == {"metricName": 1, "targetSize": 2, "targetSizeFloat": 3}
    assert numbers(pb.GetMetricsRequest) == {"scaledObjectRef": 1, "metricName": 2}
    assert numbers(pb.GetMetricsResponse) == {"metricValues": 1}
    assert numbers(pb.MetricValue) == {"metricName": 1, "metricValue": 2, "metricValueFloat": 3}
    service = pb.DESCRIPTOR.services_by_name["ExternalScaler"]
    assert [m.name for m in service.methods] == [
        "IsActive",
        "StreamIsActive",
        "GetMetricSpec",
        "GetMetrics",
        "StreamMetricSpec",
    ]
