"""Ready means warm (scaler/serving/warmup.py): when SERVING is said, every target known at
start-up has a decision fresh enough to stay within the staleness bound, even after a warm-up
that took longer than that bound."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from models import artefact
from models.base import DAY, Series
from scaler.clock import ManualClock
from scaler.decision import spec
from scaler.errors import NoData
from scaler.serving import warmup
from scaler.serving.engine import Engine
from scaler.serving.state import TargetState, forecast_steps
from scaler.serving.telemetry import Telemetry
from scaler.settings import EngineSettings
from scaler.sources.base import Sample
from tests.contract import synthetic

STEP = 300.0
STALENESS = 300.0
SLOW = 120.0
"""Seconds a long history read (the warm-up's weeks) takes on the test's clock: a Prometheus
that answers slowly; the engine's reads of a few new points take no time."""
SPECS = [
    spec.parse("gpu", f"llm-{i}", {"query": "load", "threshold": "20", "model": "seasonal"})
    for i in range(4)
]


@dataclass
class SeriesSource:
    """The Source seam over one Series: its newest sample at or before `at`."""

    data: Series

    def latest(self, target: spec.TargetSpec, *, at: float) -> Sample:
        known = self.data.until(at)
        return Sample(at=known.end, value=float(known.values[-1]))


@dataclass
class SlowSource(SeriesSource):
    """A SeriesSource whose read of more than a day moves the clock on by SLOW."""

    clock: ManualClock

    def history(
        self,
        target: spec.TargetSpec,
        *,
        start: float,
        end: float,
        step: float,
        resolution: float | None = None,
    ) -> Series:
        if end - start > DAY:
            self.clock.advance(SLOW)
        return self.data.until(end).since(start)


def test_a_warm_up_longer_than_the_staleness_bound_serves_no_stale_decision(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = synthetic.load(20, seed=4)
    fit_at = synthetic.START + 16 * DAY
    known = data.until(fit_at).since(fit_at - 14 * DAY + STEP)
    stored = artefact.fit("seasonal", known, forecast_steps(SPECS[0], STEP))
    clock = ManualClock(fit_at + 2 * STEP)
    settings = EngineSettings(
        step=30.0,
        model_step=STEP,
        history=14 * DAY,
        staleness=STALENESS,
        concurrency=1,  # one target at a time: four slow reads are eight minutes
        fit_workers=0,
    )
    engine = Engine(
        settings=settings,
        source_for=lambda _spec: SlowSource(data, clock),
        clock=clock,
        telemetry=Telemetry(CollectorRegistry()),
    )
    engine.fitter.maybe_fit = lambda *_: None  # type: ignore[method-assign]  # the store's model
    decided: list[str] = []
    refresh = engine._guarded_refresh

    async def counted(state: TargetState, now: float, *, hold: bool = True) -> None:
        decided.append(state.spec.key)
        await refresh(state, now, hold=hold)

    monkeypatch.setattr(engine, "_guarded_refresh", counted)

    async def load(state: TargetState) -> None:
        state.model = artefact.load(stored)

    asyncio.run(warmup.warm_up(engine, SPECS, load=load))
    states = [engine.targets[s.key] for s in SPECS]
    assert clock.now() - fit_at > len(SPECS) * SLOW > STALENESS  # the warm-up ran that long
    assert all(s.decision is not None for s in states)
    assert all(clock.now() - s.decided_at <= STALENESS / 2 + settings.step for s in states)
    for s in states:
        engine.answer(s)  # none UNAVAILABLE at SERVING
    assert len(decided) > len(SPECS)  # the first ones were decided again: the mechanism ran


@dataclass
class YoungSource(SeriesSource):
    """A SeriesSource over a load whose history begins at `data.start`: Prometheus answers
    "no series" for any window wholly before it."""

    def history(
        self,
        target: spec.TargetSpec,
        *,
        start: float,
        end: float,
        step: float,
        resolution: float | None = None,
    ) -> Series:
        if end < self.data.start:
            raise NoData(f"no series for {target.label} before the load began")
        return self.data.until(end).since(start)


def test_a_history_younger_than_the_window_reads_as_missing_steps_not_as_a_failed_fetch() -> None:
    data = synthetic.load(16, seed=5)  # shorter than the 28-day window asked for
    engine = Engine(
        settings=EngineSettings(step=30.0, model_step=STEP, fit_workers=0),
        source_for=lambda _spec: YoungSource(data),
        clock=ManualClock(data.end),
        telemetry=Telemetry(CollectorRegistry()),
    )
    end = data.end
    start = end - 28 * DAY + STEP
    old = data  # the engine holds all there is; the warm-up asks for the weeks before it too
    got = asyncio.run(warmup._fetch(engine, SPECS[0], start=start, end=end, old=old))
    assert got.start == start and got.end == end and got.step == STEP
    assert got.since(data.start).values.tolist() == data.values.tolist()  # kept, in place
    missing = got.until(data.start - STEP).values
    assert len(missing) == round((data.start - start) / STEP) and np.isnan(missing).all()


@dataclass
class RecordingSource(YoungSource):
    """YoungSource that notes the fit input (`resolution`) of every history read."""

    resolutions: list[float | None]

    def history(
        self,
        target: spec.TargetSpec,
        *,
        start: float,
        end: float,
        step: float,
        resolution: float | None = None,
    ) -> Series:
        self.resolutions.append(resolution)
        return super().history(target, start=start, end=end, step=step, resolution=resolution)


@pytest.mark.parametrize("peaks", [30.0, None])
def test_the_warm_up_reads_the_same_fit_input_as_the_engine(peaks: float | None) -> None:
    data = synthetic.load(16, seed=6)
    seen: list[float | None] = []
    engine = Engine(
        settings=EngineSettings(step=30.0, model_step=STEP, fit_workers=0, history_peaks=peaks),
        source_for=lambda _spec: RecordingSource(data, seen),
        clock=ManualClock(data.end),
        telemetry=Telemetry(CollectorRegistry()),
    )
    old = data.since(data.end - 2 * DAY)  # the warm-up reads the older part and nothing newer
    asyncio.run(warmup._fetch(engine, SPECS[0], start=data.start, end=data.end, old=old))
    assert seen == [peaks]  # bucket peaks when the engine fits on them, point values otherwise
