"""bench/bound_bands.py: the bands that read the future give the policy the load itself, or a
smooth of it with a band as wide as its noise, measured only on residuals already seen."""

from __future__ import annotations

import numpy as np

from bench import bound_bands
from models.conformal import LEVELS


def test_the_future_path_is_the_load_after_the_origin_and_nan_past_the_end() -> None:
    values = np.arange(10, dtype=np.float64)
    assert bound_bands.future_path(values, 2, 3).tolist() == [3.0, 4.0, 5.0]
    tail = bound_bands.future_path(values, 7, 4)
    assert tail[:2].tolist() == [8.0, 9.0]
    assert np.isnan(tail[2:]).all()


def test_a_band_that_knows_the_future_is_the_load_at_every_quantile() -> None:
    path = np.array([5.0, 12.0, 7.0])
    band = bound_bands.exact_band(3)
    for q in (0.5, 0.7, 0.95):
        assert band.upper(path, q).tolist() == path.tolist()


def test_the_smooth_window_is_odd_and_at_least_three_points() -> None:
    assert bound_bands.smooth_points(900.0, 300.0) == 3
    assert bound_bands.smooth_points(600.0, 600.0) == 3
    assert bound_bands.smooth_points(3600.0, 300.0) == 13
    assert bound_bands.smooth_points(900.0, 1800.0) == 3


def test_the_centred_mean_averages_either_side_and_skips_missing_values() -> None:
    values = np.array([1.0, 2.0, 9.0, np.nan, 4.0])
    smooth = bound_bands.centred_mean(values, 3)
    assert smooth.tolist() == [1.5, 4.0, 5.5, 6.5, 4.0]


def test_the_centred_mean_of_an_unobserved_stretch_is_missing() -> None:
    values = np.array([1.0, np.nan, np.nan, np.nan, 3.0])
    smooth = bound_bands.centred_mean(values, 3)
    assert np.isnan(smooth[2])
    assert smooth[0] == 1.0


def test_residuals_are_relative_to_the_median_floored() -> None:
    actual = np.array([12.0, 1.0])
    p50 = np.array([10.0, 0.0])
    residuals = bound_bands.relative_residuals(actual, p50, floor=2.0)
    assert residuals.tolist() == [0.2, 0.5]


def test_a_band_from_the_residual_quantiles_covers_that_share_of_the_noise() -> None:
    rng = np.random.default_rng(7)
    smooth = np.full(5000, 100.0)
    actual = smooth * (1 + rng.normal(0, 0.1, smooth.size))
    residuals = bound_bands.relative_residuals(actual, smooth, floor=10.0)
    band = bound_bands.band(bound_bands.offsets_row(residuals), floor=10.0)
    for q in (0.8, 0.9, 0.95):  # above the median: the band never goes below the P50
        upper = band.upper(smooth, q)
        assert abs(float(np.mean(actual <= upper)) - q) < 0.01


def test_causal_offsets_read_only_the_residuals_up_to_each_row() -> None:
    residuals = np.concatenate([np.zeros(10), np.ones(10)])
    table = bound_bands.causal_offsets(residuals, window=4, every=1)
    assert table.shape == (20, LEVELS.size)
    assert (table[10] > 0).any() and (table[9] == 0).all()  # row 10 has seen one residual of 1
    assert (table[13] == 1).all()  # its window holds only ones by then


def test_causal_offsets_repeat_between_two_measures() -> None:
    residuals = np.arange(12, dtype=np.float64)
    table = bound_bands.causal_offsets(residuals, window=100, every=5)
    assert (table[1:5] == table[0]).all()
    assert (table[6:10] == table[5]).all()
    assert table[5, -1] > table[0, -1]


def test_a_row_before_any_residual_adds_nothing_to_the_median() -> None:
    residuals = np.array([np.nan, np.nan, 0.5])
    table = bound_bands.causal_offsets(residuals, window=10, every=1)
    assert (table[0] == 0).all()
    assert (table[2] == 0.5).all()


def test_hourly_offsets_measure_each_hour_of_the_day_on_its_own() -> None:
    times = np.arange(0, 2 * 86400, 300, dtype=np.float64)
    hours = bound_bands.hour_of_day(times)
    residuals = np.where(hours == 18, 1.0, 0.0)
    table = bound_bands.hourly_offsets(residuals, times)
    assert table.shape == (24, LEVELS.size)
    assert (table[18] == 1).all()
    assert (np.delete(table, 18, axis=0) == 0).all()


def test_a_band_with_a_row_per_point_widens_only_the_points_it_names() -> None:
    table = np.zeros((3, LEVELS.size))
    table[1] = 0.5
    band = bound_bands.band(table, floor=1.0)
    assert band.upper(np.array([10.0, 10.0, 10.0]), 0.95).tolist() == [10.0, 15.0, 10.0]


def test_grading_reads_the_forecast_made_a_lead_time_before_each_step() -> None:
    actual = np.array([0.0, 0.0, 0.0, 10.0, 10.0, 10.0])
    p95_at = np.array([12.0, 8.0, 12.0, np.nan, np.nan, np.nan])  # made after steps 0, 1, 2
    p50_at = np.array([10.0, 5.0, 10.0, np.nan, np.nan, np.nan])
    covered, wape = bound_bands.grade(actual, p95_at, p50_at, k=2, first=0)
    assert covered == 2 / 3  # step 4 read the forecast made after step 1, which fell short
    assert wape == 5 / 30


def test_grading_skips_unscored_and_unknown_steps() -> None:
    actual = np.array([0.0, 0.0, 5.0, np.nan, 5.0])
    p95_at = np.array([1.0, 1.0, 9.0, 9.0, 9.0])
    p50_at = np.array([5.0, 5.0, 5.0, 5.0, 5.0])
    covered, wape = bound_bands.grade(actual, p95_at, p50_at, k=0, first=2)
    assert (covered, wape) == (0.5, 0.0)  # steps 2 and 4 only, graded on step 1's and 3's


def test_an_even_period_is_averaged_with_half_weights_at_both_ends() -> None:
    assert bound_bands.period_weights(4).tolist() == [0.5, 1.0, 1.0, 1.0, 0.5]
    assert bound_bands.period_weights(3).tolist() == [1.0, 1.0, 1.0]
    values = np.tile(np.array([1.0, 5.0, 3.0, 7.0]), 3)
    level = bound_bands.centred_average(values, bound_bands.period_weights(4))
    assert np.allclose(level[2:-2], 4.0)  # one whole cycle under every inner window


def test_the_classical_fit_is_the_level_plus_the_mean_profile() -> None:
    period = 4
    profile = np.array([-2.0, 0.0, 2.0, 0.0])
    level = np.linspace(100.0, 140.0, 40)
    values = level + np.tile(profile, 10)
    fit = bound_bands.classical(values, period)
    inner = slice(period, values.size - period)  # where the centred level has a whole window
    assert np.allclose(fit[inner], values[inner])


def test_the_classical_fit_does_not_know_a_one_off_spike() -> None:
    values = np.tile(np.array([10.0, 20.0, 10.0, 0.0]), 20)
    values[41] += 40.0  # one day's burst
    fit = bound_bands.classical(values, 4)
    assert fit[41] < 35.0
    assert values[41] - fit[41] > 20.0
