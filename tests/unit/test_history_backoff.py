"""A target whose history reads keep failing at the transport (Prometheus times out on its range
query while its instant reads and other targets' requests succeed, so the endpoint's breaker
never opens) sent that read again every step: a sick Prometheus was asked for a window of
history per target per step. Its reads now back off (a step, doubling to half the staleness
bound, reset by an answer); the steps between are held with nothing sent, and the answers
still stop at --staleness."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from models.base import HOUR, Series
from scaler.clock import ManualClock
from scaler.decision import spec
from scaler.errors import SourceUnavailable, Unavailable
from scaler.record.decisionlog import DecisionLog
from scaler.serving.engine import Engine
from scaler.settings import EngineSettings
from scaler.sources.base import Sample
from tests.unit.test_drift_rebuild import engine_with
from tests.unit.test_held_answers import MODEL_STEP, NOW, STALENESS, STEP, counted

TIMED_OUT = "Prometheus at http://prom:9090 did not answer within 10s for gpu/heavy"
HEALTHY = spec.parse("gpu", "llm", {"query": "load", "threshold": "10"})
HEAVY = spec.parse("gpu", "heavy", {"query": "heavy", "threshold": "10"})


@dataclass
class Sick:
    """One Prometheus (our Source seam): every query's newest value is 100, and its history
    too, but `heavy`'s history times out at the steps in `down`; `asked` keeps each history
    request (query, step)."""

    clock: ManualClock
    down: set[float] = field(default_factory=set)
    hang: float = 0.0
    """Seconds a failing history read takes before it fails."""
    asked: list[tuple[str, float]] = field(default_factory=list)

    def history(self, spec: spec.TargetSpec, *, start: float, end: float, step: float, **_: object):  # type: ignore[no-untyped-def]
        self.asked.append((spec.query, self.clock.now()))
        if spec.query == "heavy" and self.clock.now() in self.down:
            time.sleep(self.hang)
            raise SourceUnavailable(TIMED_OUT)
        end = min(end, self.clock.now())
        return Series(start, step, np.full(np.arange(start, end + 1e-6, step).size, 100.0))

    def latest(self, _spec: object, *, at: float) -> Sample:
        return Sample(at=at, value=100.0)

    def steps_asked(self, query: str) -> list[int]:
        return [round((t - NOW) / STEP) for q, t in self.asked if q == query]


def make(
    log: Path, down: range, *, deadline: float = 30.0, hang: float = 0.0
) -> tuple[Engine, Sick, ManualClock]:
    clock = ManualClock(NOW)
    settings = EngineSettings(
        step=STEP,
        model_step=MODEL_STEP,
        staleness=STALENESS,
        fit_workers=0,
        refresh_deadline=deadline,
    )
    source = Sick(clock, {NOW + i * STEP for i in down}, hang)
    engine = engine_with(source, clock, settings, decision_log=DecisionLog(log))
    return engine, source, clock


def backoff_refusals(engine: Engine) -> float:
    key = {"kind": "HistoryBackoff"}
    return engine.telemetry.registry.get_sample_value("scaler_refresh_errors_total", key) or 0.0


def test_a_new_target_whose_history_times_out_is_not_asked_for_it_every_step(
    tmp_path: Path,
) -> None:
    engine, source, clock = make(tmp_path / "d.jsonl", down=range(40))

    async def run() -> None:
        for i in range(20):  # ten minutes
            clock.t = NOW + i * STEP
            engine.ensure(HEALTHY)
            engine.ensure(HEAVY)
            await engine.tick(clock.t)

    asyncio.run(run())
    engine.close()
    # a step, then 2, 4 and at most 5 (half the 5-minute staleness), instead of every step
    assert source.steps_asked("heavy") == [0, 1, 3, 7, 12, 17]
    assert engine.isolation.open_endpoints() == []  # the healthy target kept the breaker closed
    assert backoff_refusals(engine) == 20 - 6
    state = engine.targets[HEAVY.key]
    with pytest.raises(Unavailable, match="did not answer within 10s"):
        engine.answer(state)
    assert engine.answer(engine.targets[HEALTHY.key]).desired == 10


def test_held_answers_stop_at_staleness_and_resume_at_the_first_read_after_recovery(
    tmp_path: Path,
) -> None:
    """Decided until step 9; its range reads time out from the model-step point at step 10 to
    step 29 (instant reads answer). Held, booked and billed as answered until the staleness
    bound, UNAVAILABLE after it, and decided again at the first read after the recovery."""
    log = tmp_path / "d.jsonl"
    engine, source, clock = make(log, down=range(10, 30))
    answered = 0.0
    served: list[int] = []

    async def run() -> None:
        nonlocal answered
        for i in range(36):
            clock.t = NOW + i * STEP
            engine.ensure(HEAVY)
            await engine.tick(clock.t)
            clock.t += 1.0  # KEDA asks between two steps
            with contextlib.suppress(Unavailable):
                answered += engine.answer(engine.targets[HEAVY.key]).desired * STEP / HOUR
                served.append(i)

    asyncio.run(run())
    engine.close()
    state = engine.targets[HEAVY.key]
    assert source.steps_asked("heavy") == [0, 10, 11, 13, 17, 22, 27, 32]
    assert served == [*range(19), *range(32, 36)]  # the last decision (step 9) + 300 s
    assert counted(engine, state) == pytest.approx(answered)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    unanswered = [r for r in records if r["event"] == "unanswered"]
    assert [r["at"] for r in unanswered] == [NOW + 9 * STEP + STALENESS]
    assert "did not answer within 10s" in unanswered[0]["error"]
    assert state.history_backoff.failures == 0  # an answer resets it: the next failure waits 1


def test_a_history_read_cut_by_the_refresh_deadline_backs_off_too(tmp_path: Path) -> None:
    engine, source, clock = make(tmp_path / "d.jsonl", down=range(3), deadline=0.05, hang=0.3)

    async def run() -> None:
        for i in range(3):
            clock.t = NOW + i * STEP
            engine.ensure(HEAVY)
            await engine.tick(clock.t)

    asyncio.run(run())
    engine.close()
    assert source.steps_asked("heavy") == [0, 1]
    backoff = engine.targets[HEAVY.key].history_backoff
    assert (backoff.failures, backoff.wait) == (2, 2 * STEP)
    assert "refresh took longer than its 0.05s deadline" in backoff.error


def test_the_backfill_of_older_history_waits_out_the_backoff_too(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The background read of the older part of a history (warmup.backfill) went out every step
    # whatever the backoff: the heaviest read of all, to a Prometheus timing out on it. A pass
    # inside the backoff sends nothing and says nothing: the failure behind it was logged.
    from scaler.serving import warmup

    engine, source, clock = make(tmp_path / "decisions.jsonl", down=range(0, 40))

    async def run() -> list[tuple[str, float]]:
        for i in range(4):  # heavy's history reads time out: its backoff engaged
            clock.t = NOW + i * STEP
            engine.ensure(HEALTHY)
            engine.ensure(HEAVY)
            await engine.tick(clock.t)
        state = engine.targets[HEAVY.key]
        end = np.floor(clock.t / MODEL_STEP) * MODEL_STEP  # a warm-up read only the replay's span
        state.history = Series(end - 10 * MODEL_STEP, MODEL_STEP, np.full(11, 100.0))
        state.history_partial = True
        assert state.history_backoff.waiting(clock.t)
        before = list(source.asked)
        for i in range(4, 7):  # the backfill's pass after each step, all inside the backoff
            clock.t = NOW + i * STEP
            await engine.tick(clock.t)
            await warmup._complete(engine, state, asyncio.Semaphore(1))
        return [a for a in source.asked if a not in before]

    try:
        with caplog.at_level(logging.INFO, logger="scaler.serving.warmup"):
            assert asyncio.run(run()) == []
    finally:
        engine.close()
    assert [r.getMessage() for r in caplog.records if r.name == "scaler.serving.warmup"] == []
