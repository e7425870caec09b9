"""The live reactive floor is the highest sample of the HPA's 5-minute window, as the replay's
(scaler/decision/policy.py `free_samples`): the engine read only the newest sample and the
history's buckets, which end at the model step, so a spike inside the bucket in progress was
handed back at the next step (a 30 s step: the answer fell from 16 to 15 replicas 15 s after a
sample needed 16)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import numpy as np

from models.base import DAY, Series
from scaler.clock import ManualClock
from scaler.decision import spec
from scaler.settings import EngineSettings
from scaler.sources.base import Sample
from tests.unit.test_drift_rebuild import engine_with

STEP, MODEL_STEP = 30.0, 300.0
START = 1_700_000_000.0 - 1_700_000_000.0 % MODEL_STEP
NOW = START + 3 * DAY
SPIKE_AT = NOW + 60.0
SPEC = spec.parse("gpu", "llm", {"query": "load", "threshold": "10", "model": "seasonal"})


@dataclass
class FlatWithSpike:
    """The Source seam: 100 throughout at the model step, and one sample of 400 at SPIKE_AT
    (inside a bucket that is not complete until long after the steps read here)."""

    clock: ManualClock

    def history(self, _spec: object, *, start: float, end: float, step: float, **_: object):  # type: ignore[no-untyped-def]
        end = min(end, self.clock.now())
        times = np.arange(start, end + 1e-6, step)
        return Series(start, step, np.full(times.size, 100.0))

    def latest(self, _spec: object, *, at: float) -> Sample:
        return Sample(at=at, value=400.0 if at == SPIKE_AT else 100.0)


def reactive_after_the_spike() -> list[int]:
    clock = ManualClock(NOW)
    settings = EngineSettings(step=STEP, model_step=MODEL_STEP, fit_workers=0)
    engine = engine_with(FlatWithSpike(clock), clock, settings)
    seen = []

    async def serve() -> None:
        for i in range(12):
            clock.t = NOW + i * STEP
            state = engine.ensure(SPEC)
            await engine.tick(clock.t)
            if clock.t >= SPIKE_AT:
                assert state.decision is not None
                seen.append(state.decision.reactive)

    asyncio.run(serve())
    engine.close()
    return seen


def test_a_spike_inside_the_bucket_in_progress_holds_the_floor_for_the_hpa_window() -> None:
    seen = reactive_after_the_spike()
    window = int(300.0 / STEP)  # the HPA's 5 minutes: the spike and the 9 steps after it
    assert seen[:window] == [40] * window
    assert seen[window:] == [10] * (len(seen) - window)
