"""The band's scale: purely relative to the forecast for every fit (power 1). Measuring the
power on the calibration backtest was an experiment, removed after c21b1a4 (docs/forecasting.md
"The band's level power"); an artefact's power is still read as written, and checked."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from models import catalog
from models.base import ArtefactError
from models.calibrate import fit_calibrated
from models.conformal import Backtest, Calibration, measured, scale_of
from tests.contract.synthetic import load

FLOOR = 1.0


def backtest(*, seed: int, origins: int = 4000, steps: int = 3) -> Backtest:
    """Forecasts over a cycle between 2 and 18 (mean 10, floor = a tenth of it) with counting
    (Poisson-like) noise: a spread of p50 ** 0.5, the load the experiment's power was for."""
    rng = np.random.default_rng(seed)
    phase = np.linspace(0.0, 40 * np.pi, origins)
    p50 = np.repeat((10.0 + 8.0 * np.sin(phase))[:, None], steps, axis=1)
    actual = p50 + rng.standard_normal(p50.shape) * p50**0.5
    return Backtest(actual=actual, p50=p50)


def test_power_one_is_the_purely_relative_scale_bit_for_bit() -> None:
    p50 = np.array([0.0, 0.3, 5.0, 70.0])
    assert np.array_equal(scale_of(p50, floor=FLOOR, power=1.0), np.maximum(p50, FLOOR))


def test_every_fit_calibrates_a_purely_relative_band_even_on_counting_noise() -> None:
    series = load(21, seed=8, scale=60.0)  # Poisson noise around a daily cycle
    for kind in ("seasonal", "naive"):
        assert fit_calibrated(catalog.adapter(kind), series, steps=3).calibration.power == 1.0
    train = backtest(seed=2)
    assert measured(train, floor=FLOOR, samples=train.origins).power == 1.0


def test_an_artefacts_power_is_read_as_written_and_an_older_table_reads_as_relative() -> None:
    table = replace(measured(backtest(seed=6), floor=FLOOR, samples=10), power=0.5)
    again = Calibration.from_dict(table.to_dict())
    assert again.power == 0.5
    assert np.array_equal(again.scale(np.array([4.0])), table.scale(np.array([4.0])))
    older = {k: v for k, v in table.to_dict().items() if k != "power"}
    assert Calibration.from_dict(older).power == 1.0


def test_a_power_outside_zero_to_one_is_refused_with_the_fix() -> None:
    data = measured(backtest(seed=7), floor=FLOOR, samples=10).to_dict()
    data["power"] = 1.7
    with pytest.raises(ArtefactError, match="outside \\[0, 1\\]; refit the model"):
        Calibration.from_dict(data)
