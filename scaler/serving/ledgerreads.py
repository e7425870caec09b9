"""Many ledgers in one read: a fresh replica rebuilds the prewarm ledger of every target from
the spend record (scaler/serving/ledgerrebuild.py), a 24-hour range query each; targets whose
first refresh falls in the same step share one query per BATCH ScaledObjects instead.

A batch is read for the step's `now` exactly, with the window of the target that asked, so a
ledger seeded from it is the one the target's own query at that step gives (the same series:
sources/prometheus.py `spent_samples_of`). A target not in a batch of its step, or whose batch
failed, reads alone, as before: a batch saves queries, it never makes one target's failure
another's. Must not: seed ledgers (ledgerrebuild.py does), or hold reads across steps.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from typing import TypeVar

from models.base import FloatArray
from scaler.decision.spec import TargetSpec
from scaler.errors import ScalerError
from scaler.sources.base import SpendRecord

logger = logging.getLogger(__name__)

BATCH = 50
"""ScaledObjects per query: its selector names each one (about 2 kB of URL for 50)."""

Samples = list[FloatArray]
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

    async def read(
        self, spec: TargetSpec, *, now: float, waiting: Iterable[TargetSpec]
    ) -> Read | None:
        """`spec`'s ledger samples at `now`, read in one batch with others of `waiting`
        (targets whose ledger is not known yet), or None: read it alone."""
        if now != self._now:  # a new step: the reads of the last one are not for this one
            self._now, self._reads = now, {}
        if spec.key not in self._reads:
            members = [spec, *self._unread(waiting, spec)]
            if len(members) == 1:
                self._reads[spec.key] = None
            else:
                batch = asyncio.create_task(self._batch(members, now=now))
                self._reads.update((m.key, batch) for m in members)
        task = self._reads[spec.key]
        if task is None:
            return None
        found = await asyncio.shield(task)  # a refresh's deadline does not cancel the others'
        return None if found is None else found.get(spec.key)

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
        try:
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
