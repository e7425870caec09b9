"""The weekly race of `scaler retrain`: fit a challenger for one target, score the champion on
the same window, and say whether the challenger is promoted and why.

The comparison: the challenger's out-of-sample pinball loss on its own calibration window (the
newest week of the history; models.calibrate) against the champion's pinball loss over the very
same window, each forecast made from data before its origin (retrain_score.champion_loss, the
number models.challenge.backtest_loss gives, in one pass).
A champion fitted a week ago has not seen that week, so the race is fair; one fitted minutes ago
has, which favours it: re-running the job promotes nothing new, rather than churning models.

The race is run at one model step only: losses at two steps grade two different series (each
point the peak of a 5- or a 10-minute bucket), so they decide nothing. And `scaler serve`
forecasts at SERVE_STEP, whatever step a model was fitted at: a model at another step would be
served at the wrong step on every replica. So a run at another `--model-step` promotes nothing
(its rows say how those fits scored), and a champion at another step (written by an older
version of this job) is replaced by a challenger at SERVE_STEP without a race, the row saying
so: a step change is never decided by a comparison that means nothing, and never flips back.

Nor is the race run on a latest week with too little observed load (`ungraded`: under a
day's worth of points, or no score): a series that stopped grades every model on a few points
or none, so nothing is promoted and the target's retrain is a failure the alert sees.

`challenge` runs in a fit worker (scaler/serving/workers.py): plain data in and out.
Must not: read the source or the store, or write anything (retrain.py does).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from models import artefact
from models.base import DAY, FloatArray, ModelError, Series, observed_span
from models.conformal import calibration_window
from scaler.decision import drift_measure
from scaler.decision.literals import format_duration
from scaler.decision.spec import TargetSpec
from scaler.offline import retrain_score
from scaler.serving import driftstate
from scaler.settings import EngineSettings

SERVE_STEP = EngineSettings().model_step
"""The step `scaler serve` fits and forecasts at (no flag changes it): the one step whose
models the store may hold as champions."""


def verdict(
    loss: float,
    old: float,
    *,
    champion: int | None,
    problem: str = "",
    idle: bool = False,
    step: float = SERVE_STEP,
    champion_step: float | None = None,
) -> tuple[bool, str]:
    """Promote the challenger? And why, in words. `idle`: the latest week's load was 0
    throughout, so both are scored on nothing and a challenger that forecasts 0 wins. `step`:
    the challenger's model step; `champion_step`: the champion's (None: unknown, it does not
    load). Pure."""
    if not math.isfinite(loss):
        return False, "challenger has no out-of-sample score; the champion stays"
    if step != SERVE_STEP:
        kept = "no champion yet" if champion is None else f"v{champion} stays"
        return False, (
            f"not promoted ({kept}): fitted at a {format_duration(step)} model step "
            f"(--model-step), and scaler serve forecasts at {format_duration(SERVE_STEP)}, "
            "so it would serve this model at the wrong step"
        )
    if champion is None:
        return True, "no champion yet"
    if idle:
        return False, (
            f"v{champion} stays: the load was 0 over the whole latest week, so a challenger "
            "fitted on it learned no load to forecast (a paused service, or a query that "
            "matches an idle series: check it)"
        )
    if problem:
        return True, f"champion v{champion} cannot be scored ({problem})"
    if champion_step is not None and champion_step != step:
        return True, (
            f"re-baseline: v{champion} was fitted at a {format_duration(champion_step)} model "
            f"step, and scaler serve forecasts at {format_duration(step)}; replaced without a "
            "race (losses at two steps grade two different series)"
        )
    if not math.isfinite(old):
        return True, f"champion v{champion} has no forecast over the latest week"
    if loss < old:
        return True, f"pinball {loss:.4g} beats v{champion}'s {old:.4g} on the latest week"
    return False, f"v{champion} stays: its pinball {old:.4g} <= challenger's {loss:.4g}"


def needed(window: float, step: float) -> int:
    """Observed points of the latest week (the calibration window, `window` seconds at `step`)
    a race needs: a day's worth (the daily cycle, its peak and its trough, which every model
    forecasts), or half the window when it is shorter than two days (a --history under 8
    days). Fewer grade a model on an hour or so of one day: its scores say nothing about the
    week it will serve. Pure."""
    return math.ceil(min(DAY, window / 2) / step)


def ungraded(
    loss: float, *, observed: int, points: int, window: float, step: float, champion: int | None
) -> str:
    """Why the race cannot be run, in words, or "" when it can: the latest week (the
    calibration window where challenger and champion are graded, `window` seconds, `points`
    at `step`) with no observed value, or with fewer than `needed`, or a challenger with no
    score. Nothing is promoted on it, and the target's retrain is a failure, not a success:
    it keeps its champion, or has no model at all. Pure."""
    kept = "not promoted, the target has no model" if champion is None else f"v{champion} stays"
    latest = f"the latest {format_duration(window)}"
    check = "check the query still returns recent data, or whether the service is paused"
    if observed == 0:
        return (
            f"{latest} (where challenger and champion are graded) has no observed load: "
            f"{check}; {kept}"
        )
    least = needed(window, step)
    if observed < least:
        rule = "a day's worth" if least * step >= DAY else "half the window"
        return (
            f"only {observed} of {latest}'s {points} points were observed, under the {least} a "
            f"grade needs ({rule}): {check}; {kept}"
        )
    if not math.isfinite(loss):
        return f"the challenger has no out-of-sample score; {kept}"
    return ""


def challenge(
    spec: TargetSpec, history: Series, steps: int, champion: dict[str, Any] | None
) -> dict[str, Any]:
    """Fit the trigger's model on `history`, score the champion on the challenger's
    calibration window (not one at another model step: `verdict`), and measure the
    challenger's drift null as `scaler serve` does with a model it fits
    (scaler/serving/champions.py publish), stored in the artefact so that no replica measures
    it again. Runs in a fit worker: plain data in and out. ModelError when the challenger
    cannot be fitted."""
    quantile = spec.quantile
    data = artefact.fit(spec.model, history, steps, quantile=quantile)
    loss = float(data.get("scores", {}).get("pinball", math.nan))
    fitted = artefact.load(data)
    null = drift_measure.null_for(fitted, history, lead_time=spec.lead_time, quantile=quantile)
    data = {**data, driftstate.NULL_KEY: driftstate.null_to_json(null, spec, fitted.step)}
    old, problem, champion_step = math.nan, "", None
    if champion is not None:
        try:
            model = artefact.load(champion)
            champion_step = model.step
            if model.step == history.step:
                since = history.end - graded_window(history)
                old = retrain_score.champion_loss(
                    model, history, since=since, steps=steps, quantile=quantile
                )
        except ModelError as exc:
            problem = str(exc)
    week = latest_week(history)
    return {
        "artefact": data,
        "loss": loss,
        "champion_loss": old,
        "problem": problem,
        "idle": idle(history),
        "step": history.step,
        "champion_step": champion_step,
        "observed": int(np.count_nonzero(~np.isnan(week))),
        "points": int(week.size),
        "window": graded_window(history),
    }


def graded_window(history: Series) -> float:
    """Seconds of `history`'s newest values where challenger and champion are graded: the
    challenger's calibration window (models.calibrate `fit_calibrated`), sized from the span
    observed as the fit sizes it. A series younger than `--history` is read with missing
    values before its first sample; a window sized from the span read (a week of 28 days)
    graded the champion on a week while the challenger was scored on a quarter of its days."""
    return calibration_window(observed_span(history))


def latest_week(history: Series) -> FloatArray:
    """`history`'s values over its calibration window (the newest week of a 28-day history),
    where challenger and champion are scored; NaN where nothing was observed."""
    return history.since(history.end - graded_window(history)).values


def idle(history: Series) -> bool:
    """Whether every sample of `history`'s latest week (its calibration window, where
    challenger and champion are scored) is 0."""
    window = latest_week(history)
    seen = window[~np.isnan(window)]
    return seen.size > 0 and not np.any(seen)
