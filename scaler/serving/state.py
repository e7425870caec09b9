"""The in-memory state of one target: what the engine knows and the server reads.

Mutated only by the engine and its fitter; the server only reads it.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from dataclasses import dataclass, field

from models.base import Forecast, Series
from models.calibrate import CalibratedModel
from models.conformal import Calibration
from scaler.decision import budget, drift, drift_null, drift_tracker, policy, unrecorded
from scaler.decision.spec import TargetSpec
from scaler.errors import BadQuery
from scaler.serving import refit_due

SAMPLES_KEPT = 512
"""Latest samples a target keeps: a 2-hour lead time (the most) at the 30 s step is 240."""
BOOKED_KEPT = 16
"""Latest booked steps a target remembers: a refresh lasts at most its deadline, a few steps."""


@dataclass
class Backoff:
    """Failures in a row of one kind of request, and when the next may be sent: `first`
    seconds after the first failure, doubling up to `most`. Pure: no clock, no I/O."""

    failures: int = 0
    wait: float = 0.0
    """Seconds from the last failure to the next request."""
    retry_at: float = -math.inf
    error: str = ""
    """The last failure's message."""

    def failed(self, now: float, error: str, *, first: float, most: float) -> None:
        """Count a failure at `now`: the next request waits twice as long as the last did."""
        self.failures += 1
        self.error = error
        doublings = min(self.failures - 1, 64)  # past `most` long before; 2.0**1024 overflows
        self.wait = min(first * 2.0**doublings, max(first, most))
        self.retry_at = now + self.wait

    def answered(self) -> None:
        self.failures, self.wait, self.retry_at, self.error = 0, 0.0, -math.inf, ""

    def waiting(self, now: float) -> bool:
        return now < self.retry_at


@dataclass
class TargetState:
    """Everything the engine knows about one target. Mutated only by the engine."""

    spec: TargetSpec
    ledger: budget.Ledger
    last_asked: float
    registered: float = -math.inf
    """When KEDA first asked about this target (the engine's clock)."""
    poll_gap: float = 0.0
    """Seconds between KEDA's last two polls of this target (calls within SAME_POLL of each
    other are one poll: IsActive and GetMetrics)."""
    ledger_known: bool = True
    """False until the ledger has been rebuilt from the spend record; prewarm is 0 until then."""
    ledger_note: str | None = None
    """Why the rebuild failed, logged once."""
    reserve: unrecorded.Reserve | None = None
    """The unrecorded bound the rebuild booked as spent, until the record is read again to
    see what it stood for (serving/ledgeraudit.py); None once settled, or never booked."""
    spend_check: unrecorded.SpendCheck = field(default_factory=unrecorded.SpendCheck)
    """Whether the spend record holds this replica's own charges (serving/ledgeraudit.py):
    while it does not, prewarm is held at 0 (reason spend_unrecorded)."""
    history: Series | None = None
    history_partial: bool = False
    """`history` holds less than the engine's window (the warm-up read what the drift replay
    needed; scaler/serving/warmup.py `backfill` reads the rest): no fit starts until it is in."""
    model: CalibratedModel | None = None
    model_note: str = "waiting for the first fit"
    model_null: drift_null.Null | None = None
    """The drift null stored with `model` (scaler/serving/driftstate.py), when there was one."""
    model_fallback: bool = False
    """`model` was fitted while its predecessor was in drift fallback: its tracker starts there."""
    model_version: int | None = None
    """The store version `model` is (None without a store, or before one was written)."""
    fitted_at: float = -math.inf
    """When the newest scheduled fit ran: the next is due a refit period later (or later still
    while the retrain job owns the schedule: `retrain_seen`). A schedule, not a fact: a failed
    fit sets it back so the retry comes sooner (fitting.py)."""
    model_fitted_at: float = -math.inf
    """When `model` was fitted: here, or by the writer of the stored champion adopted (its
    training data's end); -inf with no model. What the fitted gauge exports."""
    retrain_seen: refit_due.JobSeen | None = None
    """The retrain job's latest sign of life for this target in the store (a champion it wrote,
    a success it recorded; champions.py): while they keep coming, the job owns the weekly
    schedule and serve's scheduled refit waits (scaler/serving/refit_due.py)."""
    refit_early: bool = False
    """A drift alarm asked for a refit on top of the schedule, which `fitted_at` keeps (as the
    replay and the weekly retrain CronJob do): the early fit does not restart the week."""
    fitting: bool = False
    fit_failures: int = 0
    """Fits in a row that broke their worker (died, timed out, out of memory): the backoff."""
    decision: policy.Decision | None = None
    predictive: policy.Decision | None = None
    """The predictive decision; equals `decision` except in shadow mode."""
    decided_at: float = -math.inf
    basis: Basis | None = None
    """What `decision` was made with, as it was then (`Basis.of`, booking.py `decide`)."""
    booked: deque[float] = field(default_factory=lambda: deque(maxlen=BOOKED_KEPT))
    """The latest steps whose answer was booked (charged, counted, logged): decided, or held
    from the last decision while the source failed (booking.py `hold`), so each is booked once. A
    step skipped while an earlier one's refresh runs is held before that refresh ends."""
    behind: float = 0.0
    """Seconds held from `decision` while the wall clock stood behind the step it was decided
    for (stepped back: an NTP correction, a VM resumed), booked as held steps, counted from its
    age at the step the clock left (held while the source failed): `staleness` at most, then
    inf (answers refused, engine `answer`); 0 at the next decision."""
    active: bool = False
    error: str | None = None
    bad_query: BadQuery | None = None
    """Set while the source says the target's query is wrong (a configuration error)."""
    bad_query_until: float = -math.inf
    """Until when a wrong query is not asked again (engine.BAD_QUERY_RETRY after the refusal)."""
    history_backoff: Backoff = field(default_factory=Backoff)
    """The history reads that failed in a row, and until when none is sent (historyreads.py)."""
    read_quantile: float | None = None
    """The quantile this step's forecast (and a drift margin) was read at: the affordable one
    before the step's charge; None when there was no forecast."""
    level_ratio: float = 1.0
    """How far this step's calibrated band reaches above its median at the read quantile
    (policy.level_ratio): the reactive floor's load times it is insured (reason level); 1
    without one."""
    drift: drift_tracker.DriftTracker | None = None
    """Forecasts awaiting their actuals, and the drift state they add up to."""
    lead_time_source: str = "metadata"
    """Where spec.lead_time comes from: `metadata`, `learned: ...` or `default: <why>`
    (leadTime: auto, serving/leadtime.py)."""
    lead_time_next: float = -math.inf
    """When leadTime: auto learns again."""
    forecast_kept: ForecastKept | None = None
    """The forecast of the latest step, kept for the steps of the same model step."""
    samples: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=SAMPLES_KEPT))
    """(time, load) of the latest steps' samples: the reactive floor and the hold are maxima
    over them, with `history`, whose buckets end at the model step (a sample of the bucket in
    progress is in no bucket yet)."""
    updated: asyncio.Event = field(default_factory=asyncio.Event)
    """Set (and replaced) when a decision or a refusal is made, to wake StreamIsActive; set for
    good when the target is dropped."""
    dropped: str | None = None
    """Why the engine no longer serves this target (engine `forget`), once it does not: the
    StreamIsActive calls on it end."""

    @property
    def budget_usable(self) -> bool:
        """The ledger may be spent from: it was read back, and the record holds what this
        replica charges (else a restart would read back nothing and start a fresh budget)."""
        return self.ledger_known and not self.spend_check.missing

    @classmethod
    def new(cls, spec: TargetSpec, *, now: float, spend_record: bool) -> TargetState:
        """A target registered at `now`, its ledger empty: known at once when there is no
        spend record to rebuild it from (`spend_record` false) or no budget to spend."""
        ledger = budget.Ledger(
            budget=spec.prewarm_budget,
            window=spec.prewarm_budget_window,
            cost_per_replica_hour=spec.cost_per_replica_hour,
            share=spec.prewarm_budget_share,
            wake_hours=budget.wake_floor(spec.max_prewarm_replicas, spec.lookahead),
        )
        return cls(
            spec=spec,
            ledger=ledger,
            last_asked=now,
            registered=now,
            ledger_known=not spend_record or spec.no_budget,
        )


@dataclass(frozen=True)
class Basis:
    """What a decision was made with besides its load: the model, the drift state, whether the
    budget was known, the quantile and lead time read, as they were when it was made. A step
    held from the decision while the source fails (booking.py `hold`) is logged and exported with
    these, not with what a fit, a drift replay or a ledger rebuild finishing meanwhile put on
    the target: the held answer is still the old model's, and the next decision made says the
    change."""

    model: CalibratedModel | None
    model_note: str
    accuracy: drift.Accuracy | None
    budget_known: bool
    read_quantile: float | None
    lead_time: float
    lookahead: float
    lead_time_source: str
    fitted_at: float = -math.inf
    """When `model` was fitted (TargetState.model_fitted_at then; -inf unknown)."""
    store_version: int | None = None
    """`model`'s version in the model store (TargetState.model_version then; None: not stored)."""

    @classmethod
    def of(cls, state: TargetState) -> Basis:
        """`state`'s basis now, for the decision just made."""
        spec, tracker = state.spec, state.drift
        return cls(
            model=state.model,
            model_note=state.model_note,
            accuracy=tracker.monitor.accuracy() if tracker is not None else None,
            budget_known=state.ledger_known,
            read_quantile=state.read_quantile,
            lead_time=spec.lead_time,
            lookahead=spec.lookahead,
            lead_time_source=state.lead_time_source,
            fitted_at=state.model_fitted_at,
            store_version=state.model_version,
        )


@dataclass(frozen=True)
class ForecastKept:
    """A forecast and its calibration table, as made from `history` by `model` for `spec`:
    the same three objects (the history is replaced, not changed, when a point comes) ask
    for the same numbers, so the 9 steps in 10 between model-step points reuse them."""

    spec: TargetSpec
    model: CalibratedModel
    history: Series
    forecast: Forecast
    table: Calibration

    def matches(self, spec: TargetSpec, model: CalibratedModel, history: Series) -> bool:
        return self.spec is spec and self.model is model and self.history is history


def forecast_steps(spec: TargetSpec, model_step: float) -> int:
    """Points of forecast a decision reads: lead time + horizon at the model step, plus one."""
    return math.ceil(spec.lookahead / model_step) + 1
