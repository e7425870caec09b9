"""How the `auto` tests of an experimental challenger (models/select.py `challengers`) see what
the selection grades: every kind it fits, on seasonal and ETS only (Prophet is slow to fit)."""

from __future__ import annotations

from typing import Any

import pytest

from models import catalog, select
from models.base import Series
from models.calibrate import CalibratedModel


def select_with(
    monkeypatch: pytest.MonkeyPatch, history: Series, switch: str
) -> tuple[CalibratedModel, list[str]]:
    """`select.fit_best` on `history` with the module flag `switch` on, and the kinds it fitted
    in order."""
    seen: list[str] = []
    original = select.fit_calibrated

    def spy(make: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(make.kind)
        return original(make, *args, **kwargs)

    monkeypatch.setattr(select, "fit_calibrated", spy)
    monkeypatch.setattr(catalog, "CANDIDATES", ("seasonal", "ets"))
    monkeypatch.setattr(select, switch, True)
    return select.fit_best(history, steps=4, candidates=None), seen
