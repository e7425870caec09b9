"""A fresh replica reads only the history its drift replay needs before SERVING, the rest after
(scaler/serving/driftstate.py REPLAY_SPAN, scaler/serving/warmup.py `backfill`): the replay from
that span is the replay from the whole window, bit for bit, and the history the engine fits on
is whole again before any fit starts."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from models import artefact
from models.base import DAY, Series
from scaler.clock import ManualClock
from scaler.decision import drift_tracker
from scaler.serving import driftstate, warmup
from scaler.serving.engine import Engine
from scaler.serving.state import TargetState, forecast_steps
from scaler.serving.telemetry import Telemetry
from scaler.settings import EngineSettings
from scaler.sources.base import Sample
from tests.unit.test_many_origins import (
    FIT_AT,
    SPEC,
    STEP,
    WINDOW,
    assert_same_tracker,
    gappy_load,
)


def champion(data: Series) -> dict[str, object]:
    known = data.until(FIT_AT).since(FIT_AT - WINDOW + STEP)
    return artefact.fit("seasonal", known, forecast_steps(SPEC, STEP))


def same(a: drift_tracker.DriftTracker, b: drift_tracker.DriftTracker) -> None:
    assert_same_tracker(a, b, null=True)


@pytest.mark.parametrize("age_days", [0.01, 4.0])
@pytest.mark.parametrize("stored_null", [True, False], ids=["null stored", "null measured"])
def test_the_replay_from_the_replay_span_is_the_replay_from_the_whole_window(
    age_days: float, stored_null: bool
) -> None:
    data = gappy_load(34, seed=11)
    stored = champion(data)
    end = FIT_AT + round(age_days * DAY / STEP) * STEP
    model = artefact.load(stored)
    whole = data.until(end).since(driftstate.start(model, window=WINDOW))
    first = driftstate.replay_start(model, window=WINDOW, null_stored=stored_null)
    short = data.until(end).since(first)
    assert len(short) < 0.5 * len(whole)  # the point: well under half the read
    reference = driftstate.rebuild(SPEC, artefact.load(stored), whole, window=WINDOW)
    null = reference.monitor.null if stored_null else None
    if not stored_null:
        assert reference.monitor.null is not None and reference.monitor.null.samples > 0
    got = driftstate.rebuild(SPEC, artefact.load(stored), short, window=WINDOW, null=null)
    same(got, reference)


@dataclass
class CountingSource:
    """The Source seam over one Series, recording the span of every history read."""

    data: Series
    reads: list[tuple[float, float]] = field(default_factory=list)

    def history(
        self,
        target: object,
        *,
        start: float,
        end: float,
        step: float,
        resolution: float | None = None,
    ) -> Series:
        self.reads.append((start, end))
        return self.data.until(end).since(start)

    def latest(self, target: object, *, at: float) -> Sample:
        known = self.data.until(at)
        return Sample(at=known.end, value=float(known.values[-1]))


def test_a_replica_warms_on_the_replay_span_and_fits_only_once_the_whole_window_is_read() -> None:
    data = gappy_load(34, seed=3)
    stored = champion(data)
    source = CountingSource(data)
    now = FIT_AT + 2 * STEP
    engine = Engine(
        # A step of 50 ms: the backfill waits one step after SERVING before it reads.
        settings=EngineSettings(step=0.05, model_step=STEP, history=WINDOW, fit_workers=0),
        source_for=lambda _spec: source,
        clock=ManualClock(now),
        telemetry=Telemetry(CollectorRegistry()),
    )
    fits: list[int] = []

    def fit(state: TargetState, now: float) -> None:
        fits.append(0 if state.history is None else len(state.history))

    engine.fitter.maybe_fit = fit  # type: ignore[method-assign]

    async def load(state: TargetState) -> None:
        state.model = artefact.load(stored)

    async def scenario() -> None:
        await warmup.warm_up(engine, [SPEC], load=load)
        state = engine.targets[SPEC.key]
        assert state.history is not None and state.history_partial
        assert state.history.start == driftstate.replay_start(state.model, window=WINDOW)  # type: ignore[arg-type]
        assert fits == []  # the refresh at warm-up started no fit on the partial history
        filling = asyncio.create_task(warmup.backfill(engine))
        for _ in range(500):
            if not state.history_partial:
                break
            await asyncio.sleep(0.01)
        filling.cancel()
        whole = data.until(state.history.end).since(state.history.end - WINDOW + STEP)
        assert not state.history_partial
        assert state.history.start == whole.start and state.history.end == whole.end
        assert np.array_equal(state.history.values, whole.values, equal_nan=True)
        # Only the part missing was read after SERVING, and then a refresh may fit again.
        assert source.reads[-1] == (whole.start, source.reads[0][0] - STEP)
        engine.clock.advance(STEP)
        await engine._guarded_refresh(state, now + STEP)
        assert fits == [int(WINDOW // STEP)]

    asyncio.run(scenario())
