"""Fingerprints: 16 hex digits naming a fitted model (its artefact's `fingerprint`, the decision
log's `model_version`) or the exact data it was trained on (models.fitcache's key).

Hashing only: fits nothing, reads no clock; a value json cannot write is hashed by its repr.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from models.base import Forecaster, Series
from models.conformal import Calibration


def model_fingerprint(
    model: Forecaster, calibration: Calibration, *, history: Series, quantile: float
) -> str:
    """16 hex digits identifying a fitted model (its artefact's `fingerprint`, the decision
    log's `model_version`): its kind, its fitted parameters and calibration table (so the
    forecast steps and settings such as Prophet's holidays they came from), the quantile it
    tracks, and the exact training data. Two kinds fitted on the same data differ (the quick
    seasonal fit and the `auto` pick that replaces it used to share one version, the data's),
    and so does one kind refitted on other data or settings; replicas fitting the same kind
    on the same data agree. Artefacts stored before keep the version they were stored with."""
    digest = hashlib.sha256()
    digest.update(data_fingerprint(history).encode())
    fitted = {
        "kind": model.kind,
        "params": model.to_dict(),
        "calibration": calibration.to_dict(),
        "quantile": quantile,
    }
    # repr: a value json cannot write (a numpy integer) is still hashed, never refused here.
    digest.update(json.dumps(fitted, sort_keys=True, default=repr).encode())
    return digest.hexdigest()[:16]


def data_fingerprint(history: Series) -> str:
    """16 hex digits identifying the exact training data (start, step and values)."""
    digest = hashlib.sha256()
    digest.update(np.array([history.start, history.step]).tobytes())
    digest.update(np.nan_to_num(history.values, nan=-1.0).tobytes())
    return digest.hexdigest()[:16]
