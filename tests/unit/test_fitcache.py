"""Sharing fits between the backtest's walks: each compared model is fitted once beside `auto`,
and the figures are the same as fitting it again."""

from __future__ import annotations

import json

import numpy as np

from models import fitcache, select
from models.base import DAY, Series
from scaler.offline import backtest
from tests.contract.synthetic import load


def test_inside_sharing_the_same_fit_is_made_once_and_outside_every_time() -> None:
    history = load(3)
    with fitcache.sharing():
        first = select.fit_kind("seasonal", history, steps=6)
        assert select.fit_kind("seasonal", history, steps=6) is first
        other = Series(history.start, history.step, np.append(history.values[:-1], 1.0))
        assert select.fit_kind("seasonal", other, steps=6) is not first
        assert select.fit_kind("seasonal", history, steps=7) is not first
    assert select.fit_kind("seasonal", history, steps=6) is not first


def test_a_backtest_grades_the_same_figures_with_and_without_shared_fits() -> None:
    series = load(5)
    config = backtest.BacktestConfig(
        model="auto", compare=("seasonal", "ets"), warmup=3 * DAY, limit=DAY
    )
    alone = backtest.run(series, config).summary
    with fitcache.sharing():
        shared = backtest.run(series, config).summary

    def figures(summary: dict[str, object]) -> str:
        models = {
            name: {k: v for k, v in m.items() if "seconds" not in k and k != "predict_ms_mean"}
            for name, m in summary["models"].items()  # type: ignore[attr-defined]
        }
        return json.dumps(models, sort_keys=True, default=str)

    assert figures(shared) == figures(alone)
