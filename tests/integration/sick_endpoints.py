"""Sick Prometheus endpoints on loopback, for tests and bench/silent_endpoints.py.

Each is a real listening socket on an ephemeral port of 127.0.0.1, served by a daemon thread:
- `silent`: accepts TCP connections and never sends a byte;
- `garbage`: answers every connection with bytes that are not HTTP;
- `answering(status, body)`: a real HTTP server answering every request the same way;
- `delayed(upstream, delay)`: forwards each request to a real Prometheus, `delay` seconds late;
- `trickling(every)`: starts an answer, then sends one byte every `every` seconds, forever.
Loopback only; never touches the network.
"""

from __future__ import annotations

import http.server
import socket
import threading
import time
import urllib.error
import urllib.request
from contextlib import suppress
from types import TracebackType


class SickEndpoint:
    """A listening socket and the thread serving it; `url` is its http:// address."""

    def __init__(self) -> None:
        self.stopped = threading.Event()
        self.port = 0
        self.served = 0
        """Requests answered (`answering` counts them)."""
        self._closers: list[socket.socket] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> SickEndpoint:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self.stopped.set()
        for sock in list(self._closers):
            with suppress(OSError):  # wakes a thread blocked on it (accept, recv)
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


class _RawEndpoint(SickEndpoint):
    """Accepts connections and hands each to `on_connection` (which may keep it open)."""

    def __init__(self) -> None:
        super().__init__()
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=512)
        self.port = int(self._listener.getsockname()[1])
        self._closers.append(self._listener)
        thread = threading.Thread(target=self._accept, name=f"sick {self.port}", daemon=True)
        thread.start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self._closers.append(conn)
            if self.stopped.is_set():  # accepted while closing
                conn.close()
                return
            self.on_connection(conn)

    def on_connection(self, conn: socket.socket) -> None:
        raise NotImplementedError


class _Silent(_RawEndpoint):
    def on_connection(self, conn: socket.socket) -> None:
        pass  # keep it open, say nothing


class _Garbage(_RawEndpoint):
    def on_connection(self, conn: socket.socket) -> None:
        try:  # read the request, answer, then half-close: the client reads it all, no reset
            conn.recv(65536)
            conn.sendall(bytes(range(256)) * 4)
            conn.shutdown(socket.SHUT_WR)
        except OSError:
            conn.close()


def silent() -> SickEndpoint:
    """Accepts TCP and never answers."""
    return _Silent()


def garbage() -> SickEndpoint:
    """Answers every request with 1 KiB of bytes that are not HTTP, then hangs up."""
    return _Garbage()


class _HTTPEndpoint(SickEndpoint):
    def __init__(self, handler: type[http.server.BaseHTTPRequestHandler]) -> None:
        super().__init__()
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        self._server = server
        self.port = int(server.server_address[1])
        thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
        thread.start()
        self._thread = thread

    def close(self) -> None:
        super().close()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


class _Quiet(http.server.BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def answering(status: int, body: bytes, content_type: str = "application/json") -> SickEndpoint:
    """An HTTP server answering every GET and POST with `status` and `body`."""

    class Handler(_Quiet):
        def do_GET(self) -> None:
            endpoint.served += 1
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_GET  # noqa: N815

    endpoint = _HTTPEndpoint(Handler)
    return endpoint


def delayed(upstream: str, delay: float) -> SickEndpoint:
    """Forwards each GET to `upstream` (a real Prometheus) and answers `delay` seconds late."""

    class Handler(_Quiet):
        def do_GET(self) -> None:
            began = time.monotonic()
            try:
                with urllib.request.urlopen(upstream + self.path, timeout=30) as resp:
                    status, body = resp.status, resp.read()
            except urllib.error.HTTPError as e:
                status, body = e.code, e.read()
            time.sleep(max(0.0, delay - (time.monotonic() - began)))
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return _HTTPEndpoint(Handler)


def trickling(every: float) -> SickEndpoint:
    """Answers 200 with headers, then one byte of body every `every` seconds, forever: no read
    ever waits longer than `every`, so a per-read timeout above it never fires."""

    class Handler(_Quiet):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            try:
                while not endpoint.stopped.wait(every):
                    self.wfile.write(b" ")
                    self.wfile.flush()
            except OSError:
                pass

    endpoint = _HTTPEndpoint(Handler)
    return endpoint


WRONG_SHAPE = (
    b'{"status":"success","data":{"resultType":"vector",'
    b'"result":[{"metric":{},"value":[1700000000],"values":[[1700000000]]}]}}'
)
"""A 200 Prometheus answer whose samples lack their value (`[time]`, not `[time, "number"]`),
to instant and range queries alike."""

BAD_DATA = (
    b'{"status":"error","errorType":"bad_data","error":"invalid parameter \\"query\\": '
    b'1:9: parse error: unexpected \\"(\\""}'
)
"""Prometheus' own 400 answer to a PromQL syntax error."""
