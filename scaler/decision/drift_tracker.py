"""`DriftTracker` keeps the forecasts made at each origin until their actuals arrive, and feeds the
drift monitor (drift.py) the one made lead time before each actual: the live engine and the
replay both use it. It also swaps in the null of each new model (`adopt`, measured by
drift_measure.py). Everything is a function of the model artefact and the series, so scaler
replicas fed the same data agree. Pure: no clock, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from models.base import Forecast, Series
from models.calibrate import CalibratedModel
from scaler.decision.drift import DriftMonitor
from scaler.decision.drift_measure import null_for
from scaler.decision.drift_null import Null


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
