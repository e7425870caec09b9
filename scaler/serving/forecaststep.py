"""A live refresh's forecast step: the model's calibrated peak over the look-ahead, and drift.

Per refresh the engine (scaler/serving/engine.py) asks `forecast_peak` for the peak the policy
prewarms for: the model's forecast from the target's history (made once per model step and
kept on the state for the steps between, `ForecastKept`), scored by the target's drift tracker
against the actuals now known, read at the quantile the budget affords. A drift alarm asks the
fitter for an early refit (`refit_early`); drift fallback is the reason the peak is not used.

Must not: read a source, fit, charge the ledger or publish a decision (booking.py does).
"""

from __future__ import annotations

from models.base import Forecast, Series
from models.calibrate import CalibratedModel
from models.conformal import Calibration
from scaler.decision import drift, drift_tracker, policy
from scaler.serving.state import ForecastKept, TargetState, forecast_steps
from scaler.serving.telemetry import Telemetry


def tracker(state: TargetState, model_step: float) -> drift_tracker.DriftTracker:
    """`state`'s drift tracker, made on first use."""
    if state.drift is None:
        spec = state.spec
        state.drift = drift_tracker.DriftTracker(
            lead_time=spec.lead_time,
            monitor=drift.DriftMonitor(quantile=spec.quantile, step=model_step),
        )
    return state.drift


def forecast_peak(
    state: TargetState, now: float, *, model_step: float, telemetry: Telemetry
) -> tuple[float | None, policy.Reason | None]:
    """The peak to prewarm for at `now` (None without one) and the reason the policy falls back
    to reactive (no model, drift fallback; None: the forecast is trusted)."""
    state.read_quantile, state.level_ratio = None, 1.0
    if state.model is None or state.history is None:
        return None, policy.Reason.NO_MODEL
    spec = state.spec
    drifts = tracker(state, model_step)
    made, table = forecast(state, state.model, state.history, model_step)
    # Score the actuals now known against the forecasts made lead time before them, then
    # keep this forecast for its turn; a drift alarm asks for a refit on the next refresh.
    drifts.score(state.history)
    drifts.record(made)
    telemetry.per_target.forecast(spec, made, state.history, now=now)
    if drifts.monitor.take_retrain():
        state.refit_early = True
    quantile = state.read_quantile = policy.affordable_quantile(
        spec.quantile, remaining=state.ledger.remaining(now), budget=state.ledger.limit(now)
    )
    upper = table.upper(made.p50, quantile)
    peak = policy.finite_peak(upper[made.times() <= now + spec.lookahead + 1e-9])
    points = policy.LEVEL_POINTS if spec.level_insurance else 0
    state.level_ratio = policy.level_ratio(upper, made.p50, points=points)
    fallback = policy.Reason.DRIFT_FALLBACK if drifts.monitor.in_fallback else None
    return peak, fallback


def forecast(
    state: TargetState, model: CalibratedModel, history: Series, model_step: float
) -> tuple[Forecast, Calibration]:
    """`model`'s forecast from `history` and the calibration table its bound is read from
    (`calibration_for`, pure in the model and the history): made once per model step and
    kept on the state (`ForecastKept`) for the steps between, which ask the same."""
    kept, spec = state.forecast_kept, state.spec
    if kept is not None and kept.matches(spec, model, history):
        return kept.forecast, kept.table
    steps = forecast_steps(spec, model_step)
    made = model.forecast(history, steps=steps, quantile=spec.quantile)
    table = model.calibration_for(history, made.p50.size)
    state.forecast_kept = ForecastKept(spec, model, history, made, table)
    return made, table
