"""A walk forward (models/walkforward.py) makes the forecasts between two refits in one-pass
batches (models.manyorigin.walked): bit for bit the forecasts, raw bounds and calibrated tables
that forecasting one origin at a time makes, which is what the live engine does. The replay and
the backtest read these; a batch that drifted from the live path would make every backtest
figure a figure of another product."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from models import manyorigin, walkforward
from models.base import DAY, WEEK, Series
from models.walkforward import Origin
from tests.contract import synthetic

STEPS = 6


def load(days: float, *, seed: int) -> Series:
    """Daily and weekly load with a few missing samples and, after day 9, twice as much of it
    (the adaptive widening moves, and a day's re-measured table with it)."""
    base = synthetic.load(days, seed=seed)
    values = base.values.copy()
    values[np.random.default_rng(seed).random(values.size) < 0.01] = np.nan
    values[base.times() > base.start + 9 * DAY] *= 2.0
    return Series(base.start, base.step, values)


def walk(
    series: Series, *, kind: str, start: int, batched: bool, window: float = WEEK
) -> Iterator[Origin]:
    origins = walkforward.walk_forward(
        kind,
        series,
        start=start,
        steps=STEPS,
        quantile=0.95,
        refit_every=3 * DAY,
        window=window,
    )
    if batched:
        return origins
    with pytest.MonkeyPatch.context() as patch:  # the one-origin-at-a-time path
        patch.setattr(manyorigin, "walked", lambda *a, **k: None)
        return iter(list(origins))


def same(a: Origin, b: Origin, series: Series) -> None:
    assert a.index == b.index
    assert (a.forecast is None) == (b.forecast is None)
    if a.forecast is None or b.forecast is None:
        return
    for field in ("p50", "upper", "raw_upper", "measured_upper"):
        left, right = getattr(a.forecast, field), getattr(b.forecast, field)
        assert left is not None and right is not None, field
        np.testing.assert_array_equal(left, right, err_msg=f"{field} at origin {a.index}")
    assert a.forecast.origin == b.forecast.origin
    assert a.model is not None and b.model is not None
    known = Series(series.start, series.step, series.values[: b.index + 1])
    expected = b.model.calibration_for(known, STEPS)
    assert a.band is not None, f"origin {a.index} was not made in a batch"
    np.testing.assert_array_equal(a.band.table, expected.table)
    assert (a.band.widen, a.band.floor, a.band.power) == (
        expected.widen,
        expected.floor,
        expected.power,
    )


@pytest.mark.parametrize("kind", ["seasonal", "ets"])
def test_batches_make_what_one_origin_at_a_time_makes(kind: str) -> None:
    series = load(12.0, seed=3)
    start = round(2 * DAY / series.step)  # fits within CONTEXT of the series' start
    batched = list(walk(series, kind=kind, start=start, batched=True))
    single = list(walk(series, kind=kind, start=start, batched=False))
    assert len(batched) == len(single) == len(series) - start
    assert {o.model.kind for o in batched if o.model} == {kind}
    refits = len({id(o.model) for o in batched})
    assert refits >= 3  # the widening and the daily tables are crossed from fit to fit
    for a, b in zip(batched, single, strict=True):
        same(a, b, series)


def test_the_reference_that_reads_four_weeks_back_is_graded_on_what_the_tracker_sees() -> None:
    """The seasonal-naive reference takes a value missing a week back from up to four weeks
    back: more than the adaptive tracker's CONTEXT, which forecasts from a week and a day
    before the fit only. A six-hour outage a week before the walk makes the two differ."""
    series = load(24.0, seed=2)
    values = series.values.copy()
    outage = round(10 * DAY / series.step)
    values[outage : outage + 72] = np.nan
    series = Series(series.start, series.step, values)
    start = round(15 * DAY / series.step)  # a week's season: 15 days of history
    batched = list(walk(series, kind="naive", start=start, batched=True, window=15 * DAY))
    single = list(walk(series, kind="naive", start=start, batched=False, window=15 * DAY))
    assert batched[0].model is not None and batched[0].model.model.reach > 4 * WEEK - 1
    for a, b in zip(batched, single, strict=True):
        same(a, b, series)


def test_a_consumer_that_stops_early_pays_for_at_most_twice_what_it_read() -> None:
    series = load(6.0, seed=5)
    start = round(2 * DAY / series.step)
    asked: list[int] = []
    real = manyorigin.walked

    def counted(model, history, **options):  # type: ignore[no-untyped-def]
        asked.append(len(history) - options["first"])
        return real(model, history, **options)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(manyorigin, "walked", counted)
        origins = walkforward.walk_forward(
            "seasonal", series, start=start, steps=STEPS, quantile=0.95
        )
        read = [next(origins) for _ in range(100)]
    assert [o.index for o in read] == list(range(start, start + 100))
    assert sum(asked) <= 2 * 2 * 100  # batches of 12, 24, 48, 96: each made from the fit
    assert max(asked) < 2 * 100
