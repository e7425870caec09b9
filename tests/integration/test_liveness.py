"""Liveness is not readiness: kubelet's startup and liveness probes ask grpc.health.v1's
`liveness` service, SERVING while the server answers, and the overall status ("") stays
NOT_SERVING until the targets known at start-up are warm. With the probes on "" a warm-up longer
than the startup probe's budget (deploy/: 120 s, about 500 targets here, or any fleet while
Prometheus hangs) got the replica killed and started over, for ever. A real `scaler serve`
process, warming against a Prometheus that never answers, and a real gRPC channel."""

from __future__ import annotations

from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.integration import sick_endpoints
from tests.integration.serve_process import ServeProcess
from tests.integration.test_manifests import scaler_container

SERVING = health_pb2.HealthCheckResponse.SERVING
LIVENESS_SERVICE = "liveness"
"""What deploy/ probes, and scaler/serving/server.py LIVENESS_SERVICE."""
TARGET = """apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: llm-serve, namespace: gpu}
spec:
  scaleTargetRef: {name: llm-serve}
  triggers:
    - type: external
      metadata: {query: "sum(load)", threshold: "5"}
"""


def status(channel: grpc.Channel, service: str) -> int:
    request = health_pb2.HealthCheckRequest(service=service)
    return int(health_pb2_grpc.HealthStub(channel).Check(request, timeout=2).status)


def test_a_replica_still_warming_up_is_alive_but_not_ready(tmp_path: Path) -> None:
    targets = tmp_path / "targets.yaml"
    targets.write_text(TARGET)
    with sick_endpoints.silent() as hung:
        flags = ["--prometheus-url", hung.url, "--targets", str(targets)]
        flags += ["--prometheus-timeout", "5s", "--prometheus-retries", "0"]
        serve = ServeProcess(tmp_path / "serve.log", flags, metadata={})
        try:
            grpc.channel_ready_future(serve.channel).result(timeout=60)
            assert status(serve.channel, LIVENESS_SERVICE) == SERVING
            assert status(serve.channel, "") != SERVING  # not warm: the history read hangs
        finally:
            serve.kill()


def test_the_startup_and_liveness_probes_ask_the_liveness_service() -> None:
    container = scaler_container()
    for probe in ("startupProbe", "livenessProbe"):
        assert container[probe]["grpc"].get("service") == LIVENESS_SERVICE, probe
