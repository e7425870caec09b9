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
(grading.origin_peak_losses), pooled the same way, may not be above the incumbent's by more
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
from models.calibrate import CalibratedModel, fit_calibrated
from models.conformal import Backtest
from models.grading import origin_losses, origin_peak_losses

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
    best, why = choice(fitted, paths, peaks if PEAK_GUARD else None)
    for model in fitted:
        if math.isfinite(_loss(model)):
            best.scores[f"pinball.{model.kind}"] = _loss(model)
    # A lower score than the chosen one's is not chosen for a reason the line must say: the
    # scores shown are the latest window's, the choice pools two, tests chance and the peak.
    passed = [f"; {m.kind} not chosen: {why[m.kind]}" for m in fitted if _loss(m) < _loss(best)]
    losses = ", ".join(f"{m.kind} {m.scores.get('pinball', math.nan):.4g}" for m in fitted)
    if not any(math.isfinite(_loss(m)) for m in fitted):
        # Nothing was compared: the cheapest is kept by default, not chosen on evidence.
        logger.info(
            "auto could not choose: no candidate could be graded on the latest week (%s; "
            "is there no observed load in it?); kept the cheapest, %s",
            losses,
            best.kind,
        )
        return best
    logger.info("auto chose %s: %s%s", best.kind, losses, "".join(passed))
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
    return choice(models, pooled, peaks)[0]


def choice(
    models: list[CalibratedModel],
    pooled: dict[str, FloatArray] | None = None,
    peaks: dict[str, FloatArray] | None = None,
) -> tuple[CalibratedModel, dict[str, str]]:
    """`choose`'s model, and why each other one was not chosen, by kind, in words: the
    comparison that decided it, as it happened (a costlier challenger against the incumbent
    of its turn; an incumbent replaced by the challenger that beat it)."""
    ordered = sorted(models, key=lambda m: m.model.cost)
    best, why = ordered[0], {}
    for model in ordered[1:]:
        rejected = _rejection(model, best, pooled, peaks)
        if rejected is None:
            why[best.kind] = f"{model.kind} beat it{_over(model, best, pooled)}"
            best = model
        else:
            why[model.kind] = rejected
    return best, why


def _rejection(
    challenger: CalibratedModel,
    incumbent: CalibratedModel,
    pooled: dict[str, FloatArray] | None,
    peaks: dict[str, FloatArray] | None,
) -> str | None:
    """Why the costlier `challenger` does not replace `incumbent`, or None when it does: lower
    loss by more than TIE, by more than chance on the same origins, and no loss on the peak."""
    if pooled is not None:
        a, b = pooled[incumbent.kind], pooled[challenger.kind]
        paired: tuple[FloatArray, FloatArray] | None = (a, b)
        mine, theirs, where = _mean(b), _mean(a), " over both windows"
    else:
        mine, theirs, where = _loss(challenger), _loss(incumbent), ""
        paired = _pairable(incumbent, challenger)
    name = incumbent.kind
    if not mine < theirs * (1 - TIE):
        return (
            f"{_num(mine)} against {name}'s {_num(theirs)}{where}, not {TIE:.0%} lower "
            f"(a tie goes to the cheaper {name})"
        )
    if paired is not None and not _paired(*paired, step=challenger.step):
        better, worse = _signs(*paired, step=challenger.step)
        return (
            f"lower than {name} in {better} of {better + worse} hours{where}, not by more than "
            f"chance (sign test {_z(better, worse):.2f} standard deviations, needs over "
            f"{SIGNIFICANCE:g})"
        )
    if _loses_peak(challenger, incumbent, peaks):
        assert peaks is not None
        return (
            f"loses on the peak the decision buys ({_num(_mean(peaks[challenger.kind]))} "
            f"against {name}'s {_num(_mean(peaks[incumbent.kind]))}, over {TIE:.0%} worse)"
        )
    return None


def _over(
    challenger: CalibratedModel,
    incumbent: CalibratedModel,
    pooled: dict[str, FloatArray] | None,
) -> str:
    """The losses a challenger beat an incumbent by, in words."""
    if pooled is None:
        return ""
    mine, theirs = _mean(pooled[challenger.kind]), _mean(pooled[incumbent.kind])
    return f" over both windows ({_num(mine)} against {_num(theirs)})"


def _num(loss: float) -> str:
    return f"{loss:.4g}"


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


def _pairable(
    incumbent: CalibratedModel, challenger: CalibratedModel
) -> tuple[FloatArray, FloatArray] | None:
    """The two models' losses on the same origins, for the paired test; None when there is
    nothing to pair (e.g. scores read from artefacts, or an ungraded incumbent): the margin
    decides."""
    a, b = incumbent.losses, challenger.losses
    if not math.isfinite(_loss(incumbent)):
        return None
    if a is None or b is None or a.shape != b.shape:
        return None
    return a, b


def _paired(a: FloatArray, b: FloatArray, *, step: float) -> bool:
    """Paired sign test on hourly blocks: are losses `b` lower than `a` by more than chance?"""
    if not math.isfinite(_mean(a)):
        return True
    better, worse = _signs(a, b, step=step)
    if better + worse < 3:
        return False
    return _z(better, worse) > SIGNIFICANCE


def _signs(a: FloatArray, b: FloatArray, *, step: float) -> tuple[int, int]:
    """Hourly blocks where losses `b` are lower than `a`, and where they are higher."""
    gain = a - b
    size = max(1, round(BLOCK / step))
    blocks = [gain[i : i + size] for i in range(0, gain.size, size)]
    means = np.array([np.nanmean(x) for x in blocks if np.isfinite(x).any()])
    return int((means > 0).sum()), int((means < 0).sum())


def _z(better: int, worse: int) -> float:
    """The sign test's statistic: standard deviations of a fair coin above an even split."""
    return (better - worse) / math.sqrt(better + worse) if better + worse else 0.0


def _loss(model: CalibratedModel) -> float:
    loss = model.scores.get("pinball", math.nan)
    return loss if math.isfinite(loss) else math.inf


def _mean(losses: FloatArray) -> float:
    finite = losses[np.isfinite(losses)]
    return float(finite.mean()) if finite.size else math.inf
