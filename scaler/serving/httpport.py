"""The HTTP port: /metrics (Prometheus scrapes it, and the prewarm ledger is rebuilt from what
it scraped), /healthz and /readyz (kubelet's probes), and the routes the caller adds (/explain).

A server of its own threads: each connection has a thread, and one that sends nothing for
READ_TIMEOUT seconds is dropped, so an idle or slow client (a port scanner, a stuck proxy) never
holds up the readiness probe or the scrape; wsgiref's default server took one connection at a
time, and an idle one stopped the port for as long as it stayed open. Only GET and HEAD are
answered, only on the paths above: anything else is 404 or 405, not the metrics page.

Must not: compute anything a request waits on (the apps read what the engine published).
"""

from __future__ import annotations

import functools
import socketserver
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

from scaler.errors import ConfigError

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
SHUTDOWN_POLL = 0.05
"""Seconds between the HTTP server's checks for a shutdown request."""
READ_TIMEOUT = 10.0
"""Seconds a connection may send nothing before it is dropped (kubelet's probes and
Prometheus send their request at once)."""
METHODS = frozenset({"GET", "HEAD"})


SERVER = "predictive-scaler"
"""The Server header of every answer."""


class _Handler(WSGIRequestHandler):
    timeout = READ_TIMEOUT

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    request_queue_size = 128  # a burst of scrapes and probes waits, it is not refused


def serve_http(
    registry: CollectorRegistry,
    *,
    host: str,
    port: int,
    unready: Callable[[], str | None],
    routes: Mapping[str, WSGIApp] | None = None,
) -> tuple[WSGIServer, int]:
    """Serve /metrics, /healthz (alive) and /readyz in a daemon thread; /readyz answers 503
    with `unready()`'s reason while that is not None. `routes` adds apps by path (/explain)."""
    metrics = make_wsgi_app(registry)

    def plain(start_response: StartResponse, status: str, text: str) -> list[bytes]:
        start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
        return [text.encode()]

    def app(environ: dict[str, Any], respond: StartResponse) -> Iterable[bytes]:
        def start_response(status: str, headers: list[tuple[str, str]], *exc: Any) -> Any:
            # wsgiref adds its own Server header (with the Python version) only without one.
            return respond(status, [*headers, ("Server", SERVER)], *exc)

        path = environ.get("PATH_INFO", "")
        if environ.get("REQUEST_METHOD", "GET") not in METHODS:
            return plain(start_response, "405 Method Not Allowed", "only GET and HEAD\n")
        if routes and path in routes:
            return routes[path](environ, start_response)
        if path == "/healthz":
            return plain(start_response, "200 OK", "ok\n")
        if path == "/readyz":
            reason = unready()
            if reason is None:
                return plain(start_response, "200 OK", "ready\n")
            return plain(start_response, "503 Service Unavailable", f"{reason}\n")
        if path == "/metrics":
            result: Iterable[bytes] = metrics(environ, start_response)
            return result
        known = ", ".join(["/metrics", "/healthz", "/readyz", *(routes or {})])
        return plain(start_response, "404 Not Found", f"no {path}; this port serves {known}\n")

    bind = host.strip("[]") if host not in ("[::]", "") else "0.0.0.0"
    try:
        server = make_server(bind, port, app, server_class=_ThreadingServer, handler_class=_Handler)
    except OSError as e:
        raise ConfigError(
            f"could not bind the HTTP port {bind}:{port} ({e.strerror}); pick another "
            "--http-port (SCALER_HTTP_PORT), or -1 to serve no metrics"
        ) from None
    # A short poll interval: shutdown() waits for it, and it counts against the grace period.
    serve = functools.partial(server.serve_forever, poll_interval=SHUTDOWN_POLL)
    threading.Thread(target=serve, name="http", daemon=True).start()
    return server, server.server_port
