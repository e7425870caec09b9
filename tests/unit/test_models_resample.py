"""Raw scrapes -> a regular Series at the model step: the one place gaps, NaN and counter
resets are handled, so no model has to."""

from __future__ import annotations

import numpy as np
import pytest

from models.base import Series, SeriesError
from models.resample import peaks, regrid, resample


def test_irregular_scrapes_land_on_a_grid_aligned_to_the_step() -> None:
    times = np.array([1001.0, 1150.0, 1290.0, 1310.0, 1620.0])
    series = resample(times, [1.0, 3.0, 5.0, 7.0, 9.0], step=300.0, max_gap=0)
    assert series.start == 1200.0  # (900, 1200] holds the first samples
    assert series.step == 300.0
    np.testing.assert_allclose(series.values, [2.0, 6.0, 9.0])


def test_a_counter_becomes_a_per_second_rate_and_a_drop_is_a_reset() -> None:
    times = np.arange(0.0, 1200.0, 60.0)  # a scrape a minute, 20 samples
    counts = 10.0 * np.arange(times.size)  # 10 requests a minute
    counts[12:] = 10.0 * (1 + np.arange(times.size - 12))  # restarted just before sample 12
    series = resample(times, counts, step=300.0, counter=True)
    observed = series.values[~np.isnan(series.values)]
    np.testing.assert_allclose(observed, 10.0 / 60.0)


def test_short_gaps_are_bridged_and_an_outage_stays_missing() -> None:
    times = np.concatenate([np.arange(0, 3000, 300.0), np.arange(3600, 6000, 300.0)])
    values = np.ones(times.size)
    values[3] = np.nan  # one lost scrape
    series = resample(times, values, step=300.0, max_gap=900.0)
    assert not np.isnan(series.values[:10]).any()
    long = resample(times, values, step=300.0, max_gap=300.0)
    assert np.isnan(long.values[10]) and np.isnan(long.values[11])  # 3000..3300: no scrape


@pytest.mark.parametrize(
    ("times", "values", "message"),
    [
        ([], [], "no samples"),
        ([0.0, 60.0, 30.0], [1.0, 1.0, 1.0], "goes back"),
        ([0.0, 60.0, 60.0], [1.0, 1.0, 1.0], "repeats"),
        ([0.0, np.nan], [1.0, 1.0], "finite"),
        ([0.0, 60.0], [1.0, np.inf], "infinite"),
        ([0.0, 60.0], [1.0, -2.0], "counter=True"),
    ],
)
def test_input_that_cannot_be_a_load_is_refused_naming_the_sample(
    times: list[float], values: list[float], message: str
) -> None:
    with pytest.raises(SeriesError, match=message):
        resample(times, values, step=60.0)


def test_a_finer_series_is_averaged_to_the_model_step_and_a_coarser_one_left_alone() -> None:
    minute = Series(0.0, 60.0, np.arange(10, dtype=np.float64))
    coarse = regrid(minute, 300.0)
    assert coarse.step == 300.0
    np.testing.assert_allclose(coarse.values, [0.0, 3.0, 7.5])  # (-300,0], (0,300], (300,600]
    hourly = Series(0.0, 3600.0, np.ones(3))
    assert regrid(hourly, 300.0) is hourly


def test_peaks_keep_the_highest_sample_of_each_bucket_on_the_same_grid_as_the_means() -> None:
    minute = Series(0.0, 60.0, np.array([5.0, 1.0, 9.0, np.nan, 2.0, 3.0, 4.0, np.nan]))
    highest = peaks(minute, 300.0)
    means = regrid(minute, 300.0)
    assert (highest.start, highest.step, len(highest)) == (means.start, means.step, len(means))
    np.testing.assert_allclose(highest.values, [5.0, 9.0, 4.0])  # (-300,0], (0,300], (300,600]
    empty = Series(0.0, 60.0, np.array([1.0, np.nan, np.nan, np.nan, np.nan, np.nan]))
    assert np.isnan(peaks(empty, 300.0).values[1])
    hourly = Series(0.0, 3600.0, np.ones(3))
    assert peaks(hourly, 300.0) is hourly
