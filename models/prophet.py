"""Prophet: piecewise-linear trend + daily (and, from two weeks of history, weekly) Fourier
seasonality, optional public holidays by country code, fitted on log(load + offset) so the
seasonality is multiplicative and forecasts stay >= 0. The only module that imports prophet.

Prophet is fitted once; then its trend (the last linear segment), its seasonal components on the
model-step grid (one cycle) and its holiday effects (per day, up to HOLIDAY_DAYS past the fit)
are extracted into arrays, and the Prophet object is dropped. `predict` is array arithmetic, the
artefact is compact, and a JSON round trip predicts exactly what the fitted object did.

Prophet's curve ignores what happened in the last minutes, which is most of the information a
10-30 minute forecast has. So its residuals are smoothed exponentially (a local level on the log
scale, the weight chosen on the in-sample one-step errors) and the current level is added to the
curve: a Prophet + ETS-on-residuals hybrid. Noisy load gets a small weight (the curve is trusted),
a level shift (a holiday, a launch, a migration) is followed within the hour.
"""

from __future__ import annotations

import logging
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np
import numpy.typing as npt
import pandas as pd

from models import stan_inputs
from models.base import (
    DAY,
    WEEK,
    ArtefactError,
    FitError,
    FloatArray,
    Series,
    finite_or,
    lognormal_upper,
    observed_span,
    prepared,
    season_for,
)

OFFSET_FRACTION = 0.05
"""log(load + offset), offset = this fraction of the mean load: zeros stay finite."""
DAILY_ORDER = 10
"""Fourier terms of the daily cycle. Prophet's default (4) is tuned for hourly-or-coarser data;
at 5-minute resolution a morning ramp is an hour wide and needs more harmonics to show."""
WEEKLY_ORDER = 6
"""Fourier terms of the weekly cycle (Prophet's default is 3): room for a sharp weekend step."""
RESIDUAL_WEIGHTS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0)
"""Candidate smoothing weights of the residual level (a grid: one parameter, no optimiser)."""
HOLIDAY_DAYS = 42
"""Days past the end of training for which holiday effects are kept (refits are weekly)."""
TOL_REL_GRAD = 1e9
"""CmdStan L-BFGS's relative-gradient tolerance (in units of machine epsilon; CmdStan's default
is 1e7). At the default, a 28-day fit at 5 minutes runs 300-400 iterations, most of them
crawling along the flat valley the Laplace prior on the changepoints makes, moving the curve by
a few thousandths of the noise; at 1e9 it stops after 30-150 iterations, a quarter of the CPU,
with the fitted curve a few hundredths of sigma_obs away (docs/benchmark.md "Retrain")."""
WARM_START = True
"""Start a fit's L-BFGS from the optimum of a fit of the same model on an overlapping history
(`warm_from`: the final fit from the calibration probe's, the earlier-window fit from the
final's), rescaled to the new window, instead of Prophet's default start (flat trend, zero
seasonality): with TOL_REL_GRAD loose, the fit stops nearer the exact optimum, sooner."""
CMDSTAN_TOL_REL_GRAD = 1e7
"""CmdStan's default, what `exact()` restores (the fits before TOL_REL_GRAD)."""


def exact() -> None:
    """The ablation (`scaler backtest --exact-prophet`): every fit from Prophet's default start
    to CmdStan's default tolerance, bit for bit the fits before the cut. One process, one run."""
    global TOL_REL_GRAD, WARM_START
    TOL_REL_GRAD, WARM_START = CMDSTAN_TOL_REL_GRAD, False


class ProphetModel:
    """Prophet trend + seasonality (+ holidays) on the log scale, with an AR(1) correction."""

    kind: ClassVar[str] = "prophet"
    cost: ClassVar[int] = 3

    def __init__(self, holidays: str | None = None) -> None:
        self.holidays = holidays
        """Country code for Prophet's built-in holidays (e.g. "US"), or None."""
        self.step = 0.0
        self.anchor = 0.0
        self.profile: FloatArray = np.zeros(0)
        self.t0 = 0.0
        self.t_scale = 1.0
        self.slope = 0.0
        self.intercept = 0.0
        self.y_scale = 1.0
        self.offset = 1.0
        self.alpha = 0.0
        """Smoothing weight of the residual level (0 = Prophet's curve as is)."""
        self.sigma = 0.0
        self.holiday_days: FloatArray = np.zeros(0)
        self.holiday_effects: FloatArray = np.zeros(0)
        self.optimum: Optimum | None = None
        """Stan's fitted parameters with the scales they are in (not in the artefact)."""
        self._start_from: Optimum | None = None

    def warm_from(self, other: object) -> None:
        """Start the next fit from `other`'s optimum (a fitted ProphetModel on a history with
        the same start; anything else is ignored): with WARM_START, L-BFGS begins next to the
        optimum instead of at Prophet's flat default and needs fewer iterations."""
        if WARM_START and isinstance(other, ProphetModel) and other.optimum is not None:
            self._start_from = other.optimum

    def fit(self, history: Series) -> None:
        history = prepared(history)
        period = season_for(observed_span(history))
        n = round(period / history.step)
        observed = history.values[~np.isnan(history.values)]
        self.step = history.step
        self.anchor = history.end - (n - 1) * history.step
        self.offset = max(float(observed.mean()) * OFFSET_FRACTION, 1e-6)
        ok = ~np.isnan(history.values)
        times = history.times()[ok]
        z = np.log(history.values[ok] + self.offset)
        frame = pd.DataFrame({"ds": _ds(times), "y": z})
        model = self._prophet(weekly=period >= WEEK)
        options: dict[str, Any] = {}
        if TOL_REL_GRAD != CMDSTAN_TOL_REL_GRAD:  # else Prophet's own call, bit for bit
            options["tol_rel_grad"] = TOL_REL_GRAD
        if self._start_from is not None:
            options["init"] = self._start_from.rescaled(times, z)
        try:
            try:
                model.fit(frame, **options)
            except (RuntimeError, ValueError):
                if "tol_rel_grad" not in options:
                    raise
                # Prophet retries a failed L-BFGS with Newton, passing our options on, and
                # cmdstan's Newton refuses tol_rel_grad: so that fallback always failed. Fit
                # again as Prophet's own call, whose fallback works.
                del options["tol_rel_grad"]
                model = self._prophet(weekly=period >= WEEK)
                model.fit(frame, **options)
            in_sample = model.predict(frame[["ds"]])["yhat"].to_numpy(dtype=np.float64)
        except (RuntimeError, ValueError) as exc:
            raise FitError(f"prophet did not fit: {exc}") from exc
        self._extract(model, history, n)
        residuals = np.full(len(history), np.nan)
        residuals[ok] = z - in_sample
        self.alpha = _residual_weight(residuals)
        self.sigma = finite_or(float(np.nanmean(model.params["sigma_obs"])) * self.y_scale, 0.0)
        self.optimum = Optimum.of(model)

    def _prophet(self, *, weekly: bool) -> Any:
        from prophet import Prophet

        quiet = logging.getLogger("cmdstanpy")  # else it adds its own handler, one line a chain
        if not quiet.handlers:
            quiet.addHandler(logging.NullHandler())
        quiet.setLevel(logging.WARNING)

        model = Prophet(
            growth="linear",
            yearly_seasonality=False,
            weekly_seasonality=False,
            daily_seasonality=False,
            uncertainty_samples=0,
        )
        _write_inputs_in_c(getattr(model.stan_backend, "model", None))
        model.add_seasonality(name="daily", period=1, fourier_order=DAILY_ORDER)
        if weekly:
            model.add_seasonality(name="weekly", period=7, fourier_order=WEEKLY_ORDER)
        if self.holidays:
            try:
                model.add_country_holidays(country_name=self.holidays)
            except (AttributeError, KeyError, ValueError, NotImplementedError) as exc:
                raise FitError(
                    f"prophet: no holidays for country {self.holidays!r}; use an ISO code "
                    "such as US or DE"
                ) from exc
        return model

    def _extract(self, model: Any, history: Series, n: int) -> None:
        """Trend, seasonal profile and holiday effects as arrays; the Prophet object is dropped."""
        params = model.params
        k = float(np.nanmean(params["k"]))
        m = float(np.nanmean(params["m"]))
        deltas = np.nanmean(params["delta"], axis=0)
        changepoints = np.asarray(model.changepoints_t, dtype=np.float64)
        self.slope = k + float(deltas.sum())
        self.intercept = m - float((changepoints * deltas).sum())
        self.y_scale = float(model.y_scale)
        self.t0 = pd.Timestamp(model.start).value / 1e9
        self.t_scale = pd.Timedelta(model.t_scale).total_seconds()
        grid = self.anchor + self.step * np.arange(n, dtype=np.float64)
        self.profile = self._components(model, grid, ("daily", "weekly"))
        days = np.arange(
            np.floor(history.start / DAY), np.floor(history.end / DAY) + HOLIDAY_DAYS + 1
        )
        effects = (
            self._components(model, days * DAY, ("holidays",))
            if self.holidays
            else np.zeros(days.size)
        )
        keep = np.abs(effects) > 1e-12
        self.holiday_days, self.holiday_effects = days[keep], effects[keep]

    def _components(self, model: Any, times: FloatArray, names: tuple[str, ...]) -> FloatArray:
        frame = model.setup_dataframe(pd.DataFrame({"ds": _ds(times)}))
        features, _, columns, _ = model.make_all_seasonality_features(frame)
        mask = sum(
            (columns[c].to_numpy() for c in names if c in columns.columns),
            np.zeros(columns.shape[0]),
        )
        beta = np.nanmean(model.params["beta"], axis=0) * mask
        out: FloatArray = features.to_numpy(dtype=np.float64) @ beta * self.y_scale
        return out

    def curve(self, times: FloatArray) -> FloatArray:
        """Prophet's log-scale forecast at `times` (trend of the last segment + seasonality)."""
        if self.profile.size == 0:
            raise FitError("prophet model used before fit")
        trend = (self.slope * (times - self.t0) / self.t_scale + self.intercept) * self.y_scale
        phase = np.rint((times - self.anchor) / self.step).astype(np.int64) % self.profile.size
        out: FloatArray = trend + self.profile[phase]
        if self.holiday_days.size:
            day = np.floor(times / DAY)
            at = np.searchsorted(self.holiday_days, day)
            at = np.minimum(at, self.holiday_days.size - 1)
            out = out + np.where(self.holiday_days[at] == day, self.holiday_effects[at], 0.0)
        return out

    def predict(self, recent: Series, steps: int) -> FloatArray:
        future = recent.end + self.step * np.arange(1, steps + 1, dtype=np.float64)
        z = self.curve(future) + self.residual_level(recent)
        out: FloatArray = np.maximum(np.exp(z) - self.offset, 0.0)
        return out

    def predict_at(self, history: Series, ends: npt.NDArray[np.int64], steps: int) -> FloatArray:
        """`predict` from every origin `history.values[: i + 1]`, i in `ends`: row k equals
        `predict(history.until(origin k), steps)` bit for bit (models.origins relies on it).
        The residuals are computed once for the whole history (elementwise, the same
        numbers); each origin's residual level is still its own dot product."""
        ends = np.asarray(ends, dtype=np.int64)
        level = np.zeros(ends.size)
        if self.alpha > 0:
            keep = _memory(self.alpha, round(DAY / self.step))
            values = history.values
            ok = ~np.isnan(values)
            residual = np.full(values.size, np.nan)
            residual[ok] = np.log(np.maximum(values[ok], 0.0) + self.offset) - self.curve(
                history.times()[ok]
            )
            weights = self.alpha * (1 - self.alpha) ** np.arange(keep - 1, -1, -1, dtype=np.float64)
            for row, i in enumerate(ends.tolist()):
                first = max(0, i + 1 - keep)
                seen = ok[first : i + 1]
                if seen.any():
                    e = residual[first : i + 1][seen]
                    level[row] = weights[keep - e.size :] @ e
        end_times = history.start + ends * history.step
        future = end_times[:, None] + self.step * np.arange(1, steps + 1, dtype=np.float64)
        out: FloatArray = np.maximum(np.exp(self.curve(future) + level[:, None]) - self.offset, 0.0)
        return out

    def residual_level(self, recent: Series) -> float:
        """Exponentially weighted mean of the newest residuals (log scale), missing ones skipped."""
        if self.alpha <= 0:
            return 0.0
        keep = _memory(self.alpha, round(DAY / self.step))
        values = recent.values[-keep:]
        ok = ~np.isnan(values)
        if not ok.any():
            return 0.0
        times = recent.times()[-keep:][ok]
        e = np.log(np.maximum(values[ok], 0.0) + self.offset) - self.curve(times)
        weights = self.alpha * (1 - self.alpha) ** np.arange(e.size - 1, -1, -1, dtype=np.float64)
        return float(weights @ e)

    def interval(self, p50: FloatArray, quantile: float) -> FloatArray:
        """Prophet's own interval: Gaussian observation noise sigma_obs (log scale)."""
        return lognormal_upper(
            p50, offset=self.offset, sigma=np.full(p50.size, self.sigma), quantile=quantile
        )

    def to_dict(self) -> dict[str, Any]:
        scalars = ("step", "anchor", "t0", "t_scale", "slope", "intercept", "y_scale")
        return {
            **{name: float(getattr(self, name)) for name in scalars},
            "offset": self.offset,
            "alpha": self.alpha,
            "sigma": self.sigma,
            "holidays": self.holidays,
            "profile": [float(v) for v in self.profile],
            "holiday_days": [float(v) for v in self.holiday_days],
            "holiday_effects": [float(v) for v in self.holiday_effects],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        try:
            holidays = data["holidays"]
            model = cls(holidays=None if holidays is None else str(holidays))
            for name in ("step", "anchor", "t0", "t_scale", "slope", "intercept", "y_scale"):
                setattr(model, name, float(data[name]))
            model.offset = float(data["offset"])
            model.alpha = float(data["alpha"])
            model.sigma = float(data["sigma"])
            model.profile = np.asarray(data["profile"], dtype=np.float64)
            model.holiday_days = np.asarray(data["holiday_days"], dtype=np.float64)
            model.holiday_effects = np.asarray(data["holiday_effects"], dtype=np.float64)
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtefactError(f"prophet artefact is malformed: {exc!r}") from exc
        if model.profile.ndim != 1 or model.profile.size == 0 or model.step <= 0:
            raise ArtefactError("prophet artefact: empty profile or non-positive step")
        if model.holiday_days.shape != model.holiday_effects.shape or model.t_scale <= 0:
            raise ArtefactError("prophet artefact: holiday arrays differ in length, or bad scale")
        return model


@dataclass(frozen=True)
class Optimum:
    """A Prophet MAP fit's parameters (in Prophet's scaled units) and the scales they are in,
    to start another fit from."""

    k: float
    m: float
    delta: FloatArray
    beta: FloatArray
    sigma_obs: float
    y_scale: float
    t_scale: float
    """Seconds from the first to the last fitted point."""

    @classmethod
    def of(cls, model: Any) -> Optimum:
        params = model.params
        return cls(
            k=float(np.nanmean(params["k"])),
            m=float(np.nanmean(params["m"])),
            delta=np.nanmean(params["delta"], axis=0),
            beta=np.nanmean(params["beta"], axis=0),
            sigma_obs=float(np.nanmean(params["sigma_obs"])),
            y_scale=float(model.y_scale),
            t_scale=pd.Timedelta(model.t_scale).total_seconds(),
        )

    def rescaled(self, times: FloatArray, z: FloatArray) -> dict[str, Any]:
        """Stan inits for a fit on (times, z) that starts at the same time as this one did:
        the same curve in that fit's scales (Prophet's absmax y scale, the span as t scale).
        The changepoints keep their order (Prophet spreads them over the same share of each
        history); a shape that does not match makes Prophet fall back to its default."""
        y_scale = float(np.abs(z).max()) or 1.0
        t_scale = float(times[-1] - times[0]) if times.size > 1 else self.t_scale
        y, t = self.y_scale / y_scale, (t_scale / self.t_scale if self.t_scale > 0 else 1.0)
        return {
            "k": self.k * y * t,
            "m": self.m * y,
            "delta": self.delta * y * t,
            "beta": self.beta * y,
            "sigma_obs": max(self.sigma_obs * y, 1e-9),
        }


def _write_inputs_in_c(stan: Any) -> None:
    """Hand CmdStan its data and inits as JSON files written in C (models/stan_inputs.py).

    cmdstanpy writes them with stanio, which walks every number of Prophet's feature matrix in
    Python and then streams it through json's pure-Python encoder: 3-4 s per fit on four weeks
    of 5-minute data, a third of a backtest. The numbers are the same (each float's shortest
    repr), so the fit is the same, bit for bit."""
    optimize = getattr(stan, "optimize", None)
    if optimize is None or getattr(optimize, "writes_inputs_in_c", False):
        return

    def from_files(*, data: Any = None, inits: Any = None, **kwargs: Any) -> Any:
        with tempfile.TemporaryDirectory(prefix="prophet-") as folder:
            paths = []
            for name, value in (("data", data), ("inits", inits)):
                if isinstance(value, dict):
                    path = Path(folder) / f"{name}.json"
                    stan_inputs.write(path, value)
                    value = str(path)
                paths.append(value)
            return optimize(data=paths[0], inits=paths[1], **kwargs)

    from_files.writes_inputs_in_c = True  # type: ignore[attr-defined]
    stan.optimize = from_files


def _ds(times: FloatArray) -> pd.Series:
    """Epoch seconds -> the naive UTC datetimes Prophet wants."""
    nanoseconds = np.rint(np.asarray(times, dtype=np.float64) * 1e9).astype(np.int64)
    return pd.Series(pd.to_datetime(nanoseconds, unit="ns"))


def _residual_weight(residuals: FloatArray, *, ahead: int = 1) -> float:
    """The smoothing weight with the least in-sample squared error `ahead` steps past the level
    (1: one step, today's rule; missing skipped)."""
    e = residuals[np.isfinite(residuals)]
    if e.size < 3 or np.ptp(e) < 1e-12:
        return 0.0
    if ahead <= 1:
        best, best_error = 0.0, float((e * e).mean())  # 0: no correction
        for alpha in RESIDUAL_WEIGHTS:
            level, total = 0.0, 0.0
            for value in e:
                total += (value - level) ** 2
                level += alpha * (value - level)
            if total / e.size < best_error:
                best, best_error = alpha, total / e.size
        return best
    best, best_error = 0.0, float((e * e).mean())
    for alpha in RESIDUAL_WEIGHTS:
        levels = np.zeros(e.size)  # levels[t]: the level after e[t], the forecast of e[t + ahead]
        level = 0.0
        for t, value in enumerate(e.tolist()):
            level += alpha * (value - level)
            levels[t] = level
        miss = e[ahead:] - levels[: e.size - ahead]
        error = float((miss * miss).sum() + (e[:ahead] * e[:ahead]).sum()) / e.size
        if error < best_error:
            best, best_error = alpha, error
    return best


def _memory(alpha: float, cap: int) -> int:
    """Points whose weight is above 1% of the newest one's, at most `cap`."""
    if alpha >= 1:
        return 1
    return int(min(max(math.ceil(math.log(0.01) / math.log(1 - alpha)), 1), max(cap, 1)))
