"""Measuring a model's drift null (drift_null.Null) on its calibration backtest. Pure: no clock,
no I/O; the monitor that tests against the null is drift.py.

The null is measured by `null_for` on the model's calibration backtest: the same rolling-origin
forecasts models.calibrate grades the model on, over the week before its fit. Forecast errors
stay autocorrelated for hours, so the spread of a windowed mean is read off the windowed means
of that backtest itself (autocorrelation included), never derived from sigma/sqrt(n) as for
independent noise. Each window's limit is set so that the chance a healthy window passes it,
summed over both windows and both sides, is drift_null.ALARMS_PER_WEEK per week of
observations (Gaussian, on a robust spread: `null_from`). An alarm episode starts with such an
exceedance, so that is an upper bound on the episode rate; `tests/unit/test_drift.py` measures
it on AR(1) errors with phi 0.9.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from models.base import DAY, WEEK, FloatArray, Series
from models.calibrate import CalibratedModel
from models.conformal import rolling
from scaler.decision.drift_null import Z_CLIP, Z_P95, Null, band_units, side_chance

SPREAD_FLOOR = 0.05
"""Smallest spread of a windowed mean, in band units: a backtest with (near) constant errors
must not make the monitor trip on the first wobble."""
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
TAIL = 0.9
"""Quantile of a null's windowed deviations past which their tail is fitted (`tail_limit`):
the top tenth, a few hundred windows of a week at a 5-minute step."""


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
