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
a level shift (a holiday, a launch, a migration) is followed within the hour. The weight and
the level's memory are models/prophet_level.py's; the warm start and CmdStan's input files,
models/prophet_stan.py's.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar, Self

import numpy as np
import numpy.typing as npt
import pandas as pd

from models import prophet_level, prophet_stan
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
        self.optimum: prophet_stan.Optimum | None = None
        """Stan's fitted parameters with the scales they are in (not in the artefact)."""
        self._start_from: prophet_stan.Optimum | None = None

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
        self.alpha = prophet_level.best_weight(residuals)
        self.sigma = finite_or(float(np.nanmean(model.params["sigma_obs"])) * self.y_scale, 0.0)
        self.optimum = prophet_stan.Optimum.of(model)

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
        prophet_stan.write_inputs_in_c(getattr(model.stan_backend, "model", None))
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
            keep = prophet_level.memory(self.alpha, round(DAY / self.step))
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
        keep = prophet_level.memory(self.alpha, round(DAY / self.step))
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


def _ds(times: FloatArray) -> pd.Series:
    """Epoch seconds -> the naive UTC datetimes Prophet wants."""
    nanoseconds = np.rint(np.asarray(times, dtype=np.float64) * 1e9).astype(np.int64)
    return pd.Series(pd.to_datetime(nanoseconds, unit="ns"))
