"""An HTTP adapter that reads every answer whole, within the request's timeout counted from its
start and under a size cap.

requests' own timeout bounds each socket read, not the request: a server that trickles a byte
every few seconds holds the request (its thread, and its endpoint's bulkhead slot) forever. And
an answer of millions of points (a query without `sum()` on a large fleet) was read and parsed
whole before anything could refuse it: gigabytes, with the GIL held through the parse, which
stalls every other target. Here the body is read in chunks while a watchdog shuts the socket
down at the deadline, and reading stops at `max_bytes`. One watchdog thread serves every request
of the process (`Deadlines`): a thread a request (threading.Timer) cost a thread start and exit
per query, dozens a second at a thousand targets.

Must not: parse, retry or judge the answer (scaler/sources/prometheus_transport.py retries,
prometheus_answers.py and prometheus_failures.py judge).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import requests
import urllib3
from requests.adapters import HTTPAdapter

CHUNK = 1 << 16
"""Bytes read at a time."""

logger = logging.getLogger(__name__)


class Deadline:
    """A call due at a time, cancellable: once `cancel` returns it will not run, and has not
    run unless it already ran whole."""

    def __init__(self, call: Callable[[], None]) -> None:
        self._call: Callable[[], None] | None = call
        self._lock = threading.Lock()

    def cancel(self) -> None:
        with self._lock:
            self._call = None

    @property
    def done(self) -> bool:
        """Run, or cancelled."""
        return self._call is None

    def fire(self) -> None:
        with self._lock:
            call, self._call = self._call, None
            if call is not None:
                call()


class Deadlines:
    """One daemon thread that runs each Deadline at its time (monotonic clock), unless it was
    cancelled first. Started on first use, and anew in a forked child (which has no threads).
    A call must be quick: the ones after it wait for it."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)  # the parent's requests are not ours

    def _reset(self) -> None:
        self._due: list[tuple[float, int, Deadline]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def at(self, when: float, call: Callable[[], None]) -> Deadline:
        deadline = Deadline(call)
        with self._wake:
            heapq.heappush(self._due, (when, next(self._order), deadline))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="http-deadlines", daemon=True
                )
                self._thread.start()
            self._wake.notify()
        return deadline

    def _run(self) -> None:
        while True:
            with self._wake:
                while True:
                    while self._due and self._due[0][2].done:
                        heapq.heappop(self._due)
                    wait = self._due[0][0] - time.monotonic() if self._due else None
                    if wait is not None and wait <= 0:
                        deadline = heapq.heappop(self._due)[2]
                        break
                    self._wake.wait(wait)
            try:  # outside the condition: new deadlines are not held up
                deadline.fire()
            except Exception:  # one failing cut must not stop the watchdog of every request
                logger.exception("a request's deadline failed to cut it")


DEADLINES = Deadlines()
"""The watchdog of every BoundedAdapter in the process."""


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
            except (ValueError, RuntimeError, OSError):  # OSError: reset, or closed meanwhile
                expired.clear()  # read whole and released to the pool just now: nothing cut

        watchdog = None if total is None else DEADLINES.at(began + total, expire)
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
