"""The seasonal baseline: the median of the same time of week (or day) over the last cycles,
scaled to a level: the geometric mean of the last hour's level and of what the deviation
regression (models.deviation) carries ahead from the last 5 minutes to 4 hours.

Cheap to fit (a reshape and a median), compact (one profile of one cycle), and hard to beat on
strongly periodic load; every other model must earn its keep against it.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar, Self

import numpy as np
import numpy.typing as npt

from models import deviation
from models.base import (
    HOUR,
    ArtefactError,
    FitError,
    FloatArray,
    Series,
    lognormal_upper,
    observed_span,
    prepared,
    season_for,
)

MAX_CYCLES = 4
"""Cycles the median looks back over: enough to ignore one odd week, few enough to follow trends."""
LEVEL_WINDOW = HOUR
"""How much recent history sets the level correction."""
TODAY: tuple[str, float] = ("flat", LEVEL_WINDOW)
"""The level window every fit reads, as artefacts may write it ("window"): the last hour, flat.
Fits that chose another window were an offline experiment, removed after c20d6b8."""
LEVEL_CLIP = (0.25, 4.0)
"""Bounds of the multiplicative level correction, so one odd hour cannot blow the forecast up."""
OFFSET_FRACTION = 0.05
"""log(load + offset) for the model's own interval; offset = this fraction of the mean load."""
POOL_WIDTHS = (0, 1, 2)
"""Neighbours on each side the median may pool: 0 is the per-phase median."""

__all__ = ["SeasonalBaseline", "season_for"]


class SeasonalBaseline:
    """Median of the same phase over the last cycles, times a recent-level factor."""

    kind: ClassVar[str] = "seasonal"
    cost: ClassVar[int] = 1
    pool: ClassVar[bool] = False
    """Whether the profile's median may pool neighbouring phases (`PooledSeasonal`)."""
    regress_level: ClassVar[bool] = True
    """Whether each fit learns how the deviation from the profile carries ahead, per step
    (`models.deviation`), its forecast combined with the level window's (`_combined`), instead of
    the level window's one ratio for every step ahead alone. On by default since issue 7's
    measurement (docs/forecasting.md "A model of the within-hour dynamics"); `scaler backtest
    --no-level-regression` is the ablation. An artefact fitted without it (none written, as
    before) keeps the hour's level."""

    def __init__(self) -> None:
        self.period = 0.0
        self.step = 0.0
        self.anchor = 0.0
        self.profile: FloatArray = np.zeros(0)
        self.offset = 1.0
        self.sigma = 0.0
        self.regression: FloatArray | None = None
        """models.deviation's coefficients, one row per step ahead (None: the level window)."""

    def fit(self, history: Series) -> None:
        history = prepared(history)
        period = season_for(observed_span(history))
        n = round(period / history.step)
        if n < 1:
            raise FitError(
                f"a step of {history.step:g} s is longer than the {period:g} s season; "
                "resample the history to the model step (5m) first"
            )
        cycles = max(1, min(MAX_CYCLES, len(history) // n))
        tail = history.values[-cycles * n :].reshape(cycles, n)
        profile = median_profile(
            tail, pool_width(tail, window=_level_points(history.step)) if self.pool else 0
        )
        if profile is None:
            raise FitError("history has no observed values in its last cycles")
        self.period = period
        self.step = history.step
        self.anchor = history.end - (n - 1) * history.step  # time of profile[0]
        self.profile = profile
        self.regression = None
        if self.regress_level and cycles > 1:  # one cycle has no deviation out of sample
            self.regression = deviation.fit(*held_out_expected(tail), history.step)
        observed = tail[~np.isnan(tail)]
        self.offset = max(float(observed.mean()) * OFFSET_FRACTION, 1e-6)
        spread = np.log(tail + self.offset) - np.log(self.profile + self.offset)
        spread = spread[np.isfinite(spread)]
        self.sigma = float(spread.std()) if spread.size > 1 else 0.0

    def expected(self, times: FloatArray) -> FloatArray:
        """The profile's value at each time (no level correction)."""
        if self.profile.size == 0:
            raise FitError("seasonal baseline used before fit")
        n = self.profile.size
        phase = np.rint((times - self.anchor) / self.step).astype(np.int64) % n
        return self.profile[phase]

    def predict(self, recent: Series, steps: int) -> FloatArray:
        if self.regression is not None:
            row: FloatArray = self.predict_at(recent, np.array([len(recent) - 1]), steps)[0]
            return row
        times = recent.end + self.step * np.arange(1, steps + 1, dtype=np.float64)
        return np.maximum(self.expected(times) * self.level(recent), 0.0)

    def predict_at(self, history: Series, ends: npt.NDArray[np.int64], steps: int) -> FloatArray:
        """`predict` from every origin `history.values[: i + 1]`, i in `ends`, in one numpy
        pass: row k equals `predict(history.until(origin k), steps)` bit for bit (models.origins
        relies on that; an origin whose level hour has a gap takes `predict` itself)."""
        if self.profile.size == 0:
            raise FitError("seasonal baseline used before fit")
        ends = np.asarray(ends, dtype=np.int64)
        end_times = history.start + ends * history.step
        ahead = self.step * np.arange(1, steps + 1, dtype=np.float64)
        profile = self.expected(end_times[:, None] + ahead[None, :])
        if self.regression is not None:
            return self._regressed(history, ends, profile)
        return np.maximum(profile * self._levels(history, ends)[:, None], 0.0)

    def _levels(self, history: Series, ends: npt.NDArray[np.int64]) -> FloatArray:
        """The level window's level of each origin `history.values[: i + 1]`, i in `ends`, as
        `level` reads it on that prefix."""
        step, start, values = history.step, history.start, history.values
        end_times = start + ends * step
        # The level hour of each origin, as Series.since finds it on the prefix.
        begin = np.ceil((end_times - LEVEL_WINDOW + step / 2 - start) / step - 1e-9)
        begin = np.clip(begin, 0, ends + 1).astype(np.int64)
        width = ends + 1 - begin
        level = np.ones(ends.size)
        for w in np.unique(width[width > 0]).tolist():
            rows = np.flatnonzero(width == w)
            index = begin[rows, None] + np.arange(w)[None, :]
            seen = values[index]
            whole = ~np.isnan(seen).any(axis=1)
            full, gappy = rows[whole], rows[~whole]
            times = (start + begin[full] * step)[:, None] + step * np.arange(w)[None, :]
            floor = _level_floor(self.profile) * w
            ratio = (seen[whole].sum(axis=1) + floor) / (self.expected(times).sum(axis=1) + floor)
            level[full] = np.clip(ratio, *LEVEL_CLIP)
            for k in gappy.tolist():
                level[k] = self.level(Series(start, step, values[: ends[k] + 1]))
        return level

    def interval(self, p50: FloatArray, quantile: float) -> FloatArray:
        """Spread of the cycles around their median profile, read as log-normal (flat in h)."""
        return lognormal_upper(
            p50, offset=self.offset, sigma=np.full(p50.size, self.sigma), quantile=quantile
        )

    def level(self, recent: Series) -> float:
        """Ratio of the last hour's observed load to what the profile expected for it."""
        window = recent.since(recent.end - LEVEL_WINDOW + recent.step / 2)
        mask = ~np.isnan(window.values)
        if not mask.any():
            return 1.0
        seen = float(window.values[mask].sum())
        expected = float(self.expected(window.times()[mask]).sum())
        floor = _level_floor(self.profile) * int(mask.sum())
        return float(np.clip((seen + floor) / (expected + floor), *LEVEL_CLIP))

    def _regressed(
        self, history: Series, ends: npt.NDArray[np.int64], profile: FloatArray
    ) -> FloatArray:
        """The forecast 1..`steps` ahead of each origin `history.values[: i + 1]`, i in `ends`
        (`profile`: the profile at those steps, a row per origin): the profile times the
        deviation `self.regression` carries ahead from the trailing ones (one code path for
        `predict` and `predict_at`, so they agree bit for bit), combined with the level
        window's forecast (`_combined`)."""
        assert self.regression is not None
        floor = _level_floor(self.profile)
        # only the points the origins' windows read, not the whole history on every forecast
        lo = max(0, int(ends.min()) - deviation.widths(history.step)[-1] + 1)
        index = np.arange(lo, int(ends.max()) + 1, dtype=np.float64)  # as Series.times()
        load = np.maximum(history.values[lo : int(ends.max()) + 1], 0.0) + floor  # as prepared
        expected = self.expected(history.start + history.step * index) + floor
        x = deviation.features(load, expected, ends - lo, history.step)
        path = (profile + floor) * np.exp(deviation.predict(self.regression, x, profile.shape[1]))
        path = np.maximum(path, floor)  # a load of at least 0
        out: FloatArray = self._combined(path, history, ends, profile, floor) - floor
        return out

    def _combined(
        self,
        path: FloatArray,
        history: Series,
        ends: npt.NDArray[np.int64],
        profile: FloatArray,
        floor: float,
    ) -> FloatArray:
        """The regression's `path` (the level's floor added) combined with the level window's
        forecast: their geometric mean, each with the floor added, an equal-weight combination
        of two medians on the log scale. Alone, the regression follows a sample of 0 down and
        the relative band with it (docs/forecasting.md "A model of the within-hour dynamics"
        measures both; `scaler backtest --level-regression-alone` took it alone until c21b1a4,
        bench/level_window.py's RegressionAlone still does)."""
        levelled = np.maximum(profile * self._levels(history, ends)[:, None], 0.0)
        out: FloatArray = np.sqrt(path * (levelled + floor))
        return out

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "period": self.period,
            "step": self.step,
            "anchor": self.anchor,
            "profile": [float(v) for v in self.profile],
            "offset": self.offset,
            "sigma": self.sigma,
        }
        if self.regress_level or self.regression is not None:  # None: one cycle, the hour's level
            out["regression"] = (
                None
                if self.regression is None
                else [[float(c) for c in r] for r in self.regression]
            )
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        model = cls()
        try:
            model.period = float(data["period"])
            model.step = float(data["step"])
            model.anchor = float(data["anchor"])
            model.profile = np.asarray(data["profile"], dtype=np.float64)
            model.offset = float(data["offset"])
            model.sigma = float(data["sigma"])
            kind, seconds = data.get("window", TODAY)  # no window: the last hour
            window = (str(kind), float(seconds))
            if data.get("regression") is not None:
                model.regression = np.asarray(data["regression"], dtype=np.float64)
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtefactError(f"seasonal artefact is malformed: {exc!r}") from exc
        if model.step <= 0 or model.profile.size != round(model.period / model.step):
            raise ArtefactError("seasonal artefact: profile length does not match period/step")
        if not np.isfinite(model.profile).all():
            raise ArtefactError("seasonal artefact: profile holds NaN or inf")
        if window != TODAY:
            raise ArtefactError(
                f"seasonal artefact: level window {window!r} is not the last hour, the one "
                "window read since the choice of windows was removed; refit the model"
            )
        coef = model.regression
        wanted = len(deviation.widths(model.step)) + 1
        if coef is not None and (
            coef.ndim != 2
            or coef.shape[1] != wanted
            or not coef.size
            or not np.isfinite(coef).all()
        ):
            raise ArtefactError(
                f"seasonal artefact: level regression of shape {coef.shape} is not "
                f"(steps, {wanted}) of finite numbers; refit the model"
            )
        return model


class PooledSeasonal(SeasonalBaseline):
    """The seasonal baseline whose profile's median pools neighbouring phases, as many as a
    leave-one-cycle-out backtest of its cycles picks (`pool_width`): one more candidate of
    `model: auto` (models/select.py POOLED_CANDIDATE, on by default), kept only where the
    selection rule picks it. On nasa's 5-minute peaks the median of 2-4 cycles per phase is
    mostly noise (the P50's log changes 0.16 from one step to the next, its level's 0.03),
    which the calibrated band then inflates (docs/forecasting.md "Does the level chase
    spikes?")."""

    kind: ClassVar[str] = "pooled"
    pool: ClassVar[bool] = True


def pooled_median(tail: FloatArray, width: int) -> FloatArray:
    """Median of each phase over the cycles (rows of `tail`) and `width` neighbouring phases on
    each side, circularly (the cycle wraps); width 0 is the per-phase median, bit for bit."""
    if width > 0:
        tail = np.concatenate([np.roll(tail, s, axis=1) for s in range(-width, width + 1)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN phases are filled by the caller
        out: FloatArray = np.nanmedian(tail, axis=0)
    return out


def median_profile(cycles: FloatArray, width: int) -> FloatArray | None:
    """The median profile of `cycles` (rows) pooling `width` neighbouring phases
    (`pooled_median`), its never-observed phases filled (`_fill_gaps`); None when no cycle
    observed anything: the fit's profile, and the held-out one of the other cycles."""
    profile = pooled_median(cycles, width)
    return None if np.isnan(profile).all() else _fill_gaps(profile)


def pool_width(tail: FloatArray, *, window: int) -> int:
    """The width (of POOL_WIDTHS) whose profile, made from the other cycles, best forecasts
    each held-out cycle one step ahead as `predict` does (times the level of the `window`
    points before; mean absolute error, leave one cycle out, ties to the narrower): with few
    cycles of noisy load a phase's median is mostly noise and its neighbours help; on a sharp
    ramp or a spike at a fixed minute they blur it, and the cycles say so. One cycle: 0."""
    cycles = tail.shape[0]
    if cycles < 2:
        return 0
    errors = [
        sum(_held_out_error(tail, c, width, window=window) for c in range(cycles))
        for width in POOL_WIDTHS
    ]
    return POOL_WIDTHS[int(np.argmin(errors))]


def _held_out_error(tail: FloatArray, c: int, width: int, *, window: int) -> float:
    """Sum of |actual - forecast| over cycle `c`, forecast one step ahead by the profile of the
    other cycles times the level of the `window` points before (missing ones skipped)."""
    profile = median_profile(np.delete(tail, c, axis=0), width)
    if profile is None:  # the other cycles are all missing: nothing to learn from
        return 0.0
    seen = tail[c]
    ok = np.isfinite(seen)
    floor = _level_floor(profile)
    sums = np.concatenate([[0.0], np.cumsum(np.where(ok, seen + floor, 0.0))])
    expected = np.concatenate([[0.0], np.cumsum(np.where(ok, profile + floor, 0.0))])
    i = np.arange(window, seen.size)  # forecast for point i from points i - window .. i - 1
    level = np.clip(
        (sums[i] - sums[i - window]) / (expected[i] - expected[i - window] + 1e-12), *LEVEL_CLIP
    )
    miss = np.abs(seen[i] - profile[i] * level)
    return float(miss[np.isfinite(miss)].sum())


def held_out_expected(tail: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Each cycle's load (rows of `tail`) and what the profile of the other cycles expected of
    it, each plus that profile's level floor, laid end to end (load NaN where missing, or where
    the other cycles saw nothing): a live forecast's deviation, out of sample. One cycle:
    against itself."""
    cycles = tail.shape[0]
    load = np.full(tail.shape, np.nan)
    expected = np.ones(tail.shape)
    for c in range(cycles):
        profile = median_profile(np.delete(tail, c, axis=0) if cycles > 1 else tail, 0)
        if profile is None:
            continue
        floor = _level_floor(profile)
        load[c] = tail[c] + floor
        expected[c] = profile + floor
    return load.ravel(), expected.ravel()


def _level_floor(profile: FloatArray) -> float:
    """What the level adds to each point's load and to what the profile expected for it, so an
    idle hour (load and profile near 0) reads a level near 1, not 0/0: 5 % of the profile's mean."""
    return max(float(np.abs(profile).mean()) * 0.05, 1e-9)


def _level_points(step: float) -> int:
    """Points in the level window at `step`."""
    return max(1, round(LEVEL_WINDOW / step))


def _fill_gaps(profile: FloatArray) -> FloatArray:
    """Linear interpolation over phases never observed (circular), so predict never returns NaN."""
    mask = np.isnan(profile)
    if not mask.any():
        return profile
    idx = np.arange(profile.size)
    return np.interp(idx, idx[~mask], profile[~mask], period=profile.size)
