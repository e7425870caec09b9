"""The replay's forecasts, one model step at a time: the walk-forward origins (models.walkforward:
weekly refit, calibrated, no lookahead), the drift tracker that scores each completed model-step
bucket against them, and the early refit it asks for.

It owns when a model is fitted and which forecast and band are in force; it does not decide
(scaler.offline.replay reads `origin` and `band` at each step and decides) nor score the
decisions (scaler.offline.replay_summary).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from models.base import Forecaster, Series
from models.calibrate import CalibratedModel
from models.conformal import Calibration
from models.walkforward import Origin, walk_forward
from scaler.decision import drift, drift_tracker, resolution
from scaler.offline.replay_config import ReplayConfig


def drift_refit_kind(
    make: Callable[[], Forecaster] | str, champion: CalibratedModel | None
) -> Callable[[], Forecaster] | str:
    """What a drift refit fits: the champion's kind on fresh data when `auto` chose it (the
    selection, a backtest of every candidate over two windows, stays with the weekly fits, as
    in the live engine: scaler/serving/fitting.py); `make` itself otherwise."""
    if make == "auto" and champion is not None:
        return champion.kind
    return make


class OriginWalk:
    """The forecast in force at the model step (`coarse`), refreshed each time a model-step
    bucket is complete: the bucket is scored (drift), then forecast from. Counts the drift
    episodes and the drift refits (`episodes`, `retrains`) for the summary."""

    def __init__(
        self,
        coarse: Series,
        config: ReplayConfig,
        *,
        make: Callable[[], Forecaster] | str,
        points: int,
    ) -> None:
        self.coarse, self._config, self._make, self._points = coarse, config, make, points
        self.tracker = drift_tracker.DriftTracker(
            lead_time=config.lead_time,
            monitor=drift.DriftMonitor(
                quantile=config.quantile,
                step=coarse.step,
                run_test=config.drift_run_test,
                drop_margin=config.drop_margin,
            ),
        )
        self._origins = self._forecasts(0)
        self.origin = Origin(index=-1, forecast=None, model=None)
        """The newest forecast made (index -1 before the first bucket is complete)."""
        self.band: Calibration | None = None
        """The calibrated band of `origin`'s forecast; None without one."""
        # An early refit on drift comes on top of the weekly ones, not instead: they keep the
        # schedule of the first fit (`anchor`), as the weekly retrain CronJob does. Restarting
        # the week at every drift refit left mongodb_rps' scored week on a model fitted on 4 days.
        self._weekly = max(1, round(config.refit_every / coarse.step))
        self._anchor: int | None = None
        self._off_schedule = False
        self.episodes = self.retrains = 0

    def _forecasts(
        self, start: int, kind: Callable[[], Forecaster] | str | None = None
    ) -> Iterator[Origin]:
        config = self._config
        return walk_forward(
            self._make if kind is None else kind,
            self.coarse,
            start=start,
            steps=self._points,
            quantile=config.quantile,
            refit_every=config.refit_every,
            window=config.history_window,
        )

    def advance(self, now: float) -> int:
        """Score and forecast from every model-step bucket complete at `now` (between two
        refreshes every decision reads the same forecast); returns how many drift episodes
        began."""
        begun = 0
        while self.origin.index < resolution.newest_complete(self.coarse, now):
            i = self.origin.index + 1
            was_ok = not self.tracker.monitor.in_fallback
            if self._config.drift:
                self._score(i)
            if was_ok and self.tracker.monitor.in_fallback:
                self.episodes += 1
                begun += 1
            self._adopt(next(self._origins), i)
        return begun

    def _score(self, i: int) -> None:
        """Score bucket `i` against the forecast in force; refit early when drift asks, and
        weekly on the first fit's schedule once off it."""
        coarse, tracker = self.coarse, self.tracker
        tracker.score(Series(coarse.start + i * coarse.step, coarse.step, coarse.values[i : i + 1]))
        if tracker.monitor.take_retrain():
            self._origins = self._forecasts(i, drift_refit_kind(self._make, self.origin.model))
            self.retrains += 1
            self._off_schedule = True
        elif (
            self._off_schedule
            and self._anchor is not None
            and (i - self._anchor) % self._weekly == 0
        ):
            self._origins = self._forecasts(i)  # the weekly refit, on its own schedule

    def _adopt(self, origin: Origin, i: int) -> None:
        """Put `origin` (made after bucket `i`) in force, with its band and its model's null."""
        coarse, drifting = self.coarse, self._config.drift
        self.origin = origin
        if self._anchor is None and origin.model is not None:
            self._anchor = round((origin.model.trained_until - coarse.start) / coarse.step)
        self.band = None
        if origin.forecast is not None and drifting:
            self.tracker.record(origin.forecast)
        if origin.forecast is not None and origin.model is not None:
            known = Series(coarse.start, coarse.step, coarse.values[: i + 1])
            self.band = (
                origin.band
                if origin.band is not None
                else origin.model.calibration_for(known, self._points)
            )
            if drifting:  # the null of each new model, measured once
                self.tracker.adopt(origin.model, known)
