"""`scaler serve` and `scaler demo` as a user runs them: a real process, signals, files."""

from __future__ import annotations

import math
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import grpc
import pytest

from scaler._pb import externalscaler_pb2 as pb
from scaler._pb import externalscaler_pb2_grpc as pb_grpc
from tests.integration.scaler_server import eventually, ref
from tests.integration.serve_process import free_ports


def scaler(*args: str, **kwargs: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "scaler", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kwargs,  # type: ignore[call-overload]
    )


def test_serve_answers_over_grpc_and_stops_cleanly_on_sigterm() -> None:
    grpc_port, http_port = free_ports(2)
    env = {**os.environ, "SCALER_HTTP_PORT": str(http_port), "SCALER_STEP": "1s"}
    proc = scaler(
        "serve",
        "--source",
        "file:",
        "--host",
        "127.0.0.1",
        "--grpc-port",
        str(grpc_port),
        "--fit-workers",
        "1",
        env=env,
    )
    try:
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            grpc.channel_ready_future(channel).result(timeout=30)
            stub = pb_grpc.ExternalScalerStub(channel)
            target = ref(leadTime="10m")
            assert stub.GetMetricSpec(target).metricSpecs[0].targetSize == 1
            request = pb.GetMetricsRequest(scaledObjectRef=target, metricName="m")
            value = eventually(lambda: stub.GetMetrics(request), timeout=30).metricValues[0]
            assert value.metricValue >= 1
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=5) as reply:
            text = reply.read().decode()
        assert "scaler_targets 1.0" in text
        deadline = time.monotonic() + 30  # the fit runs in a worker process
        while 'scaler_model_fits_total{model="auto",result="ok"}' not in text:
            assert time.monotonic() < deadline, "the model was never fitted"
            time.sleep(0.5)
            with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=5) as r:
                text = r.read().decode()
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    assert "stopped" in out


def test_serve_with_a_missing_trace_exits_with_a_clear_error() -> None:
    proc = scaler(
        "serve", "--source", "file:/nonexistent/trace.csv", "--grpc-port", "0", "--http-port", "-1"
    )
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "/nonexistent/trace.csv" in out and "does not exist" in out


BAD_SERVE = {
    "port out of range": (["--grpc-port", "70000"], {}, "--grpc-port: 70000 is not a TCP port"),
    "http port out of range": (["--http-port=65536"], {}, "--http-port: 65536 is not a TCP port"),
    "port from the environment": ([], {"SCALER_GRPC_PORT": "xyz"}, "'xyz' is not a port number"),
    "step of 0": (["--step", "0s"], {}, "--step: 0s is outside [1s, 10m]"),
    "staleness of 0": (["--staleness", "0s"], {}, "--staleness: 0s is outside"),
    "staleness under two steps": (
        ["--staleness", "10s"],
        {},
        "--staleness 10s is under twice --step 30s: a decision is up to a step old",
    ),
    "prometheus timeout of 0": (
        ["--prometheus-timeout", "0s"],
        {},
        "'0s': must be from 1s to 5m (a whole request",
    ),
    "decision log a directory": (["--decision-log", "{tmp}"], {}, "--decision-log {tmp}: cannot"),
    "host not of this machine": (["--host", "999.1.1.1"], {}, "could not bind the gRPC port"),
    "http port in use": (["--http-port", "{busy}"], {}, "could not bind the HTTP port"),
    "prometheus url not one": (
        ["--source", "prometheus", "--prometheus-url", "prometheus:9090"],
        {},
        "--prometheus-url 'prometheus:9090': give an http:// or https:// URL",
    ),
    "kubeconfig not one": (
        ["--kube-events", "--kubeconfig", "{tmp}/garbage"],
        {},
        "cannot configure the Kubernetes client from {tmp}/garbage",
    ),
}


@pytest.mark.parametrize("case", BAD_SERVE)
def test_serve_refuses_a_bad_flag_or_file_at_start_up_naming_it(case: str, tmp_path: Path) -> None:
    argv, env, message = BAD_SERVE[case]
    (tmp_path / "garbage").write_text("garbage\n")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        fill = {"tmp": str(tmp_path), "busy": str(busy.getsockname()[1])}
        flags = ["--source", "file:", "--host", "127.0.0.1", "--http-port", "0"]
        if "SCALER_GRPC_PORT" not in env:  # a flag would override the variable
            flags += ["--grpc-port", "0"]
        proc = scaler("serve", *flags, *(a.format(**fill) for a in argv), env={**os.environ, **env})
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, out
    assert message.format(**fill) in out
    assert "Traceback" not in out


def test_help_lists_the_commands_and_the_serve_flags() -> None:
    top = subprocess.run(
        [sys.executable, "-m", "scaler", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "serve" in top and "demo" in top
    serve = subprocess.run(
        [sys.executable, "-m", "scaler", "serve", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for flag in (
        "--grpc-port",
        "--http-port",
        "--source",
        "--tls-cert",
        "--tls-client-ca",
        "--tls-require-client-cert",
        "SCALER_GRPC_PORT",
    ):
        assert flag in serve


@pytest.mark.slow
def test_demo_short_mode_prints_the_table_and_writes_a_png(tmp_path: Path) -> None:
    out = tmp_path / "demo.png"
    proc = subprocess.run(
        [sys.executable, "-m", "scaler", "demo", "--short", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "P95 peak" in proc.stdout and "reactive" in proc.stdout
    assert "forecast" in proc.stdout  # the model prewarmed at least once
    assert out.stat().st_size > 10_000
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_demo_short_in_a_stretch_without_values_plays_its_24_steps_and_says_so_once(
    tmp_path: Path,
) -> None:
    # 9 days with load in the first 4: the replay starts at day 4.5, in the gap. Before, each
    # unanswered step printed a line and did not count: 708 lines and 1.5 minutes for --short.
    start = 1_709_251_200  # 2024-03-01T00:00:00Z
    values = [f"{100 + 80 * math.sin(i / 288 * 2 * math.pi):.3f}" for i in range(4 * 288)]
    values += [""] * (5 * 288)
    trace = tmp_path / "tailgap.csv"
    lines = (f"{start + 300 * i},{v}\n" for i, v in enumerate(values))
    trace.write_text("timestamp,value\n" + "".join(lines))
    proc = subprocess.run(
        [sys.executable, "-m", "scaler", "demo", "--trace", str(trace), "--short",
         "--out", str(tmp_path / "demo.png")],
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "its first 720 steps go unanswered" in proc.stdout
    assert proc.stdout.count("waiting: UNAVAILABLE") == 1
    assert "... the same for 24 steps" in proc.stdout
    assert "no decisions were made: the server answered none of the steps played" in proc.stdout


@pytest.mark.slow
def test_demo_on_a_one_minute_trace_shows_and_scores_each_step_s_own_load(tmp_path: Path) -> None:
    # The load cycles through 7 levels minute by minute, so the highest of the last 5 minutes
    # (the reactive floor the decision keeps as its `load`) is rarely the minute's own. Before,
    # the table's `load`, "the trace's load at that step", and the yardstick were that peak.
    start = 1_709_251_200  # 2024-03-01T00:00:00Z

    def level(minute: int) -> float:  # by the minute of the day
        return 100.0 + 50.0 * ((minute % 1440 * 3) % 7)

    trace = tmp_path / "minutes.csv"
    lines = (f"{start + 60 * i},{level(i)}\n" for i in range(int(2.5 * 1440)))
    trace.write_text("timestamp,value\n" + "".join(lines))
    proc = subprocess.run(
        [sys.executable, "-m", "scaler", "demo", "--trace", str(trace), "--steps", "12",
         "--seconds-per-step", "0.3", "--threshold", "40", "--out", str(tmp_path / "d.png")],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines() if line[:3] in ("Fri", "Sat")]
    assert len(rows) >= 6, proc.stdout
    for row in rows:
        hour, minute = map(int, row[1].split(":"))
        assert float(row[2]) == level(60 * hour + minute), row
