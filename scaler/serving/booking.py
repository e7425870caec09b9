"""A step's answer for one target: decided, held, and published, with what each books.

`Booking.decide` turns a step's load and forecast peak into the decision KEDA is answered
(policy.decide, or margin.decide in drift fallback; shadow mode serves the reactive one) and
charges its prewarm and reactive replica-hours to the target's ledger. `Booking.hold` books a
step whose refresh failed, or that the clock stepped back behind, from the last decision while
it is still answered (its prewarm cut to what the budget allows now), and once the answers stop,
one `unanswered` line. `Booking.from_predecessor` decides a trigger's edited target from the
sample of the one it replaces until its first refresh. Each publishes
the step: its gauges and counters (telemetry.py, target_metrics.py) and its decision log line.
The engine (scaler/serving/engine.py) calls them, on the event loop, once per target and step.

Must not: read a source, fit a model, or wait: everything a decision needs is on the target's
state when it is called.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Mapping

from scaler.decision import drift, margin, policy
from scaler.decision import spec as specs
from scaler.decision.spec import TargetSpec
from scaler.record import decisionrecord
from scaler.record.decisionlog import DecisionLog
from scaler.serving import succession
from scaler.serving.state import Basis, TargetState
from scaler.serving.telemetry import Telemetry
from scaler.settings import EngineSettings

logger = logging.getLogger(__name__)


def _limits(spec: TargetSpec) -> policy.Limits:
    return policy.Limits(
        threshold=spec.threshold,
        min_replicas=spec.min_replicas,
        max_replicas=spec.max_replicas,
        max_prewarm_replicas=spec.max_prewarm_replicas,
        no_budget=spec.no_budget,
    )


class Booking:
    """Decides, holds and publishes the steps of one engine's targets (`settings`: the step and
    the staleness bound), exporting them to `telemetry` and logging them to `log`."""

    def __init__(self, settings: EngineSettings, telemetry: Telemetry, log: DecisionLog) -> None:
        self.settings, self.telemetry, self.log = settings, telemetry, log

    def decide(
        self,
        state: TargetState,
        *,
        now: float,
        load: float,
        peak: float | None,
        fallback: policy.Reason | None,
    ) -> None:
        """Decide `state`'s answer for step `now` from its `load` and forecast `peak` (None:
        none, `fallback` says why), charge it to the ledger, publish it and wake the
        StreamIsActive calls waiting on the target."""
        spec, step = state.spec, self.settings.step
        limits = _limits(spec)
        # The reactive floor: the highest load of the HPA's stabilisation window (free); the
        # highest of the last lead time is held past it as paid prewarm (policy.decide).
        # Both read the latest steps' samples too: the bucket in progress is in no history yet.
        state.samples.append((now, load))
        window = min(policy.STABILISATION, spec.lead_time)
        recent = [v for t, v in state.samples if t > now - window]
        held_recent = [v for t, v in state.samples if t > now - spec.lead_time]
        if state.history is not None:
            held_recent += state.history.since(now - spec.lead_time).values.tolist()
            recent += state.history.since(now - window).values.tolist()
        floor, held = policy.floor_load(recent), policy.floor_load(held_recent)
        allowance = state.ledger.allowance(now, step) if state.budget_usable else 0
        quantile = state.read_quantile
        if fallback is policy.Reason.DRIFT_FALLBACK and state.history is not None:
            assert quantile is not None  # drift is only judged on a forecast
            # reactive plus the recent-growth margin; with the monitor's drop_margin off,
            # plain reactive plus the paid hold after a drop (as the replay: margin.decide)
            predictive = margin.decide(
                load=floor,
                recent=state.history.since(now - margin.LOOKBACK).values,
                step=state.history.step,
                lead_time=spec.lead_time,
                quantile=quantile,
                limits=limits,
                allowance=allowance,
                held_load=held,
                after_drop=state.drift is not None and state.drift.monitor.no_margin,
            )
        else:
            predictive = policy.decide(
                load=floor,
                forecast_peak=peak,
                limits=limits,
                allowance=allowance,
                fallback=fallback,
                held_load=held,
                level_load=floor * state.level_ratio,
            )
        cost = state.ledger.charge(now, predictive.prewarm, step)
        used = state.ledger.record_reactive(now, limits.clamp(predictive.reactive), step)
        self.telemetry.reactive_spent.labels(spec.key).inc(used)
        served = predictive
        if spec.mode == "shadow":
            served = policy.decide(
                load=floor,
                forecast_peak=None,
                limits=limits,
                allowance=0,
                fallback=policy.Reason.REACTIVE,
            )
        forecast_wants = peak is not None and fallback is None and spec.mode == "active"
        active = load > spec.activation_threshold or (
            forecast_wants and peak is not None and peak > spec.activation_threshold
        )
        state.decision, state.predictive = served, predictive
        state.decided_at, state.active, state.behind = now, active, 0.0
        state.basis = Basis.of(state)  # a step held from it is logged with it (`hold`)
        state.booked.append(now)
        self._publish(state, now=now, cost=cost, load=load)
        state.updated.set()  # wakes StreamIsActive; it decides what to send
        state.updated = asyncio.Event()

    def from_predecessor(
        self, targets: Mapping[str, TargetState], state: TargetState, now: float
    ) -> bool:
        """Decide a new target for step `now` from another of `targets` of its trigger, the one
        an edit of its metadata replaces, reading the same load and decided at `now`
        (`succession.predecessor_sample`): reactive from that newest sample, with no forecast
        and no prewarm (reason no_model, or budget_unknown), booked and logged as any decision.
        KEDA is answered at once instead of UNAVAILABLE until the first refresh has read the
        new target's ledger and history, which is the next step's; a changed query, or a
        predecessor without this step's sample, waits for that refresh as before. False when
        there is no such predecessor (the engine refreshes the target as usual)."""
        if state.decision is not None:  # decided in the warm-up: refreshed as usual
            return False
        found = succession.predecessor_sample(targets, state, now)
        if found is None:
            return False
        other, load = found
        reason = policy.Reason.NO_MODEL if state.ledger_known else policy.Reason.BUDGET_UNKNOWN
        self.decide(state, now=now, load=load, peak=None, fallback=reason)
        logger.info(
            "%s: answered reactively from the newest sample of %s (the same trigger and query) "
            "until its first refresh",
            state.spec.key,
            other.spec.key,
        )
        return True

    def hold(self, state: TargetState, now: float, *, behind: float | None = None) -> None:
        """A refresh failed: KEDA is still answered the last good decision until it is
        `staleness` old (engine `answer`). Book the step as a decided one, so the ledger, the
        spend counters and the decision log keep to what KEDA was answered: its prewarm charged
        (cut to what the budget allows now, policy.held), its replicas counted up to when the
        answers stop, a line logged if the cut changed it. Once they stop, one `unanswered`
        line.

        With `behind` (the step tried last, which the wall clock stepped back behind), this
        step cannot be decided (engine `_launch`): it is held the same way, its age the seconds
        held since (`state.behind`: the decision's stamp is in the future), from its age at
        `behind` (held while its source failed, or refused already), and booked even when its
        stamp was booked before the clock went back. Once the clock is past that step, a step
        held (its source failing) counts the seconds held behind it in the decision's age."""
        decision, predictive, spec = state.decision, state.predictive, state.spec
        back = behind is not None
        if decision is None or predictive is None or (now in state.booked and not back):
            return  # nothing answered yet, or this step is booked
        if state.bad_query is not None:
            return  # answered INVALID_ARGUMENT (engine `answer`); closed in the log at the refusal
        if behind is not None and state.behind == 0.0:  # the first step behind it
            state.behind = max(0.0, behind - state.decided_at)
        age = state.behind if back else now - state.decided_at + state.behind
        served_until = now - age + self.settings.staleness
        if now >= served_until:
            staleness = specs.format_duration(self.settings.staleness)
            cause = "the clock stepped back" if back else state.error or "engine stalled"
            self.log.unanswered(
                spec.key, at=served_until, why=f"no fresh decision for {staleness}: {cause}"
            )
            if back:
                state.behind = math.inf  # refused until the clock passes the decision's step
            return
        span = min(self.settings.step, served_until - now)
        if back:
            state.behind += span
        limits = _limits(spec)
        allowance = state.ledger.allowance(now, span) if state.budget_usable else 0
        predictive = policy.held(predictive, limits=limits, allowance=allowance)
        if spec.mode == "active":
            decision = predictive
        state.decision, state.predictive = decision, predictive
        cost = state.ledger.charge(now, predictive.prewarm, span)
        used = state.ledger.record_reactive(now, limits.clamp(predictive.reactive), span)
        self.telemetry.reactive_spent.labels(spec.key).inc(used)
        state.booked.append(now)
        self._publish(state, now=now, cost=cost, load=decision.load, booked=span)

    def _publish(
        self, state: TargetState, *, now: float, cost: float, load: float, booked: float = 0.0
    ) -> None:
        """Export the step's decision, and log it; `booked` seconds of it answered (a step).
        Its model, drift state and budget's knowledge are the decision's (`state.basis`), as
        the log line's: a held step's, not what a fit or a rebuild put on the target since."""
        spec, d, p, basis = state.spec, state.decision, state.predictive, state.basis
        assert d is not None and p is not None and basis is not None
        t, key = self.telemetry, spec.key
        t.load.labels(key).set(d.load)
        t.forecast_peak.labels(key).set(p.forecast_peak)
        t.desired.labels(key).set(d.desired)
        t.predictive.labels(key).set(p.desired)
        t.reactive.labels(key).set(d.reactive)
        t.prewarm.labels(key).set(p.prewarm)
        # Shadow spend never reached KEDA: it must not count against the real budget when the
        # ledger is rebuilt from the spend counter after a switch to active. A shadow trigger's
        # own ledger is rebuilt from its counter (sources/prometheus_ledger.py `_counter`).
        spent = t.prewarm_spent if spec.mode == "active" else t.shadow_prewarm
        spent.labels(key).inc(cost)
        if cost > 0:  # to be found in the shared record (ledgeraudit.py)
            state.spend_check.charged(now)
        t.budget_remaining.labels(key).set(state.ledger.remaining(now) if basis.budget_known else 0)
        t.active.labels(key).set(1 if state.active else 0)
        t.decisions.labels(p.reason.value).inc()
        accuracy = basis.accuracy
        if accuracy is not None:
            t.drift_fallback.labels(key).set(
                1 if accuracy.state is drift.DriftState.FALLBACK else 0
            )
            t.forecast_coverage.labels(key).set(accuracy.coverage)
            t.forecast_wape.labels(key).set(accuracy.wape)
        t.per_target.publish(state, now=now, step=booked or self.settings.step)
        self.log.write(
            decisionrecord.build(state, now=now, load=load, step=self.settings.step, cost=cost)
        )
