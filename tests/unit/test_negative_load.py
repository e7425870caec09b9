"""A negative newest load is no load (scaler/sources/prometheus_answers.py `load`): the engine
makes no decision from it, so KEDA is answered UNAVAILABLE, never 0 replicas, and the problem is
logged once although its value changes every step."""

from __future__ import annotations

import asyncio
import logging

import pytest

from models.base import Series
from scaler.clock import ManualClock
from scaler.decision import spec
from scaler.errors import NegativeLoad, Unavailable
from scaler.settings import EngineSettings
from scaler.sources.base import Sample
from tests.contract import synthetic
from tests.unit.test_drift_rebuild import engine_with

STEP = 30.0
SPEC = spec.parse("gpu", "neg", {"query": "-1 * sum(load)", "threshold": "5"})


class NegativeSource:
    """Prometheus answering -1 * sum(load): a history, and a negative newest value each step."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock

    def history(
        self,
        spec: spec.TargetSpec,
        *,
        start: float,
        end: float,
        step: float,
        resolution: float | None = None,
    ) -> Series:
        return synthetic.load(16, seed=3).until(end).since(start)

    def latest(self, spec: spec.TargetSpec, *, at: float) -> Sample:
        value = -900.0 - (at - synthetic.START)  # a new value every step
        problem = f"query {spec.query!r} returned a negative load; wrap it in clamp_min(..., 0)"
        raise NegativeLoad(problem.replace("a negative load", f"{value:g}"), problem=problem)


def test_a_negative_load_is_answered_unavailable_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock(synthetic.START + 15 * 86400.0)
    engine = engine_with(NegativeSource(clock), clock, EngineSettings(step=STEP, fit_workers=0))
    state = engine.ensure(SPEC)

    async def run() -> None:
        for _ in range(3):
            clock.t += STEP
            await engine.tick(clock.t)

    with caplog.at_level(logging.WARNING, logger="scaler"):
        asyncio.run(run())
    engine.close()

    with pytest.raises(Unavailable, match=r"no decision yet .*returned -\d+.*clamp_min"):
        engine.answer(state)
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith(SPEC.key)]
    assert len(logged) == 1
