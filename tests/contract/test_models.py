"""Every model in the catalog through one contract: what the engine and the backtest rely on.

Predict length, never NaN, never negative, a calibrated bound at or above the median, a JSON
round trip that predicts exactly what the fitted object did (also after the daily re-measured
calibration kicks in), and a corrupt or incompatible artefact refused with ArtefactError.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from typing import Any

import numpy as np
import pytest

from models import artefact, catalog
from models.base import DAY, ArtefactError, Series
from models.calibrate import CalibratedModel
from tests.contract.synthetic import load

STEPS = 6
SERIES = load(23)
TRAIN = SERIES.until(SERIES.start + 21 * DAY - 1)
"""Three weeks to fit on; two more days to forecast from (so re-measured calibration runs)."""


@cache
def fitted(kind: str) -> dict[str, Any]:
    return artefact.fit(kind, TRAIN, STEPS)


def forecast_after(model: CalibratedModel, seconds: float) -> Any:
    return model.forecast(SERIES.until(TRAIN.end + seconds), steps=STEPS, quantile=0.95)


@pytest.mark.parametrize("kind", catalog.names())
def test_predicts_the_requested_number_of_finite_non_negative_points(kind: str) -> None:
    model = artefact.load(fitted(kind))
    for steps in (1, STEPS, 40):
        forecast = model.forecast(TRAIN, steps=steps, quantile=0.95)
        assert forecast.p50.shape == forecast.upper.shape == (steps,)
        assert np.isfinite(forecast.p50).all() and np.isfinite(forecast.upper).all()
        assert (forecast.p50 >= 0).all()
        assert (forecast.upper >= forecast.p50).all()
        assert forecast.origin == TRAIN.end + TRAIN.step


@pytest.mark.parametrize("kind", catalog.names())
def test_forecasts_follow_the_daily_cycle(kind: str) -> None:
    model = artefact.load(fitted(kind))
    night = forecast_after(model, 6 * 3600.0).p50.mean()  # Monday 06:00
    afternoon = forecast_after(model, 14 * 3600.0).p50.mean()  # Monday 14:00
    assert afternoon > 2 * night


@pytest.mark.parametrize("kind", catalog.names())
def test_a_json_round_trip_predicts_exactly_what_the_fitted_model_did(kind: str) -> None:
    original = artefact.load(fitted(kind))
    loaded = artefact.load(json.loads(json.dumps(fitted(kind), allow_nan=False)))
    for seconds in (0.0, 3600.0, 1.5 * DAY):  # 1.5 days: the re-measured table is in use
        a, b = forecast_after(original, seconds), forecast_after(loaded, seconds)
        assert np.array_equal(a.p50, b.p50)
        assert np.array_equal(a.upper, b.upper)


@pytest.mark.parametrize("kind", catalog.names())
def test_an_artefact_names_kind_version_window_resolution_fingerprint_and_scores(
    kind: str,
) -> None:
    data = fitted(kind)
    assert data["kind"] == kind
    assert data["format"] >= 2
    assert data["trained_from"] == TRAIN.start and data["trained_until"] == TRAIN.end
    assert data["step"] == TRAIN.step
    assert len(data["fingerprint"]) == 16
    assert 0.8 < data["scores"]["coverage"] <= 1.0
    assert data["scores"]["pinball"] > 0
    assert len(json.dumps(data)) < 200_000  # compact: a week's profile, never the history


def test_two_kinds_fitted_on_the_same_data_have_different_versions() -> None:
    versions = {kind: fitted(kind)["fingerprint"] for kind in catalog.names()}
    assert len(set(versions.values())) == len(versions), versions


def test_a_version_is_the_same_for_the_same_fit_and_changes_with_its_steps() -> None:
    again = artefact.fit("seasonal", TRAIN, STEPS)  # another replica fitting the same target
    assert again["fingerprint"] == fitted("seasonal")["fingerprint"]
    assert artefact.fit("seasonal", TRAIN, STEPS + 6)["fingerprint"] != again["fingerprint"]


def test_an_artefact_stored_with_a_data_only_fingerprint_keeps_it() -> None:
    older = fitted("seasonal") | {"fingerprint": "0123456789abcdef"}
    assert artefact.load(older).fingerprint == "0123456789abcdef"


def corruptions(data: dict[str, Any]) -> list[tuple[str, Any]]:
    cases: list[tuple[str, Any]] = [("not an object", [1, 2]), ("empty", {})]
    for key in ("kind", "params", "calibration", "trained_until", "step"):
        broken = copy.deepcopy(data)
        del broken[key]
        cases.append((f"no {key}", broken))
    broken = copy.deepcopy(data)
    broken["format"] = 1
    cases.append(("old format", broken))
    broken = copy.deepcopy(data)
    broken["kind"] = "lstm"
    cases.append(("unknown kind", broken))
    for key, value in data["params"].items():
        broken = copy.deepcopy(data)
        broken["params"][key] = "garbage" if not isinstance(value, list) else [[1.0, "x"]]
        cases.append((f"params.{key} garbage", broken))
        broken = copy.deepcopy(data)
        del broken["params"][key]
        cases.append((f"params.{key} missing", broken))
    broken = copy.deepcopy(data)
    broken["calibration"]["table"] = [[1.0, 2.0]]
    cases.append(("calibration of other levels", broken))
    return cases


@pytest.mark.parametrize("kind", catalog.names())
def test_a_corrupt_or_incompatible_artefact_is_an_artefact_error(kind: str) -> None:
    survived = []
    for name, broken in corruptions(fitted(kind)):
        if name == "params.holidays garbage":
            continue  # any string is a valid country code; checked when fitting
        if name == "params.regression missing":
            continue  # a seasonal artefact from before the level regression: the hour's level
        try:
            artefact.load(broken)
        except ArtefactError:
            continue
        survived.append(name)
    assert survived == []


@pytest.mark.parametrize("kind", catalog.names())
def test_predicting_from_a_history_with_a_missing_last_hour_never_gives_nan(kind: str) -> None:
    model = artefact.load(fitted(kind))
    values = SERIES.until(TRAIN.end + DAY).values.copy()
    values[-12:] = np.nan
    recent = Series(SERIES.start, SERIES.step, values)
    forecast = model.forecast(recent, steps=STEPS, quantile=0.95)
    assert np.isfinite(forecast.p50).all() and np.isfinite(forecast.upper).all()
