"""`holidays: CC` reaches Prophet in the live fit (models.artefact.fit), as `scaler backtest
--holidays` does in the offline one."""

from __future__ import annotations

from models import artefact
from scaler.decision import resolution
from scaler.offline.traces import read_trace
from scaler.sources.file import bundled_trace


def test_a_prophet_fit_with_a_country_learns_its_holiday_effects_and_keeps_them() -> None:
    history = resolution.model_series(read_trace(bundled_trace()), 3600.0)
    with_us = artefact.fit("prophet", history, 4, holidays="US")
    plain = artefact.fit("prophet", history, 4)
    assert with_us["params"]["holidays"] == "US"
    assert plain["params"]["holidays"] is None
    assert plain["params"]["holiday_effects"] == []
    assert with_us["params"]["holiday_days"]  # the days past the fit that holidays cover
    assert artefact.load(with_us).model.holidays == "US"  # type: ignore[attr-defined]
