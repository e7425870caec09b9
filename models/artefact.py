"""Model artefacts: a fitted, calibrated model as JSON-ready data, and back. Never pickle.

`fit` is the function the engine runs in its fitting process: it takes plain data and returns
plain data, so nothing but numbers crosses the process boundary.
"""

from __future__ import annotations

from typing import Any

from models import catalog
from models.base import ArtefactError, ModelError, Series
from models.calibrate import ARTEFACT_FORMAT, CalibratedModel, Calibration, fit_calibrated

DEFAULT_KIND = "seasonal"


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
        return CalibratedModel(
            model=cls.from_dict(data["params"]),
            calibration=Calibration.from_dict(data["calibration"]),
            trained_from=float(data["trained_from"]),
            trained_until=float(data["trained_until"]),
            step=float(data["step"]),
            fingerprint=str(data["fingerprint"]),
            scores={str(k): float(v) for k, v in dict(data.get("scores", {})).items()},
        )
    except ArtefactError:
        raise
    except (KeyError, TypeError, ValueError, ModelError) as exc:
        raise ArtefactError(f"artefact is malformed: {exc!r}") from exc


def fit(kind: str, history: Series, steps: int) -> dict[str, Any]:
    """Fit `kind` (or the default for `auto`) on history, calibrated for `steps` ahead."""
    chosen = DEFAULT_KIND if kind == "auto" else kind
    cls = catalog.adapter(chosen)
    return dump(fit_calibrated(cls, history, steps=steps))
