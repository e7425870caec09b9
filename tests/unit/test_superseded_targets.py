"""An edit of a trigger's metadata is a new target (a new fingerprint); the old one was still
decided for, logged and billed (`scaler_gpu_replica_hours_total`) until --idle-expiry, an hour
by default, although KEDA never asked about it again. Now it is dropped once two of KEDA's
polls have come without it, and two live triggers alike in ScaledObject and metric name are
both kept."""

from __future__ import annotations

import asyncio

from scaler.clock import ManualClock
from scaler.decision import spec
from scaler.decision.spec import TargetSpec
from scaler.settings import EngineSettings
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
