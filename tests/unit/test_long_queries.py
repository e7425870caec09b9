"""A 4 KB query (the most `query` may hold) is quoted by its start and its length in log lines
and in the errors KEDA is answered: the key's fingerprint names it, and an error must keep its
fix within the 1 KB of gRPC status details."""

from __future__ import annotations

import http.server
import json
import logging
import threading
from collections.abc import Iterator

import pytest

from scaler.clock import ManualClock
from scaler.decision import spec
from scaler.errors import NegativeLoad, NoData
from scaler.serving.server import MAX_DETAILS_BYTES, bounded
from scaler.settings import EngineSettings
from scaler.sources import prometheus_answers
from scaler.sources.prometheus import PrometheusSource
from tests.unit.test_drift_rebuild import engine_with

LONG = "sum(" + " + ".join(f'rate(requests_total{{pod="p{i:04d}"}}[2m])' for i in range(120))
LONG = LONG[:4095] + ")"
SHORT = 'sum(rate(vllm_request_success_total{model="llama-3-70b"}[2m]))'


def target(query: str) -> spec.TargetSpec:
    return spec.parse("gpu", "llm", {"query": query, "threshold": "10"})


def test_a_new_target_logs_the_start_of_a_long_query_and_its_length(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert len(LONG) == 4096
    clock = ManualClock(1_700_000_000.0)
    engine = engine_with(object(), clock, EngineSettings(step=30.0, fit_workers=0))
    with caplog.at_level(logging.INFO, logger="scaler.serving.engine"):
        long_key = engine.ensure(target(LONG)).spec.key
        short_key = engine.ensure(target(SHORT)).spec.key
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("new target")]
    assert lines[0].startswith(f"new target {long_key} ({LONG[:100]}")
    assert lines[0].endswith("... (4096 characters))") and len(lines[0]) < 300
    assert lines[1] == f"new target {short_key} ({SHORT})"  # a usual query stays whole


def test_a_negative_load_of_a_long_query_keeps_its_fix_within_the_status_details() -> None:
    with pytest.raises(NegativeLoad) as refused:
        prometheus_answers.load(target(LONG), "http://prometheus:9090", -50.0)
    said = bounded(str(refused.value))
    assert len(said.encode()) <= MAX_DETAILS_BYTES
    assert "(4096 characters)' for gpu/llm returned -50 at http://prometheus:9090" in said
    assert said.endswith("wrap the query in clamp_min(..., 0) or fix the subtraction in it")


class EmptyPrometheus(http.server.BaseHTTPRequestHandler):
    """A Prometheus whose every query matches no series."""

    def do_GET(self) -> None:
        kind = "matrix" if self.path.startswith("/api/v1/query_range") else "vector"
        body = json.dumps({"status": "success", "data": {"resultType": kind, "result": []}})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def source() -> Iterator[PrometheusSource]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), EmptyPrometheus)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    src = PrometheusSource(f"http://127.0.0.1:{server.server_address[1]}", timeout=5.0)
    yield src
    src.close()
    server.shutdown()
    server.server_close()
    thread.join()


def test_no_data_for_a_long_query_keeps_its_fix_within_the_status_details(
    source: PrometheusSource,
) -> None:
    now = 1_700_000_000.0
    with pytest.raises(NoData) as latest:
        source.latest(target(LONG), at=now)
    with pytest.raises(NoData) as history:
        source.history(target(LONG), start=now - 3600, end=now, step=60)
    for refused in (latest, history):
        said = bounded(str(refused.value))
        assert len(said.encode()) <= MAX_DETAILS_BYTES
        assert f"query '{LONG[:100]}" in said and "(4096 characters)' for gpu/llm" in said
        assert said.endswith("check the metric name and labels")
    with pytest.raises(NoData, match=r"query 'sum\(rate\(vllm.*\[2m\]\)\)' for gpu/llm has no"):
        source.latest(target(SHORT), at=now)
