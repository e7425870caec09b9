"""The instant query's HTTP (scaler/sources/prometheus_transport.py `Client.instant`): the
request the engine sends for every target every step rides one kept-alive connection and asks
for an uncompressed answer; what it reads is the library's `data.result` (the real Prometheus
tests in test_prometheus_source.py read the values)."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator

import pytest

from scaler.decision import spec
from scaler.errors import SourceUnavailable
from scaler.sources.prometheus import PrometheusSource

QUERY = "sum(gpu_queue_depth)"


class RecordingHandler(http.server.BaseHTTPRequestHandler):
    """An HTTP/1.1 instant-query endpoint answering one sample, recording each request's
    client port and Accept-Encoding."""

    protocol_version = "HTTP/1.1"
    server: RecordingServer

    def do_GET(self) -> None:
        self.server.seen.append((self.client_address[1], self.headers.get("Accept-Encoding")))
        body = json.dumps(self.server.answer).encode()
        self.send_response(self.server.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class RecordingServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    status = 200
    answer: object = {}

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), RecordingHandler)
        self.seen: list[tuple[int, str | None]] = []


@pytest.fixture
def server() -> Iterator[RecordingServer]:
    found = RecordingServer()
    thread = threading.Thread(target=found.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield found
    found.shutdown()
    found.server_close()
    thread.join()


def instant(value: str, at: float) -> dict[str, object]:
    return {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": {}, "value": [at, value]}]},
    }


def target() -> spec.TargetSpec:
    return spec.parse("gpu", "llm-serve", {"query": QUERY, "threshold": "10"})


def test_instant_queries_share_one_kept_alive_connection_and_ask_for_no_compression(
    server: RecordingServer,
) -> None:
    at = time.time()
    server.answer = instant("7.5", at)
    source = PrometheusSource(f"http://127.0.0.1:{server.server_address[1]}", timeout=2.0)
    try:
        values = [source.latest(target(), at=at).value for _ in range(20)]
    finally:
        source.close()
    assert values == [7.5] * 20
    assert len(server.seen) == 20
    assert {port for port, _ in server.seen} == {server.seen[0][0]}
    assert {encoding for _, encoding in server.seen} == {"identity"}


def test_an_instant_answer_with_a_2xx_status_other_than_200_is_unavailable_naming_it(
    server: RecordingServer,
) -> None:
    server.status, server.answer = 203, instant("1", time.time())
    url = f"http://127.0.0.1:{server.server_address[1]}"
    source = PrometheusSource(url, timeout=2.0)
    try:
        with pytest.raises(SourceUnavailable, match="HTTP 203") as raised:
            source.latest(target(), at=time.time())
    finally:
        source.close()
    assert url in str(raised.value)
