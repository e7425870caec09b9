"""`scaler serve` as a real process for the integration tests: started with the flags a test
gives, asked for health, gauges and answers over its real ports, and SIGKILLed at the end."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from scaler._pb import externalscaler_pb2 as pb
from scaler._pb import externalscaler_pb2_grpc as pb_grpc

TEST_FLAGS = ("--step", "2s", "--staleness", "1h", "--fit-workers", "1", "--store-poll", "1s")
"""A 2 s decision step and a 1 s store poll, so a test sees several of each in seconds."""


def free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports of 127.0.0.1 that nothing listens on right now. Each socket
    stays bound until all are picked: one port at a time, the kernel may hand out the one just
    closed again (5 times in 100,000 pairs here), and serve's two servers then collide."""
    with contextlib.ExitStack() as bound:
        sockets = [bound.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]


class ServeProcess:
    """One `scaler serve` process on loopback ports, its output appended to `log`."""

    def __init__(self, log: Path, flags: list[str], *, metadata: Mapping[str, str]) -> None:
        self.grpc_port, self.http_port = free_ports(2)
        self.log = log
        self.metadata = dict(metadata)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCALER_")}
        argv = [
            sys.executable, "-m", "scaler", "serve", "--host", "127.0.0.1",
            "--grpc-port", str(self.grpc_port), "--http-port", str(self.http_port),
            *flags, *TEST_FLAGS,
        ]  # fmt: skip
        with log.open("ab") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}")

    def serving(self) -> bool:
        assert self.proc.poll() is None, self.log.read_text()
        stub = health_pb2_grpc.HealthStub(self.channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=1)
        except grpc.RpcError:
            return False
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)

    def wait_serving(self, within: float = 90) -> float:
        began = time.monotonic()
        while not self.serving():
            assert time.monotonic() - began < within, f"never SERVING:\n{self.log.read_text()}"
            time.sleep(0.05)
        return time.monotonic() - began

    def metrics(self) -> dict[str, float]:
        """`name{namespace/name}` -> value of every per-target gauge."""
        url = f"http://127.0.0.1:{self.http_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as reply:
            text = reply.read().decode()
        found = re.findall(r'^(scaler_\w+)\{target="([^"]+)"\} (\S+)$', text, re.M)
        return {f"{name}{{{target.split('#')[0]}}}": float(v) for name, target, v in found}

    def answer(self, name: str, namespace: str = "gpu") -> float:
        stub = pb_grpc.ExternalScalerStub(self.channel)  # type: ignore[no-untyped-call]
        ref = pb.ScaledObjectRef(name=name, namespace=namespace, scalerMetadata=self.metadata)
        request = pb.GetMetricsRequest(scaledObjectRef=ref, metricName="m")
        return float(stub.GetMetrics(request, timeout=5).metricValues[0].metricValueFloat)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.channel.close()
