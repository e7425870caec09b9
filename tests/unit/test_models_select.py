"""`model: auto`: the lowest pinball loss on the latest week wins; ties go to the cheaper model."""

from __future__ import annotations

import numpy as np

from models import artefact, select
from models.base import Series
from models.calibrate import LEVELS, CalibratedModel, Calibration
from models.ets import ETSModel
from models.prophet import ProphetModel
from models.seasonal import SeasonalBaseline
from tests.contract.synthetic import load


def graded(model: object, loss: float) -> CalibratedModel:
    return CalibratedModel(
        model=model,  # type: ignore[arg-type]
        calibration=Calibration(table=np.zeros((1, LEVELS.size)), floor=1.0, samples=1),
        trained_from=0.0,
        trained_until=1.0,
        step=300.0,
        fingerprint="0" * 16,
        scores={"pinball": loss},
    )


def test_the_lowest_pinball_loss_wins() -> None:
    chosen = select.choose(
        [graded(SeasonalBaseline(), 10.0), graded(ETSModel(), 7.0), graded(ProphetModel(), 8.0)]
    )
    assert chosen.kind == "ets"


def test_a_tie_goes_to_the_cheaper_model() -> None:
    chosen = select.choose(
        [graded(ProphetModel(), 9.95), graded(SeasonalBaseline(), 10.0), graded(ETSModel(), 9.9)]
    )
    assert chosen.kind == "seasonal"


def test_a_model_that_could_not_be_graded_loses_to_one_that_was() -> None:
    chosen = select.choose([graded(SeasonalBaseline(), float("nan")), graded(ETSModel(), 50.0)])
    assert chosen.kind == "ets"


def test_auto_records_every_candidates_backtest_score_in_the_artefact() -> None:
    history = load(15, seed=1)
    best = select.fit_best(history, steps=4, candidates=("seasonal", "ets"))
    assert {"pinball.seasonal", "pinball.ets"} <= set(best.scores)
    assert best.scores["pinball"] == min(
        best.scores["pinball.seasonal"], best.scores["pinball.ets"]
    )
    data = artefact.dump(best)
    assert artefact.load(data).kind == best.kind


def test_auto_picks_a_model_that_tracks_a_level_shift_over_one_that_cannot() -> None:
    base = load(15, seed=2)
    values = base.values.copy()
    values[-3 * 288 :] *= 3.0  # traffic tripled three days ago and stayed there
    shifted = Series(base.start, base.step, values)
    best = select.fit_best(shifted, steps=4, candidates=("naive", "seasonal"))
    assert best.scores["pinball"] <= best.scores["pinball.naive"]


def with_losses(model: object, losses: np.ndarray) -> CalibratedModel:
    graded_model = graded(model, float(np.mean(losses)))
    graded_model.losses = losses
    return graded_model


def test_a_costlier_model_that_is_better_only_by_chance_is_a_tie() -> None:
    rng = np.random.default_rng(0)
    cheap = rng.gamma(1.0, 10.0, 2016)  # a week of 5-minute origins
    hourly = np.repeat(rng.uniform(0.2, 1.8, 168), 12)  # better some hours, worse others
    lucky = cheap * hourly
    lucky *= 0.95 * cheap.mean() / lucky.mean()  # 5% lower over the week
    chosen = select.choose([with_losses(SeasonalBaseline(), cheap), with_losses(ETSModel(), lucky)])
    assert chosen.kind == "seasonal"


def test_a_costlier_model_that_is_better_hour_after_hour_is_chosen() -> None:
    rng = np.random.default_rng(1)
    cheap = rng.gamma(1.0, 10.0, 2016)
    steady = cheap * 0.8
    chosen = select.choose(
        [with_losses(SeasonalBaseline(), cheap), with_losses(ETSModel(), steady)]
    )
    assert chosen.kind == "ets"


def test_a_costlier_model_that_loses_on_the_peak_the_decision_buys_is_not_chosen() -> None:
    rng = np.random.default_rng(2)
    cheap = rng.gamma(1.0, 10.0, 2016)
    steady = cheap * 0.8  # better hour after hour along the path (chosen without the guard)
    peaks = {"seasonal": rng.gamma(1.0, 10.0, 2016)}
    peaks["ets"] = peaks["seasonal"] * 1.5  # but it buys for the wrong peak
    models = [with_losses(SeasonalBaseline(), cheap), with_losses(ETSModel(), steady)]
    pooled = {"seasonal": cheap, "ets": steady}
    assert select.choose(models, pooled).kind == "ets"  # the ablation: the path alone
    assert select.choose(models, pooled, peaks).kind == "seasonal"
    peaks["ets"] = peaks["seasonal"] * 1.01  # within TIE on the peak: the path decides
    assert select.choose(models, pooled, peaks).kind == "ets"
