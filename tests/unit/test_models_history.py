"""How much history buys which model (DESIGN.md): two weeks or more -> weekly seasonality; one
to fourteen days -> daily only; under a day -> no model, and the error says why. Awkward but
real histories (flat, all zeros, starting mid-way, a week missing) never crash a model."""

from __future__ import annotations

import numpy as np
import pytest

from models import artefact, catalog
from models.base import DAY, WEEK, FitError, ModelError, Series
from models.calibrate import fit_calibrated
from tests.contract.synthetic import load

STEPS = 4


@pytest.mark.parametrize("kind", catalog.names())
def test_under_a_day_of_history_gives_no_model_and_says_the_scaler_stays_reactive(
    kind: str,
) -> None:
    with pytest.raises(FitError, match="stays reactive"):
        fit_calibrated(catalog.adapter(kind), load(0.9), steps=STEPS)


def season_of(data: dict[str, object]) -> float:
    params = data["params"]
    assert isinstance(params, dict)
    if "members" in params:  # an ensemble: every member follows the same rule
        (season,) = {season_of({**data, **member}) for member in params["members"]}
        return season
    return float(len(params.get("profile", [])) * float(data["step"])) or float(params["period"])


# Prophet once per side of the boundary (the rule is the shared season_for): its fits are slow.
CASES = [
    (kind, days, season)
    for kind in catalog.names()
    for days, season in ((3, DAY), (13.9, DAY), (14, WEEK))
    if not (kind == "prophet" and days == 13.9)
]


@pytest.mark.parametrize(("kind", "days", "season"), CASES)
def test_daily_seasonality_below_two_weeks_and_weekly_from_two_weeks_on(
    kind: str, days: float, season: float
) -> None:
    data = artefact.fit(kind, load(days), STEPS)
    assert season_of(data) == season


def awkward_histories() -> dict[str, Series]:
    base = load(17, seed=9)
    midway = base.values.copy()
    midway[: round(3.4 * DAY / base.step)] = np.nan  # the scrape started on a Thursday noon
    week_gone = base.values.copy()
    week_gone[round(8 * DAY / base.step) : round(15 * DAY / base.step)] = np.nan
    return {
        "flat": Series(base.start, base.step, np.full(len(base), 42.0)),
        "all zeros": Series(base.start, base.step, np.zeros(len(base))),
        "starts mid-way": Series(base.start, base.step, midway),
        "a week missing": Series(base.start, base.step, week_gone),
    }


@pytest.mark.parametrize("kind", catalog.names())
@pytest.mark.parametrize("case", list(awkward_histories()))
def test_awkward_histories_give_finite_forecasts(kind: str, case: str) -> None:
    history = awkward_histories()[case]
    model = artefact.load(artefact.fit(kind, history, STEPS))
    forecast = model.forecast(history, steps=STEPS, quantile=0.95)
    assert np.isfinite(forecast.p50).all() and np.isfinite(forecast.upper).all()
    if case == "flat":
        np.testing.assert_allclose(forecast.p50, 42.0, rtol=1e-6)
        np.testing.assert_allclose(forecast.upper, 42.0, rtol=1e-6)
    if case == "all zeros":
        np.testing.assert_allclose(forecast.upper, 0.0, atol=1e-6)


def test_auto_with_too_little_history_explains_every_candidate() -> None:
    with pytest.raises(ModelError) as raised:
        artefact.fit("auto", load(0.5), STEPS)
    for kind in catalog.CANDIDATES:
        assert f"{kind}: history covers" in str(raised.value)
