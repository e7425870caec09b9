"""`scaler serve` as a process: its fit workers die with it, and SIGTERM with a full fit queue
exits within the grace period plus a second. Real subprocesses, real gRPC, /proc."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc

from bench.procs import alive, descendants
from scaler._pb import externalscaler_pb2 as pb
from scaler._pb import externalscaler_pb2_grpc as pb_grpc
from scaler.settings import ServerSettings
from tests.integration.scaler_server import eventually, ref
from tests.integration.serve_process import free_ports

GRACE = ServerSettings().grace_seconds
SERVE = [sys.executable, "-m", "scaler", "serve", "--source", "file:", "--host", "127.0.0.1"]


def cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    return "?"


class Serve:
    """`scaler serve --source file:` with one fit worker, its log in a file."""

    def __init__(self, log: Path) -> None:
        self.grpc_port, self.http_port = free_ports(2)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCALER_")}
        env.update(SCALER_STEP="1s", SCALER_HTTP_PORT=str(self.http_port))
        self.log = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                [*SERVE, "--grpc-port", str(self.grpc_port), "--fit-workers", "1"],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}")
        grpc.channel_ready_future(self.channel).result(timeout=60)
        self.stub = pb_grpc.ExternalScalerStub(self.channel)

    def register(self, names: list[str]) -> None:
        for name in names:
            request = pb.GetMetricsRequest(scaledObjectRef=ref(name=name), metricName="m")
            eventually(lambda r=request: self.stub.GetMetrics(r), timeout=60)

    def fits(self, model: str, result: str = "ok") -> float:
        url = f"http://127.0.0.1:{self.http_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as reply:
            text = reply.read().decode()
        pattern = rf'scaler_model_fits_total{{model="{model}",result="{result}"}} (\S+)'
        found = re.search(pattern, text)
        return float(found[1]) if found else 0.0

    def wait_for(self, what: str, condition: object, within: float = 90) -> None:
        deadline = time.monotonic() + within
        while not condition():  # type: ignore[operator]
            assert self.proc.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, f"never {what}:\n{self.log.read_text()}"
            time.sleep(0.2)

    def close(self) -> None:
        self.channel.close()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@contextlib.contextmanager
def serve(tmp_path: Path) -> Iterator[Serve]:
    server = Serve(tmp_path / "serve.log")
    try:
        yield server
    finally:
        server.close()


def test_a_sigkill_of_serve_leaves_no_fit_worker_or_resource_tracker_behind(
    tmp_path: Path,
) -> None:
    with serve(tmp_path) as server:
        server.register(["llm-serve"])  # model auto: a quick fit, then the full selection
        server.wait_for("a fit worker", lambda: descendants(server.proc.pid))
        server.wait_for("a first fit", lambda: server.fits("seasonal") >= 1)
        children = descendants(server.proc.pid)
        server.proc.send_signal(signal.SIGKILL)  # mid-way through the `auto` fit
        server.proc.wait(10)
        deadline = time.monotonic() + 5
        while any(alive(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = {pid: cmdline(pid) for pid in children if alive(pid)}
    assert len(children) >= 2, "expected a fit worker and the resource tracker"
    assert left == {}


def test_sigterm_with_a_full_fit_queue_exits_within_the_grace_period_plus_a_second(
    tmp_path: Path,
) -> None:
    names = [f"team-{i}" for i in range(16)]
    with serve(tmp_path) as server:
        server.register(names)
        # every quick fit done: the sixteen `auto` selections (seconds each) fill the queue
        server.wait_for("the quick fits", lambda: server.fits("seasonal") >= len(names))
        assert server.fits("auto") < len(names) - 1, "the queue had drained already"
        stream = server.stub.StreamIsActive(ref(name=names[0]))

        def read() -> None:
            with contextlib.suppress(grpc.RpcError):  # cancelled when the grace runs out
                list(stream)

        threading.Thread(target=read, daemon=True).start()  # an open stream holds the grace
        time.sleep(0.5)
        started = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        server.proc.wait(30)
        took = time.monotonic() - started
        log = server.log.read_text()
    print(f"SIGTERM to exit with {len(names)} fits queued: {took:.2f}s (grace {GRACE:g}s)")
    assert took <= GRACE + 1.0, log
    assert server.proc.returncode == 0, log  # the regular shutdown, not the deadline's cut
    assert "stopped" in log
