"""The median of the candidate models, as one more candidate for `model: auto`.

When a week of backtest cannot tell the candidates apart (bursty load with no cycle: a paired
test on one week is too noisy to call), picking one is a coin toss that may land on the worst;
the point-by-point median of their forecasts is never far from the best of them and often beats
all (the forecast-combination result of Bates & Granger 1969, borne out again in the M4
competition). The median, not the mean, so one member that goes astray (an ETS level blown up
by an outage) cannot drag the ensemble with it.

The ensemble is a point forecaster like any other: its P95 comes from conformal calibration of
its own residuals, so its coverage holds like every model's. `combine` builds it from members
already fitted and backtested by `model: auto`, so selection pays no extra fit for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Self

import numpy as np

from models import catalog, origins
from models.base import ArtefactError, FitError, FloatArray, Forecaster, ModelError, Series
from models.calibrate import CalibratedModel, calibrated
from models.conformal import Backtest


class Ensemble:
    """y = median over members of each member's forecast, point by point."""

    kind: ClassVar[str] = "ensemble"
    cost: ClassVar[int] = 4
    """Above every member: it fits and predicts with all of them."""

    def __init__(self, members: Sequence[Forecaster] = ()) -> None:
        self.members = list(members)

    def fit(self, history: Series) -> None:
        """Fit every candidate that can be fitted; FitError when none can."""
        self.members, failures = [], []
        for kind in catalog.CANDIDATES:
            member = catalog.adapter(kind)()
            try:
                member.fit(history)
            except FitError as exc:
                failures.append(f"{kind}: {exc}")
            else:
                self.members.append(member)
        if not self.members:
            raise FitError("no ensemble member could be fitted (" + "; ".join(failures) + ")")

    def predict(self, recent: Series, steps: int) -> FloatArray:
        if not self.members:
            raise FitError("ensemble used before fit")
        paths = np.vstack([m.predict(recent, steps) for m in self.members])
        out: FloatArray = np.median(paths, axis=0)
        return out

    def predict_at(self, history: Series, ends: origins.IntArray, steps: int) -> FloatArray:
        """`predict` from every origin `history.values[: i + 1]`, i in `ends`: each member's
        forecasts at every origin (its own `predict_at` when it has one, its `predict` one origin
        at a time when not: models.origins), then their median, row by row. The same numbers as
        `predict` per origin, bit for bit: the median of the same members' values, in the same
        member order (what lets an ensemble champion's drift state be replayed in one pass,
        models/manyorigin.py)."""
        if not self.members:
            raise FitError("ensemble used before fit")
        paths = np.stack([origins.predict_at(m, history, ends, steps) for m in self.members])
        out: FloatArray = np.median(paths, axis=0)
        return out

    def interval(self, p50: FloatArray, quantile: float) -> FloatArray:
        """The median of the members' own bounds around the ensemble's path."""
        out: FloatArray = np.median(
            np.vstack([m.interval(p50, quantile) for m in self.members]), axis=0
        )
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"members": [{"kind": m.kind, "params": m.to_dict()} for m in self.members]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        try:
            members = [
                _member(str(item["kind"])).from_dict(item["params"]) for item in data["members"]
            ]
        except ArtefactError:
            raise
        except (KeyError, TypeError, ValueError, ModelError) as exc:
            raise ArtefactError(f"ensemble artefact is malformed: {exc!r}") from exc
        if not members:
            raise ArtefactError("ensemble artefact has no members; refit the model")
        return cls(members)


def _member(kind: str) -> type[Forecaster]:
    if kind not in catalog.CANDIDATES:
        raise ArtefactError(f"ensemble member {kind!r} is not one of {catalog.CANDIDATES}")
    return catalog.adapter(kind)


def combine(models: Sequence[CalibratedModel], history: Series) -> CalibratedModel | None:
    """The calibrated ensemble of `models` (fitted on `history`, each with its calibration
    backtest on the same origins), without refitting any; None with fewer than two."""
    usable = [m for m in models if m.backtest is not None and m.kind in catalog.CANDIDATES]
    if len(usable) < 2 or len({m.backtest.p50.shape for m in usable if m.backtest}) != 1:
        return None
    backtest = median_backtest([m.backtest for m in usable if m.backtest is not None])
    in_sample = any(m.scores.get("in_sample", 0.0) > 0 for m in usable)
    return calibrated(
        Ensemble([m.model for m in usable]),
        history,
        backtest,
        quantile=usable[0].quantile,
        in_sample=in_sample,
    )


def median_backtest(backtests: Sequence[Backtest]) -> Backtest:
    """The ensemble's backtest from its members' on the same origins: their median P50."""
    return Backtest(
        actual=backtests[0].actual, p50=np.median(np.stack([b.p50 for b in backtests]), axis=0)
    )
