"""Ready means warm: the targets known at start-up have their models, their history, their
drift state and a first decision before the gRPC health service and /readyz say SERVING.

`run` is the engine task of `scaler serve`: it registers the targets given by `--targets`
(scaler/kube/targets.py) and warms each one whole, as many at once as an endpoint's bulkhead
takes: its champion from the model store when there is one (scaler/serving/champions.py), the
history its drift replay needs and its drift state (`adopt`), then the engine's own refresh of
it (ledger, latest sample, decision). Then it calls `on_warm` and runs the engine. A target that
fails to warm keeps its error, like any failing refresh, and the engine retries it each step;
it does not hold the others back.

`adopt` is also what the engine runs for every new model later (a fit, a hot-reloaded champion):
the drift tracker is rebuilt from the model's fit (scaler/serving/driftstate.py), so every
replica holds the same one. Must not: decide, or serve RPCs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from models.base import Series
from scaler.clock import quantise
from scaler.decision.spec import TargetSpec
from scaler.errors import HistoryBackoff, NoData, ScalerError, TooManyTargets
from scaler.serving import driftstate, priority
from scaler.serving.state import TargetState

if TYPE_CHECKING:
    from scaler.serving.engine import Engine

logger = logging.getLogger(__name__)

REDECIDE_PASSES = 3
"""Passes at most over targets whose first decision got old during a long warm-up."""

BACKFILL_AT_ONCE = 1
"""Older-history reads in flight at once after SERVING (`backfill`): one, so that the RPCs, the
engine's refreshes and the Prometheus answering them keep the CPU (each read is a few tens of
ms there and here; 1,000 targets are read in under a minute)."""

Loader = Callable[[TargetState], Awaitable[None]]
"""Loads a target's champion into its state (scaler/serving/champions.py)."""


async def run(
    engine: Engine,
    targets: Sequence[TargetSpec],
    *,
    load: Loader | None = None,
    on_warm: Callable[[], object] = lambda: None,
) -> None:
    """Warm `targets` up, call `on_warm`, and run the engine until cancelled."""
    began = time.monotonic()
    engine.fitter.start()  # fits started by the warm-up go to the worker pool
    with priority.lowered(engine.settings.warm_nice):  # serving replicas first (--warm-nice)
        await warm_up(engine, targets, load=load)
    engine.refreshed_once = True  # every target known at start-up has been refreshed
    answering = sum(1 for s in engine.targets.values() if s.decision is not None)
    logger.info(
        "warm in %.1fs: %d targets known at start-up, %d answering, %d with a model",
        time.monotonic() - began,
        len(targets),
        answering,
        sum(1 for s in engine.targets.values() if s.model is not None),
    )
    on_warm()
    filling = asyncio.create_task(backfill(engine))
    try:
        await engine.run()
    finally:
        filling.cancel()


async def warm_up(
    engine: Engine, targets: Sequence[TargetSpec], *, load: Loader | None = None
) -> None:
    """Register every target, then warm each one whole (champion, history, drift state, a
    first decision), `concurrency` at a time: all at once, each refresh's deadline would run
    out in the bulkheads' queues (and count against the endpoint's breaker)."""
    states = []
    for spec in targets:
        try:
            states.append(engine.ensure(spec))
        except TooManyTargets as exc:
            left = len(targets) - len(states)
            logger.warning("%d of %d targets not warmed up: %s", left, len(targets), exc)
            break
    slots = asyncio.Semaphore(engine.settings.concurrency)
    await asyncio.gather(*(_warm(engine, state, load, slots) for state in states))
    # A warm-up longer than a few steps leaves its first targets' decisions old: decide again,
    # at the step now, for those older than half the staleness bound, so that none turns stale
    # (UNAVAILABLE) while the engine's first steps after SERVING work through every target. A
    # long second pass can age the rest in turn: a few passes, each over fewer targets.
    for _ in range(REDECIDE_PASSES):
        now = _step_now(engine)
        old = [s for s in states if now - s.decided_at > engine.settings.staleness / 2]
        if not old:
            break
        await asyncio.gather(*(_decide(engine, state, slots) for state in old))


def _step_now(engine: Engine) -> float:
    return quantise(engine.clock.now(), engine.settings.step)


async def _warm(
    engine: Engine, state: TargetState, load: Loader | None, slots: asyncio.Semaphore
) -> None:
    async with slots:
        try:
            if load is not None:
                await load(state)
            if state.model is not None:
                await adopt(engine, state)
        except ScalerError as exc:  # the engine's refresh retries and reports it
            logger.warning("%s: not warm at start-up, the engine retries: %s", state.spec.key, exc)
        # Stamped with the step it is made in (errors are kept on the state, as each step); no
        # step is held before SERVING, when nothing is answered yet.
        await engine._guarded_refresh(state, _step_now(engine), hold=False)


async def _decide(engine: Engine, state: TargetState, slots: asyncio.Semaphore) -> None:
    async with slots:
        await engine._guarded_refresh(state, _step_now(engine), hold=False)


async def adopt(engine: Engine, state: TargetState) -> None:
    """Rebuild the drift tracker of `state`'s model from its fit (driftstate.rebuild), fetching
    the history the replay needs, and keep the newest window of it as the target's history."""
    model, spec = state.model, state.spec
    if model is None:
        return
    step, window = engine.settings.model_step, engine.settings.history
    end = np.floor(engine.clock.now() / step) * step
    stored = state.model_null is not None  # no null measured again: a shorter replay span
    first = driftstate.replay_start(model, window=window, null_stored=stored)
    begin = max(first, end - 2 * window + step)
    history = state.history
    if history is None or history.step != step or history.start > begin or history.end < end:
        with engine.history_reads.reading(state):  # backs off after failures, as a refresh's
            history = await _fetch(engine, spec, start=begin, end=float(end), old=history)
        # Less than the window the engine fits on: the rest is read after SERVING (`backfill`),
        # and no fit starts before it is in.
        state.history_partial = history.start > end - window + step
    tracker = await asyncio.to_thread(
        driftstate.rebuild,
        spec,
        model,
        history,
        window=window,
        null=state.model_null,
        carried_fallback=state.model_fallback,
    )
    if state.model is model:  # not replaced while the replay ran
        state.drift = tracker
        keep = int(window // step)
        state.history = (
            history if len(history) <= keep else history.since(history.end - (keep - 1) * step)
        )


async def backfill(engine: Engine) -> None:
    """Read, after SERVING, the older part of each history the warm-up read only as far as the
    drift replay needed (`adopt`), so the next fit sees the whole window: BACKFILL_AT_ONCE at a
    time, so the refreshes and RPCs keep the CPU (the process is SERVING now). Runs until
    cancelled, each step, for targets warmed later too (discovered ones); a failed read is
    tried again the next step, and fits of that target wait for it (TargetState.history_partial)."""
    slots = asyncio.Semaphore(BACKFILL_AT_ONCE)
    first = True  # logged even when none is pending (histories restored whole from checkpoints)
    while True:
        await asyncio.sleep(engine.settings.step)  # the engine's first refresh of all goes first
        pending = [s for s in engine.targets.values() if s.history_partial]
        if pending or first:
            first = False
            began = time.monotonic()
            await asyncio.gather(*(_complete(engine, state, slots) for state in pending))
            logger.info(
                "older history read for %d of %d targets in %.1fs",
                sum(1 for s in pending if not s.history_partial),
                len(pending),
                time.monotonic() - began,
            )


async def _complete(engine: Engine, state: TargetState, slots: asyncio.Semaphore) -> None:
    async with slots:
        step, window = engine.settings.model_step, engine.settings.history
        old = state.history
        if old is None or old.step != step:
            state.history_partial = False  # replaced by a whole read meanwhile
            return
        start = old.end - window + step
        if old.start <= start:
            state.history_partial = False
            return
        try:  # a failure here counts in the target's backoff, as the engine's own reads do
            with engine.history_reads.reading(state):
                got = await _fetch(engine, state.spec, start=start, end=old.end, old=old)
        except HistoryBackoff:
            return  # its history reads back off: tried again once one may be sent
        except ScalerError as exc:
            logger.warning(
                "%s: older history not read yet, tried again next step: %s", state.spec.key, exc
            )
            return
        now = state.history  # the engine's refreshes appended to it meanwhile
        if now is None or now.step != step or now.start != old.start:
            return
        older = got.values[: len(got) - len(old)]
        merged = Series(got.start, step, np.concatenate([older, now.values]))
        keep = int(window // step)
        state.history = (
            merged if len(merged) <= keep else merged.since(merged.end - (keep - 1) * step)
        )
        state.history_partial = False


async def _fetch(
    engine: Engine, spec: TargetSpec, *, start: float, end: float, old: Series | None
) -> Series:
    """The history from `start` to `end`: only the part `old` lacks is queried."""
    source, endpoint = engine.source_for(spec), engine._endpoint(spec)
    step = engine.settings.model_step
    peaks = engine.settings.history_peaks  # the same fit input as the engine's own reads
    query = partial(source.history, spec, step=step, resolution=peaks)
    offset = 0.5 if old is None else (old.start - start) / step
    on_grid = old is not None and old.step == step and abs(offset - round(offset)) < 1e-6
    if old is None or not on_grid or old.end < start:
        return await engine.isolation.run(endpoint, partial(query, start=start, end=end))
    parts, first = [old], min(start, old.start)
    if start < old.start:
        older = partial(query, start=start, end=old.start - step)
        try:
            parts.insert(0, await engine.isolation.run(endpoint, older))
        except NoData:  # the load's history begins after `start`: those steps are missing
            count = round((old.start - start) / step)
            parts.insert(0, Series(old.start - count * step, step, np.full(count, np.nan)))
            first = parts[0].start
    if old.end < end:
        newer = partial(query, start=old.end + step, end=end)
        parts.append(await engine.isolation.run(endpoint, newer))
    return Series(first, step, np.concatenate([p.values for p in parts]))
