"""Targets sharing a Prometheus are different tenants: when one's failures open the endpoint's
breaker, another target is refused without being told whose request failed or what it asked
(scaler/serving/isolation.py); the operator's log still says it."""

from __future__ import annotations

import asyncio
import logging

import pytest

from models.base import Series
from scaler.clock import ManualClock
from scaler.decision import spec
from scaler.errors import SourceUnavailable
from scaler.settings import EngineSettings
from scaler.sources.base import Sample
from tests.contract import synthetic
from tests.unit.test_drift_rebuild import engine_with

STEP = 30.0
THEIRS = spec.parse("team-b", "secret-llm", {"query": "team_b_private_total", "threshold": "5"})
OURS = spec.parse("team-a", "llm", {"query": "load", "threshold": "5"})


class FailingForTeamB:
    """A source whose Prometheus fails every request, saying so as PrometheusSource does: with
    the target and its query."""

    def _fail(self, target: spec.TargetSpec) -> SourceUnavailable:
        return SourceUnavailable(
            f"Prometheus at http://prom:9090 answered HTTP 500 for {target.label}: query "
            f"{target.query!r} failed; check serverAddress / --prometheus-url"
        )

    def history(
        self,
        spec: spec.TargetSpec,
        *,
        start: float,
        end: float,
        step: float,
        resolution: float | None = None,
    ) -> Series:
        raise self._fail(spec)

    def latest(self, spec: spec.TargetSpec, *, at: float) -> Sample:
        raise self._fail(spec)


def test_a_target_refused_by_an_open_breaker_is_not_told_another_targets_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock(synthetic.START)
    settings = EngineSettings(step=STEP, model_step=300.0, fit_workers=0)
    engine = engine_with(FailingForTeamB(), clock, settings)
    engine.ensure(THEIRS)

    async def run() -> None:
        for i in range(4):  # team-b's failures over more than a step open the breaker
            clock.t = synthetic.START + i * STEP
            await engine.tick(clock.t)
        assert engine.isolation.open_endpoints() == ["default"]
        engine.ensure(OURS)
        await engine.tick(clock.t)

    with caplog.at_level(logging.WARNING, logger="scaler"):
        asyncio.run(run())
    engine.close()

    told = engine.targets[OURS.key].error
    assert told is not None and "source endpoint default is failing" in told
    assert "team-b" not in told and "team_b_private_total" not in told
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith(OURS.key)]
    assert len(logged) == 1 and "the failure that opened it: " in logged[0]
    assert "team-b/secret-llm" in logged[0]  # the operator sees what opened it


class FailingForEveryone(FailingForTeamB):
    """The same dead Prometheus, for every target: each failed request names its own target."""


def test_a_long_outage_logs_each_refused_target_once_not_once_per_failed_probe(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each failed probe is another target's failure; the refused targets used to log again
    every time it changed (200 targets: a thousand lines in 100 s of a Prometheus outage)."""
    clock = ManualClock(synthetic.START)
    settings = EngineSettings(step=STEP, model_step=300.0, fit_workers=0, staleness=3600.0)
    engine = engine_with(FailingForEveryone(), clock, settings)
    targets = [
        spec.parse(f"team-{i}", "llm", {"query": f"load_{i}", "threshold": "5"}) for i in range(6)
    ]
    for target in targets:
        engine.ensure(target)

    async def run() -> None:
        for i in range(40):  # 20 minutes: the breaker opens, then its probes keep failing
            clock.t = synthetic.START + i * STEP
            await engine.tick(clock.t)

    with caplog.at_level(logging.WARNING, logger="scaler"):
        asyncio.run(run())
    engine.close()

    assert engine.isolation.open_endpoints() == ["default"]
    for target in targets:
        lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(target.key)]
        probes = sum(f"for {target.label}:" in line for line in lines)  # its own failures
        assert len(lines) <= 2 * probes + 2, "\n".join(lines)
