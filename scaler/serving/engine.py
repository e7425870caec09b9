"""The background engine: per target, source -> model -> policy -> in-memory state.

Every `step` seconds (stamped on multiples of the step, so replicas agree) each target is
refreshed: new samples are fetched from its source, a forecast is made from its calibrated
model and scored for drift (scaler/serving/forecaststep.py), the policy decides, the ledger is
charged, and the decision is published for the server (scaler/serving/booking.py, which also
holds a step whose refresh failed).
The history and the forecast change only at a model-step point: between two, a refresh sends
only its instant query and reuses the forecast it kept (`ForecastKept`), the same numbers.
Models are fitted off this loop (a process pool, or a thread when fit_workers is 0) and refitted
every `refit_every`. RPCs only ever read `TargetState`; nothing here runs on the request path.

A failing target never stops the others: its error is kept on its state and logged once per
change (scaler/serving/problems.py), and its answers turn UNAVAILABLE once its data is older
than `staleness` (INVALID_ARGUMENT at once when the source says its query is wrong, BadQuery;
scaler/serving/answers.py). Each target's refresh is a task of its own with a deadline,
and its source calls go through its endpoint's bulkhead and breaker (scaler.serving.isolation): a
silent Prometheus holds neither the step nor other endpoints' targets, and a new target is
refreshed as soon as it registers (an edited trigger reading the query of the target it replaces
is first decided reactively from that one's sample of the step, and refreshed the next step:
booking.py `from_predecessor`). A refresh still running at the next step is not started twice.
A target whose history reads fail at the transport while the endpoint's breaker stays closed
backs off on its own, the steps between held with nothing sent (scaler/serving/historyreads.py).

A target seen for the first time has its prewarm ledger rebuilt from the spend counter every
replica exports (scaler/serving/ledgerrebuild.py); until that has succeeded its prewarm
allowance is 0 (reason budget_unknown). The record is read again later for it
(scaler/serving/ledgeraudit.py). Without a spend record (file source) or with a zero
budget the ledger starts empty and known.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from functools import partial

from scaler.clock import Clock, quantise
from scaler.decision import budget, quoting
from scaler.decision.spec import TargetSpec
from scaler.errors import BadQuery, TooManyTargets, Unavailable
from scaler.record.decisionlog import DecisionLog
from scaler.serving import (
    answers,
    booking,
    clockwatch,
    fitting,
    forecaststep,
    historyreads,
    isolation,
    leadtime,
    ledgeraudit,
    ledgerrebuild,
    problems,
    succession,
    warmup,
)
from scaler.serving.state import TargetState
from scaler.serving.telemetry import Telemetry
from scaler.settings import EngineSettings
from scaler.sources.base import Source, SpendRecord

logger = logging.getLogger(__name__)

BAD_QUERY_RETRY = 300.0
"""Seconds a query the source refused (BadQuery) waits before it is asked again: its answer
stays INVALID_ARGUMENT meanwhile. Each step it was re-sent, and one whose answer is too large
(hundreds of series) was downloaded again each time. An edit of the metadata is a new target,
asked at once; a refusal that goes away by itself (a series count that falls) is seen within."""
DEFAULT_ENDPOINT = "default"
"""The endpoint name of targets without `serverAddress` (the default Prometheus / the file)."""


DROPPED = {
    "idle": "no call asked about it for --idle-expiry",
    "superseded": "an edit of its trigger replaced it (a newer target of the same ScaledObject "
    "and metric name is asked instead)",
    "deleted": "its ScaledObject, or its trigger naming this scaler, left the cluster",
}
"""Why `forget` dropped a target, by its `why`: said to the streams it ends."""

SAME_POLL = 1.0
"""Calls about one target less than this many seconds apart are one poll of KEDA's."""


class Engine:
    def __init__(
        self,
        *,
        settings: EngineSettings,
        source_for: Callable[[TargetSpec], Source],
        clock: Clock,
        telemetry: Telemetry,
        decision_log: DecisionLog | None = None,
        spend_record: SpendRecord | None = None,
    ) -> None:
        self.settings = settings
        self.source_for = source_for
        self.spend_record = spend_record
        self.clock = clock
        self.telemetry = telemetry
        self.booking = booking.Booking(settings, telemetry, decision_log or DecisionLog(None))
        """Decides, holds and publishes each target's steps (booking.py)."""
        self.targets: dict[str, TargetState] = {}
        self.refreshed_once = False
        self._wake = asyncio.Event()
        self.isolation = isolation.Isolation(
            isolation.Limits.for_step(
                step=settings.step,
                staleness=settings.staleness,
                concurrency=settings.concurrency,
            ),
            now=clock.now,
        )
        self._running: dict[str, asyncio.Task[None]] = {}
        """The refresh in flight of each target key."""
        self._tried: dict[str, float] = {}
        """The step each target key was last refreshed for."""
        self._held_behind: dict[str, float] = {}
        """The step each target key was last held for while the clock stood behind `_tried`."""
        self.clock_watch = clockwatch.ClockWatch(settings.staleness)
        """Says when the wall clock steps back behind the latest step (clockwatch.py)."""
        self.problems = problems.Problems(telemetry)
        """Each failing target's problem, logged once per change (problems.py)."""
        self.fitter = fitting.Fitter(settings, telemetry)
        self.history_reads = historyreads.HistoryReads(
            settings, clock, past_deadline=self._past_deadline
        )
        """Each target's history window and the backoff of its failing reads (warm-up's too)."""
        self.pinned: set[str] = set()
        """Target keys the cluster says exist (serve's discovery): never idle-expired, dropped
        by `forget` when their ScaledObject goes."""
        self.pod_selectors: leadtime.PodSelectors | None = None
        """Where leadTime: auto finds a target's pods without podSelector (kube/selectors.py)."""
        self.ledgers = (
            None
            if spend_record is None
            else ledgerrebuild.Rebuilds(spend_record, self.isolation, settings=settings)
        )
        """Rebuilds the ledger of each target seen for the first time (ledgerrebuild.py)."""
        self.audits = (
            None
            if spend_record is None
            else ledgeraudit.Audits(
                spend_record, self.isolation, settings=settings, telemetry=telemetry
            )
        )
        """Reads a rebuilt ledger against the record again (ledgeraudit.py)."""

    @property
    def decision_log(self) -> DecisionLog:
        """Where each step's answer is logged: the booking's, set only at construction."""
        return self.booking.log

    # ---- what the server calls -------------------------------------------------------------
    def ensure(self, spec: TargetSpec) -> TargetState:
        """The state of `spec`'s target, registering it (and waking the loop) when new."""
        state = self.targets.get(spec.key)
        now = self.clock.now()
        if state is None:
            if len(self.targets) >= self.settings.max_targets:
                raise TooManyTargets(
                    f"{spec.label}: this scaler already serves {len(self.targets)} targets, its "
                    "--max-targets; raise it (with about 0.5 MiB of memory a target), or spread "
                    "the ScaledObjects over more scaler Deployments. KEDA's fallback applies "
                    "meanwhile; a target no call asks about for --idle-expiry frees its place"
                )
            state = TargetState.new(spec, now=now, spend_record=self.spend_record is not None)
            self.targets[spec.key] = state
            self.telemetry.targets.set(len(self.targets))
            # the key's fingerprint names the query: the line need not carry 4 KB of it
            logger.info("new target %s (%s)", spec.key, quoting.echo_query(spec.query))
            hint = budget.share_hint(
                "prewarmBudget",
                spec.prewarm_budget,
                share=spec.prewarm_budget_share,
                cost=spec.cost_per_replica_hour,
            )
            if hint is not None:  # accepted, as it may be meant, but said once per target
                logger.warning("%s: %s", spec.key, hint)
            self._wake.set()
        if now - state.last_asked > SAME_POLL:
            state.poll_gap = now - state.last_asked
        state.last_asked = now
        return state

    def answer(self, state: TargetState) -> answers.Answer:
        """The current answer for a target (answers.py: BadQuery, Unavailable when stale)."""
        now = self.clock.now()
        return answers.answer(state, now=now, staleness=self.settings.staleness)

    # ---- the loop ----------------------------------------------------------------------------
    async def run(self) -> None:
        """Refresh every target each step until cancelled; a new target wakes the loop, which
        starts its refresh without waiting for the others'."""
        self.fitter.start()
        first = True
        try:
            while True:
                now = quantise(self.clock.now(), self.settings.step)
                self._wake.clear()  # before launching: a target registered after wakes us
                started = self._launch(now)
                if first:
                    first = False
                    round_one = asyncio.gather(*started, return_exceptions=True)
                    round_one.add_done_callback(lambda _: setattr(self, "refreshed_once", True))
                next_at = now + self.settings.step
                sleep = asyncio.ensure_future(self.clock.sleep(next_at - self.clock.now()))
                wake = asyncio.ensure_future(self._wake.wait())
                await asyncio.wait({sleep, wake}, return_when=asyncio.FIRST_COMPLETED)
                for pending in (sleep, wake):
                    pending.cancel()
        finally:
            for task in list(self._running.values()):
                task.cancel()
            self.close()

    async def tick(self, now: float) -> None:
        """One step for every target: expire idle ones, refresh the rest concurrently, and wait
        for every refresh in flight (each ends by its deadline)."""
        self._launch(now)
        await asyncio.gather(*self._running.values())
        self.refreshed_once = True

    def _launch(self, now: float) -> list[asyncio.Task[None]]:
        """Start the refresh of every target not yet tried for step `now` and not in flight."""
        self._expire_idle()
        started = []
        self.clock_watch.note(now)
        for key, state in self.targets.items():
            tried = self._tried.get(key, -math.inf)
            if tried > now and self._held_behind.get(key) != now:
                self._held_behind[key] = now  # the clock stepped back: booked once a step
                self.booking.hold(state, now, behind=tried)
            if tried >= now:
                continue
            if key in self._running:  # still refreshing an earlier step: this one is held
                self._tried[key] = now  # (booked once; the next refresh is the next step's)
                self.booking.hold(state, now)
                continue
            if key not in self._tried and self.booking.from_predecessor(self.targets, state, now):
                self._tried[key] = now  # its first refresh is the next step's
                continue
            self._tried[key] = now
            task = asyncio.create_task(self._guarded_refresh(state, now), name=f"refresh {key}")
            task.add_done_callback(partial(self._finished, key))
            self._running[key] = task
            started.append(task)
        return started

    def _finished(self, key: str, task: asyncio.Task[None]) -> None:
        if self._running.get(key) is task:
            del self._running[key]

    def _endpoint(self, spec: TargetSpec) -> str:
        return spec.server_address.rstrip("/") if spec.server_address else DEFAULT_ENDPOINT

    def close(self) -> None:
        self.fitter.close()
        self.decision_log.close()

    # ---- one target --------------------------------------------------------------------------
    async def _guarded_refresh(self, state: TargetState, now: float, *, hold: bool = True) -> None:
        """Refresh `state` for step `now`; a failure keeps its error and, with `hold` (not in
        the warm-up, before any answer is served), books the step as held (booking.py `hold`)."""
        if state.decided_at >= now or now < state.bad_query_until:
            return
        deadline = self.settings.refresh_deadline
        try:
            async with asyncio.timeout(deadline):
                await self.refresh(state, now)
            state.error, state.bad_query = None, None
            self.problems.solved(state.spec.key)
            return
        except TimeoutError:
            self.problems.note(state, "Deadline", self._past_deadline(state.spec))
        except BadQuery as exc:
            state.bad_query, state.bad_query_until = exc, now + BAD_QUERY_RETRY
            self.problems.note(state, type(exc).__name__, str(exc))
            if state.decision is not None:  # answers refused from now (or since they went stale)
                stale = state.decided_at + self.settings.staleness
                self.decision_log.unanswered(state.spec.key, at=min(now, stale), why=str(exc))
            state.updated.set()  # a waiting StreamIsActive answers with the error
            state.updated = asyncio.Event()
            return
        except Exception as exc:  # one broken target must not stop the others
            self.problems.note_failure(state, exc)
        if hold:
            self.booking.hold(state, now)

    def _past_deadline(self, spec: TargetSpec) -> str:
        deadline = self.settings.refresh_deadline
        return (
            f"{self._endpoint(spec)}: refresh took longer than its {deadline:g}s deadline "
            f"({isolation.DEADLINE})"
        )

    async def refresh(self, state: TargetState, now: float) -> None:
        spec, source = state.spec, self.source_for(state.spec)
        if not state.ledger_known:
            await self._rebuild_ledger(state, now)
        elif self.audits is not None:
            await self.audits.follow(state, now)
        endpoint = self._endpoint(spec)
        reads = self.history_reads
        if reads.due(state, now):  # 9 steps in 10 the model step holds no new point
            with reads.reading(state):
                state.history = await self.isolation.run(
                    endpoint, partial(reads.updated, source, state, now)
                )
        sample = await self.isolation.run(endpoint, partial(source.latest, spec, at=now))
        if now - sample.at > self.settings.staleness:
            raise Unavailable(f"{spec.label}: newest sample is {now - sample.at:.0f}s old")
        await leadtime.keep_learned(
            state,
            now,
            source=source,
            run=partial(self.isolation.run, endpoint),
            telemetry=self.telemetry,
            selectors=self.pod_selectors,
        )
        if not state.history_partial:  # the warm-up's backfill first (warmup.py)
            self.fitter.maybe_fit(state, now)
        await self._adopt_null(state)
        peak, fallback = forecaststep.forecast_peak(
            state, now, model_step=self.settings.model_step, telemetry=self.telemetry
        )
        if not state.budget_usable:
            fallback = ledgeraudit.held_reason(state)
        self.booking.decide(state, now=now, load=sample.value, peak=peak, fallback=fallback)

    async def _rebuild_ledger(self, state: TargetState, now: float) -> None:
        """Rebuild `state`'s ledger from the spend record, read with the others not known yet."""
        assert self.ledgers is not None  # a ledger with no record to rebuild from starts known
        waiting = (s.spec for s in self.targets.values() if not s.ledger_known)
        await self.ledgers.rebuild(state, now, waiting=waiting)

    async def _adopt_null(self, state: TargetState) -> None:
        """For a new model, rebuild the drift tracker from the model's fit (its null, a backtest
        of ~1 s unless stored with it, and a replay since the fit) in a thread, once per model:
        on the event loop it would stall every RPC and every other target's refresh. Every
        replica then holds the same tracker (scaler/serving/driftstate.py)."""
        model, history = state.model, state.history
        if model is None or history is None:
            return
        if not forecaststep.tracker(state, self.settings.model_step).needs(model):
            return
        await warmup.adopt(self, state)

    def forget(self, key: str, why: str = "idle") -> None:
        """Stop refreshing target `key` (`why`: a key of DROPPED), and end the StreamIsActive
        calls waiting on it: nothing would wake them again."""
        self.pinned.discard(key)
        state = self.targets.pop(key, None)
        if state is None:
            return
        state.dropped = DROPPED[why]
        state.updated.set()
        running = self._running.pop(key, None)
        if running is not None:  # it would publish the gauges forgotten below
            running.cancel()
        self._tried.pop(key, None)
        self._held_behind.pop(key, None)
        self.problems.solved(key)
        self.decision_log.stop(key)  # else the same key registered later continues its line
        self.telemetry.forget(key)
        self.telemetry.targets.set(len(self.targets))
        logger.info("dropped %s target %s", why, key)

    def _expire_idle(self) -> None:
        now = self.clock.now()
        for key, state in list(self.targets.items()):
            if key not in self.pinned and now - state.last_asked > self.settings.idle_expiry:
                self.forget(key)
        for key in succession.superseded(
            self.targets, self.pinned, now=now, step=self.settings.step
        ):
            self.forget(key, "superseded")
        self.telemetry.targets.set(len(self.targets))
        used = {self._endpoint(s.spec) for s in self.targets.values()}
        used.add(ledgerrebuild.SPEND_RECORD)
        self.isolation.forget(used)
