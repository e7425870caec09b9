"""Adaptive conformal calibration: the band recovers its coverage within the day the load turns
noisier, where the measured tables alone do not, and every replica computes the same band."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models import adaptive, artefact, catalog
from models.base import DAY, Series
from models.calibrate import CalibratedModel, fit_calibrated
from tests.contract.synthetic import load

STEPS = 4
K = 2  # graded 3 steps ahead, as a 10-minute lead time on a 5-minute step


def coverage(model: CalibratedModel, series: Series, *, since: float, until: float) -> float:
    first = round((since - series.start) / series.step)
    last = min(round((until - series.start) / series.step), len(series) - STEPS - 1)
    hits = []
    for i in range(first, last):
        known = Series(series.start, series.step, series.values[: i + 1])
        forecast = model.forecast(known, steps=STEPS, quantile=0.95)
        hits.append(series.values[i + 1 + K] <= forecast.upper[K])
    return float(np.mean(hits))


def noisier_from(series: Series, change: float, *, seed: int) -> Series:
    """`series` with multiplicative noise (x0.4 .. x1.6) from time `change` on."""
    values = series.values.copy()
    i = round((change - series.start) / series.step)
    values[i:] *= np.random.default_rng(seed).uniform(0.4, 1.6, values.size - i)
    return Series(series.start, series.step, values)


@pytest.mark.parametrize("seed", [0, 1])
def test_aci_recovers_coverage_after_the_noise_level_changes_and_the_static_tables_do_not(
    seed: int,
) -> None:
    change = load(18).start + 15.5 * DAY  # mid-day, a day and a half after the fit
    series = noisier_from(load(18, seed=seed), change, seed=seed + 100)
    train = series.until(series.start + 14 * DAY - 1)
    figures = {}
    for on in (True, False):
        model = fit_calibrated(catalog.adapter("seasonal"), train, steps=STEPS)
        model.aci = on
        before = coverage(model, series, since=train.end, until=change)
        after = coverage(model, series, since=change, until=series.end)
        figures[on] = (before, after)
    assert 0.92 <= figures[True][0] <= 0.98 and 0.92 <= figures[False][0] <= 0.98
    assert 0.92 <= figures[True][1] <= 0.98  # ACI: back to nominal on the noisier load
    assert figures[False][1] < 0.9  # the ablation: the measured tables lag a day or more


def test_a_replica_that_starts_late_computes_the_same_band_as_one_that_ran_all_along() -> None:
    series = noisier_from(load(17, seed=2), load(17).start + 15 * DAY, seed=7)
    train = series.until(series.start + 14 * DAY - 1)
    running = fit_calibrated(catalog.adapter("seasonal"), train, steps=STEPS)
    for i in range(len(train), len(series), 7):
        running.calibration_for(Series(series.start, series.step, series.values[:i]), STEPS)
    late = artefact.load(artefact.dump(running))
    both = [m.calibration_for(series, STEPS) for m in (running, late)]
    assert both[0].widen == both[1].widen != 0.0
    np.testing.assert_array_equal(both[0].offsets(STEPS, 0.95), both[1].offsets(STEPS, 0.95))


def test_a_rewritten_past_rebuilds_the_widening_rather_than_continue_from_stale_state() -> None:
    series = noisier_from(load(16, seed=3), load(16).start + 14.5 * DAY, seed=8)
    train = series.until(series.start + 14 * DAY - 1)
    model = fit_calibrated(catalog.adapter("seasonal"), train, steps=STEPS)
    noisy = model.calibration_for(series, STEPS).widen
    calm = load(16, seed=3)  # the same window with the noisy stretch never having happened
    fresh = fit_calibrated(catalog.adapter("seasonal"), train, steps=STEPS)
    assert model.calibration_for(calm, STEPS).widen == fresh.calibration_for(calm, STEPS).widen
    assert noisy > fresh.calibration_for(calm, STEPS).widen


def test_the_learning_rate_widens_by_one_spread_per_window_at_twice_the_target_miss_rate() -> None:
    rate = adaptive.learning_rate(miss_target=0.05, window=288)
    widen = 0.0
    for t in range(288):
        widen = adaptive.update(
            widen, np.array([float(t % 10 == 0)]), miss_target=0.05, rate=rate
        )  # one miss in ten: twice the 5% target
    assert widen == pytest.approx(1.0, abs=0.05)


@settings(max_examples=100, deadline=None)
@given(
    misses=st.lists(st.sampled_from([0.0, 1.0, float("nan")]), min_size=1, max_size=400),
    target=st.floats(0.01, 0.49),
    window=st.integers(1, 5000),
)
def test_the_widening_stays_between_the_median_and_its_ceiling(
    misses: list[float], target: float, window: int
) -> None:
    rate = adaptive.learning_rate(miss_target=target, window=window)
    widen = 0.0
    for miss in misses:
        widen = adaptive.update(widen, np.array([miss]), miss_target=target, rate=rate)
        assert -1.0 <= widen <= adaptive.ceiling(target)


@pytest.mark.parametrize(("target", "window"), [(0.0, 10), (1.0, 10), (0.05, 0)])
def test_a_learning_rate_from_a_meaningless_target_or_window_is_refused(
    target: float, window: int
) -> None:
    with pytest.raises(ValueError, match="miss target"):
        adaptive.learning_rate(miss_target=target, window=window)
