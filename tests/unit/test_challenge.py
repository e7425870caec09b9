"""The champion's side of `scaler retrain`'s race (models/challenge.py): its loss over the
newest week, each forecast made from data before its origin."""

from __future__ import annotations

import math

import numpy as np
import pytest

from models import artefact
from models.base import DAY, Series, observed_span
from models.challenge import backtest_loss
from models.conformal import calibration_window
from scaler.decision import spec as specs
from scaler.offline import retrain_race
from tests.contract.synthetic import load

HISTORY = load(15, seed=7)
STEPS = 4


def loss(data: dict[str, object], history: Series) -> float:
    since = history.end - calibration_window(history.span)
    model = artefact.load(data)
    return backtest_loss(model, history, since=since, steps=STEPS, quantile=0.95)


def test_a_champion_fitted_before_the_load_tripled_loses_more_than_one_fitted_after() -> None:
    values = HISTORY.values.copy()
    values[-3 * 288 :] *= 3  # the load tripled three days ago
    history = Series(HISTORY.start, HISTORY.step, values)
    stale = artefact.fit("seasonal", history.until(history.start + 8 * DAY), STEPS)
    fresh = artefact.fit("seasonal", history, STEPS)
    assert loss(stale, history) > loss(fresh, history) > 0
    assert loss(fresh, history) == loss(fresh, history)  # deterministic: a fair race


def test_a_history_with_no_origin_in_the_window_has_no_loss() -> None:
    data = artefact.fit("seasonal", HISTORY, STEPS)
    model = artefact.load(data)
    assert math.isnan(backtest_loss(model, HISTORY, since=HISTORY.end, steps=STEPS, quantile=0.95))


def test_a_series_younger_than_the_history_read_grades_both_models_on_the_challengers_window() -> (
    None
):
    # 10 days observed, read as 28 (the job's --history): missing values before the first.
    observed = load(10, seed=11)
    padding = np.full(18 * 288, np.nan)
    history = Series(observed.start - 18 * DAY, observed.step, np.r_[padding, observed.values])
    spec = specs.parse("gpu", "llm", {"query": "x", "threshold": "10", "model": "seasonal"})
    champion = artefact.fit("seasonal", history.until(history.end - 3 * DAY), STEPS)
    result = retrain_race.challenge(spec, history, STEPS, champion)
    window = calibration_window(observed_span(history))  # what the challenger's fit holds out
    assert window == 2.5 * DAY  # a quarter of 10 days, not the week of 28
    assert result["window"] == window
    assert result["points"] == window / history.step + 1  # both ends
    model = artefact.load(champion)
    since = history.end - window
    graded = backtest_loss(model, history, since=since, steps=STEPS, quantile=spec.quantile)
    assert result["champion_loss"] == pytest.approx(graded, rel=1e-9)
