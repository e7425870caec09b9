"""A target's drift state rebuilt from what every replica shares: the model artefact and the
series. No state file: like the prewarm ledger, it is derived again after a restart.

scaler/decision/drift.py is deterministic: fed the same forecasts and actuals it reaches the same
state. So the state of a model's tracker is a function of the artefact and of the history since
its fit, and `rebuild` computes it by replaying that history through the very code the live
engine runs each step: at every model-step origin since the fit, score the actuals now known and
record the forecast made from the history the engine held then (the `window` ending at that
origin). A replica that has served since the fit and one started a minute ago then hold the
same state, and answer alike (DESIGN.md: derive state from shared inputs).

The engine rebuilds on every new model, not only at start-up, so a hot-reloaded champion or a
refit starts from the same point on every replica. What a refit does not see is the fallback
its predecessor was in (the new model's fit is where replay begins): `carried_fallback` restarts
the new model's monitor in FALLBACK, with its long window empty, exactly as on entering
fallback; the writer of a model records it with the artefact (scaler/serving/champions.py).

Cost: one forecast per model step since the fit. For a model with a many-origin forecast (the
seasonal baseline, models/manyorigin.py) they are made in one numpy pass, bit for bit the
forecasts the live engine makes one per step, and scored in one call: a day-old model replays
in about 25 ms, a week-old one (2,016 origins) in about 0.15 s, most of it DriftMonitor.observe.
Other models loop over `forecast`, about 1.2 ms an origin. It runs in a thread, off the event
loop. Must not: fetch data (the caller hands over the series).
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from models import manyorigin
from models.base import DAY, Forecast, Series
from models.calibrate import CONTEXT, CalibratedModel
from scaler.decision import drift, drift_measure, drift_null, drift_tracker
from scaler.decision.spec import TargetSpec
from scaler.serving.state import forecast_steps

REPLAY_SPAN = max(CONTEXT, 1.5 * drift_measure.NULL_SPAN) + DAY
"""History before a model's fit its replay reads: every forecast since the fit is a function of
the data from CONTEXT (8 days) before the fit on (the adaptive widening's context; each model's
own memory, a week at most, and the daily re-measure's half week fall inside it), and a null
measured again (none stored) reads 1.5 weeks (drift_measure.NULL_SPAN and half of it as context); a
day more keeps that window's first point inside. tests/unit/test_replay_span.py holds the
replay from this span to the one from the whole window, bit for bit."""
REPLAY_SPAN_NULL_STORED = CONTEXT + DAY
"""The same with the model's null stored with it (NULL_KEY): nothing measures it again, so the
forecasts' CONTEXT and the day are all a replay reads (9 days instead of 11.5: a warm-up's
largest read, the bucket peaks before the fit, is that much shorter)."""

NULL_KEY = "drift_null"
"""Artefact key holding the model's drift null, measured once by the replica that fitted it."""


def start(model: CalibratedModel, *, window: float) -> float:
    """Where the history a rebuild needs begins: the engine's `window` before the fit."""
    return model.trained_until - window + model.step


def replay_start(model: CalibratedModel, *, window: float, null_stored: bool = False) -> float:
    """Where the least history a rebuild needs begins: REPLAY_SPAN (REPLAY_SPAN_NULL_STORED
    when the model's null is stored; at most the engine's `window`) before the fit. A rebuild
    from there gives the same tracker as one from `start`; what the engine keeps for its next
    fit is read after SERVING (scaler/serving/warmup.py)."""
    span = REPLAY_SPAN_NULL_STORED if null_stored else REPLAY_SPAN
    return model.trained_until - min(window, span) + model.step


def rebuild(
    spec: TargetSpec,
    model: CalibratedModel,
    history: Series,
    *,
    window: float,
    null: drift_null.Null | None = None,
    carried_fallback: bool = False,
) -> drift_tracker.DriftTracker:
    """The tracker of `model` after replaying `history` (which should begin at `start`) from the
    model's fit to its end; `null` saves measuring it again (`null_to_json`)."""
    tracker = drift_tracker.DriftTracker(
        lead_time=spec.lead_time,
        monitor=drift.DriftMonitor(quantile=spec.quantile, step=history.step),
    )
    tracker.use(model, null if null is not None else tracker.null_of(model, history))
    if carried_fallback:
        tracker.monitor.state = drift.DriftState.FALLBACK
    if history.step != model.step:
        return tracker
    steps = forecast_steps(spec, history.step)
    keep = int(window // history.step)
    first = max(model.trained_until, history.start)
    origins = math.floor((history.end - first) / history.step + 1e-9) + 1
    if origins <= 0:
        return tracker
    at = round((first - history.start) / history.step)
    made = manyorigin.forecasts(
        model, history, first=at, steps=steps, quantile=spec.quantile, keep=keep
    )
    if made is None:  # no many-origin shortcut for this model: one forecast per origin
        made = _one_by_one(spec, model, history, first=first, origins=origins, keep=keep)
    # The live engine scores the newest actual, then records the step's forecast. Recording
    # them all first and scoring once matches every actual with the same forecast (the one
    # made lead time before it), in the same order, without a Series per origin. The newest
    # actual is scored on its own: a refit asked for in the past was the live engine's to
    # make then (and its result is the next champion); only one asked for now is still due.
    step = history.step
    tracker.score(history.until(first))  # nothing pending yet: marks where scoring begins
    for forecast in made:
        tracker.record(forecast)
    if len(made) > 1:
        tracker.score(history.until(history.end - step))
        tracker.monitor.take_retrain()
        tracker.score(history)
    asked = tracker.monitor.take_retrain()
    tracker.monitor.retrain_requested = asked
    return tracker


def _one_by_one(
    spec: TargetSpec,
    model: CalibratedModel,
    history: Series,
    *,
    first: float,
    origins: int,
    keep: int,
) -> list[Forecast]:
    """`model.forecast` from the newest `keep` points known at each origin, one at a time."""
    steps = forecast_steps(spec, history.step)
    out = []
    for i in range(origins):
        known = history.until(first + i * history.step)
        if len(known) > keep:
            known = known.since(known.end - (keep - 1) * history.step)
        out.append(model.forecast(known, steps=steps, quantile=spec.quantile))
    return out


def null_to_json(null: drift_null.Null, spec: TargetSpec, step: float) -> dict[str, Any]:
    """The null as artefact data, with what it was measured for."""
    return {
        "lead_time": spec.lead_time,
        "quantile": spec.quantile,
        "step": step,
        **asdict(null),
    }


def null_from_json(data: Any, spec: TargetSpec, step: float) -> drift_null.Null | None:
    """The stored null when it was measured for this target's lead time, quantile and step;
    None (measure it again) when it was not, or is malformed."""
    if not isinstance(data, dict):
        return None
    try:
        if (
            float(data["lead_time"]) != spec.lead_time
            or float(data["quantile"]) != spec.quantile
            or float(data["step"]) != step
        ):
            return None

        def pair(k: str) -> tuple[float, float]:
            return float(data[k][0]), float(data[k][1])

        windows = (int(data["windows"][0]), int(data["windows"][1]))
        null = drift_null.Null(
            windows=windows,
            means=pair("means"),
            spreads=pair("spreads"),
            z=float(data["z"]),
            limits=pair("limits"),
            samples=int(data["samples"]),
            lower=None if data.get("lower") is None else pair("lower"),
            misses=None
            if data.get("misses") is None
            else (int(data["misses"][0]), int(data["misses"][1])),
            run=None if data.get("run") is None else int(data["run"]),
            routine_gap=float(data.get("routine_gap", 0.0)),
        )
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    values = (
        *null.means,
        *null.spreads,
        *null.limits,
        *(null.lower or ()),
        null.z,
        null.routine_gap,
    )
    if not all(math.isfinite(v) for v in values) or min(windows) < 1:
        return None
    return null
