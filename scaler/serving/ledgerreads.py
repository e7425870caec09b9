"""Many ledgers in one read: a fresh replica rebuilds the prewarm ledger of every target from
the spend record (engine `_rebuild_ledger`), a 24-hour range query each; targets whose first
refresh falls in the same step share one query per BATCH ScaledObjects instead.

A batch is read for the step's `now` exactly, with the window of the target that asked, so a
ledger seeded from it is the one the target's own query at that step gives (the same series:
sources/prometheus.py `spent_samples_of`). A target not in a batch of its step, or whose batch
failed, reads alone, as before: a batch saves queries, it never makes one target's failure
another's. Must not: seed ledgers (the engine does), or hold reads across steps.

The first target of a step that needs a batch also starts the batches of every other target
still waiting in that step, IN_FLIGHT at a time: a fresh replica's warm-up runs its targets a
few at a time, and those slots all waited on the same batch, so its 20 batches at 1,000 targets
were read one after another (docs/benchmark.md "A day-old fleet's ledger history").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from typing import TypeVar

from scaler.decision.spec import TargetSpec
from scaler.errors import ScalerError
from scaler.sources.base import SpendRecord

logger = logging.getLogger(__name__)

BATCH = 50
"""ScaledObjects per query: its selector names each one (about 2 kB of URL for 50)."""
IN_FLIGHT = 2
"""Batch reads at once: two overlap this process' decoding of one answer with Prometheus'
evaluation of the next; more would hold more day-long answers in memory for no more cores."""

Samples = list[list[tuple[float, float]]]
Read = tuple[Samples, Samples]
"""A ledger's spend samples and, for a share budget, its reactive replica-hours' (else [])."""

T = TypeVar("T")
Runner = Callable[[Callable[[], T]], Awaitable[T]]


class Batches:
    """The spend-record reads of one step, shared by the targets whose ledgers they hold."""

    def __init__(self, record: SpendRecord, run: Runner[dict[str, Samples]], *, step: float):
        """`run` runs a blocking read (the spend record's bulkhead and breaker); `step` is the
        spacing of the samples read."""
        self._record, self._run, self._step = record, run, step
        self._now: float | None = None
        self._reads: dict[str, asyncio.Task[dict[str, Read] | None] | None] = {}
        """Per target key, the batch holding its ledger this step; None: it reads alone."""
        self._in_flight: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None

    async def read(
        self, spec: TargetSpec, *, now: float, waiting: Iterable[TargetSpec]
    ) -> Read | None:
        """`spec`'s ledger samples at `now`, read in one batch with others of `waiting`
        (targets whose ledger is not known yet), or None: read it alone."""
        if now != self._now:  # a new step: the reads of the last one are not for this one
            self._now, self._reads = now, {}
        if spec.key not in self._reads:
            others = list(waiting)
            members = [spec, *self._unread(others, spec)]
            if len(members) == 1:
                self._reads[spec.key] = None
            else:
                self._start(members, now=now)
                self._start_the_rest(others, now=now)
        task = self._reads[spec.key]
        if task is None:
            return None
        found = await asyncio.shield(task)  # a refresh's deadline does not cancel the others'
        return None if found is None else found.get(spec.key)

    def _start(self, members: list[TargetSpec], *, now: float) -> None:
        batch = asyncio.create_task(self._batch(members, now=now))
        self._reads.update((m.key, batch) for m in members)

    def _start_the_rest(self, waiting: list[TargetSpec], *, now: float) -> None:
        """Batches for every target of `waiting` not in one yet, started now and read
        IN_FLIGHT at a time behind the one asked for (a target left alone reads alone)."""
        for first in waiting:
            if first.key not in self._reads:
                members = [first, *self._unread(waiting, first)]
                if len(members) > 1:
                    self._start(members, now=now)

    def _unread(self, waiting: Iterable[TargetSpec], spec: TargetSpec) -> list[TargetSpec]:
        """Up to BATCH - 1 targets of `waiting` with `spec`'s window and no read this step."""
        out: dict[str, TargetSpec] = {}
        for other in waiting:
            if len(out) == BATCH - 1:
                break
            if (
                other.key != spec.key
                and other.key not in self._reads
                and other.prewarm_budget_window == spec.prewarm_budget_window
            ):
                out.setdefault(other.key, other)
        return list(out.values())

    async def _batch(self, members: list[TargetSpec], *, now: float) -> dict[str, Read] | None:
        start = now - members[0].prewarm_budget_window
        read = partial(self._record.spent_samples_of, start=start, end=now, step=self._step)
        shares = [m for m in members if m.prewarm_budget_share is not None]
        loop = asyncio.get_running_loop()
        if self._in_flight is None or self._in_flight[0] is not loop:  # one per event loop
            self._in_flight = (loop, asyncio.Semaphore(IN_FLIGHT))
        try:
            async with self._in_flight[1]:
                spent = await self._run(partial(read, members))
                used = await self._run(partial(read, shares, reactive=True)) if shares else {}
        except ScalerError as exc:  # each reads alone, and says so if that fails too
            logger.debug(
                "ledger batch of %d targets failed, each reads alone: %s", len(members), exc
            )
            return None
        # A member the record left out (its connection is misconfigured) reads alone.
        return {
            m.key: (spent[m.key], used[m.key] if m.prewarm_budget_share is not None else [])
            for m in members
            if m.key in spent and (m.prewarm_budget_share is None or m.key in used)
        }
