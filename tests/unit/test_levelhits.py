"""The level insurance's hit-rate gate (decision.levelhits): the level is bought only while its
replicas saved steps at least as often, a lead time after each decision, as the forecast's
highest prewarm replica did; the replay and the live engine consult the same gate, and it
buys within the same strict budget."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.base import DAY, Series
from scaler.decision import budget, levelhits, policy
from scaler.offline import replay
from scaler.serving.state import TargetState
from tests.unit.switches import hour_level
from tests.unit.test_live_hold import NOW, STEP, ready_engine
from tests.unit.test_policy_properties import Step, in_window, limit_sets, ratios, steps, walked
from tests.unit.test_replay import trace

LEAD = 600.0
REACTIVE, TOP, LEVEL = 10, 11, 12
"""One decision's replicas: the load's own, the forecast's top (one prewarm replica), and the
level's ask (one more above it)."""


def fed(
    required: list[int], *, gate: levelhits.HitGate | None = None, start: float = 0.0
) -> levelhits.HitGate:
    """A gate that recorded one decision a minute from `start` (REACTIVE, TOP, LEVEL) and saw,
    a lead time after each, the load need `required[i]` replicas."""
    gate = gate or levelhits.HitGate(lead_time=LEAD, window=DAY)
    for i, need in enumerate(required):
        gate.record(start + 60.0 * i, reactive=REACTIVE, top=TOP, level=LEVEL)
        gate.observe(start + 60.0 * i + LEAD, need)
    return gate


def test_a_level_that_covered_more_often_than_the_forecasts_top_opens_the_gate() -> None:
    # The load reached the level's replica on 3 steps in 10, the top's exactly on 1 in 10.
    gate = fed([LEVEL, LEVEL, LEVEL, TOP] + [REACTIVE] * 6)
    assert gate.level_rate() > gate.top_rate() > 0
    assert gate.open()
    assert gate.level_load(250.0) == 250.0


def test_a_level_that_covered_less_often_shuts_it_and_the_level_is_not_bought() -> None:
    gate = fed([LEVEL] + [TOP] * 4 + [REACTIVE] * 5)
    assert 0 < gate.level_rate() < gate.top_rate()
    assert not gate.open()
    assert gate.level_load(250.0) is None


def test_the_gate_is_shut_until_the_level_has_been_scored() -> None:
    gate = levelhits.HitGate(lead_time=LEAD, window=DAY)
    assert not gate.open()
    gate.record(0.0, reactive=REACTIVE, top=TOP, level=LEVEL)
    gate.observe(LEAD - 1.0, LEVEL)  # the replica asked for at 0 is not ready yet
    assert not gate.open() and len(gate.pending) == 1
    gate.observe(LEAD, LEVEL)
    assert gate.open() and not gate.pending


def test_a_level_that_never_covered_stays_shut_even_when_the_forecast_bought_nothing() -> None:
    gate = levelhits.HitGate(lead_time=LEAD, window=DAY)
    for i in range(20):
        gate.record(60.0 * i, reactive=REACTIVE, top=REACTIVE, level=LEVEL)
        gate.observe(60.0 * i + LEAD, REACTIVE)
    assert gate.level_rate() == 0 and np.isnan(gate.top_rate())
    assert not gate.open()
    gate.record(1e4, reactive=REACTIVE, top=REACTIVE, level=LEVEL)
    gate.observe(1e4 + LEAD, LEVEL)
    assert gate.open()  # the level displaces nothing the forecast would have bought


def test_the_gate_follows_the_recent_window_not_the_whole_past() -> None:
    gate = fed(([LEVEL] + [TOP] * 3 + [REACTIVE] * 6) * 100)  # shut for 1000 minutes
    assert not gate.open()
    # Three windows on, the old evidence weighs e^-3: a few hours of the opposite open it.
    fed(([LEVEL] * 3 + [TOP] + [REACTIVE] * 6) * 30, gate=gate, start=gate.last + 3 * DAY)
    assert gate.open()
    stale = fed(([LEVEL] + [TOP] * 3 + [REACTIVE] * 6) * 100)
    fed(([LEVEL] * 3 + [TOP] + [REACTIVE] * 6) * 30, gate=stale, start=stale.last + 60.0)
    assert not stale.open()  # the same hours right after: the window still remembers


# The replay consults it: on load whose level the model knows (a daily cycle, 9 days), the
# level's replicas cover less often than the forecast's, so the gate buys the level on fewer
# steps than the ungated rule (its ablation), within the same share budget.
SHARE = 0.3


@pytest.fixture(scope="module")
def runs() -> dict[str, replay.Replay]:
    config = replay.ReplayConfig(threshold=40.0, budget_share=SHARE, level_points=1)
    with hour_level():  # the level regression's median leaves the level little to buy
        return {
            name: replay.replay(trace(), replace(config, level_hit_gate=gate))
            for name, gate in (("gated", "top"), ("ungated", ""))
        }


def test_the_replays_gate_buys_the_level_on_fewer_steps_than_its_ablation(
    runs: dict[str, replay.Replay],
) -> None:
    level = {k: int((r.decisions["reason"] == "level").sum()) for k, r in runs.items()}
    assert 0 < level["gated"] < level["ungated"] / 2


def test_the_gated_level_stays_within_the_share_budget(runs: dict[str, replay.Replay]) -> None:
    spend = runs["gated"].summary["policy"]["prewarm"]
    assert 0 < spend["max_window_share"] <= SHARE + 1e-9
    assert spend["windows_without_reactive"] == 0


# The live engine consults the same gate (EngineSettings.level_hit_gate).
def live(tmp_path: Path, *, gated: bool, loads: list[float]) -> list[policy.Decision]:
    """Decisions a minute apart on a flat 200 (10 replicas at threshold 20), the forecast's peak
    at 190 and its band reaching 1.15 above its median (the level asks 12 replicas); the load
    of each decision is `loads[i]`."""
    history = Series(NOW - STEP * 19, STEP, np.full(20, 200.0))
    tmp_path.mkdir(parents=True, exist_ok=True)
    engine, state = ready_engine(tmp_path, history, budget_hours=24.0)
    engine.settings = replace(engine.settings, level_points=1, level_hit_gate=gated)
    made: list[policy.Decision] = []
    for i, load in enumerate(loads):
        now = NOW + 60.0 * i
        state.history = Series(now - STEP * 19, STEP, np.full(20, load))
        state.level_ratio = 1.15
        engine._decide(state, now=now, load=load, peak=190.0, fallback=None)
        assert isinstance(state, TargetState) and state.predictive is not None
        made.append(state.predictive)
    return made


def test_the_live_gate_stops_buying_a_level_the_load_never_reached(tmp_path: Path) -> None:
    flat = [200.0] * 40
    gated = live(tmp_path / "a", gated=True, loads=flat)
    ungated = live(tmp_path / "b", gated=False, loads=flat)
    assert all(d.reason is policy.Reason.LEVEL for d in ungated)
    assert not any(d.reason is policy.Reason.LEVEL for d in gated)


def test_the_live_gate_opens_once_the_level_covered_load(tmp_path: Path) -> None:
    # 10 minutes on 200, then the load steps to 230 (12 replicas) for good: the replicas the
    # level asked for 10 minutes before were needed, the forecast bought none to compare.
    gated = live(tmp_path, gated=True, loads=[200.0] * 10 + [230.0] * 30)
    assert not any(d.reason is policy.Reason.LEVEL for d in gated[:10])
    assert any(d.reason is policy.Reason.LEVEL for d in gated[10:])


@settings(max_examples=150, deadline=None)
@given(
    sequence=st.lists(steps, min_size=1, max_size=120),
    budget_amount=st.floats(min_value=0, max_value=30),
    window=st.sampled_from([3600.0, 86400.0]),
    limits=limit_sets(),
    ratio=ratios,
)
def test_the_gated_level_spends_within_the_budget_in_every_window(
    sequence: list[Step],
    budget_amount: float,
    window: float,
    limits: policy.Limits,
    ratio: float,
) -> None:
    """As test_policy_properties' sequence test, the gate in the loop (clock jumps both ways,
    NaN and inf loads, forecasts and steps)."""
    ledger = budget.Ledger(budget=budget_amount, window=window)
    gate = levelhits.HitGate(lead_time=LEAD, window=window)
    spent: list[tuple[float, float]] = []
    for stamp, load, peak, step, recent in walked(sequence):
        if math.isfinite(load):
            gate.observe(stamp, policy.replicas_for(load, limits.threshold))
        insured = policy.floor_load(recent) * ratio
        d = policy.decide(
            load=load,
            forecast_peak=peak,
            limits=limits,
            allowance=ledger.allowance(stamp, step),
            held_load=policy.floor_load(recent),
            level_load=gate.level_load(insured),
        )
        gate.record_decision(
            stamp,
            d,
            held_load=policy.floor_load(recent),
            insured=insured,
            threshold=limits.threshold,
        )
        hours = ledger.charge(stamp, d.prewarm, step)
        if hours > 0:
            assert math.isfinite(stamp)
            spent.append((stamp, hours))
    for end, _ in spent:
        assert in_window(spent, end, window) <= budget_amount + 1e-6


def test_what_waits_for_its_outcome_stays_bounded_whatever_the_clock_does() -> None:
    gate = levelhits.HitGate(lead_time=LEAD, window=DAY)
    for i in range(3000):  # no sample ever comes: a day's records wait, no more
        gate.record(60.0 * i, reactive=REACTIVE, top=TOP, level=LEVEL)
    assert len(gate.pending) <= DAY / 60.0 + 1
    gate.record(0.0, reactive=REACTIVE, top=TOP, level=LEVEL)  # the clock went back
    assert len(gate.pending) == 1
