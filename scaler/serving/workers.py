"""Supervised worker processes for heavy jobs (model fits) off the serving process.

Each worker is one spawned process that runs one job at a time over its own pipe, so the
supervisor always knows which job a worker was running when something went wrong. A job whose
worker dies (the kernel's OOM killer, a crash, a SIGKILL), runs past the timeout or exceeds the
memory bound fails alone, with an error naming the cause; its worker is discarded and a fresh one
is started for the next job. Every other job keeps running. A broken `ProcessPoolExecutor`, by
contrast, fails every later job for good.

Workers die with the serving process: `PR_SET_PDEATHSIG` (Linux) kills a worker when the thread
that started it exits, and a watchdog thread in the worker exits when its parent pid changes, so
a SIGKILL of the server leaves no orphan; the multiprocessing resource tracker exits once the
last of them has gone. Workers must therefore be started from a thread that lives as long as the
pool (the event loop's). Each worker leads its own process group, so a kill also reaches what the
job started (Prophet's Stan binary).

A worker inherits no logging setup. What a job logs (at the parent's level) is sent to the
parent as it is logged, at most MAX_RECORDS a job, and logged there by the parent's own handlers,
so a fit's lines read the same (text or JSON) whether it ran in a worker or in the serving
process, and the lines of a job whose worker is killed (a timeout, the OOM killer) are not lost
with it.

This module knows processes and pipes only; what a job is and how failures are charged is the
caller's business (scaler/serving/fitting.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import importlib
import logging
import multiprocessing
import os
import resource
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from scaler import quiet
from scaler.errors import ScalerError

logger = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
"""prctl option: the signal a process gets when its parent thread exits (linux/prctl.h)."""
WATCHDOG_PERIOD = 1.0
"""Seconds between a worker's checks that its parent is still alive."""
REAP_TIMEOUT = 0.5
"""Seconds to wait for a killed worker to be reaped."""


class WorkerError(ScalerError):
    """A job could not run to completion in a worker; the message names the cause."""

    result = "crash"
    """Short label of the cause, for metrics."""


class WorkerDied(WorkerError):
    """The worker running the job died (killed by the OS or a signal, or crashed)."""


class JobTimeout(WorkerError):
    """The job ran past its time bound; its worker was killed."""

    result = "timeout"


class JobOutOfMemory(WorkerError):
    """The job exceeded the worker's memory bound."""

    result = "memory"


class PoolUnavailable(WorkerError):
    """No worker could be started (or the pool is closed): not the job's fault."""

    result = "unavailable"


class _Worker:
    def __init__(self, process: BaseProcess, conn: Connection) -> None:
        self.process = process
        self.conn = conn

    @property
    def pid(self) -> int:
        return self.process.pid or 0

    def kill(self) -> None:
        """SIGKILL the worker's process group (it and whatever its job started), then reap."""
        if self.process.exitcode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        self.process.join(REAP_TIMEOUT)
        self.conn.close()

    def death(self) -> str:
        """How the worker ended, e.g. 'was killed by SIGKILL (the OOM killer?)'."""
        self.process.join(REAP_TIMEOUT)
        code = self.process.exitcode
        if code is None:
            return "closed its pipe"
        if code < 0:
            name = signal.Signals(-code).name
            hint = " (the kernel's OOM killer, or an operator)" if -code == signal.SIGKILL else ""
            return f"was killed by {name}{hint}"
        return f"exited with code {code}"


class WorkerPool:
    """Up to `size` supervised worker processes; `run` sends one job to an idle one."""

    def __init__(
        self,
        *,
        size: int,
        memory_limit: int,
        timeout: float,
        start_timeout: float = 120.0,
        preload: Sequence[str] = (),
        on_restart: Callable[[str], None] | None = None,
    ) -> None:
        self.size = size
        self.memory_limit = memory_limit
        """Bytes of address space per worker (RLIMIT_AS); 0 leaves it unbounded."""
        self.timeout = timeout
        """Seconds a job may run before its worker is killed."""
        self.start_timeout = start_timeout
        self.preload = tuple(preload)
        """Modules a worker imports before it reports ready (not charged to the first job)."""
        self.on_restart = on_restart or (lambda _cause: None)
        self.healthy = True
        """False while the last attempt to start a worker failed."""
        self.problem: str | None = None
        """Why the pool is unhealthy."""
        self._context = multiprocessing.get_context("spawn")
        self._slots = asyncio.Semaphore(size)
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._closed = False

    @property
    def pids(self) -> list[int]:
        """Process ids of the live workers."""
        return [w.pid for w in (*self._idle, *self._busy) if w.process.exitcode is None]

    async def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`fn(*args, **kwargs)` in a worker; its exceptions are raised here unchanged.

        WorkerDied / JobTimeout / JobOutOfMemory when the job broke its worker (the worker is
        replaced), PoolUnavailable when no worker can be started. Waits for a free worker.
        """
        async with self._slots:
            worker = await self._take()
            self._busy.add(worker)
            try:
                kind, value = await self._exchange(worker, (fn, args, kwargs))
            except BaseException:
                self._discard(worker)
                raise
            self._busy.discard(worker)
            if kind == "ok":
                self._idle.append(worker)
                return value
            if kind == "raised":
                self._idle.append(worker)
                raise value
            self._discard(worker)  # after a MemoryError its heap is not worth keeping
            self.on_restart("memory")
            if self.memory_limit <= 0:
                raise JobOutOfMemory(f"the fit ran out of memory ({value})")
            bound = f"{self.memory_limit / 2**20:.0f} MiB"
            raise JobOutOfMemory(f"the fit exceeded the memory bound of {bound} ({value})")

    def close(self) -> None:
        """Kill every worker now (a running job is abandoned) and refuse new jobs."""
        self._closed = True
        for worker in [*self._idle, *self._busy]:
            worker.kill()
        self._idle.clear()
        self._busy.clear()

    async def _take(self) -> _Worker:
        while self._idle:
            worker = self._idle.pop()
            if worker.process.exitcode is None:
                return worker
            logger.warning("idle fit worker %d %s; replacing it", worker.pid, worker.death())
            worker.kill()
            self.on_restart("died")
        return await self._start()

    async def _start(self) -> _Worker:
        if self._closed:
            raise PoolUnavailable("the fit pool is shut down")
        ours, theirs = self._context.Pipe()
        process = self._context.Process(
            target=_worker_main,
            args=(
                theirs,
                os.getpid(),
                self.memory_limit,
                self.preload,
                logging.getLogger().getEffectiveLevel(),
            ),
            name="scaler-fit-worker",
            daemon=True,
        )
        try:
            process.start()
        except OSError as exc:
            self._unhealthy(f"could not start a fit worker: {exc}")
            raise PoolUnavailable(self.problem or "") from exc
        finally:
            theirs.close()
        worker = _Worker(process, ours)
        try:
            kind, _ = await self._receive(worker, self.start_timeout)
        except (WorkerError, EOFError, OSError) as exc:
            worker.kill()
            self._unhealthy(f"a new fit worker {worker.death()} before it was ready ({exc})")
            raise PoolUnavailable(self.problem or "") from exc
        except BaseException:
            worker.kill()
            raise
        if kind != "ready":
            worker.kill()
            self._unhealthy(f"a new fit worker failed to start: {kind}")
            raise PoolUnavailable(self.problem or "")
        self.healthy, self.problem = True, None
        return worker

    def _unhealthy(self, problem: str) -> None:
        if self.problem != problem:
            logger.error("%s", problem)
        self.healthy, self.problem = False, problem

    async def _exchange(self, worker: _Worker, job: tuple[Any, ...]) -> tuple[str, Any]:
        try:
            worker.conn.send(job)
            return await self._receive(worker, self.timeout)
        except TimeoutError as exc:  # before OSError, of which it is a subclass
            self.on_restart("timeout")
            raise JobTimeout(
                f"the fit ran past its bound of {self.timeout:.0f}s; worker {worker.pid} killed"
            ) from exc
        except (EOFError, OSError) as exc:
            self.on_restart("died")
            raise WorkerDied(f"fit worker {worker.pid} {worker.death()} during the fit") from exc

    async def _receive(self, worker: _Worker, within: float) -> tuple[str, Any]:
        """The worker's next message, waited for on the event loop (no thread held)."""
        loop = asyncio.get_running_loop()
        readable: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not readable.done():
                readable.set_result(None)

        fd = worker.conn.fileno()
        deadline = loop.time() + within
        while True:
            loop.add_reader(fd, wake)
            try:
                await asyncio.wait_for(readable, max(0.0, deadline - loop.time()))
            finally:
                loop.remove_reader(fd)
            kind, value = worker.conn.recv()  # EOFError when the worker died
            if kind != "log":
                return kind, value
            # what the job logged, through this process's handlers; then wait on for the outcome
            logging.getLogger(value.name).handle(value)
            readable = loop.create_future()

    def _discard(self, worker: _Worker) -> None:
        self._busy.discard(worker)
        worker.kill()


# ---- the worker side ---------------------------------------------------------------------------
def _worker_main(
    conn: Connection, parent: int, memory_limit: int, preload: tuple[str, ...], level: int
) -> None:
    _die_with_parent(parent)
    kept = _Kept(conn)
    logging.basicConfig(level=level, handlers=[kept], force=True)
    with contextlib.suppress(OSError):
        os.setpgrp()  # a kill of the group reaches what a job starts
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when workers stop
    quiet.silence_third_party()  # before the preload imports Prophet
    if memory_limit > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    try:
        for module in preload:
            importlib.import_module(module)
    except BaseException as exc:
        kept.send(f"preload failed: {exc!r}", None)
        return
    kept.send("ready", os.getpid())
    while True:
        try:
            fn, args, kwargs = conn.recv()
        except (EOFError, OSError):
            return
        kept.send(*_outcome(fn, args, kwargs))


MAX_RECORDS = 200
"""Log records a job may send back: a fit logs a handful; a loop logging on every step does
not fill the pipe (the rest are counted in one last record)."""


class _Kept(logging.Handler):
    """The worker's side of its pipe: each log record is sent to the parent as it is logged
    (the message formatted here, since its arguments may not pickle; a traceback as text), at
    most MAX_RECORDS a job, and the job's outcome after them, preceded by a count of any
    dropped."""

    def __init__(self, conn: Connection) -> None:
        super().__init__()
        self.conn = conn
        self.sent = 0
        self.dropped = 0

    def emit(self, record: logging.LogRecord) -> None:
        if self.sent >= MAX_RECORDS:
            self.dropped += 1
            return
        record.msg, record.args = record.getMessage(), None
        if record.exc_info:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
        self.sent += 1
        with contextlib.suppress(OSError):  # the parent is gone: the watchdog ends this process
            self.conn.send(("log", record))

    def send(self, kind: str, value: Any) -> None:
        """The job's outcome (or the worker's start-up), closing its records."""
        self.acquire()  # not mid-record of a thread the job started
        try:
            if self.dropped:
                note = f"{self.dropped} more log records of this fit worker's job were dropped"
                fields = {"name": __name__, "levelno": logging.WARNING, "levelname": "WARNING"}
                self.conn.send(("log", logging.makeLogRecord({**fields, "msg": note})))
            self.sent = self.dropped = 0
            self.conn.send((kind, value))
        finally:
            self.release()


def _outcome(fn: Callable[..., Any], args: Any, kwargs: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(*args, **kwargs)
    except MemoryError as exc:
        return "memory", repr(exc)[:200]
    except Exception as exc:
        try:
            import pickle

            pickle.loads(pickle.dumps(exc))
        except Exception:
            return "raised", RuntimeError(f"{type(exc).__name__}: {exc}")
        return "raised", exc


def _die_with_parent(parent: int) -> None:
    """Exit when `parent` does, even when it is SIGKILLed and cannot clean up."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(WATCHDOG_PERIOD)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()
