"""The champion's weekly score in one pass is backtest_loss's origin-by-origin number, bit for
bit, wherever its fit falls: after the window (a champion fitted on this very history), inside
it (adaptive widening and daily tables after the fit), or before it (a week-old champion)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from models import artefact, challenge
from models.base import DAY, Series
from models.conformal import calibration_window
from scaler.offline import retrain_score
from tests.contract import synthetic

STEPS = 4


def load(days: float) -> Series:
    """Daily and weekly load, 1 % missing, twice as busy over the last two days (the band
    after the fit must widen)."""
    base = synthetic.load(days, seed=9)
    values = base.values.copy()
    values[np.random.default_rng(9).random(values.size) < 0.01] = np.nan
    values[base.times() > base.end - 2 * DAY] *= 2.0
    return Series(base.start, base.step, values)


@pytest.mark.parametrize("kind", ["seasonal", "ets"])
@pytest.mark.parametrize("fitted_days_ago", [0.0, 3.0, 8.0])
def test_the_one_pass_champion_score_is_the_origin_by_origin_one(
    kind: str, fitted_days_ago: float
) -> None:
    history = load(30)
    fit_end = history.end - fitted_days_ago * DAY
    data = artefact.fit(kind, history.until(fit_end).since(fit_end - 21 * DAY), STEPS)
    since = history.end - calibration_window(history.span)

    fast = retrain_score.champion_loss(
        artefact.load(data), history, since=since, steps=STEPS, quantile=0.95
    )
    slow = challenge.backtest_loss(
        artefact.load(data), history, since=since, steps=STEPS, quantile=0.95
    )

    assert math.isfinite(slow)
    assert fast == slow
    shortcut = retrain_score._uppers(
        artefact.load(data), history, since=since, steps=STEPS, quantile=0.95
    )
    assert shortcut is not None  # the one pass, not the fallback to backtest_loss


def test_a_model_without_the_one_pass_is_scored_origin_by_origin(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    history = load(22)
    model = artefact.load(artefact.fit("seasonal", history, STEPS))
    calls: list[float] = []
    monkeypatch.setattr(
        challenge, "backtest_loss", lambda *_a, **kw: calls.append(kw["since"]) or 1.5
    )
    model.step = 60.0  # another step than the history's: no shortcut
    assert (
        retrain_score.champion_loss(
            model, history, since=history.end - DAY, steps=STEPS, quantile=0.95
        )
        == 1.5
    )
    assert calls == [history.end - DAY]
