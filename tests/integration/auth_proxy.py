"""A small real HTTP(S) reverse proxy in front of the test Prometheus that checks credentials,
as an ingress or an oauth proxy in front of a production Prometheus does.

It forwards GET requests to `upstream` when the request carries `expect` (a header name and
value; None accepts anything), answers 401 otherwise, and remembers the headers and query
parameters it saw. `fail_first` answers that many requests with 503 first (a restarting
Prometheus); `delay` holds every answer that long. TLS comes from an `ssl.SSLContext` the test
builds (server certificate, optionally requiring a client certificate). Loopback only.
"""

from __future__ import annotations

import http.server
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit


@dataclass
class Seen:
    headers: dict[str, str]
    params: dict[str, list[str]]
    client_cert: bool


@dataclass
class ProxyState:
    upstream: str
    expect: tuple[str, str] | None = None
    fail_first: int = 0
    delay: float = 0.0
    seen: list[Seen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        state = self.server.state
        cert = isinstance(self.connection, ssl.SSLSocket) and bool(self.connection.getpeercert())
        query = parse_qs(urlsplit(self.path).query)
        with state.lock:
            state.seen.append(Seen(dict(self.headers.items()), query, cert))
            failing = state.fail_first > 0
            state.fail_first -= 1 if failing else 0
        if state.delay:
            time.sleep(state.delay)
        if failing:
            return self._answer(503, b"upstream connect error")
        if state.expect is not None and self.headers.get(state.expect[0]) != state.expect[1]:
            return self._answer(401, b'{"status":"error","error":"unauthorized"}')
        try:
            with urllib.request.urlopen(state.upstream + self.path, timeout=30) as answer:
                return self._answer(answer.status, answer.read())
        except urllib.error.HTTPError as e:
            return self._answer(e.code, e.read())
        except (urllib.error.URLError, OSError) as e:  # upstream gone (the session ending)
            return self._answer(502, str(e).encode())

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    state: ProxyState


@contextmanager
def auth_proxy(state: ProxyState, tls: ssl.SSLContext | None = None) -> Iterator[str]:
    """Run the proxy on an ephemeral loopback port; yields its base URL."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.state = state
    scheme = "http"
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"{scheme}://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
