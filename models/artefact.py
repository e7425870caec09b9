"""Model artefacts: a fitted, calibrated model as JSON-ready data, and back. Never pickle.

`fit` is the function the engine runs in its fitting process: it takes plain data and returns
plain data, so nothing but numbers crosses the process boundary.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from models import catalog, select
from models.base import ArtefactError, ModelError, Series
from models.calibrate import ARTEFACT_FORMAT, CalibratedModel, fit_calibrated
from models.conformal import Calibration

DEFAULT_KIND = "auto"
"""What a target gets without a `model` key: the backtests pick (models.select)."""


def dump(model: CalibratedModel) -> dict[str, Any]:
    return model.to_dict()


def load(data: dict[str, Any]) -> CalibratedModel:
    """The CalibratedModel an artefact describes; ArtefactError if it is corrupt or incompatible."""
    if not isinstance(data, dict):
        raise ArtefactError("artefact is not a JSON object")
    if data.get("format") != ARTEFACT_FORMAT:
        raise ArtefactError(
            f"artefact format {data.get('format')!r} is not {ARTEFACT_FORMAT}; refit the model"
        )
    try:
        cls = catalog.adapter(str(data["kind"]))
        model = CalibratedModel(
            model=cls.from_dict(data["params"]),
            calibration=Calibration.from_dict(data["calibration"]),
            trained_from=float(data["trained_from"]),
            trained_until=float(data["trained_until"]),
            step=float(data["step"]),
            fingerprint=str(data["fingerprint"]),
            scores={str(k): float(v) for k, v in dict(data.get("scores", {})).items()},
            quantile=float(data["quantile"]),
        )
    except ArtefactError:
        raise
    except (KeyError, TypeError, ValueError, ModelError) as exc:
        raise ArtefactError(f"artefact is malformed: {exc!r}") from exc
    if not all(math.isfinite(v) for v in (model.trained_from, model.trained_until, model.step)):
        raise ArtefactError("artefact has a non-finite training window or step; refit the model")
    if not 0.5 < model.quantile < 1:
        raise ArtefactError(f"artefact quantile {model.quantile} is not in (0.5, 1); refit it")
    if not np.isfinite(model.calibration.table).all():
        raise ArtefactError("artefact calibration table holds NaN or inf; refit the model")
    return model


def fit(
    kind: str,
    history: Series,
    steps: int,
    *,
    quantile: float = 0.95,
    holidays: str | None = None,
) -> dict[str, Any]:
    """Fit `kind` ("auto" selects, see models.select) on history, calibrated for `steps` ahead;
    the artefact's scores grade it at `quantile` on the latest week. ModelError when it cannot.
    `holidays` (a country code) is Prophet's, used with kind prophet, as `scaler backtest`."""
    if holidays and kind == "prophet":
        prophet: Any = catalog.adapter("prophet")  # the one adapter that takes holidays
        make = functools.partial(prophet, holidays=holidays)
        return dump(fit_calibrated(make, history, steps=steps, quantile=quantile))
    return dump(select.fit_kind(kind, history, steps=steps, quantile=quantile))
