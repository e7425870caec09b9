"""The HTTP port over real sockets: an idle or slow client never holds up the probes or the
scrape, and only GET/HEAD on the known paths are answered (scaler/serving/httpport.py)."""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter

from scaler.serving.httpport import serve_http


@pytest.fixture()
def port() -> Iterator[int]:
    registry = CollectorRegistry()
    Counter("scaler_test_total", "a counter", registry=registry).inc()
    server, bound = serve_http(registry, host="127.0.0.1", port=0, unready=lambda: None)
    yield bound
    server.shutdown()
    server.server_close()


def get(port: int, path: str, method: str = "GET") -> tuple[int, str, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(request, timeout=3) as reply:
            return reply.status, reply.read().decode(), reply.headers.get("Server", "")
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(), err.headers.get("Server", "")


def test_idle_connections_do_not_hold_up_the_probes_or_the_scrape(port: int) -> None:
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(8)]
    slow = socket.create_connection(("127.0.0.1", port))
    slow.sendall(b"GET /metr")  # a request that never ends
    try:
        began = time.monotonic()
        assert get(port, "/readyz")[:2] == (200, "ready\n")
        assert "scaler_test_total 1.0" in get(port, "/metrics")[1]
        assert time.monotonic() - began < 2.0
    finally:
        for sock in (*idle, slow):
            sock.close()


def test_only_the_known_paths_and_methods_are_answered(port: int) -> None:
    status, body, server = get(port, "/nonexistent")
    assert status == 404 and "this port serves /metrics, /healthz, /readyz" in body
    assert get(port, "/../../etc/passwd")[0] == 404
    assert get(port, "/readyz", method="POST")[0] == 405
    assert get(port, "/healthz", method="PUT")[0] == 405
    assert get(port, "/healthz")[:2] == (200, "ok\n")
    assert "CPython" not in server and "Python" not in server
