"""Ready means warm: the targets known at start-up have their models, their history and their
drift state before the gRPC health service and /readyz say SERVING.

`run` is the engine task of `scaler serve`: it registers the targets given by `--targets`
(scaler/kube/manifests.py), loads each one's champion from the model store when there is one
(scaler/serving/champions.py), reads the history its drift replay needs and rebuilds its drift
state (`adopt`), all targets at once within the source's bulkheads; then it starts the engine,
whose first round decides for every target, and calls `on_warm`. A target that fails to warm is
left to the engine, which retries it each step and says why; it does not hold the others back.

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
from scaler.decision.spec import TargetSpec
from scaler.errors import ScalerError
from scaler.serving import driftstate
from scaler.serving.state import TargetState

if TYPE_CHECKING:
    from scaler.serving.engine import Engine

logger = logging.getLogger(__name__)

Loader = Callable[[TargetState], Awaitable[None]]
"""Loads a target's champion into its state (scaler/serving/champions.py)."""


async def run(
    engine: Engine,
    targets: Sequence[TargetSpec],
    *,
    load: Loader | None = None,
    on_warm: Callable[[], object] = lambda: None,
) -> None:
    """Warm `targets` up, start the engine, call `on_warm` once its first round is done, and
    run the engine until cancelled."""
    began = time.monotonic()
    await warm_up(engine, targets, load=load)
    task = asyncio.create_task(engine.run(), name="engine loop")
    try:
        while not engine.refreshed_once and not task.done():
            await asyncio.wait({task}, timeout=0.05)
        if not task.done():
            answering = sum(1 for s in engine.targets.values() if s.decision is not None)
            logger.info(
                "warm in %.1fs: %d targets known at start-up, %d answering, %d with a model",
                time.monotonic() - began,
                len(targets),
                answering,
                sum(1 for s in engine.targets.values() if s.model is not None),
            )
            on_warm()
        await task
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def warm_up(
    engine: Engine, targets: Sequence[TargetSpec], *, load: Loader | None = None
) -> None:
    """Register every target, load its champion and rebuild its drift state, concurrently."""
    states = [engine.ensure(spec) for spec in targets]
    await asyncio.gather(*(_warm(engine, state, load) for state in states))


async def _warm(engine: Engine, state: TargetState, load: Loader | None) -> None:
    try:
        if load is not None:
            await load(state)
        if state.model is not None:
            await adopt(engine, state)
    except ScalerError as exc:  # the engine's refresh retries and reports it
        logger.warning("%s: not warm at start-up, the engine retries: %s", state.spec.key, exc)


async def adopt(engine: Engine, state: TargetState) -> None:
    """Rebuild the drift tracker of `state`'s model from its fit (driftstate.rebuild), fetching
    the history the replay needs, and keep the newest window of it as the target's history."""
    model, spec = state.model, state.spec
    if model is None:
        return
    step, window = engine.settings.model_step, engine.settings.history
    end = np.floor(engine.clock.now() / step) * step
    begin = max(driftstate.start(model, window=window), end - 2 * window + step)
    history = state.history
    if history is None or history.step != step or history.start > begin or history.end < end:
        history = await _fetch(engine, spec, start=begin, end=float(end), old=history)
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


async def _fetch(
    engine: Engine, spec: TargetSpec, *, start: float, end: float, old: Series | None
) -> Series:
    """The history from `start` to `end`: only the part `old` lacks is queried."""
    source, endpoint = engine.source_for(spec), engine._endpoint(spec)
    step = engine.settings.model_step
    query = partial(source.history, spec, step=step)
    offset = 0.5 if old is None else (old.start - start) / step
    on_grid = old is not None and old.step == step and abs(offset - round(offset)) < 1e-6
    if old is None or not on_grid or old.end < start:
        return await engine.isolation.run(endpoint, partial(query, start=start, end=end))
    parts, first = [old], min(start, old.start)
    if start < old.start:
        older = partial(query, start=start, end=old.start - step)
        parts.insert(0, await engine.isolation.run(endpoint, older))
    if old.end < end:
        newer = partial(query, start=old.end + step, end=end)
        parts.append(await engine.isolation.run(endpoint, newer))
    return Series(first, step, np.concatenate([p.values for p in parts]))
