"""Keeps targets from hurting each other through a sick source endpoint.

Each endpoint (a Prometheus URL, or the spend record) gets its own bulkhead and its own circuit
breaker:

- The bulkhead bounds the requests in flight to one endpoint. Each runs in one of the endpoint's
  own `concurrency` daemon threads (a blocked read can neither be cancelled nor hold up the
  process' exit), and its slot is freed when the call ends, not when the caller gives up: an
  endpoint that never answers holds at most its own threads, and never one of another
  endpoint's. The threads are started once and reused: starting one per call blocks the event
  loop until the new thread gets the GIL, milliseconds each under load (at start-up, thousands).
- The breaker (`Breaker`, a pure state machine on the times it is given) refuses requests to an
  endpoint that has only failed for a while, so that its targets fail in microseconds with the
  reason instead of each waiting for a timeout, and probes it again after a cooldown. The reason
  a target is given names no other target: the failure that opened it is only logged.

Only transport failures count against an endpoint (`SourceUnavailable`, which includes
`MalformedAnswer`, and a caller's deadline expiring): an endpoint that answers "no data" or "bad
query" is healthy, the target is not. Must not: retry, or know about targets and decisions.
"""

from __future__ import annotations

import asyncio
import logging
import math
import queue
import threading
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

from scaler.errors import CircuitOpen, SourceUnavailable

logger = logging.getLogger(__name__)

T = TypeVar("T")

DEADLINE = "no answer within the refresh deadline"
IDLE_SECONDS = 120.0
"""How long an endpoint's thread waits for a call before it ends (well past a step)."""


@dataclass
class Breaker:
    """Closed, open or half-open, from the outcomes it is told about. Pure: no clock, no I/O.

    It opens when the endpoint has failed `min_failures` times in a row over at least `window`
    seconds with no success between: one slow query among healthy ones on the same endpoint
    never opens it (the others' successes reset the run), a dead endpoint does within about a
    window. Open, it refuses for `cooldown` seconds, then lets one probe through (half-open): a
    success closes it, a failure reopens it for twice as long, up to `max_cooldown`.
    """

    min_failures: int
    window: float
    cooldown: float
    max_cooldown: float
    failures: int = 0
    failing_since: float = math.nan
    open_until: float = -math.inf
    opened: int = 0
    """Times it has opened without a success between (0 when closed)."""
    probing: bool = False
    last_error: str = ""
    opened_by: str = ""
    """The failure that opened it, kept until it closes: each failed probe is another
    target's failure, and the refused targets log a problem once, not once per probe."""

    def __post_init__(self) -> None:
        if self.min_failures < 1:
            raise ValueError(f"breaker min_failures must be >= 1, got {self.min_failures}")
        if not (0 <= self.window < math.inf and 0 < self.cooldown <= self.max_cooldown < math.inf):
            raise ValueError(
                "breaker needs 0 <= window and 0 < cooldown <= max_cooldown, all finite; got "
                f"window={self.window}, cooldown={self.cooldown}, max_cooldown={self.max_cooldown}"
            )

    @property
    def is_open(self) -> bool:
        return self.opened > 0

    def refusal(self, now: float) -> str | None:
        """None when a request may go now (taking the probe slot when half-open), else why not.

        The reason is told to every target of the endpoint, so it never quotes `last_error`:
        that names the target whose request failed, its query, and what Prometheus said about
        it, and targets are different tenants. The log (Isolation) and CircuitOpen.problem
        carry it for the operator."""
        if not self.is_open:
            return None
        if now >= self.open_until and not self.probing:
            self.probing = True
            return None
        return (
            f"it failed {self.failures} requests in a row, so requests to it are refused until "
            "a probe succeeds; the scaler's log has the failures"
        )

    @property
    def current_cooldown(self) -> float:
        doublings = min(max(self.opened - 1, 0), 64)  # at max_cooldown long before 2.0**1024
        return min(self.cooldown * 2.0**doublings, self.max_cooldown)

    def success(self) -> None:
        self.failures, self.failing_since = 0, math.nan
        self.opened, self.open_until, self.probing = 0, -math.inf, False
        self.opened_by = ""

    def failure(self, now: float, error: str) -> None:
        self.failures += 1
        self.last_error = error
        if math.isnan(self.failing_since):
            self.failing_since = now
        if self.is_open:
            if self.probing:  # the probe failed: wait longer before the next one
                self.probing = False
                self.opened += 1
                self.open_until = now + self.current_cooldown
            return
        if self.failures >= self.min_failures and now - self.failing_since >= self.window:
            self.opened, self.opened_by = 1, error
            self.open_until = now + self.current_cooldown


@dataclass(frozen=True)
class Limits:
    """How each endpoint is isolated; see Breaker for the breaker's fields."""

    concurrency: int
    """Requests in flight per endpoint."""
    min_failures: int
    window: float
    cooldown: float
    max_cooldown: float

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency per endpoint must be >= 1, got {self.concurrency}")
        Breaker(self.min_failures, self.window, self.cooldown, self.max_cooldown)

    @classmethod
    def for_step(cls, *, step: float, staleness: float, concurrency: int) -> Limits:
        """Derived from the decision step: a breaker opens after failures spanning a step (three
        at least), first probes a step later, and at worst every half staleness period, so a
        recovered endpoint answers again before its targets' last good decision goes stale
        twice over."""
        return cls(
            concurrency=concurrency,
            min_failures=3,
            window=step,
            cooldown=step,
            max_cooldown=max(step, staleness / 2),
        )


class Isolation:
    """One bulkhead and one breaker per endpoint name; used from one event loop."""

    def __init__(self, limits: Limits, now: Callable[[], float]) -> None:
        self.limits = limits
        self._now = now
        self._breakers: dict[str, Breaker] = {}
        self._slots: dict[str, asyncio.Semaphore] = {}
        self._workers: dict[str, _Workers] = {}

    def breaker(self, endpoint: str) -> Breaker:
        found = self._breakers.get(endpoint)
        if found is None:
            lim = self.limits
            found = Breaker(lim.min_failures, lim.window, lim.cooldown, lim.max_cooldown)
            self._breakers[endpoint] = found
        return found

    async def run(self, endpoint: str, call: Callable[[], T]) -> T:
        """`call()` in a thread of `endpoint`'s bulkhead, unless its breaker refuses
        (CircuitOpen). Its outcome is told to the breaker; a cancelled wait (the caller's
        deadline) counts as a failure, and the thread runs on until it ends by itself."""
        breaker = self.breaker(endpoint)
        refusal = breaker.refusal(self._now())
        if refusal is not None:
            raise CircuitOpen(
                f"source endpoint {endpoint} is failing: {refusal}", breaker.opened_by
            )
        try:
            result = await self._in_thread(endpoint, call)
        except SourceUnavailable as exc:
            self._failed(endpoint, breaker, str(exc))
            raise
        except asyncio.CancelledError:
            self._failed(endpoint, breaker, f"{endpoint}: {DEADLINE}")
            raise
        except BaseException:
            self._succeeded(endpoint, breaker)  # it answered; what it said is the target's
            raise
        self._succeeded(endpoint, breaker)
        return result

    def _failed(self, endpoint: str, breaker: Breaker, error: str) -> None:
        was_open = breaker.is_open
        breaker.failure(self._now(), error)
        if breaker.is_open and not was_open:
            logger.warning(
                "source endpoint %s: circuit open after %d failures in a row; its targets are "
                "refused without a request, and it is probed again every %gs to %gs: %s",
                endpoint,
                breaker.failures,
                breaker.cooldown,
                breaker.max_cooldown,
                error,
            )

    def _succeeded(self, endpoint: str, breaker: Breaker) -> None:
        if breaker.is_open:
            logger.info("source endpoint %s answers again: circuit closed", endpoint)
        breaker.success()

    def forget(self, keep: set[str]) -> None:
        """Drop the state of endpoints no target uses any more."""
        for endpoint in set(self._breakers) - keep:
            del self._breakers[endpoint]
        for endpoint in set(self._slots) - keep:
            del self._slots[endpoint]
        for endpoint in set(self._workers) - keep:
            self._workers.pop(endpoint).stop()

    def open_endpoints(self) -> list[str]:
        return sorted(e for e, b in self._breakers.items() if b.is_open)

    async def _in_thread(self, endpoint: str, call: Callable[[], T]) -> T:
        slots = self._slots.get(endpoint)
        if slots is None:
            slots = self._slots[endpoint] = asyncio.Semaphore(self.limits.concurrency)
        await slots.acquire()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[T] = loop.create_future()

        def settle(outcome: Callable[[], None]) -> None:
            slots.release()
            if not done.cancelled():
                outcome()

        def work() -> None:
            report: Callable[[], None]
            try:
                report = partial(done.set_result, call())
            except BaseException as exc:  # handed to the awaiting task
                report = partial(done.set_exception, exc)
            with suppress(RuntimeError):  # the loop closed meanwhile: nobody is listening
                loop.call_soon_threadsafe(settle, report)

        workers = self._workers.get(endpoint)
        if workers is None:
            workers = self._workers[endpoint] = _Workers(endpoint, self.limits.concurrency)
        try:
            workers.submit(work)
        except BaseException:
            slots.release()
            raise
        return await done


class _Workers:
    """Up to `size` daemon threads running the calls of one endpoint: an idle one takes the
    next call, a new one starts only when none is idle, and one idle for IDLE_SECONDS ends (an
    engine that is dropped leaves no threads behind). The bulkhead lets at most `size` calls
    in, so a call never waits for a thread."""

    def __init__(self, endpoint: str, size: int) -> None:
        self.endpoint, self.size = endpoint, size
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        """Threads waiting for a call that no submitted call has claimed yet."""

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            self._jobs.put(job)
            if self._idle > 0:
                self._idle -= 1
                return
            if self._threads >= self.size:
                return  # all busy: the first to finish takes it
            self._threads += 1
            name = f"source {self.endpoint} {self._threads}"
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    def stop(self) -> None:
        """Each thread ends after the call it is running, if any."""
        with self._lock:
            for _ in range(self._threads):
                self._jobs.put(None)
            self._threads = self._idle = 0

    def _serve(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    if self._idle == 0:  # every idle thread is claimed: a call is queued
                        continue
                    self._idle -= 1
                    self._threads -= 1
                    return
            if job is None:
                return
            job()
            with self._lock:
                self._idle += 1
