"""While a target's source fails, KEDA is still answered its last good decision until that is
`staleness` old, then UNAVAILABLE. The spend counter, the prewarm ledger and the decision log
must keep to those answers: the counter used to book only the steps that decided (a third of a
flaky run's replica-hours missing), the ledger never charged the prewarm answered meanwhile (a
strict budget overrun by up to `staleness` of maxPrewarmReplicas per outage), and the log wrote
nothing when the answers stopped, so `scaler explain` billed the silence."""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from models import artefact
from models.base import DAY, HOUR, Series
from scaler.clock import ManualClock
from scaler.decision import spec
from scaler.errors import BadQuery, SourceUnavailable, Unavailable
from scaler.record import timeline
from scaler.record.decisionlog import DecisionLog
from scaler.serving.engine import Engine
from scaler.serving.state import TargetState, forecast_steps
from scaler.serving.telemetry import Telemetry
from scaler.settings import EngineSettings
from scaler.sources.base import Sample
from tests.unit.test_drift_rebuild import engine_with

STEP, MODEL_STEP, STALENESS = 30.0, 300.0, 300.0
START = 1_700_000_000.0 - 1_700_000_000.0 % MODEL_STEP
NOW = START + 3 * DAY


@dataclass
class Flaky:
    """The Source seam: 100 at the model step, newest samples 200 at the first step (a rise the
    floor holds for the lead time as paid prewarm) and 100 after; unreachable at `down`."""

    clock: ManualClock
    down: set[float] = field(default_factory=set)
    refused: set[float] = field(default_factory=set)
    """Steps at which Prometheus refuses the query (BadQuery)."""

    def history(self, _spec: object, *, start: float, end: float, step: float, **_: object):  # type: ignore[no-untyped-def]
        self._check()
        end = min(end, self.clock.now())
        return Series(start, step, np.full(np.arange(start, end + 1e-6, step).size, 100.0))

    def latest(self, _spec: object, *, at: float) -> Sample:
        self._check()
        return Sample(at=at, value=200.0 if at == NOW else 100.0)

    def _check(self) -> None:
        if self.clock.now() in self.refused:
            raise BadQuery("load", "Prometheus said: bad_data")
        if self.clock.now() in self.down:
            raise SourceUnavailable("prometheus at http://prom:9090 did not answer")


def make(
    log: Path, *, budget: str = "24", down: range = range(0), staleness: float = STALENESS
) -> tuple[Engine, Flaky, ManualClock, spec.TargetSpec]:
    """An engine over a Flaky source down at the steps in `down`, logging to `log`."""
    clock = ManualClock(NOW)
    settings = EngineSettings(step=STEP, model_step=MODEL_STEP, staleness=staleness, fit_workers=0)
    source = Flaky(clock, {NOW + i * STEP for i in down})
    engine = engine_with(source, clock, settings, decision_log=DecisionLog(log))
    target = spec.parse("gpu", "llm", {"query": "load", "threshold": "10", "prewarmBudget": budget})
    return engine, source, clock, target


def serve(budget: str, down: range, steps: int, log: Path) -> tuple[Engine, TargetState, float]:
    """Run `steps` steps with the source down at the steps in `down`; the replica-hours KEDA was
    answered (asked 1 s into each step, as a poll between two steps)."""
    engine, _, clock, target = make(log, budget=budget, down=down)
    answered = 0.0

    async def run() -> TargetState:
        nonlocal answered
        state = engine.ensure(target)
        state.ledger_known = True  # no spend record here: the ledger starts empty and known
        for i in range(steps):
            clock.t = NOW + i * STEP
            engine.ensure(target)
            await engine.tick(clock.t)
            clock.t += 1.0
            with contextlib.suppress(Unavailable):  # KEDA's fallback applies
                answered += engine.answer(state).desired * STEP / HOUR
        return state

    state = asyncio.run(run())
    engine.close()
    return engine, state, answered


def counted(engine: Engine, state: TargetState) -> float:
    key = {"target": state.spec.key}
    value = engine.telemetry.registry.get_sample_value("scaler_gpu_replica_hours_total", key)
    return float(value or 0.0)


def billed(log: Path) -> tuple[float, list[timeline.Gap]]:
    records: list[dict[str, Any]] = [json.loads(line) for line in log.read_text().splitlines()]
    spans, gaps = timeline.spans(records)
    return timeline.totals(spans).replica_hours, gaps


def test_an_outage_shorter_than_staleness_is_answered_counted_and_billed_alike(
    tmp_path: Path,
) -> None:
    engine, state, answered = serve("24", down=range(5, 10), steps=15, log=tmp_path / "d.jsonl")
    replica_hours, gaps = billed(tmp_path / "d.jsonl")
    assert answered == pytest.approx(15 * 20 * STEP / HOUR)  # 20 replicas (10 held) throughout
    assert counted(engine, state) == pytest.approx(answered)
    assert replica_hours == pytest.approx(answered)
    assert gaps == []


def test_an_outage_past_staleness_stops_the_count_and_the_bill_where_the_answers_stop(
    tmp_path: Path,
) -> None:
    log = tmp_path / "d.jsonl"
    engine, state, answered = serve("24", down=range(5, 25), steps=30, log=log)
    replica_hours, gaps = billed(log)
    assert answered == pytest.approx(14 * 20 * STEP / HOUR, abs=20 * STEP / HOUR)
    assert counted(engine, state) == pytest.approx(answered)
    assert replica_hours == pytest.approx(answered)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    events = [r["event"] for r in records]
    assert events.count("unanswered") == 1
    resumed = records[events.index("unanswered") + 1]["at"]  # the breaker's probe succeeded
    (gap,) = gaps
    assert (gap.start, gap.end) == (NOW + 4 * STEP + STALENESS, resumed)
    assert "KEDA was not answered" in gap.why and "did not answer" in gap.why


def test_prewarm_answered_through_an_outage_is_charged_and_cut_when_the_budget_runs_out(
    tmp_path: Path,
) -> None:
    # The rise at NOW is free for the HPA's 5 minutes, then held as 10 paid prewarm replicas
    # (1/12 replica-hour a step): 0.5 pays for 6 steps, the first before the outage.
    engine, state, answered = serve("0.5", down=range(11, 19), steps=19, log=tmp_path / "d.jsonl")
    assert state.ledger.spent(NOW + 19 * STEP) == pytest.approx(0.5)  # charged, never past it
    assert state.predictive is not None
    assert (state.predictive.prewarm, state.predictive.reason.value) == (0, "budget_capped")
    assert answered == pytest.approx((16 * 20 + 3 * 10) * STEP / HOUR)
    assert counted(engine, state) == pytest.approx(answered)


def test_a_step_refreshed_again_after_a_failure_is_held_once(tmp_path: Path) -> None:
    engine, _, clock, target = make(tmp_path / "d.jsonl", down=range(11, 12))

    async def run() -> tuple[float, float]:
        state = engine.ensure(target)
        for i in range(11):  # the rise is held as 10 paid prewarm replicas from step 10
            clock.t = NOW + i * STEP
            await engine.tick(clock.t)
        before = (counted(engine, state), state.ledger.spent(clock.t))
        clock.t = now = NOW + 11 * STEP
        await engine._guarded_refresh(state, now)  # a second call for one step (as the
        await engine._guarded_refresh(state, now)  # warm-up's passes were), then the loop's
        await engine.tick(now)
        return counted(engine, state) - before[0], state.ledger.spent(now) - before[1]

    counted_hours, charged = asyncio.run(run())
    engine.close()
    assert counted_hours == pytest.approx(20 * STEP / HOUR)  # one step of 20 replicas
    assert charged == pytest.approx(10 * STEP / HOUR)  # one step of 10 prewarm replicas


def test_a_step_skipped_while_a_slow_refresh_runs_is_held_and_booked(tmp_path: Path) -> None:
    engine, _, clock, target = make(tmp_path / "d.jsonl")
    slow = NOW + STEP

    async def run() -> tuple[float, float]:
        state = engine.ensure(target)
        await engine.tick(NOW)
        base, answered = counted(engine, state), 0.0
        release = asyncio.Event()

        async def hang(state: TargetState, now: float) -> None:
            await release.wait()
            raise SourceUnavailable("prometheus at http://prom:9090 did not answer in time")

        engine.refresh = hang  # type: ignore[method-assign]  # our seam: a refresh in flight
        clock.t = slow
        started = engine._launch(slow)
        await asyncio.sleep(0)
        clock.t = slow + STEP
        assert engine._launch(slow + STEP) == []  # skipped: step `slow` is still refreshing
        release.set()
        await asyncio.gather(*started)
        for at in (slow + 1, slow + STEP + 1):
            clock.t = at
            answered += engine.answer(state).desired * STEP / HOUR
        return counted(engine, state) - base, answered

    booked, answered = asyncio.run(run())
    engine.close()
    assert booked == pytest.approx(answered) == pytest.approx(2 * 20 * STEP / HOUR)


def test_a_target_dropped_and_registered_again_starts_a_new_line(tmp_path: Path) -> None:
    """A refused first refresh of the same key hours later closed the old line at the refusal,
    and explain billed the hours between."""
    log = tmp_path / "d.jsonl"
    engine, source, clock, target = make(log)

    async def run() -> None:
        engine.ensure(target)
        await engine.tick(NOW)
        engine.forget(target.key, "idle")
        clock.t = NOW + 3 * HOUR
        source.refused = {clock.t}
        engine.ensure(target)
        await engine.tick(clock.t)

    asyncio.run(run())
    engine.close()
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["event"] for r in records] == ["start", "stop"]
    replica_hours, _ = billed(log)
    assert replica_hours == pytest.approx(20 * STEP / HOUR)


def test_a_step_after_a_refused_query_is_not_booked_whatever_fails_next(tmp_path: Path) -> None:
    """With a staleness past the refused query's retry, a retry failing otherwise was held,
    booked and logged while every answer was INVALID_ARGUMENT."""
    engine, source, clock, target = make(tmp_path / "d.jsonl", staleness=1800.0)

    async def run() -> float:
        state = engine.ensure(target)
        await engine.tick(NOW)
        base = counted(engine, state)
        state.bad_query = BadQuery("load", "Prometheus said: bad_data")
        source.down = {NOW + i * STEP for i in range(1, 40)}
        for i in range(1, 40):
            clock.t = NOW + i * STEP
            await engine.tick(clock.t)
        return counted(engine, state) - base

    assert asyncio.run(run()) == 0.0
    engine.close()


@dataclass
class Record:
    """The ledger's spend record (a SpendRecord): unreadable at `down`, holding no spend."""

    clock: ManualClock
    down: set[float]

    def spent_samples(self, _spec: object, **_: object) -> list[object]:
        if self.clock.now() in self.down:
            raise SourceUnavailable("prometheus at http://ledger:9090 did not answer")
        return []

    def spent_samples_of(self, _specs: object, **_: object) -> dict[str, list[object]]:
        return {}  # each read alone


def test_a_held_step_is_logged_with_the_model_and_budget_its_decision_was_made_with(
    tmp_path: Path,
) -> None:
    """A fit and a ledger rebuild that finished during an outage were read from the target as
    it was: a `change` line named the new model and a known budget beside the held answer,
    which the old ones had decided (no model, budget unknown: reactive)."""
    log = tmp_path / "d.jsonl"
    clock = ManualClock(NOW)
    settings = EngineSettings(step=STEP, model_step=MODEL_STEP, staleness=STALENESS, fit_workers=0)
    source = Flaky(clock, {NOW + i * STEP for i in range(1, 3)})
    engine = Engine(
        settings=settings,
        source_for=lambda _spec: source,  # type: ignore[arg-type,return-value]
        clock=clock,
        telemetry=Telemetry(CollectorRegistry()),
        decision_log=DecisionLog(log),
        spend_record=Record(clock, {NOW}),  # type: ignore[arg-type]
    )
    engine.fitter.maybe_fit = lambda *_: None  # type: ignore[method-assign]  # models are set
    target = spec.parse("gpu", "llm", {"query": "load", "threshold": "10"})
    known = Series(NOW - 2 * DAY, MODEL_STEP, np.full(int(2 * DAY / MODEL_STEP) + 1, 100.0))
    model = artefact.load(artefact.fit("seasonal", known, forecast_steps(target, MODEL_STEP)))

    async def run() -> None:
        state = engine.ensure(target)
        await engine.tick(NOW)  # no model, and the ledger's record unreadable
        state.model = model  # a fit that finishes during the outage
        for i in range(1, 4):  # the ledger is rebuilt at step 1, the source fails to step 2
            clock.t = NOW + i * STEP
            await engine.tick(clock.t)

    asyncio.run(run())
    engine.close()
    records = [json.loads(line) for line in log.read_text().splitlines()]
    events = [(r["event"], r["at"]) for r in records]
    assert events == [("start", NOW), ("change", NOW + 3 * STEP), ("stop", NOW + 3 * STEP)]
    first, decided, _ = records
    assert (first["reason"], first["model_version"], first["budget_known"]) == (
        "budget_unknown",
        None,
        False,
    )
    assert (decided["model_version"], decided["budget_known"]) == (model.fingerprint, True)
    replica_hours, gaps = billed(log)
    assert replica_hours == pytest.approx(counted(engine, engine.targets[target.key]))
    assert gaps == []


def test_a_held_step_exports_the_model_and_budget_its_decision_was_made_with(
    tmp_path: Path,
) -> None:
    """The gauges of a held step were read from the target as it was: a fit and a ledger
    rebuild finishing during an outage showed the new model and a known budget beside the held
    answer, while its log line (the decision's Basis) named the old model and no budget."""
    clock = ManualClock(NOW)
    settings = EngineSettings(step=STEP, model_step=MODEL_STEP, staleness=STALENESS, fit_workers=0)
    source = Flaky(clock, {NOW + i * STEP for i in range(1, 3)})
    registry = CollectorRegistry()
    engine = Engine(
        settings=settings,
        source_for=lambda _spec: source,  # type: ignore[arg-type,return-value]
        clock=clock,
        telemetry=Telemetry(registry),
        decision_log=DecisionLog(tmp_path / "d.jsonl"),
        spend_record=Record(clock, {NOW}),  # type: ignore[arg-type]
    )
    engine.fitter.maybe_fit = lambda *_: None  # type: ignore[method-assign]  # models are set
    target = spec.parse("gpu", "llm", {"query": "load", "threshold": "10", "prewarmBudget": "24"})
    points = int(2 * DAY / MODEL_STEP) + 1
    old, new = (
        artefact.load(
            artefact.fit(
                "seasonal",
                Series(NOW - 2 * DAY, MODEL_STEP, np.full(points, level)),
                forecast_steps(target, MODEL_STEP),
            )
        )
        for level in (100.0, 120.0)
    )
    assert old.fingerprint != new.fingerprint

    def exported() -> tuple[list[str], float | None]:
        """The versions scaler_model_info names, and scaler_prewarm_budget_remaining."""
        versions = [
            s.labels["version"]
            for metric in registry.collect()
            if metric.name == "scaler_model_info"
            for s in metric.samples
            if s.value == 1
        ]
        remaining = registry.get_sample_value(
            "scaler_prewarm_budget_remaining", {"target": target.key}
        )
        return versions, remaining

    async def run() -> list[tuple[list[str], float | None]]:
        state = engine.ensure(target)
        state.model = old
        await engine.tick(NOW)  # the old model; the ledger's record unreadable
        state.model = new  # a fit that finishes during the outage
        seen = []
        for i in range(1, 4):  # the ledger is rebuilt at step 1, the source fails to step 2
            clock.t = NOW + i * STEP
            await engine.tick(clock.t)
            seen.append(exported())
        return seen

    seen = asyncio.run(run())
    engine.close()
    assert seen[:2] == [([old.fingerprint], 0.0)] * 2  # held: the old model, no budget known
    versions, remaining = seen[2]  # decided: the new model, the rebuilt budget
    assert versions == [new.fingerprint]
    assert remaining is not None and remaining > 0
