"""Forecast drift: is the forecast made lead-time ago still worth acting on? Pure: no clock, no I/O.

`DriftMonitor` is fed (time, actual, forecast_p50, forecast_upper) for forecasts made lead time
earlier, puts each error in band units (drift_null.py) and tests two windowed means against the
model's `Null` (measured by drift_measure.py; the `conservative` one until then). It owns the
fallback state machine and the accuracy it exports; drift_tracker.py pairs forecasts with their
actuals and feeds it.

State machine: OK -> FALLBACK when a window stays past its limit for a whole short window (a
moderate shift), or for CONFIRM observations when the short window is also past the conservative
null's limit (a gross shift: x3, x0.3, an outage; `Null.gross`). FALLBACK -> OK after
RELEASE_AFTER short windows in a row back within half the limit while the long window, restarted
when fallback began, is full again and within its limit (hysteresis: entering needs half an hour
of error, leaving a long window of accuracy). After a drop (load below the forecast) it also
waits for a model trained on a whole RETRAIN_AGAIN (a daily cycle) of the new regime: a refit on
mostly old data looks accurate in band units (its band is wide) while it still buys prewarm for
load that has gone. Entering fallback raises `retrain_requested`, and so does every RETRAIN_AGAIN
in it; the owner clears it with `take_retrain()` when it has scheduled the refit.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum

from models.base import DAY
from scaler.decision.drift_null import LONG_SPAN, Z_P95, Null, band_unit

WINDOW = 12
"""Observations in the rolling coverage/WAPE window (exported as metrics only)."""
CONFIRM = 2
"""Consecutive observations a window must stay past its limit to engage fallback: one window
that just touches the limit is noise at the edge of the null (it moves by one error per step);
a regime change stays past it, at the cost of one step of delay."""
STALE_AFTER = LONG_SPAN
"""Seconds without a scored actual after which the forecast is not trusted on the next one
(fallback until it earns trust back): a gap longer than the long window, such as NASA's
37-hour outage, leaves the monitor no evidence, and the load that returns after it is
rarely the load the model expects (the recovery)."""
RELEASE_AFTER = 6
"""Consecutive settled observations (`Null.settled`) needed to leave fallback."""
RETRAIN_AGAIN = DAY
"""Seconds in fallback after which another refit is requested: a refit right after a regime
change sees little of the new regime, the next one a whole daily cycle of it."""


class DriftState(StrEnum):
    OK = "ok"
    FALLBACK = "fallback"


@dataclass(frozen=True)
class Accuracy:
    """What the monitor exports as metrics."""

    state: DriftState
    coverage: float
    """Share of the last WINDOW actuals at or under the upper forecast (NaN before any)."""
    wape: float
    """Weighted absolute percentage error of the p50 over the last WINDOW actuals (NaN before)."""
    short_shift: float
    """Mean band-unit error over the short window, less its healthy mean (NaN until full)."""
    long_shift: float
    """The same over the long window."""
    threshold: float
    """Shift (band units) past which the short window trips."""
    observations: int
    """Actuals scored so far."""


@dataclass
class DriftMonitor:
    """Accuracy of the forecasts made lead time earlier, and the fallback state they imply."""

    quantile: float = 0.95
    step: float = 300.0
    """Seconds between observations (the model step): sizes the windows of the default null."""
    null: Null | None = None
    """The healthy distribution in use; None until `DriftTracker.adopt` measures one."""
    level: float = 0.0
    """Load added to actual and forecast before their log ratio (`band_units`): the model's
    residual floor once a model is adopted."""
    state: DriftState = DriftState.OK
    retrain_requested: bool = False
    observations: int = 0
    healthy_run: int = 0
    tripped_run: int = 0
    """Consecutive observations with a window past its limit (CONFIRM engages fallback)."""
    run_test: bool = True
    """Engage on a run of actuals below the band (`Null.run`, its limit read off the calibration
    backtest's runs scaled to the band: `null_from`); False is the ablation (`scaler backtest
    --no-run-test`). With `drop_margin` off it meets issue 7's injected-drop goal; the cost, on
    holidays, is in docs/policy.md "Drift"."""
    drop_margin: bool = False
    """Keep the fallback's growth margin after a drop too (the ablation, `scaler backtest
    --drop-margin`); False (the default): a fallback entered on a drop is plain reactive plus
    the paid hold (`no_margin`, read by the replay and the live engine alike), so a load that
    fell for good buys no insurance against a rebound of the level it left."""
    below_run: int = 0
    """Consecutive scored actuals below the band's lower mirror (u < -1.645)."""
    entered_at: float = -math.inf
    """Time fallback was last entered."""
    retrained_at: float = -math.inf
    """Time the newest refit was asked for in this fallback."""
    relearn_until: float = -math.inf
    """After an alarm on a drop (load below the forecast), fallback holds until the model in use
    was trained on data up to this time (a whole RETRAIN_AGAIN of the new regime)."""
    last_at: float = -math.inf
    """Time of the newest scored actual (a gap past STALE_AFTER restarts trust)."""
    fitted_until: float = -math.inf
    """End of the training data of the model whose null is in use (`DriftTracker.use`)."""
    recent: deque[tuple[bool, float, float]] = field(default_factory=lambda: deque(maxlen=WINDOW))
    """(covered, |actual - p50|, actual) of the last WINDOW observations."""
    short: deque[float] = field(default_factory=deque)
    long: deque[float] = field(default_factory=deque)
    """Band-unit errors of the newest observations, as many as each window holds."""

    @property
    def in_fallback(self) -> bool:
        return self.state is DriftState.FALLBACK

    @property
    def after_drop(self) -> bool:
        """In a fallback entered on a drop (load below the forecast: the relearn hold)."""
        return self.in_fallback and math.isfinite(self.relearn_until)

    @property
    def no_margin(self) -> bool:
        """The fallback's decision adds no growth margin (`margin.decide(after_drop=...)`): in a
        fallback entered on a drop, with `drop_margin` off."""
        return self.after_drop and not self.drop_margin

    def current_null(self) -> Null:
        return self.null if self.null is not None else Null.conservative(self.step)

    def observe(self, at: float, actual: float, p50: float, upper: float) -> None:
        """Score one actual against the forecast made for it; a missing actual is not scored,
        a non-finite forecast counts as a full miss."""
        if not math.isfinite(actual):
            return
        u = band_unit(actual, p50, upper, self.level)
        self.observations += 1
        covered = math.isfinite(upper) and actual <= upper + 1e-9
        self.recent.append((covered, abs(actual - p50) if math.isfinite(p50) else actual, actual))
        null = self.current_null()
        gap = max(STALE_AFTER, null.routine_gap)
        stale = math.isfinite(self.last_at) and at - self.last_at > gap + 1e-6
        # A gap ends a run, as in the calibration's run lengths (run_limit): a business day's
        # evening below the band and the next morning's are two runs, not one.
        contiguous = math.isfinite(self.last_at) and at - self.last_at <= 1.5 * self.step
        self.last_at = at
        self.below_run = self.below_run + 1 if u < -Z_P95 and contiguous else 0
        if stale and self.state is DriftState.OK:
            # Load came back after a gap longer than the long window (an outage, a lost
            # scraper): no evidence says the forecast still holds, so it earns trust afresh.
            self.short.clear()
            self.long.clear()
            _push(self.short, u, null.windows[0])
            _push(self.long, u, null.windows[1])
            self._enter(at, hold=False)
            return
        _push(self.short, u, null.windows[0])
        _push(self.long, u, null.windows[1])
        short, long = self._means(null)
        if self.state is DriftState.OK:
            misses = self.misses(null)
            self.tripped_run = self.tripped_run + 1 if null.tripped(short, long, misses) else 0
            gross = null.gross(short)
            if self.run_test and null.run is not None and self.below_run >= null.run:
                # A run no healthy forecast reaches at the design rate: the run is its own
                # persistence, and load below the forecast is the side that buys phantom prewarm.
                self._enter(at, hold=math.isfinite(self.fitted_until))
            elif self.tripped_run >= (CONFIRM if gross else null.windows[0]):
                # Only a forecast above the load buys phantom prewarm; a monitor told of no
                # model (fed errors directly) holds on the errors alone.
                below = (
                    short < null.means[0]
                    or (math.isfinite(long) and long < null.means[1])
                    or misses[1] > misses[0]
                )
                self._enter(at, hold=math.isfinite(self.fitted_until) and below)
            return
        self.healthy_run = self.healthy_run + 1 if null.settled(short, long) else 0
        if at - self.retrained_at >= RETRAIN_AGAIN - 1e-6:
            self.retrain_requested, self.retrained_at = True, at
        relearnt = self.fitted_until >= self.relearn_until - self.step - 1e-6
        if self.healthy_run >= RELEASE_AFTER and relearnt:
            self.state = DriftState.OK
            self.healthy_run = 0

    def _enter(self, at: float, *, hold: bool) -> None:
        """OK -> FALLBACK at `at`, asking for a refit; `hold`: after a drop, stay until a model
        trained RETRAIN_AGAIN later is in use."""
        self.state = DriftState.FALLBACK
        self.retrain_requested = True
        self.entered_at = self.retrained_at = at
        self.relearn_until = at + RETRAIN_AGAIN if hold else -math.inf
        self.healthy_run = self.tripped_run = self.below_run = 0
        self.long.clear()  # leaving needs a whole long window of fresh evidence

    def misses(self, null: Null) -> tuple[int, int]:
        """Observations of the long window above the upper band and below its mirror image;
        (0, 0) while it is not full."""
        if len(self.long) < null.windows[1]:
            return 0, 0
        return sum(1 for u in self.long if u > Z_P95), sum(1 for u in self.long if u < -Z_P95)

    def take_retrain(self) -> bool:
        """True when a refit is due (on entering fallback, then every RETRAIN_AGAIN points in
        it); clears the request, so the owner refits once per request."""
        wanted, self.retrain_requested = self.retrain_requested, False
        return wanted

    def coverage(self) -> float:
        if not self.recent:
            return math.nan
        return sum(1 for covered, _, _ in self.recent if covered) / len(self.recent)

    def wape(self) -> float:
        total = sum(actual for _, _, actual in self.recent)
        if not self.recent or total <= 0:
            return math.nan
        return sum(err for _, err, _ in self.recent) / total

    def accuracy(self) -> Accuracy:
        null = self.current_null()
        short, long = self._means(null)
        return Accuracy(
            state=self.state,
            coverage=self.coverage(),
            wape=self.wape(),
            short_shift=short - null.means[0],
            long_shift=long - null.means[1],
            threshold=null.limits[0],
            observations=self.observations,
        )

    def _means(self, null: Null) -> tuple[float, float]:
        """Mean of each window, NaN while it is not full."""
        return tuple(  # type: ignore[return-value]
            sum(w) / len(w) if len(w) >= width else math.nan
            for w, width in zip((self.short, self.long), null.windows, strict=True)
        )


def _push(window: deque[float], value: float, width: int) -> None:
    window.append(value)
    while len(window) > width:
        window.popleft()
