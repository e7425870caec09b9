"""An HTTP adapter that reads every answer whole, within the request's timeout counted from its
start and under a size cap.

requests' own timeout bounds each socket read, not the request: a server that trickles a byte
every few seconds holds the request (its thread, and its endpoint's bulkhead slot) forever. And
an answer of millions of points (a query without `sum()` on a large fleet) was read and parsed
whole before anything could refuse it: gigabytes, with the GIL held through the parse, which
stalls every other target. Here the body is read in chunks while a watchdog shuts the socket
down at the deadline, and reading stops at `max_bytes`.

Must not: parse, retry or judge the answer (scaler/sources/prometheus.py does).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import requests
import urllib3
from requests.adapters import HTTPAdapter

CHUNK = 1 << 16
"""Bytes read at a time."""


class AnswerTooLarge(requests.RequestException):
    """The answer's body passed the adapter's `max_bytes`; nothing of it was parsed."""


class BoundedAdapter(HTTPAdapter):
    """HTTPAdapter whose `send` returns a response already read: within the request's timeout
    from the start of `send` (a total, not per read), and at most `max_bytes` of body
    (AnswerTooLarge past it). A caller asking to stream gets the plain adapter's response."""

    def __init__(self, *, max_bytes: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_bytes = max_bytes

    def send(
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: float | tuple[float, float] | tuple[float, None] | None = None,
        verify: bool | str = True,
        cert: bytes | str | tuple[bytes | str, bytes | str] | None = None,
        proxies: Mapping[str, str] | None = None,
    ) -> requests.Response:
        began = time.monotonic()
        response = super().send(
            request, stream=True, timeout=timeout, verify=verify, cert=cert, proxies=proxies
        )
        if stream:
            return response
        total = _total(timeout)
        expired = threading.Event()

        def expire() -> None:
            # Set before the shutdown: the read it wakes checks the flag at once.
            expired.set()
            try:
                response.raw.shutdown()  # wakes a read blocked on the socket
            except (ValueError, RuntimeError):
                expired.clear()  # read whole and released to the pool just now: nothing cut

        watchdog = None
        if total is not None:
            watchdog = threading.Timer(max(total - (time.monotonic() - began), 0.0), expire)
            watchdog.daemon = True
            watchdog.start()
        try:
            body = self._read(response, request)
        except AnswerTooLarge:  # an OSError too (as every RequestException): first
            response.close()
            raise
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            response.close()
            if expired.is_set():
                raise _late(total, request, response) from None
            raise requests.ConnectionError(exc, request=request, response=response) from exc
        finally:
            if watchdog is not None:
                watchdog.cancel()
        if expired.is_set():  # the shutdown ended the read early, as if the body were whole
            response.close()
            raise _late(total, request, response)
        response.raw.release_conn()  # read whole: the connection serves the next request
        # What requests' own `content` would hold after reading the body itself.
        response._content = body
        response._content_consumed = True  # type: ignore[attr-defined]
        return response

    def _read(self, response: requests.Response, request: requests.PreparedRequest) -> bytes:
        chunks, size = [], 0
        for chunk in response.raw.stream(CHUNK, decode_content=True):
            size += len(chunk)
            if size > self.max_bytes:
                raise AnswerTooLarge(
                    f"the answer is over {self.max_bytes // 2**20} MiB",
                    request=request,
                    response=response,
                )
            chunks.append(chunk)
        return b"".join(chunks)


def _total(timeout: float | tuple[float, float] | tuple[float, None] | None) -> float | None:
    """The whole request's bound: the timeout, or a (connect, read) pair's sum."""
    if timeout is None:
        return None
    if isinstance(timeout, tuple):
        parts = [t for t in timeout if t is not None]
        return sum(parts) if parts else None
    return float(timeout)


def _late(
    total: float | None, request: requests.PreparedRequest, response: requests.Response
) -> requests.ReadTimeout:
    return requests.ReadTimeout(
        f"the answer was not whole within {total:g}s", request=request, response=response
    )
