"""The container image: built by `make image`, run as Kubernetes runs it (read-only root, a tmpfs
/tmp, the image's own non-root user), and talked to over real gRPC on the host's loopback.

Needs root podman, runc and mmdebstrap (`make image-tools`, a prerequisite of `make test`);
without them the build fails, and so does the test. Set SCALER_TEST_IMAGE_BUILT=1 to reuse an
image `make image IMAGE=predictive-scaler:test` has just built instead of building it again."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from scaler._pb import externalscaler_pb2 as pb
from scaler._pb import externalscaler_pb2_grpc as pb_grpc
from scaler.settings import ServerSettings
from tests.integration.scaler_server import eventually, ref
from tests.integration.serve_process import free_ports

# The first test also builds the image: on a fresh machine that is the base, the wheels and
# every layer (minutes), so the bound is generous; a cached rebuild takes seconds.
pytestmark = [pytest.mark.image, pytest.mark.slow, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "predictive-scaler:test"
IMAGE_USER = 10001  # the Dockerfile's USER; the Deployment's runAsUser matches it
GRACE = ServerSettings().grace_seconds
# What podman needs in this VM (issue 9): runc (crun fails here) and bounded ulimits.
PODMAN_RUN = [
    "podman",
    "--runtime",
    "runc",
    "run",
    "--network",
    "host",
    "--ulimit",
    "nofile=1024:1024",
    "--ulimit",
    "nproc=1024:1024",
]


def podman(*args: str, timeout: float = 60) -> str:
    done = subprocess.run(
        ["podman", *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"podman {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout.strip()


@pytest.fixture(scope="module")
def image() -> str:
    """`make image` (the Makefile's flags: base from Debian, this machine's pip configuration)."""
    if os.environ.get("SCALER_TEST_IMAGE_BUILT") == "1":
        podman("image", "exists", IMAGE)
        return IMAGE
    started = time.monotonic()
    done = subprocess.run(
        ["make", "-s", "-C", str(ROOT), "image", f"IMAGE={IMAGE}"],
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    took = time.monotonic() - started
    if done.returncode != 0:
        pytest.fail(f"make image failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    size = int(podman("image", "inspect", "--format", "{{.Size}}", IMAGE))
    print(f"make image: {took:.1f}s, {size / 1e6:.0f} MB")
    return IMAGE


@dataclass
class Container:
    name: str
    grpc_port: int
    http_port: int
    health_port: int

    def logs(self) -> str:
        done = subprocess.run(
            ["podman", "logs", self.name], capture_output=True, text=True, check=False
        )
        return done.stdout + done.stderr

    def pid(self) -> int:
        return int(podman("inspect", "--format", "{{.State.Pid}}", self.name))

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.http_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as reply:
            return str(reply.read().decode())

    def fits(self, model: str) -> float:
        pattern = rf'scaler_model_fits_total{{model="{model}",result="ok"}} (\S+)'
        found = re.search(pattern, self.metrics())
        return float(found[1]) if found else 0.0

    def wait_for(self, what: str, condition: object, within: float) -> None:
        deadline = time.monotonic() + within
        while True:
            with contextlib.suppress(OSError, urllib.error.URLError):
                if condition():  # type: ignore[operator]
                    return
            running = podman("inspect", "--format", "{{.State.Running}}", self.name)
            assert running == "true", f"the container exited:\n{self.logs()}"
            assert time.monotonic() < deadline, f"never {what}:\n{self.logs()}"
            time.sleep(0.5)


@pytest.fixture
def container(image: str) -> Iterator[Container]:
    """The image's default user and entrypoint, read-only, on the bundled trace."""
    box = Container(f"scaler-test-{uuid.uuid4().hex[:8]}", *free_ports(3))
    podman(
        *PODMAN_RUN[1:],
        "--detach",
        "--name",
        box.name,
        "--read-only",
        "--tmpfs",
        "/tmp",
        "--env",
        "SCALER_STEP=1s",
        image,
        "serve",
        "--source",
        "file:",
        "--host",
        "127.0.0.1",
        "--grpc-port",
        str(box.grpc_port),
        "--http-port",
        str(box.http_port),
        "--health-port",
        str(box.health_port),
    )
    try:
        yield box
    finally:
        subprocess.run(["podman", "rm", "--force", "--time", "0", box.name], capture_output=True)


def uids(pid: int) -> set[int]:
    """Real, effective, saved and filesystem uids of a host process."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return {int(field) for field in line.split()[1:]}
    raise AssertionError(f"no Uid line for {pid}")


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found += [int(child) for child in text]
    return found


def test_the_image_serves_keda_over_grpc_read_only_as_its_non_root_user(
    container: Container,
) -> None:
    channel = grpc.insecure_channel(f"127.0.0.1:{container.grpc_port}")
    try:
        grpc.channel_ready_future(channel).result(timeout=120)
        stub = pb_grpc.ExternalScalerStub(channel)
        target = ref(name="llm-serve", maxReplicas="7")
        spec = eventually(lambda: stub.GetMetricSpec(target), timeout=120)
        [metric] = spec.metricSpecs
        assert metric.targetSize == 1  # the value is a replica count, one per replica
        request = pb.GetMetricsRequest(scaledObjectRef=target, metricName=metric.metricName)
        reply = eventually(lambda: stub.GetMetrics(request), timeout=120)
        [value] = reply.metricValues
        assert value.metricName == metric.metricName
        assert 0 <= value.metricValue <= 7  # clamped to the trigger's maxReplicas
        assert isinstance(eventually(lambda: stub.IsActive(target)).result, bool)
        health = health_pb2_grpc.HealthStub(channel)
        serving = health_pb2.HealthCheckResponse.SERVING
        assert health.Check(health_pb2.HealthCheckRequest(), timeout=10).status == serving
    finally:
        channel.close()
    # kubelet's probes: grpc.health.v1 on the plaintext health port, HTTP /readyz
    with grpc.insecure_channel(f"127.0.0.1:{container.health_port}") as probe:
        check = health_pb2_grpc.HealthStub(probe).Check
        assert check(health_pb2.HealthCheckRequest(), timeout=10).status == serving
    ready = f"http://127.0.0.1:{container.http_port}/readyz"
    container.wait_for("ready", lambda: urllib.request.urlopen(ready, timeout=5), within=60)
    # A full `auto` fit (Prophet's cmdstan included) in the fit worker, on a read-only root.
    container.wait_for("an auto fit", lambda: container.fits("auto") >= 1, within=300)
    server = container.pid()
    workers = children(server)
    assert workers, "expected the fit worker process"
    assert {server, *workers} and all(uids(pid) == {IMAGE_USER} for pid in [server, *workers])


def test_the_container_stops_on_sigterm_within_the_grace_period(container: Container) -> None:
    channel = grpc.insecure_channel(f"127.0.0.1:{container.grpc_port}")
    try:
        grpc.channel_ready_future(channel).result(timeout=120)
        stub = pb_grpc.ExternalScalerStub(channel)
        eventually(lambda: stub.IsActive(ref(name="llm-serve")), timeout=120)
    finally:
        channel.close()
    started = time.monotonic()
    # SIGTERM, then SIGKILL after 30 s (the Deployment's terminationGracePeriodSeconds)
    podman("stop", "--time", "30", container.name, timeout=60)
    took = time.monotonic() - started
    code = int(podman("inspect", "--format", "{{.State.ExitCode}}", container.name))
    print(f"SIGTERM to exit in the container: {took:.2f}s (grace {GRACE:g}s)")
    assert code == 0, f"exit {code} (137 is the SIGKILL):\n{container.logs()}"
    assert took <= GRACE + 2.0, container.logs()
    assert "stopped" in container.logs()
