"""Forecast drift: is the forecast made lead-time ago still worth acting on? Pure: no clock, no I/O.

`DriftMonitor` is fed (time, actual, forecast_p50, forecast_upper) for forecasts made lead time
earlier. Each error is put in *band-sigmas* on a log scale (`band_units`): log(actual / p50) over
log(upper / p50) / 1.645, so a healthy point has a spread of about 1 and load x3 or x0.3 are
errors of the same size. Two windowed means are tested, a short one (SHORT_SPAN: a step change
engages fallback within half an hour) and a long one (LONG_SPAN: a sustained moderate bias), each
against the distribution it has on the model's own out-of-sample errors.

That distribution (`Null`) is measured by `null_for` on the model's calibration backtest: the
same rolling-origin forecasts models.calibrate grades the model on, over the week before its fit.
Forecast errors stay autocorrelated for hours, so the spread of a windowed mean is read off the
windowed means of that backtest itself (autocorrelation included), never derived from sigma/sqrt(n)
as for independent noise. Each window's limit is set so that the chance a healthy window passes
it, summed over both windows and both sides, is ALARMS_PER_WEEK per week of observations
(Gaussian, on a robust spread: `null_from`). An alarm episode starts with
such an exceedance, so that is an upper bound on the episode rate; `tests/unit/test_drift.py`
measures it on AR(1) errors with phi 0.9. Without a measured null (no model yet, too short a
backtest) the `conservative` one assumes errors perfectly correlated across the window: a
windowed mean as spread out as a single error, with the Gaussian limit for the design rate.

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

`DriftTracker` keeps the forecasts made at each origin until their actuals arrive, and feeds the
monitor the one made lead time before each actual: the live engine and the replay both use it.
It also swaps in the null of each new model (`adopt`). Everything is a function of the model
artefact and the series, so scaler replicas fed the same data agree.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum
from statistics import NormalDist

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from models.base import DAY, HOUR, WEEK, FloatArray, Forecast, Series
from models.calibrate import CalibratedModel
from models.conformal import rolling

WINDOW = 12
"""Observations in the rolling coverage/WAPE window (exported as metrics only)."""
SHORT_SPAN = 0.5 * HOUR
"""Seconds the short window spans: a step change (load x3, x0.3, an outage) must engage fallback
within half an hour, so its evidence is weighed over that long."""
LONG_SPAN = 6 * HOUR
"""Seconds the long window spans: a bias too small to trip the short window but kept up for
hours (a slow drift of the level) shows up here."""
MIN_WINDOW = 2
"""Fewest observations in a window: on a coarse step (30 min) one point alone is never an alarm."""
ALARMS_PER_WEEK = 0.25
"""Design false-alarm rate: the summed chance per week of observations that a healthy forecast's
windowed mean leaves its band, one per four weeks. The goal is at most one per 7 days (one per
14 in the unit test); the factor of 2-4 is margin for error tails heavier than the Gaussian one
the threshold assumes and for a null measured on one week."""
Z_CLIP = 6.0
"""Errors are clipped at this many band-sigmas: one outlier (a launch-day spike, a lost scrape)
moves a window's mean by at most Z_CLIP / window, so it never trips the short window alone,
while a window of sustained misses can still pass the conservative null's threshold (about 4)."""
BAND_FLOOR = 0.01
"""The band is never narrower than 1% above the forecast, so a collapsed band is not a division
by zero."""
Z_P95 = NormalDist().inv_cdf(0.95)
SPREAD_FLOOR = 0.05
"""Smallest spread of a windowed mean, in band units: a backtest with (near) constant errors
must not make the monitor trip on the first wobble."""
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
NULL_SPAN = WEEK
"""Newest stretch of a model's training history its null is measured on (models.calibrate's
calibration window on a long history)."""
ROUTINE_SPAN = 2 * WEEK
"""Newest stretch of a model's training history whose gaps `null_for` reads for routine ones:
two weeks, so a gap that comes once a week (a weekend) is seen twice, as the calibration week
sees a nightly one."""
MIN_NULL_WINDOWS = 8
"""Fewest independent windows a measured null needs; with fewer the conservative one is used."""
MIN_MISSES = 10
"""Fewest misses of one side in a backtest whose own clustering the miss test reads
(`miss_limit`); with fewer it reads the errors' autocorrelation instead."""
TESTS = 3
"""Tests the design rate is shared by: the short and the long window's means and the long
window's coverage misses, each on two sides."""
SIDES = 2 * TESTS + 1
"""Sides the design rate is shared by: each test's two, and the run test's one (`run_limit`:
consecutive actuals below the band, the only side on which a forecast buys phantom prewarm)."""
TAIL = 0.9
"""Quantile of a null's windowed deviations past which their tail is fitted (`tail_limit`):
the top tenth, a few hundred windows of a week at a 5-minute step."""


class DriftState(StrEnum):
    OK = "ok"
    FALLBACK = "fallback"


@dataclass(frozen=True)
class Null:
    """What the windowed means of band-unit errors look like while the forecast is healthy."""

    windows: tuple[int, int]
    """Observations in the short and the long window."""
    means: tuple[float, float]
    spreads: tuple[float, float]
    """Robust standard deviation of each window's mean (autocorrelation included)."""
    z: float
    """Threshold in spreads (`z_for`)."""
    limits: tuple[float, float]
    """mean - means[i] > limits[i] trips window i (see `null_from`): the upper side."""
    samples: int
    """Backtest errors it was measured on (0: the conservative null)."""
    lower: tuple[float, float] | None = None
    """means[i] - mean > lower[i] trips window i: the lower side (None: the same as `limits`).
    The sides are measured apart: a launch-day spike in the calibration week must not blind the
    monitor to an outage."""
    misses: tuple[int, int] | None = None
    """More actuals than this above the upper band (u > 1.645), or below its mirror image
    (u < -1.645), in the long window trip it (`miss_limit`); None: no miss test (the
    conservative null, or a null stored before the test existed)."""
    run: int | None = None
    """This many consecutive actuals below the band's lower mirror (u < -1.645) trip the run
    test (`run_limit`, on the calibration's errors scaled to the band: `null_from`) at once;
    None: no run test (the conservative null, a stored older null)."""
    routine_gap: float = 0.0
    """Seconds of the longest gap between actuals that the calibration backtest held more than
    once (`routine_gap`): a load that routinely stops (a call centre at night) has gaps that
    long while its forecast is healthy, so only a longer gap restarts trust (`observe`)."""

    def sides(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """(upper, lower) limits of each window."""
        return self.limits, self.limits if self.lower is None else self.lower

    @classmethod
    def conservative(cls, step: float) -> Null:
        """No measurement: errors centred, as spread as a calibrated band implies for one point
        (one band-sigma), and perfectly correlated across a window."""
        z = z_for(step)
        return cls(
            windows=windows(step),
            means=(0.0, 0.0),
            spreads=(1.0, 1.0),
            z=z,
            limits=(z, z),
            samples=0,
        )

    def tripped(self, short: float, long: float, misses: tuple[int, int] = (0, 0)) -> bool:
        """A window's mean past its limit, or the long window's (upper, lower) `misses` count
        past the miss test's."""
        upper, lower = self.sides()
        return self.missed(misses) or any(
            math.isfinite(m) and (m - mu > up or mu - m > low)
            for m, mu, up, low in zip((short, long), self.means, upper, lower, strict=True)
        )

    def missed(self, misses: tuple[int, int]) -> bool:
        """More misses above or below the band in the long window than the miss test allows."""
        return self.misses is not None and (
            misses[0] > self.misses[0] or misses[1] > self.misses[1]
        )

    def gross(self, short: float) -> bool:
        """The short window is past its limit and past the conservative null's (a windowed mean
        as spread as one error: a shift no burst of healthy errors reaches at the design rate)."""
        (up, _), (low, _) = self.sides()
        d = short - self.means[0]
        return math.isfinite(short) and (d > max(up, self.z) or -d > max(low, self.z))

    def settled(self, short: float, long: float) -> bool:
        """The short window is back within half its limit and the long one, full again since
        fallback began, within its limit: a forecast earns trust back over hours, not minutes."""
        (up_s, up_l), (low_s, low_l) = self.sides()
        ds, dl = short - self.means[0], long - self.means[1]
        return (
            math.isfinite(short)
            and math.isfinite(long)
            and -low_s / 2 <= ds <= up_s / 2
            and -low_l <= dl <= up_l
        )


def windows(step: float) -> tuple[int, int]:
    """Observations in the short and long window at one observation per `step` seconds."""
    short = max(MIN_WINDOW, math.floor(SHORT_SPAN / step + 1e-9))
    return short, max(short + 1, math.floor(LONG_SPAN / step + 1e-9))


def z_for(step: float) -> float:
    """The threshold (in spreads) whose two-sided, two-window exceedance chance per week of
    observations is ALARMS_PER_WEEK."""
    return NormalDist().inv_cdf(1 - side_chance(step))


def band_units(actual: FloatArray, p50: FloatArray, upper: FloatArray, level: float) -> FloatArray:
    """Errors in band units, on a log scale: log((actual + c) / (p50 + c)) over the same log
    ratio of the calibrated upper band, divided by 1.645 (the P95 of a healthy point is ~1.645
    band-sigmas up), clipped at +-Z_CLIP; a non-finite forecast is a full miss (+Z_CLIP).

    On a log scale load x3 and x0.3 are errors of the same size: a drop to zero on a band as wide
    as the forecast is still far outside it, where a linear ratio could never pass -1. `level`
    (c) is the model's residual floor (a tenth of the mean load), so ratios near zero stay sane.
    """
    c = max(level, 1e-9)
    base = np.maximum(p50, 0.0) + c
    band = np.maximum(np.log((np.maximum(upper, 0.0) + c) / base), math.log1p(BAND_FLOOR))
    with np.errstate(invalid="ignore", divide="ignore"):
        u = np.log((np.maximum(actual, 0.0) + c) / base) / (band / Z_P95)
    u = np.where(np.isfinite(p50) & np.isfinite(upper), u, Z_CLIP)
    out: FloatArray = np.clip(u, -Z_CLIP, Z_CLIP)
    return out


def _band_unit(actual: float, p50: float, upper: float, level: float) -> float:
    """`band_units` of one point, without numpy's per-call overhead (the monitor's hot path)."""
    if not (math.isfinite(p50) and math.isfinite(upper)):
        return Z_CLIP
    c = max(level, 1e-9)
    base = max(p50, 0.0) + c
    band = max(math.log((max(upper, 0.0) + c) / base), math.log1p(BAND_FLOOR))
    u = math.log((max(actual, 0.0) + c) / base) / (band / Z_P95)
    return min(max(u, -Z_CLIP), Z_CLIP)


def null_from(
    errors: FloatArray, *, step: float, quantile: float = 0.95, scaled_runs: bool = True
) -> Null:
    """The null of band-unit `errors` observed every `step` seconds, in time order (NaN where
    there was no actual), over every window of the series that has no gap. Too few windows give
    the conservative null.

    The point spread is the band's own: the calibration table was measured out of sample, so
    a healthy point is one band-sigma wide by construction. The backtest gives what the band
    cannot: how far a window's mean strays, relative to the spread of single errors (robust
    spreads: 68th percentiles of |deviation from the median|), which is where the
    autocorrelation enters. A ratio, because `null_for` forecasts with the final model, which
    has seen that week (its errors there are smaller, not less correlated).

    Each side of each window gets its own limit, the larger of two: the Gaussian one (z_for
    spreads, never below 1/sqrt(window) of a point) and the exponential tail of that side's
    deviations (`tail_limit`), because forecast errors come in bursts (a news spike, a batch
    job) whose windowed means reach far past what a Gaussian on their robust spread allows.
    The short window is the fast path for gross shifts only: its limits are never below the
    conservative null's (a windowed mean as spread as one error), so a half-hour burst that
    a long window of accuracy contradicts is not an alarm; moderate shifts are the long
    window's to find.

    The run test's limit (`run_limit`) is read off the same errors scaled to the band: their
    deviations from the median over the point spread (when it is under the band's 1), below
    -1.645 (`scaled_runs`; False, the ablation, reads runs of the raw errors below -1.645). In
    sample they are narrower than the band (0.5-0.9 of it on NASA's and bank_calls' models), so
    their raw runs below the band's edge are shorter than a live forecast's, and a limit read
    off them tripped on healthy business-hours evenings (bank_calls; docs/policy.md "Drift").
    A backtest wider than the band is read as it is: scaling it down would shorten the runs.
    """
    conservative = Null.conservative(step)
    u = np.clip(np.asarray(errors, dtype=np.float64), -Z_CLIP, Z_CLIP)
    finite = u[np.isfinite(u)]
    if finite.size == 0:
        return conservative
    point = max(float(np.quantile(np.abs(finite - np.median(finite)), 0.6827)), SPREAD_FLOOR)
    alpha = side_chance(step)
    means, spreads, uppers, lowers = [], [], [], []
    runs = gapless_runs(u)
    for width in conservative.windows:
        if int((runs // width).sum()) < MIN_NULL_WINDOWS:
            return conservative
        view = sliding_window_view(u, width)
        windowed = view[np.isfinite(view).all(axis=1)].mean(axis=1)
        centre = float(np.median(windowed))
        deviation = (windowed - centre) / point  # in point spreads: band units when healthy
        shrink = float(np.quantile(np.abs(deviation), 0.6827))
        spread = min(max(shrink, 1 / math.sqrt(width)), 1.0)
        floor = conservative.z * spread
        means.append(centre)
        spreads.append(spread)
        uppers.append(max(floor, tail_limit(deviation, alpha)))
        lowers.append(max(floor, tail_limit(-deviation, alpha)))
    long = conservative.windows[1]
    rate = min(max(1 - quantile, 1e-3), 0.5)  # the band's nominal miss rate, each side
    return Null(
        windows=conservative.windows,
        means=(means[0], means[1]),
        spreads=(spreads[0], spreads[1]),
        z=conservative.z,
        limits=(uppers[0], uppers[1]),
        samples=int(np.isfinite(u).sum()),
        lower=(lowers[0], lowers[1]),
        misses=(
            miss_limit(u, u > Z_P95, long, alpha=alpha, rate=rate),
            miss_limit(u, u < -Z_P95, long, alpha=alpha, rate=rate),
        ),
        run=run_limit(
            (u - np.median(finite)) / min(point, 1.0) < -Z_P95 if scaled_runs else u < -Z_P95,
            np.isfinite(u),
            width=long,
            alpha=alpha,
            rate=rate,
        ),
        routine_gap=routine_gap(u, step),
    )


def run_limit(
    missed: np.ndarray, finite: np.ndarray, *, width: int, alpha: float, rate: float
) -> int | None:
    """The shortest run of consecutive misses (`missed`, where the calibration backtest's actual
    fell below the band; `finite`: where it had one, a gap ends a run) that a healthy forecast
    reaches with chance at most `alpha` per observation; None with fewer than MIN_MISSES misses
    (their clustering is not measured).

    A run reaches length n at an observation with chance at most p q^(n-1): p the miss rate
    (at least the nominal `rate`), q the chance a miss follows a miss (the autocorrelation).
    Runs of an autocorrelated forecast outlast a memoryless chain (the longer a run, the likelier
    it goes on), so q is the larger of the chance after one miss and after two (when at least
    MIN_MISSES runs reached two). A run longer than `width` (the long window) is an event (a
    lost scrape read as zero), not the healthy forecast's clustering, and is left out."""
    hit = np.asarray(missed, dtype=bool) & np.asarray(finite, dtype=bool)
    n = int(np.sum(finite))
    bounded = np.concatenate(([False], hit, [False])).astype(np.int8)
    edges = np.flatnonzero(np.diff(bounded))
    lengths = edges[1::2] - edges[::2]
    lengths = lengths[lengths <= width]
    misses = int(lengths.sum())
    if misses < MIN_MISSES or n == 0:
        return None
    p = min(max(rate, misses / n), 0.5)
    after_one = int(np.maximum(lengths - 1, 0).sum())
    after_two = int(np.maximum(lengths - 2, 0).sum())
    q = max(after_one / misses, p)
    if after_one >= MIN_MISSES:
        q = max(q, after_two / after_one)
    if q >= 1:
        return width
    chain = 1 + math.log(alpha / p) / math.log(q) if alpha < p else 1.0
    # The chain is a model of the runs; the backtest's own longest run is what a healthy
    # forecast did: a run no longer than that is no evidence (runs with a routine, such as a
    # business day's late start, outlast the chain's geometric tail).
    seen = int(lengths.max()) + 1
    return min(width, max(1, math.ceil(chain - 1e-9), seen))


def gapless_runs(errors: FloatArray) -> np.ndarray:
    """Lengths of the runs of consecutive finite `errors`. A window fits inside one run, so a
    run of n holds n // width independent windows: load with routine gaps (business hours, a
    nightly batch window) has fewer than its observations / width, and a continuous week the
    same (counting overlapping windows / width, as before, refused a week of 14-hour days)."""
    finite = np.concatenate(([False], np.isfinite(errors), [False]))
    edges = np.flatnonzero(np.diff(finite.astype(np.int8)))
    return edges[1::2] - edges[::2]


def routine_gap(errors: FloatArray, step: float) -> float:
    """Seconds of the longest gap between scored actuals in `errors` (NaN: no actual) that
    happened at least twice. A gap seen once is an event (an outage, a lost scraper), not the
    load's routine, and a model fitted during an outage must not learn outages as normal."""
    at = np.flatnonzero(np.isfinite(errors))
    gaps = np.sort(np.diff(at))
    return float(gaps[-2] * step) if gaps.size >= 2 else 0.0


def miss_limit(
    errors: FloatArray, missed: np.ndarray, width: int, *, alpha: float, rate: float
) -> int:
    """The most misses of one side of the band a healthy window of `width` consecutive
    observations holds, passed with chance `alpha`: `errors` the calibration backtest's band-unit
    errors in time order (NaN: no actual), `missed` where they miss that side.

    Misses of an autocorrelated forecast come in runs, so a window holds fewer independent
    chances to miss than observations: its count is read as a binomial of an effective size,
    n_eff = width / (1 + 2 sum_k (1 - k/width) rho_k) (`effective_size`, the variance inflation
    of a windowed sum), at the larger of the nominal `rate` and the measured one. The empirical
    exponential tail of the backtest's own windowed counts (`tail_limit`) is a floor, for
    bursts the autocorrelation does not describe. `width` (never trips) when even a window of
    nothing but misses is within the binomial's chance.
    """
    finite = np.isfinite(errors)
    hits = np.where(finite, missed, False).astype(np.float64)
    if finite.sum() < width * MIN_NULL_WINDOWS:
        return width
    p = min(max(rate, float(hits[finite].mean())), 0.5)
    indicator = np.where(finite, hits, np.nan)
    # Few misses say little about how they cluster: then the errors' own autocorrelation, which
    # bounds the indicators' (for Gaussian errors) and so errs towards fewer independent chances.
    source = indicator if hits.sum() >= MIN_MISSES else errors
    size = max(1, math.floor(effective_size(source, width) + 1e-9))
    allowed = size  # misses among the effective observations a healthy window may reach
    for count in range(size + 1):
        if _binomial_tail(size, p, count + 1) <= alpha:
            allowed = count
            break
    binomial = width if allowed >= size else math.ceil((allowed + 1) * width / size) - 1
    view = sliding_window_view(np.where(finite, hits, np.nan), width)
    counts = view[np.isfinite(view).all(axis=1)].sum(axis=1)
    empirical = tail_limit(counts, alpha) if counts.size else 0.0
    return min(width, max(binomial, math.floor(empirical)))


def effective_size(series: FloatArray, width: int) -> float:
    """Independent observations a window of `width` consecutive ones of `series` is worth:
    width / (1 + 2 sum_{k<K} (1 - k/width) rho_k), rho_k its lag-k autocorrelation over the
    pairs with both values finite, summed up to the first lag K < width where it is no longer
    positive (beyond it, summing sampling noise would shrink the size of independent errors).
    In [1, width]."""
    x = np.asarray(series, dtype=np.float64)
    ok = np.isfinite(x)
    if ok.sum() < 2:
        return 1.0
    centred = np.where(ok, x - float(np.mean(x[ok])), 0.0)
    var = float(np.mean(centred[ok] ** 2))
    if var <= 0:
        return 1.0
    inflation = 1.0
    for k in range(1, min(width, x.size - 1)):
        both = ok[k:] & ok[:-k]
        if not both.any():
            continue
        rho = float(np.mean((centred[k:] * centred[:-k])[both])) / var
        if rho <= 0:  # past here the sample autocorrelations are noise around zero
            break
        inflation += 2 * (1 - k / width) * rho
    return min(max(width / inflation, 1.0), float(width))


def _binomial_tail(n: int, p: float, k: int) -> float:
    """P(X >= k) for X binomial(n, p)."""
    if k <= 0:
        return 1.0
    return float(sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k, n + 1)))


def side_chance(step: float) -> float:
    """Chance per observation that one side of one test may pass its limit while healthy:
    ALARMS_PER_WEEK spread over a week of observations and SIDES sides of the tests."""
    return ALARMS_PER_WEEK / (SIDES * max(WEEK / step, 1.0))


def tail_limit(deviation: FloatArray, alpha: float) -> float:
    """The level `deviation` passes with chance `alpha`, from an exponential tail fitted past
    its TAIL quantile (peaks over threshold with a generalised Pareto of shape 0). Its scale is
    the median excess over ln 2, not the mean (the maximum likelihood one): a calibration week
    that holds an outage of its own has a few windows far out, which must not widen the limit
    past the next outage. Heavier than a Gaussian tail, so a Gaussian sample gets a wider
    limit than z sigmas (a margin), and a bursty one the width its bursts need."""
    d = np.asarray(deviation, dtype=np.float64)
    d = d[np.isfinite(d)]
    if d.size == 0:
        return math.inf
    if alpha >= 1 - TAIL:
        return float(np.quantile(d, 1 - alpha))
    start = float(np.quantile(d, TAIL))
    excess = d[d > start] - start
    scale = float(np.median(excess)) / math.log(2) if excess.size else 0.0
    return start + scale * math.log((1 - TAIL) / alpha)


def null_for(model: CalibratedModel, history: Series, *, lead_time: float, quantile: float) -> Null:
    """The null of `model`, measured on its own rolling-origin forecasts over the NULL_SPAN of
    `history` before its fit (the calibration backtest), at the point lead time ahead, in band
    units of the model's calibrated `quantile` band."""
    ahead = max(1, round(lead_time / history.step))
    known = history.until(model.trained_until)
    since = max(known.start + DAY, model.trained_until - NULL_SPAN)
    if known.end - since < DAY or known.step != model.step:
        return Null.conservative(history.step)
    context = known.since(since - NULL_SPAN / 2)  # level/state the forecasts start from
    backtest = rolling(model.model, context, since=since, steps=ahead)
    p50, actual = backtest.p50[:, ahead - 1], backtest.actual[:, ahead - 1]
    offset = model.calibration.offsets(ahead, quantile)[ahead - 1]
    upper = np.maximum(p50 + offset * model.calibration.scale(p50), p50)
    units = band_units(actual, p50, upper, model.calibration.floor)
    null = null_from(units, step=history.step, quantile=quantile)
    # Gaps are the load's, not the errors': even a null too short to measure (a holiday took
    # days out of its week) knows the nights.
    seen = known.since(model.trained_until - ROUTINE_SPAN).values
    return dataclasses.replace(
        null, routine_gap=max(null.routine_gap, routine_gap(seen, history.step))
    )


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
        u = _band_unit(actual, p50, upper, self.level)
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


@dataclass
class DriftTracker:
    """Forecasts awaiting their actuals; scores each actual against the forecast made
    `lead_time` before it (at least one step ahead)."""

    lead_time: float
    monitor: DriftMonitor = field(default_factory=DriftMonitor)
    pending: dict[float, Forecast] = field(default_factory=dict)
    """Forecasts by origin (the time of their first point)."""
    scored_until: float = -math.inf
    """Time of the newest actual already scored."""
    adopted: tuple[str, float, float] | None = None
    """(fingerprint, trained_until, step) of the model whose null the monitor uses."""

    def adopt(self, model: CalibratedModel, history: Series) -> None:
        """Use `model`'s null from now on (measured once per model: a no-op for the same one)."""
        if self.needs(model):
            self.use(model, self.null_of(model, history))

    def needs(self, model: CalibratedModel) -> bool:
        """True when `model` is not the one whose null the monitor uses."""
        return _model_key(model) != self.adopted

    def null_of(self, model: CalibratedModel, history: Series) -> Null:
        """`model`'s null, measured (a backtest: the live engine runs it off its event loop)."""
        return null_for(model, history, lead_time=self.lead_time, quantile=self.monitor.quantile)

    def use(self, model: CalibratedModel, null: Null) -> None:
        """Score from now on against `null`, measured for `model` by `null_of`."""
        self.adopted = _model_key(model)
        self.monitor.fitted_until = model.trained_until
        self.monitor.level = model.calibration.floor
        self.monitor.null = null

    def record(self, forecast: Forecast) -> None:
        """Keep a forecast (the first one made for an origin wins: it is the one made earliest)."""
        if math.isfinite(forecast.origin):
            self.pending.setdefault(_key(forecast.origin), forecast)

    def score(self, series: Series) -> int:
        """Feed the monitor every actual of `series` newer than the last one scored; returns
        how many were scored. Forecasts too old to be needed again are dropped."""
        if not self.pending:  # nothing to score against: skip, not walk, the history
            self.scored_until = max(self.scored_until, series.end)
            return 0
        new = series.since(max(series.start, self.scored_until + series.step))
        scored = 0
        for at, actual in zip(new.times(), new.values, strict=True):
            match = self._forecast_for(float(at), series.step)
            if match is not None and math.isfinite(actual):
                p50, upper = match
                self.monitor.observe(float(at), float(actual), p50, upper)
                scored += 1
            self.scored_until = float(at)
        self._forget(series.step)
        return scored

    def ahead(self, step: float) -> int:
        """Steps ahead of its origin's last observation the scored forecast point is."""
        return max(1, round(self.lead_time / step))

    def _forecast_for(self, at: float, step: float) -> tuple[float, float] | None:
        index = self.ahead(step) - 1
        forecast = self.pending.get(_key(at - index * step))
        if forecast is None or forecast.step != step or index >= forecast.p50.size:
            return None
        upper = forecast.upper if forecast.measured_upper is None else forecast.measured_upper
        return float(forecast.p50[index]), float(upper[index])

    def _forget(self, step: float) -> None:
        oldest = self.scored_until - self.ahead(step) * step
        for origin in [o for o in self.pending if o <= oldest]:
            del self.pending[origin]


def _model_key(model: CalibratedModel) -> tuple[str, float, float]:
    return (model.fingerprint, model.trained_until, model.step)


def _key(t: float) -> float:
    """Times as dictionary keys, immune to float noise below a millisecond."""
    return round(t, 3)
