"""Values every forecaster shares: a regular load `Series`, a `Forecast`, the `Forecaster`
protocol and the `ModelError` tree.

Pure: numpy and pandas only. Knows nothing of sources, servers or the scaler package.
Times are epoch seconds (UTC, floats); a Series is regular (one value per `step`, NaN where
missing), which every model may rely on. Resampling raw scrapes to that grid lives in
`models.resample`, not in each model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, Self

import numpy as np
import numpy.typing as npt
import pandas as pd

FloatArray = npt.NDArray[np.float64]

MINUTE = 60.0
HOUR = 3600.0
DAY = 86400.0
WEEK = 7 * DAY


class ModelError(Exception):
    """Base of every error raised by `models`."""


class FitError(ModelError):
    """A model could not be fitted on the given history (too short, all missing, ...)."""


class UnknownModelError(ModelError):
    """A model kind that no adapter provides."""


class ArtefactError(ModelError):
    """A model artefact that is corrupt, of another kind, or of an incompatible version."""


class SeriesError(ModelError):
    """Input that cannot form a Series: unordered or duplicated timestamps, inf, bad step."""


@dataclass(frozen=True)
class Series:
    """A regular load series: `values[i]` is the load at `start + i * step` (NaN = missing)."""

    start: float
    """Epoch seconds (UTC) of values[0]."""
    step: float
    """Seconds between consecutive values; > 0."""
    values: FloatArray = field(repr=False)

    def __post_init__(self) -> None:
        if not np.isfinite(self.step) or self.step <= 0:
            raise SeriesError(f"series step must be a positive number of seconds, got {self.step}")
        arr = np.asarray(self.values, dtype=np.float64)
        if arr.ndim != 1:
            raise SeriesError(f"series values must be one-dimensional, got shape {arr.shape}")
        if np.isinf(arr).any():
            raise SeriesError("series holds inf; drop or clip infinite samples before modelling")
        if arr.flags.writeable:  # views of an already frozen series are shared, not copied
            arr = arr.copy()
            arr.flags.writeable = False
        object.__setattr__(self, "values", arr)

    def __len__(self) -> int:
        return int(self.values.size)

    @property
    def end(self) -> float:
        """Epoch seconds of the last value (start - step when empty)."""
        return self.start + (len(self) - 1) * self.step

    @property
    def span(self) -> float:
        """Seconds covered, counting each value as one step."""
        return len(self) * self.step

    @property
    def observed(self) -> int:
        """How many values are not missing."""
        return int(np.count_nonzero(~np.isnan(self.values)))

    def times(self) -> FloatArray:
        return self.start + self.step * np.arange(len(self), dtype=np.float64)

    def last_valid(self) -> tuple[float, float] | None:
        """(time, value) of the newest non-missing value, or None when all are missing."""
        idx = np.flatnonzero(~np.isnan(self.values))
        if idx.size == 0:
            return None
        i = int(idx[-1])
        return self.start + i * self.step, float(self.values[i])

    def until(self, t: float) -> Series:
        """The prefix with every value at time <= t."""
        n = int(np.floor((t - self.start) / self.step + 1e-9)) + 1
        n = max(0, min(len(self), n))
        return Series(self.start, self.step, self.values[:n])

    def since(self, t: float) -> Series:
        """The suffix with every value at time >= t."""
        i = int(np.ceil((t - self.start) / self.step - 1e-9))
        i = max(0, min(len(self), i))
        return Series(self.start + i * self.step, self.step, self.values[i:])

    def to_pandas(self) -> pd.Series:
        index = pd.DatetimeIndex((self.times() * 1e9).astype("datetime64[ns]"), tz="UTC")
        return pd.Series(self.values, index=index, name="value")


@dataclass(frozen=True)
class Forecast:
    """A forecast path: point i is for time `origin + i * step`."""

    origin: float
    """Epoch seconds of the first forecast point (one step after the last observation)."""
    step: float
    p50: FloatArray = field(repr=False)
    """Point (median) forecast."""
    upper: FloatArray = field(repr=False)
    """Calibrated forecast at `quantile`; >= p50 point by point."""
    quantile: float

    def times(self) -> FloatArray:
        return self.origin + self.step * np.arange(self.p50.size, dtype=np.float64)

    def peak(self, until: float) -> float:
        """Max of `upper` over the points at or before `until` (NaN when none is finite)."""
        mask = self.times() <= until + 1e-9
        vals = self.upper[mask]
        vals = vals[np.isfinite(vals)]
        return float(vals.max()) if vals.size else float("nan")


class Forecaster(Protocol):
    """A point forecaster. Calibration to a quantile is done on top of it by `models.calibrate`.

    Adapters are unaware of each other and of the scaler; each keeps only compact parameters
    (profiles, coefficients, states), never a library object holding its training history, so
    that its JSON artefact reproduces its predictions exactly.
    """

    kind: ClassVar[str]
    """Stable name used in artefacts and in the `model` metadata key."""
    cost: ClassVar[int]
    """Relative fitting cost; ties in model selection go to the cheaper model."""

    def fit(self, history: Series) -> None:
        """Fit on a regular series at the model step. Raises FitError when it cannot."""
        ...

    def predict(self, recent: Series, steps: int) -> FloatArray:
        """Point forecast for the `steps` points after `recent.end`.

        `recent` is the history known at the forecast origin (at least the last day, at the same
        step as the fit); models use it for level correction or state updates. Never NaN.
        """
        ...

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready parameters (floats, lists, strings); no pickle."""
        ...

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Inverse of to_dict. Raises ArtefactError on missing or malformed fields."""
        ...
