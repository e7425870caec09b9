"""Blocking calls the retrain job may walk away from: each in a daemon thread of its own.

A history read from a Prometheus that took the query and never answers lasts up to
--prometheus-timeout (at most 5 minutes) per request, a request per chunk. Run by
`asyncio.to_thread`, in the loop's default executor, it held the job after SIGTERM: the await
was cancelled, but `asyncio.run` joins that executor's threads on its way out (and the
interpreter joins them again at exit), so the summary waited for the read and the pod was
killed at its terminationGracePeriodSeconds (exit 137, no summary). A daemon thread is joined
by neither: once its await is cancelled the call is abandoned, its result dropped if it ever
comes, and the process exits without it.

Must not: run what has to finish (storing, promoting, recording an outcome): those stay in
`asyncio.to_thread`, so the exit waits for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")


async def call(work: Callable[[], _T], *, name: str) -> _T:
    """`work()`'s result or exception, computed in a daemon thread named `name`; cancelling
    the await abandons the thread rather than waiting for it."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[_T] = loop.create_future()

    def run() -> None:
        try:
            result = work()
        except BaseException as exc:  # handed to the awaiting task, whatever it is
            _settle(loop, done, functools.partial(done.set_exception, exc))
        else:
            _settle(loop, done, functools.partial(done.set_result, result))

    threading.Thread(target=run, name=name, daemon=True).start()
    return await done


def _settle(
    loop: asyncio.AbstractEventLoop, done: asyncio.Future[Any], how: Callable[[], None]
) -> None:
    def apply() -> None:
        if not done.done():  # cancelled meanwhile: nobody waits for it any more
            how()

    with contextlib.suppress(RuntimeError):  # the loop is closed: the run is over
        loop.call_soon_threadsafe(apply)
