"""A wall clock stepped back (an NTP correction, a VM resumed) must not let prewarm run
uncharged. The engine used to skip every target while the clock stood behind its last step, and
KEDA kept being answered that step's decision, its prewarm never charged (4.83 replica-hours
answered against 1.5 counted over a 10-minute step back). Now each such step is held as a
failed refresh's is (booking.py `hold`): charged, counted and cut to the budget, for at most
`staleness`, then refused until the clock is past the step again."""

from __future__ import annotations

import asyncio
import logging
import math
from pathlib import Path

import pytest

from models.base import HOUR
from scaler.clock import ManualClock
from scaler.decision import spec
from scaler.errors import Unavailable
from scaler.serving.engine import Engine
from tests.unit.test_held_answers import NOW, STALENESS, STEP, counted, make

BACK = 20
"""Steps the clock steps back, after the twelfth: twice `staleness`."""


def test_steps_behind_a_stepped_back_clock_are_charged_then_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    engine, _, clock, target = make(tmp_path / "d.jsonl", budget="24")
    stamps = [NOW + i * STEP for i in range(12)]  # 10 prewarm replicas are held from step 10
    stamps += [NOW + (i - BACK) * STEP for i in range(11, 11 + BACK + 4)]
    with caplog.at_level(logging.INFO, logger="scaler.serving.clockwatch"):
        rows, charged = answers(engine, clock, target, stamps)
    state = engine.targets[target.key]
    refused = [at for at, desired, _ in rows if math.isnan(desired)]
    answered = sum(desired * STEP / HOUR for _, desired, _ in rows if not math.isnan(desired))
    prewarm = sum((d - r) * STEP / HOUR for _, d, r in rows if not math.isnan(d))
    held = int(STALENESS / STEP)
    assert prewarm > 10 * held * STEP / HOUR - 1e-9  # the held steps answered their prewarm
    assert charged == pytest.approx(prewarm)  # ... and every replica of it is on the ledger
    assert counted(engine, state) == pytest.approx(answered)
    behind = [NOW + (i - BACK) * STEP for i in range(11, 12 + BACK)]  # up to the step it left
    assert refused == behind[held:]  # refused past staleness, until the clock is past it
    messages = [r.getMessage() for r in caplog.records]
    assert sum("stepped back 600s" in m for m in messages) == 1
    assert sum("past" in m and "again" in m for m in messages) == 1


@pytest.mark.parametrize("fails", [4, 1])
def test_a_decision_held_while_its_source_failed_is_held_behind_only_what_is_left(
    tmp_path: Path, fails: int
) -> None:
    # The source fails from step 4: step 3's decision is held through step 11 (240 s of the
    # 300 s of staleness). Then the clock steps back: the steps behind held it 300 s more,
    # answered 540 s after it was made, as if the step back had made it fresh. From step 1:
    # step 0's, refused since step 10, was answered again for 300 s.
    engine, _, clock, target = make(tmp_path / "d.jsonl", budget="24", down=range(fails, 60))
    stamps = [NOW + i * STEP for i in range(12)]
    behind = [NOW + (i - BACK) * STEP for i in range(12, 12 + BACK)]
    refused = refusals(engine, clock, target, stamps + behind)
    state = engine.targets[target.key]
    assert state.decided_at == NOW + (fails - 1) * STEP
    held = max(0, int(STALENESS / STEP) - (12 - fails))  # what staleness leaves after step 11
    assert refused == [at for at in stamps if at >= NOW + (fails + 9) * STEP] + behind[held:]


def test_a_decision_held_behind_the_clock_then_while_its_source_fails_is_held_to_staleness(
    tmp_path: Path,
) -> None:
    # Step 11's decision is held behind a clock stepped back 4 steps (3 held steps: 90 s),
    # then the source fails as the clock passes step 11: it was answered, and charged, for
    # --staleness more, 390 s after it was made.
    engine, _, clock, target = make(tmp_path / "d.jsonl", budget="24", down=range(12, 60))
    stamps = [NOW + i * STEP for i in range(12)]
    stamps += [NOW + i * STEP for i in range(8, 12)]  # stepped back 4 steps
    stamps += [NOW + i * STEP for i in range(12, 24)]
    refused = refusals(engine, clock, target, stamps)
    state = engine.targets[target.key]
    assert state.decided_at == NOW + 11 * STEP
    assert refused == [NOW + i * STEP for i in range(18, 24)]  # 90 s + 210 s of holds


def test_a_decision_refused_behind_the_clock_is_not_charged_once_it_is_past(
    tmp_path: Path,
) -> None:
    # Refused behind a clock stepped back twice --staleness, then the source fails as the clock
    # passes the step it left: those steps were charged and logged as held, though refused.
    engine, _, clock, target = make(tmp_path / "d.jsonl", budget="24", down=range(12, 60))
    stamps = [NOW + i * STEP for i in range(12)]
    stamps += [NOW + (i - BACK) * STEP for i in range(11, 11 + BACK + 6)]
    rows, charged = answers(engine, clock, target, stamps)
    prewarm = sum((d - r) * STEP / HOUR for _, d, r in rows if not math.isnan(d))
    assert charged == pytest.approx(prewarm)


def refusals(
    engine: Engine, clock: ManualClock, target: spec.TargetSpec, stamps: list[float]
) -> list[float]:
    """The steps of `stamps` whose answer was refused (`answers`)."""
    rows, _ = answers(engine, clock, target, stamps)
    return [at for at, desired, _ in rows if math.isnan(desired)]


def answers(
    engine: Engine, clock: ManualClock, target: spec.TargetSpec, stamps: list[float]
) -> tuple[list[tuple[float, float, float]], float]:
    """Each step of `stamps` (the wall clock at each) with the replicas KEDA was answered, asked
    1 s in (NaN: refused), and the decision's reactive ones; and the prewarm the ledger holds."""
    rows: list[tuple[float, float, float]] = []

    async def run() -> float:
        state = engine.ensure(target)
        state.ledger_known = True
        for at in stamps:
            clock.t = at
            engine.ensure(target)
            await engine.tick(at)
            clock.t += 1.0
            try:
                desired = float(engine.answer(state).desired)
            except Unavailable:
                desired = math.nan
            assert state.decision is not None
            rows.append((at, desired, float(state.decision.reactive)))
        return state.ledger.spent(NOW)

    charged = asyncio.run(run())
    engine.close()
    return rows, charged
