"""An answer too large to read is refused after its first MAX_ANSWER_BYTES, naming the fix, not
read and parsed whole; a healthy answer is read as before, compressed or not (the adapter in
scaler/sources/bounded.py, through PrometheusSource and a real HTTP server on loopback)."""

from __future__ import annotations

import gzip
import http.server
import json
import threading
import time
from collections.abc import Iterator

import pytest

from scaler.decision import spec
from scaler.errors import BadQuery
from scaler.sources import bounded, prometheus_transport
from scaler.sources.prometheus import PrometheusSource
from tests.integration import sick_endpoints

NOW = 1_700_000_000.0
PROBE = spec.parse("gpu", "llm", {"query": "rate(requests_total[2m])", "threshold": "1"})


def vector(series: int) -> bytes:
    """A Prometheus instant answer with `series` series: what a query without sum() gives."""
    result = [
        {
            "metric": {"pod": f"llm-{i:07d}", "instance": f"10.0.{i // 250}.{i % 250}:8000"},
            "value": [NOW, "12.5"],
        }
        for i in range(series)
    ]
    return json.dumps(
        {"status": "success", "data": {"resultType": "vector", "result": result}}
    ).encode()


def test_an_answer_past_the_cap_is_a_bad_query_naming_sum_not_read_whole() -> None:
    body = vector(400_000)
    assert len(body) > prometheus_transport.MAX_ANSWER_BYTES
    with sick_endpoints.answering(200, body) as endpoint:
        source = PrometheusSource(endpoint.url, timeout=30.0)
        with pytest.raises(BadQuery, match=r"over 32 MiB, so it was not read on; .* sum\(\)"):
            source.latest(PROBE, at=NOW)
        source.close()


def test_a_single_series_answer_reads_as_before() -> None:
    with sick_endpoints.answering(200, vector(1)) as endpoint:
        source = PrometheusSource(endpoint.url, timeout=5.0)
        sample = source.latest(PROBE, at=NOW)
        source.close()
    assert (sample.at, sample.value) == (NOW, 12.5)


@pytest.fixture()
def gzipped() -> Iterator[tuple[str, list[int]]]:
    """An endpoint answering gzip-compressed, keeping connections alive; the client port of
    each request it served (one port: one connection)."""
    served: list[int] = []
    body = gzip.compress(vector(1))

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            served.append(self.client_address[1])
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", served
    server.shutdown()
    server.server_close()


def test_a_compressed_answer_is_decoded_and_the_connection_kept_for_the_next(
    gzipped: tuple[str, list[int]],
) -> None:
    url, served = gzipped
    source = PrometheusSource(url, timeout=5.0)
    samples = [source.latest(PROBE, at=NOW) for _ in range(3)]
    source.close()
    assert [s.value for s in samples] == [12.5] * 3
    assert len(served) == 3
    assert len(set(served)) == 1, "each answer read whole releases its connection to the pool"


def test_requests_share_one_watchdog_thread_instead_of_starting_one_each(
    gzipped: tuple[str, list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, served = gzipped
    source = PrometheusSource(url, timeout=5.0)
    source.latest(PROBE, at=NOW)  # the connection, and the watchdog, exist from here on
    started: list[str] = []
    start = threading.Thread.start

    def counted(thread: threading.Thread) -> None:
        started.append(thread.name)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", counted)
    samples = [source.latest(PROBE, at=NOW) for _ in range(20)]
    source.close()
    assert [s.value for s in samples] == [12.5] * 20
    assert len(set(served)) == 1  # one connection: the server started no thread either
    assert started == []


def test_a_deadline_runs_at_its_time_unless_cancelled_and_an_earlier_one_goes_first() -> None:
    ran: list[str] = []
    now = time.monotonic()
    late = bounded.DEADLINES.at(now + 0.4, lambda: ran.append("late"))
    cancelled = bounded.DEADLINES.at(now + 0.1, lambda: ran.append("cancelled"))
    early = bounded.DEADLINES.at(now + 0.2, lambda: ran.append("early"))
    cancelled.cancel()
    time.sleep(0.7)
    late.cancel()  # ran already: nothing to undo
    assert ran == ["early", "late"]
    assert early.done and late.done


def test_a_deadline_whose_cut_fails_does_not_stop_the_watchdog_of_the_others() -> None:
    # A shutdown of a socket reset meanwhile raises OSError: it ended the one shared thread, and
    # every other request's deadline waited for the next request to start it again.
    ran: list[str] = []

    def broken() -> None:
        raise OSError(107, "Transport endpoint is not connected")

    now = time.monotonic()
    bounded.DEADLINES.at(now + 0.1, broken)
    after = bounded.DEADLINES.at(now + 0.3, lambda: ran.append("after"))
    time.sleep(0.7)
    assert ran == ["after"] and after.done
