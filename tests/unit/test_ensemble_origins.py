"""An ensemble champion forecasts at many origins in one call (models/ensemble.py predict_at):
the very numbers `predict` gives one origin at a time, so its drift state is replayed through the
one-pass path (models/manyorigin.py) and still equals the state the loop over `forecast` builds
(scaler/serving/driftstate.py; without predict_at an ensemble took that loop, about 1.2 ms an
origin)."""

from __future__ import annotations

import numpy as np
import pytest

from models import artefact, manyorigin, origins
from models.base import DAY, Forecaster, Series
from models.calibrate import CalibratedModel, fit_calibrated
from models.ensemble import Ensemble, combine
from models.ets import ETSModel
from models.reference import SeasonalNaive
from models.seasonal import SeasonalBaseline
from scaler.serving import driftstate
from scaler.serving.state import forecast_steps
from tests.unit.test_many_origins import (
    FIT_AT,
    SPEC,
    STEP,
    WINDOW,
    assert_same_tracker,
    gappy_load,
)


def members(data: Series, kinds: tuple[type[Forecaster], ...]) -> list[Forecaster]:
    out = []
    for kind in kinds:
        member = kind()
        member.fit(data.until(FIT_AT).since(FIT_AT - WINDOW + STEP))
        out.append(member)
    return out


@pytest.mark.parametrize(
    "kinds",
    [(SeasonalBaseline, ETSModel, SeasonalNaive), (SeasonalBaseline, ETSModel)],
    ids=["three members (odd)", "two members (a mean of the middle two)"],
)
def test_the_ensemble_forecast_from_every_origin_at_once_is_predict_at_each_origin(
    kinds: tuple[type[Forecaster], ...],
) -> None:
    data = gappy_load(33, seed=4)
    ensemble = Ensemble(members(data, kinds))
    ends = np.arange(len(data) - 3 * 288, len(data) - 1)  # three days of origins, gaps included
    at_once = ensemble.predict_at(data, ends, 7)
    one_by_one = np.array([ensemble.predict(data.until(data.start + i * STEP), 7) for i in ends])
    assert at_once.shape == (ends.size, 7)
    assert np.array_equal(at_once, one_by_one)
    assert isinstance(ensemble, origins.ManyOrigins)


def ensemble_champion(data: Series) -> CalibratedModel:
    """A calibrated median of seasonal and ETS, combined as `model: auto` combines them, through
    the artefact a replica loads."""
    known = data.until(FIT_AT).since(FIT_AT - WINDOW + STEP)
    steps = forecast_steps(SPEC, STEP)
    fitted = [fit_calibrated(kind, known, steps=steps) for kind in (SeasonalBaseline, ETSModel)]
    combined = combine(fitted, known)
    assert combined is not None
    return artefact.load(artefact.dump(combined))


def test_an_ensemble_champions_drift_state_replayed_in_one_pass_equals_the_loop_over_forecast(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = gappy_load(34, seed=11)
    history = data.until(FIT_AT + 2 * DAY).since(FIT_AT - WINDOW + STEP)
    champion = ensemble_champion(data)
    assert champion.kind == "ensemble"
    first = round((FIT_AT - history.start) / STEP)
    steps, keep = forecast_steps(SPEC, STEP), int(WINDOW // STEP)
    shortcut = manyorigin.forecasts(
        ensemble_champion(data), history, first=first, steps=steps, quantile=0.95, keep=keep
    )
    assert shortcut is not None  # it takes the one-pass path now
    fast = driftstate.rebuild(SPEC, champion, history, window=WINDOW)
    monkeypatch.setattr(manyorigin, "forecasts", lambda *_a, **_k: None)  # the ablation
    slow = driftstate.rebuild(SPEC, ensemble_champion(data), history, window=WINDOW)
    assert fast.monitor.observations > 500
    assert_same_tracker(fast, slow, arrays=("p50", "upper"))
