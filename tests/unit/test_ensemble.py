"""The median of the candidates: robust to one member gone astray, built from the candidates'
own backtests without refitting, and chosen by `auto` only when it beats them hour after hour."""

from __future__ import annotations

import numpy as np

from models import artefact, catalog, ensemble, select
from models.base import Series
from models.calibrate import fit_calibrated
from models.ensemble import Ensemble
from models.ets import ETSModel
from models.seasonal import SeasonalBaseline
from tests.contract.synthetic import load
from tests.unit.test_models_select import with_losses

STEPS = 4


def test_one_member_gone_astray_does_not_drag_the_median_with_it() -> None:
    history = load(15, seed=1)
    sane = [catalog.adapter(kind)() for kind in ("seasonal", "ets")]
    astray = SeasonalBaseline()
    for model in sane:
        model.fit(history)
    astray.fit(Series(history.start, history.step, history.values * 10))  # ten times the load
    both = np.vstack([m.predict(history, STEPS) for m in sane])
    median = Ensemble([*sane, astray]).predict(history, STEPS)
    assert (median >= both.min(axis=0) - 1e-9).all() and (median <= both.max(axis=0) + 1e-9).all()


def test_the_combined_backtest_is_the_median_of_the_candidates_on_the_same_origins() -> None:
    history = load(15, seed=2)
    fitted = [fit_calibrated(catalog.adapter(k), history, steps=STEPS) for k in catalog.CANDIDATES]
    combined = ensemble.combine(fitted, history)
    assert combined is not None and combined.backtest is not None
    p50s = np.stack([m.backtest.p50 for m in fitted if m.backtest is not None])
    np.testing.assert_array_equal(combined.backtest.p50, np.median(p50s, axis=0))
    assert 0.9 <= combined.scores["coverage"] <= 1.0
    loaded = artefact.load(artefact.dump(combined))
    forecast = loaded.forecast(history, steps=STEPS, quantile=0.95)
    np.testing.assert_array_equal(forecast.p50, combined.model.predict(history, STEPS))


def test_a_single_candidate_is_no_ensemble() -> None:
    history = load(15, seed=3)
    only = fit_calibrated(catalog.adapter("seasonal"), history, steps=STEPS)
    assert ensemble.combine([only], history) is None


def test_auto_grades_the_ensemble_next_to_every_candidate() -> None:
    best = select.fit_best(load(15, seed=4), steps=STEPS, candidates=("seasonal", "ets"))
    assert {"pinball.seasonal", "pinball.ets", "pinball.ensemble"} <= set(best.scores)


def test_the_ensemble_better_only_by_chance_loses_to_the_cheaper_single_model() -> None:
    rng = np.random.default_rng(0)
    cheap = rng.gamma(1.0, 10.0, 2016)  # a week of 5-minute origins
    lucky = cheap * np.repeat(rng.uniform(0.2, 1.8, 168), 12)
    lucky *= 0.95 * cheap.mean() / lucky.mean()  # 5% lower over the week, by the hour's luck
    median = Ensemble([SeasonalBaseline(), ETSModel()])
    chosen = select.choose([with_losses(SeasonalBaseline(), cheap), with_losses(median, lucky)])
    assert chosen.kind == "seasonal"


def test_the_ensemble_better_hour_after_hour_is_chosen() -> None:
    cheap = np.random.default_rng(1).gamma(1.0, 10.0, 2016)
    median = Ensemble([SeasonalBaseline(), ETSModel()])
    steady = cheap * 0.8  # 20% lower in every hour
    chosen = select.choose([with_losses(SeasonalBaseline(), cheap), with_losses(median, steady)])
    assert chosen.kind == "ensemble"
