"""`scaler explain` as an engineer runs it: against a real `scaler serve` process over its HTTP
port, then on the decision log that process wrote (rotated, with a corrupt line)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import pytest

from scaler._pb import externalscaler_pb2 as pb
from scaler._pb import externalscaler_pb2_grpc as pb_grpc
from tests.integration.scaler_server import eventually, ref
from tests.integration.serve_process import free_ports
from tests.integration.test_cli import scaler


def explain(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scaler", "explain", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_explain_reads_a_running_server_then_the_rotated_log_it_wrote(tmp_path: Path) -> None:
    grpc_port, http_port = free_ports(2)
    log = tmp_path / "decisions.jsonl"
    env = {**os.environ, "SCALER_FIT_WORKERS": "1"}
    proc = scaler(
        "serve",
        "--source",
        "file:",
        "--host",
        "127.0.0.1",
        "--grpc-port",
        str(grpc_port),
        "--http-port",
        str(http_port),
        "--step",
        "1s",
        "--decision-log",
        str(log),
        "--decision-log-max-size",
        "4Ki",
        "--decision-log-keep",
        "50",
        env=env,
    )
    server = f"http://127.0.0.1:{http_port}"
    triggers = [ref(name="llm", leadTime=lead, costPerReplicaHour="2.5") for lead in ("10m", "5m")]
    try:
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            grpc.channel_ready_future(channel).result(timeout=30)
            stub = pb_grpc.ExternalScalerStub(channel)
            requests = [pb.GetMetricsRequest(scaledObjectRef=t, metricName="m") for t in triggers]

            def poll() -> None:
                """Both triggers, as each KEDA poll asks them (one left unasked for two polls
                while another trigger of its ScaledObject is asked is dropped as edited)."""
                failed = []
                for request in requests:
                    try:
                        stub.GetMetrics(request)
                    except grpc.RpcError as exc:
                        failed.append(exc)
                if failed:
                    raise failed[0]

            eventually(poll, timeout=30)
            time.sleep(4)  # a few decisions
            answered = [
                stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=t, metricName="m"))
                .metricValues[0]
                .metricValue
                for t in triggers
            ]
        live = explain("team-a/llm", "--server", server, "--since", "10m")
        unknown = explain("team-a/nope", "--server", server)
        bad = urllib.request.Request(f"{server}/explain?target=llm&since=yesterday")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(bad, timeout=10)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out

    assert live.returncode == 0, live.stderr
    keys = sorted({line.split()[0] for line in live.stdout.splitlines() if "  metric " in line})
    assert len(keys) == 2 and f"team-a/llm has 2 triggers: {', '.join(keys)}" in live.stdout
    assert "GPU-hours (replica-hours served): " in live.stdout and " USD" in live.stdout
    # one total for the ScaledObject, before the sections
    total = "team-a/llm, the ScaledObject: the max of its 2 triggers' requests"
    assert live.stdout.index(total) < live.stdout.index(f"{keys[0]}  metric ")
    assert "time per reason: " in live.stdout
    for n in answered:
        assert f"asked {n} (reactive " in live.stdout
    assert refused.value.code == 400
    assert "NAMESPACE/NAME" in json.load(refused.value)["error"]
    assert unknown.returncode == 2
    assert "no decisions of team-a/nope" in unknown.stderr and keys[0] in unknown.stderr

    rotated = sorted(tmp_path.glob("decisions.jsonl.*"))
    assert rotated, "the 4Ki log never rotated"
    oldest = max(rotated, key=lambda p: int(p.suffix[1:]))
    with oldest.open("a") as fh:
        fh.write('{"v": 1, "target": "team-a/llm#cut-short", "at": 17\n')
    bad_line = len(oldest.read_text().splitlines())
    first = json.loads(oldest.read_text().splitlines()[0])

    logged = explain("team-a/llm", "--log", str(log), "--since", "10m")
    assert logged.returncode == 0, logged.stderr
    assert f"{oldest}:{bad_line}: not JSON" in logged.stderr
    assert "the rest is read" in logged.stderr
    for key in keys:
        assert f"{key}  metric " in logged.stdout
    assert total in logged.stdout
    for n in answered:
        assert f"asked {n} (reactive " in logged.stdout
    # the very first decision is in the oldest rotated file, and --at finds it
    at = explain(str(first["target"]), "--log", str(log), "--at", f"@{first['at'] + 0.5}")
    assert at.returncode == 0, at.stderr
    assert f"asked {first['desired']} (reactive {first['reactive']}" in at.stdout
    missing = explain("team-a/nope", "--log", str(log))
    assert missing.returncode == 2 and keys[0] in missing.stderr
    empty = explain(
        "team-a/llm", "--log", str(log), "--since", "2020-01-01", "--until", "2020-01-02"
    )
    assert empty.returncode == 1 and "no decision of" in empty.stdout
