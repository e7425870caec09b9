"""`model: auto`: fit every candidate, grade each on the latest week (rolling origin, the
calibration backtest), keep the lowest pinball loss at the requested quantile.

A more expensive model must win by more than TIE (relative) and by more than chance: on the
same origins, it must have the lower mean loss in more hours than it has the higher, by more
than SIGNIFICANCE standard deviations of a fair coin (a paired sign test on hourly blocks, since
neighbouring origins share errors). A sign test, not a t-test on the mean gain: on bursty load
one burst hour dominates both the mean gain and its standard error, so a model better in
nearly every hour was "too noisy to call" (twitter_aapl: Prophet's hourly wins sat 3.5-8.8
coin deviations up at every weekly refit while the t statistic stayed under 2).
Otherwise it is a tie, and ties go to the cheaper model: faster to refit, smaller to keep, easier
to explain, and a lucky week on a short calibration window is not evidence.

The median of the candidates (models.ensemble, built from their backtests without refitting) is
one more candidate, the costliest, under the same rule: it must beat the best single model by
the margin and the test. (Making it the default on a tie was measured and rejected: on
llm_serving the week before the fit favoured the median, 14.6 against 15.3, and the median then
lost to the cheapest model by 120.6 to 68.1 on the week after; a short calibration window
misleads a combination as much as a single model.)

A costlier model must also not lose on the peak the decision buys (PEAK_GUARD): the pinball
loss of each origin's highest actual against its highest calibrated upper over the look-ahead
(calibrate.origin_peak_losses), pooled the same way, may not be above the incumbent's by more
than TIE. The path's loss averages a short recurring spike (a nightly job: one 5-minute bucket a
day) down to nothing, and a smooth model that misses it every night can win on the path while
the replicas bought from its peak are short every night.

The losses compared are pooled over two windows (models.folds): the calibration window and the
one of the same length before it, graded by a fit on the history before that, so a lucky
stretch of one short window is not the whole evidence. When a candidate has no earlier window
(a history too short, or a fit that fails there), every candidate is compared on the
calibration window alone, so the pairs stay on the same origins.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import numpy as np

from models import catalog, ensemble, fitcache, folds
from models.base import HOUR, FitError, FloatArray, ModelError, Series
from models.calibrate import (
    Backtest,
    CalibratedModel,
    fit_calibrated,
    origin_losses,
    origin_peak_losses,
)

logger = logging.getLogger(__name__)

TIE = 0.02
"""Relative pinball-loss margin under which two models are tied (the cheaper one wins)."""
SIGNIFICANCE = 2.0
"""Standard deviations of a fair coin (sqrt(hours) / 2) by which a costlier model's count of
better hours must exceed half of the hours (about a 2.3% one-sided false call)."""
BLOCK = HOUR
"""Length of the blocks the paired test averages over (errors within an hour are not
independent: one burst spoils several neighbouring forecasts)."""


@fitcache.memoised
def fit_kind(kind: str, history: Series, *, steps: int, quantile: float = 0.95) -> CalibratedModel:
    """A calibrated model of `kind`, or the best candidate for "auto"."""
    if kind == "auto":
        return fit_best(history, steps=steps, quantile=quantile)
    return fit_calibrated(catalog.adapter(kind), history, steps=steps, quantile=quantile)


def fit_best(
    history: Series,
    *,
    steps: int,
    quantile: float = 0.95,
    candidates: tuple[str, ...] | None = None,
) -> CalibratedModel:
    """Fit each candidate (default: catalog.CANDIDATES, and the challengers switched on,
    `challengers`) and keep the best (see the module docstring). Its `scores` also hold
    every candidate's pinball loss as `pinball.<kind>`. FitError only when none fits."""
    if candidates is None:
        candidates = catalog.CANDIDATES + challengers()
    fitted: list[CalibratedModel] = []
    failures: list[str] = []
    for kind in sorted(candidates, key=lambda k: catalog.adapter(k).cost):
        try:
            fitted.append(fit_kind(kind, history, steps=steps, quantile=quantile))
        except ModelError as exc:
            failures.append(f"{kind}: {exc}")
    if not fitted:
        raise FitError("no model could be fitted (" + "; ".join(failures) + ")")
    combined = ensemble.combine(fitted, history)
    if combined is not None:
        fitted.append(combined)
    found = pooled(fitted, history, steps=steps)
    paths, peaks = found if found else (None, None)
    best = choose(fitted, paths, peaks if PEAK_GUARD else None)
    for model in fitted:
        if math.isfinite(_loss(model)):
            best.scores[f"pinball.{model.kind}"] = _loss(model)
    logger.info(
        "auto chose %s: %s",
        best.kind,
        ", ".join(f"{m.kind} {m.scores.get('pinball', math.nan):.4g}" for m in fitted),
    )
    return best


POOLED_CANDIDATE = True
"""Also grade the seasonal baseline whose profile pools neighbouring phases (models.seasonal
PooledSeasonal) as one more candidate under the same rule (2 % margin, sign test, peak guard;
as cheap as the per-phase one, so it wins ties against costlier models), never a member of the
median. On by default since session 21, measured with the level regression over four draws of
each synthetic kind (docs/forecasting.md "The pooled profile as a default candidate": nasa
0.51 -> 0.46, synthetic noise 0.26 -> 0.18, spikes 0.55 -> 0.48, holidays +0.002);
`scaler backtest --no-pool-phases` is the ablation."""


def challengers() -> tuple[str, ...]:
    """The challengers switched on (catalog.CHALLENGERS): by default the pooled profile."""
    on = {"pooled": POOLED_CANDIDATE}
    return tuple(kind for kind in catalog.CHALLENGERS if on[kind])


PEAK_GUARD = True
"""A costlier model must also not lose on the peak the decision buys (origin_peak_losses, by
more than TIE): `scaler backtest --no-peak-guard` is the ablation (the path's loss alone). A
model that follows the curve better point by point but smooths away a short recurring spike (a
nightly job on mongodb_rps: Prophet's daily harmonics miss its one 5-minute bucket, the
seasonal baseline repeats it) forecasts well and buys the wrong replicas."""

Grade = Callable[..., FloatArray]


def pooled_losses(
    models: list[CalibratedModel], history: Series, *, steps: int
) -> dict[str, FloatArray] | None:
    """Per-origin losses of each model over the earlier window and the calibration window
    (models.folds), by kind; None unless every model has both on the same origins."""
    found = pooled(models, history, steps=steps)
    return found[0] if found else None


def pooled(
    models: list[CalibratedModel], history: Series, *, steps: int
) -> tuple[dict[str, FloatArray], dict[str, FloatArray]] | None:
    """(path losses, peak losses) of each model over both windows, by kind (origin_losses,
    origin_peak_losses); None unless every model has both windows on the same origins."""
    earlier: dict[str, Backtest] = {}
    for model in models:
        if model.kind in catalog.CANDIDATES + catalog.CHALLENGERS:
            found = folds.earlier_backtest(
                catalog.adapter(model.kind), history, steps=steps, warm=model.model
            )
            if found is None:
                return None
            earlier[model.kind] = found
    if len({b.p50.shape for b in earlier.values()}) != 1:
        return None
    members = [
        earlier[m.kind] for m in models if m.kind in catalog.CANDIDATES and m.kind in earlier
    ]
    before: dict[str, Backtest] = {}
    for model in models:
        if model.kind in earlier:
            before[model.kind] = earlier[model.kind]
        elif model.kind == ensemble.Ensemble.kind and members:
            before[model.kind] = ensemble.median_backtest(members)
        else:
            return None
        if model.losses is None:
            return None
    paths = {
        m.kind: np.concatenate([_graded(origin_losses, before[m.kind], m), m.losses])
        for m in models
        if m.losses is not None
    }
    peaks: dict[str, FloatArray] = {}
    for model in models:
        if model.backtest is None:
            return paths, {}
        peaks[model.kind] = np.concatenate(
            [
                _graded(origin_peak_losses, before[model.kind], model),
                _graded(origin_peak_losses, model.backtest, model),
            ]
        )
    return paths, peaks


def _graded(grade: Grade, backtest: Backtest, model: CalibratedModel) -> FloatArray:
    return grade(backtest, floor=model.calibration.floor, quantile=model.quantile)


def choose(
    models: list[CalibratedModel],
    pooled: dict[str, FloatArray] | None = None,
    peaks: dict[str, FloatArray] | None = None,
) -> CalibratedModel:
    """The lowest pinball loss, cheaper first; ungraded models lose to graded ones. With
    `pooled` (per-origin losses by kind), the losses and the paired test are those; with
    `peaks` (per-origin peak losses by kind) a costlier model must not lose on them either."""
    ordered = sorted(models, key=lambda m: m.model.cost)
    best = ordered[0]
    for model in ordered[1:]:
        if _beats(model, best, pooled) and not _loses_peak(model, best, peaks):
            best = model
    return best


def _loses_peak(
    challenger: CalibratedModel,
    incumbent: CalibratedModel,
    peaks: dict[str, FloatArray] | None,
) -> bool:
    """Is the challenger's mean peak loss above the incumbent's by more than TIE? False
    without both (nothing to compare: the path's loss decides)."""
    if not peaks or challenger.kind not in peaks or incumbent.kind not in peaks:
        return False
    return _mean(peaks[challenger.kind]) > _mean(peaks[incumbent.kind]) * (1 + TIE)


def _beats(
    challenger: CalibratedModel,
    incumbent: CalibratedModel,
    pooled: dict[str, FloatArray] | None,
) -> bool:
    """Lower loss by more than TIE, and by more than chance on the same origins."""
    if pooled is not None:
        a, b = pooled[incumbent.kind], pooled[challenger.kind]
        lower = _mean(b) < _mean(a) * (1 - TIE)
        return lower and _paired(a, b, step=challenger.step)
    return _loss(challenger) < _loss(incumbent) * (1 - TIE) and _significant(incumbent, challenger)


def _significant(incumbent: CalibratedModel, challenger: CalibratedModel) -> bool:
    """Does `challenger` beat `incumbent` on the same origins by more than chance?"""
    a, b = incumbent.losses, challenger.losses
    if not math.isfinite(_loss(incumbent)):
        return True
    if a is None or b is None or a.shape != b.shape:
        return True  # nothing to pair (e.g. scores read from artefacts): the margin decides
    return _paired(a, b, step=challenger.step)


def _paired(a: FloatArray, b: FloatArray, *, step: float) -> bool:
    """Paired sign test on hourly blocks: are losses `b` lower than `a` by more than chance?"""
    if not math.isfinite(_mean(a)):
        return True
    gain = a - b
    size = max(1, round(BLOCK / step))
    blocks = [gain[i : i + size] for i in range(0, gain.size, size)]
    means = np.array([np.nanmean(x) for x in blocks if np.isfinite(x).any()])
    better, worse = int((means > 0).sum()), int((means < 0).sum())
    if better + worse < 3:
        return False
    return (better - worse) / math.sqrt(better + worse) > SIGNIFICANCE


def _loss(model: CalibratedModel) -> float:
    loss = model.scores.get("pinball", math.nan)
    return loss if math.isfinite(loss) else math.inf


def _mean(losses: FloatArray) -> float:
    finite = losses[np.isfinite(losses)]
    return float(finite.mean()) if finite.size else math.inf
