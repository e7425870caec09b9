"""The band's scale grows with the load as fast as the residuals do (calibrate.level_power):
measured on the calibration backtest, so a band on counting noise is as honest at night as at
the peak, and a band on purely relative noise stays what it was."""

from __future__ import annotations

import numpy as np
import pytest

from models import calibrate, catalog
from models.calibrate import (
    Backtest,
    Calibration,
    fit_calibrated,
    level_power,
    measured,
    scale_of,
)
from tests.contract.synthetic import load

FLOOR = 1.0
LEVELS_SEEN = (0.5, 1.5)
"""Below and above the mean level (in units of the mean): night and peak."""


def backtest(*, growth: float, seed: int, origins: int = 4000, steps: int = 3) -> Backtest:
    """Forecasts over a cycle between 2 and 18 (mean 10, floor = a tenth of it) whose errors
    have a spread of p50 ** growth: 0.5 is counting (Poisson) noise, 1 a relative error."""
    rng = np.random.default_rng(seed)
    phase = np.linspace(0.0, 40 * np.pi, origins)
    p50 = np.repeat((10.0 + 8.0 * np.sin(phase))[:, None], steps, axis=1)
    actual = p50 + rng.standard_normal(p50.shape) * p50**growth
    return Backtest(actual=actual, p50=p50)


@pytest.fixture(autouse=True)
def band_power(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(calibrate, "LEVEL_POWER", True)  # off by default (calibrate.LEVEL_POWER)


def measured_relative(train: Backtest) -> Calibration:
    """The ablation: the same calibration with the power off (the purely relative band)."""
    calibrate.LEVEL_POWER = False
    try:
        return measured(train, floor=FLOOR, samples=train.origins)
    finally:
        calibrate.LEVEL_POWER = True


def coverage_by_level(table: Calibration, test: Backtest) -> list[float]:
    upper = table.upper(test.p50[:, 0], 0.95)
    hit = test.actual[:, 0] <= upper
    level = test.p50[:, 0] / 10.0
    low, high = level < LEVELS_SEEN[0] + 0.25, level > LEVELS_SEEN[1] - 0.25
    return [float(hit[low].mean()), float(hit[high].mean())]


@pytest.mark.parametrize("growth", [0.0, 0.5, 1.0])
def test_the_measured_power_is_how_fast_the_residuals_grow_with_the_forecast(
    growth: float,
) -> None:
    power = level_power(backtest(growth=growth, seed=1), floor=FLOOR)
    assert power == pytest.approx(growth, abs=0.08)


def test_a_measured_power_covers_night_and_peak_alike_where_relative_does_not() -> None:
    train, test = backtest(growth=0.5, seed=2), backtest(growth=0.5, seed=3)
    fitted = measured(train, floor=FLOOR, samples=train.origins)
    relative = measured_relative(train)
    assert relative.power == 1.0
    night, peak = coverage_by_level(fitted, test)
    assert 0.92 <= night <= 0.98 and 0.92 <= peak <= 0.98
    night_rel, peak_rel = coverage_by_level(relative, test)
    assert night_rel < 0.92 and peak_rel > 0.98  # the ablation: short at night, wide at the peak


def test_the_measured_band_is_narrower_at_the_peak_on_counting_noise() -> None:
    train = backtest(growth=0.5, seed=4)
    fitted = measured(train, floor=FLOOR, samples=train.origins)
    relative = measured_relative(train)
    peak = np.array([18.0])
    assert fitted.upper(peak, 0.95)[0] < relative.upper(peak, 0.95)[0]


def test_power_one_is_the_purely_relative_scale_bit_for_bit() -> None:
    p50 = np.array([0.0, 0.3, 5.0, 70.0])
    assert np.array_equal(scale_of(p50, floor=FLOOR, power=1.0), np.maximum(p50, FLOOR))


def test_a_flat_or_short_backtest_keeps_the_relative_scale() -> None:
    flat = Backtest(actual=np.full((500, 2), 11.0), p50=np.full((500, 2), 10.0))
    short = backtest(growth=0.5, seed=5, origins=50, steps=2)
    assert level_power(flat, floor=FLOOR) == 1.0
    assert level_power(short, floor=FLOOR) == 1.0


def test_the_power_survives_a_json_round_trip_and_an_older_table_reads_as_relative() -> None:
    train = backtest(growth=0.5, seed=6)
    table = measured(train, floor=FLOOR, samples=train.origins)
    again = Calibration.from_dict(table.to_dict())
    assert again.power == table.power != 1.0
    older = {k: v for k, v in table.to_dict().items() if k != "power"}
    assert Calibration.from_dict(older).power == 1.0


def test_a_power_outside_zero_to_one_is_refused_with_the_fix() -> None:
    data = measured(backtest(growth=0.5, seed=7), floor=FLOOR, samples=10).to_dict()
    data["power"] = 1.7
    with pytest.raises(calibrate.ArtefactError, match="outside \\[0, 1\\]; refit the model"):
        Calibration.from_dict(data)


def test_the_reference_keeps_its_relative_band_while_a_model_measures_its_power() -> None:
    series = load(21, seed=8, scale=60.0)  # Poisson noise around a daily cycle
    model = fit_calibrated(catalog.adapter("seasonal"), series, steps=3)
    reference = fit_calibrated(catalog.adapter("naive"), series, steps=3)
    assert model.calibration.power < 0.9
    assert reference.calibration.power == 1.0
