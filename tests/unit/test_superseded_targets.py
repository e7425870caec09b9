"""An edit of a trigger's metadata is a new target (a new fingerprint); the old one was still
decided for, logged and billed (`scaler_gpu_replica_hours_total`) until --idle-expiry, an hour
by default, although KEDA never asked about it again. Now it is dropped once two of KEDA's
polls have come without it, and two live triggers alike in ScaledObject and metric name are
both kept."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from scaler.clock import ManualClock
from scaler.decision import spec
from scaler.decision.spec import TargetSpec
from scaler.errors import Unavailable
from scaler.record import timeline
from scaler.settings import EngineSettings
from tests.unit import test_held_answers as held
from tests.unit.test_drift_rebuild import FIT_AT, STEP, SeriesSource, engine_with, series

BASE = {"query": "load", "threshold": "20", "model": "seasonal"}


def trigger(**meta: str) -> TargetSpec:
    return spec.parse("gpu", "llm", BASE | meta)


Poll = list[tuple[float, TargetSpec]]
"""KEDA's calls of one poll: (seconds after the poll's start, the trigger asked about)."""


def served(polls: list[list[TargetSpec]] | list[Poll], tick_at: float = 0.5) -> dict[str, float]:
    """The engine's targets after KEDA's polls, one a step, each with when it was registered
    (a target dropped and asked again is registered anew); the engine's step runs `tick_at`
    seconds into each poll, between calls at other offsets."""
    clock = ManualClock(FIT_AT)
    settings = EngineSettings(step=STEP, model_step=STEP, fit_workers=0)
    engine = engine_with(SeriesSource(series(), clock), clock, settings)

    async def serve() -> None:
        for i, poll in enumerate(polls):
            start = FIT_AT + i * STEP
            calls = [c if isinstance(c, tuple) else (0.0, c) for c in poll]
            for offset, target in sorted(c for c in calls if c[0] < tick_at):
                clock.t = start + offset
                engine.ensure(target)
            clock.t = start + tick_at
            await engine.tick(clock.t)
            for offset, target in sorted(c for c in calls if c[0] >= tick_at):
                clock.t = start + offset
                engine.ensure(target)

    asyncio.run(serve())
    registered = {key: state.registered for key, state in engine.targets.items()}
    engine.close()
    return registered


def test_an_edited_trigger_replaces_the_old_one_after_two_polls_without_it() -> None:
    shadow = trigger(mode="shadow", metricName="llm-replicas")
    active = trigger(mode="active", metricName="llm-replicas")
    before = [[shadow], [shadow]]
    assert served([*before, [active]]).keys() == {shadow.key, active.key}  # one poll without
    assert served([*before, [active], [active]]).keys() == {active.key}


def test_an_edit_without_a_metric_name_replaces_it_too() -> None:
    old, new = trigger(), trigger(threshold="30")
    assert old.metric_name != new.metric_name  # the default name holds the fingerprint
    assert served([[old], [old], [new], [new]]).keys() == {new.key}


def test_two_live_triggers_alike_in_scaled_object_and_metric_are_both_kept() -> None:
    one = trigger(metricName="llm-replicas")
    two = trigger(metricName="llm-replicas", threshold="30")
    # `two` appears just after `one` was asked; from then on KEDA asks `one` just after the
    # engine's step and `two` just before it, so at every step `one` was last asked before
    # `two` was first, and `two` has been asked since.
    first: Poll = [(0.1, one), (0.2, two)]
    poll: Poll = [(0.2, two), (0.8, one)]
    registered = served([[one], [one], first, *[poll] * 6])
    assert registered == {one.key: FIT_AT, two.key: FIT_AT + 2 * STEP + 0.2}  # never dropped
    other = trigger(metricName="llm-queue", threshold="30")  # another trigger, not an edit
    assert served([[one], [other], [other], [other]]).keys() == {one.key, other.key}


def test_an_edited_trigger_answers_reactively_from_the_old_ones_sample_until_its_refresh(
    tmp_path: Path,
) -> None:
    """The first GetMetrics of an edited trigger was UNAVAILABLE (KEDA's fallback) until the
    new target's first refresh had read its ledger and weeks of history. Now the step it comes
    in is decided from the newest sample of the trigger it replaces, which reads the same query
    from the same Prometheus: reactive, at its own threshold, with no prewarm, and booked and
    logged as such; its first refresh is the next step's. A changed query waits as before."""
    log = tmp_path / "d.jsonl"
    engine, _, clock, _ = held.make(log)
    old = trigger(metricName="llm-replicas", threshold="10", mode="shadow")
    new = trigger(metricName="llm-replicas", threshold="30")
    requery = trigger(metricName="llm-replicas", threshold="30", query="other")

    async def run() -> None:
        engine.ensure(old)
        await engine.tick(held.NOW)  # the newest sample is 200: 20 replicas at threshold 10
        clock.t = held.NOW + 5.0  # KEDA asks about the edited trigger
        state, other = engine.ensure(new), engine.ensure(requery)
        engine._launch(held.NOW)  # the engine's loop, woken by the new targets
        assert engine.answer(state).desired == 7  # at once: ceil(200 / 30), answered
        assert state.predictive is not None and state.predictive.prewarm == 0
        assert state.predictive.reason.value == "no_model"
        assert state.history is None and new.key not in engine._running  # read next step
        with pytest.raises(Unavailable, match="warming up"):
            engine.answer(other)  # another query: its own refresh first, as before
        await asyncio.gather(*engine._running.values())
        clock.t = held.NOW + held.STEP
        for target in (old, new, requery):
            engine.ensure(target)
        await engine.tick(clock.t)
        assert state.history is not None and state.decided_at == clock.t

    asyncio.run(run())
    engine.close()
    state = engine.targets[new.key]
    records = [json.loads(line) for line in log.read_text().splitlines()]
    first = next(r for r in records if r["target"] == new.key)
    assert (first["event"], first["at"], first["load"]) == ("start", held.NOW, 200.0)
    assert (first["desired"], first["prewarm"], first["reason"]) == (7, 0, "no_model")
    mine = [r for r in records if r["target"] == new.key]
    spans, gaps = timeline.spans(mine)
    assert timeline.totals(spans).replica_hours == pytest.approx(held.counted(engine, state))
    assert gaps == []
