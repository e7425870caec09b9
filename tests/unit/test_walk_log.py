"""A walk from the start of a series retries the fit every hour until it has a day of history:
its log names the first failure and its reason once, then one line when a model is fitted,
instead of one line per retry (24 on every backtest of a fresh series)."""

from __future__ import annotations

import logging
import re

import pytest

from models import walkforward
from tests.contract import synthetic


def test_a_walk_logs_its_failed_fits_once_and_their_count_when_a_model_fits(
    caplog: pytest.LogCaptureFixture,
) -> None:
    series = synthetic.load(2.0, seed=1)
    with caplog.at_level(logging.INFO, logger=walkforward.__name__):
        origins = list(
            walkforward.walk_forward("seasonal", series, start=0, steps=6, quantile=0.95)
        )
    lines = [r.getMessage() for r in caplog.records if r.name == walkforward.__name__]
    failed = [line for line in lines if line.startswith("no model at")]
    fitted = [line for line in lines if line.startswith("first model at")]
    assert len(failed) == 1, lines
    assert re.match(r"no model at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ: ", failed[0]), failed[0]
    assert "a forecast needs" in failed[0]
    assert len(fitted) == 1, lines
    retries = sum(1 for o in origins if o.forecast is None and o.index % 12 == 0)
    assert f"after {retries} fits that failed" in fitted[0]
    assert origins[-1].forecast is not None
