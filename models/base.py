"""Values every forecaster shares: a regular load `Series`, a `Forecast`, the `Forecaster`
protocol and the `ModelError` tree.

Pure: numpy and pandas only. Knows nothing of sources, servers or the scaler package.
Times are epoch seconds (UTC, floats); a Series is regular (one value per `step`, NaN where
missing), which every model may rely on. Resampling raw scrapes to that grid lives in
`models.resample`, not in each model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Self

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:  # imported where used: `scaler serve` never needs pandas (0.7 s, 40 MiB)
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
        import pandas as pd

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
    raw_upper: FloatArray | None = field(default=None, repr=False)
    """The model's own, uncalibrated bound at `quantile` (reported, never used to decide)."""
    measured_upper: FloatArray | None = field(default=None, repr=False)
    """The calibrated bound before adaptive widening (models.adaptive): what drift detection
    grades, since the widening would otherwise absorb the very misses drift looks for."""

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

    def interval(self, p50: FloatArray, quantile: float) -> FloatArray:
        """The model's own upper bound at `quantile` for a path `p50` (steps 1..n), as the
        model's theory would state it. Reported next to the calibrated bound, never used."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready parameters (floats, lists, strings); no pickle."""
        ...

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Inverse of to_dict. Raises ArtefactError on missing or malformed fields."""
        ...


def season_for(span: float) -> float:
    """The seasonal period a history of `span` seconds (first to last observed value) supports:
    a week from two weeks on, a day from one day on; FitError below a day (DESIGN.md)."""
    if span >= 2 * WEEK:
        return WEEK
    if span >= DAY:
        return DAY
    raise FitError(
        f"history covers {span / HOUR:.1f} h of observed load; a forecast needs at least one "
        "day (the scaler stays reactive until then)"
    )


def observed_span(history: Series) -> float:
    """Seconds from the first to the last observed value, counting each as one step."""
    idx = np.flatnonzero(~np.isnan(history.values))
    if idx.size == 0:
        return 0.0
    return float(idx[-1] - idx[0] + 1) * history.step


def prepared(history: Series) -> Series:
    """History as every model fits on it: leading missing values dropped (a series that starts
    mid-way), negative values read as 0 (a load cannot be negative; sources that compute
    differences may produce tiny negatives). FitError when nothing is observed."""
    values = history.values
    idx = np.flatnonzero(~np.isnan(values))
    if idx.size == 0:
        raise FitError("history has no observed values; check the query returns data")
    first = int(idx[0])
    clean = np.where(values[first:] < 0, 0.0, values[first:])
    return Series(history.start + first * history.step, history.step, clean)


def lognormal_upper(
    p50: FloatArray, *, offset: float, sigma: FloatArray, quantile: float
) -> FloatArray:
    """Upper bound of a model that is Gaussian on log(load + offset) with per-step `sigma`."""
    z = NormalDist().inv_cdf(min(max(quantile, 1e-6), 1 - 1e-6))
    out: FloatArray = np.maximum((p50 + offset) * np.exp(z * sigma) - offset, p50)
    return out


def finite_or(value: float, default: float) -> float:
    """`value` when it is a finite number, else `default` (for fitted parameters)."""
    return value if math.isfinite(value) else default
