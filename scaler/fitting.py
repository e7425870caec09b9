"""Fitting models off the serving loop: a process pool (or a thread with fit_workers 0), one
fit in flight per target, a refit every `refit_every`, retries after failures.

Only plain data crosses the process boundary (a Series in, a JSON-ready artefact out).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import math
import multiprocessing
from typing import Any

from models import artefact
from models.base import ModelError, Series
from scaler.settings import EngineSettings
from scaler.state import TargetState, forecast_steps
from scaler.telemetry import Telemetry

logger = logging.getLogger(__name__)

QUICK_MODEL = "seasonal"
"""Fitted first for a new `auto` target, while the full selection runs."""
FIT_RETRY = 3600.0
"""Seconds before a failed fit (e.g. less than a day of history) is tried again."""


class Fitter:
    def __init__(self, settings: EngineSettings, telemetry: Telemetry) -> None:
        self.settings = settings
        self.telemetry = telemetry
        self._pool: concurrent.futures.Executor | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    def start(self) -> None:
        if self._pool is None and self.settings.fit_workers > 0:
            self._pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=self.settings.fit_workers,
                mp_context=multiprocessing.get_context("spawn"),
                # No max_tasks_per_child: on CPython 3.11-3.12 the pool stalls for minutes
                # whenever a worker retires (measured by make bench: 400 fits in 8 minutes instead
                # of 1,000 in 85 s). A worker that fitted Prophet stays ~200 MiB resident.
            )

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def maybe_fit(self, state: TargetState, now: float) -> None:
        """Start a fit of `state`'s model in the background when one is due."""
        due = now - state.fitted_at >= self.settings.refit_every
        if state.fitting or not due or state.history is None:
            return
        state.fitting = True
        task = asyncio.ensure_future(self._fit(state, state.history, now))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _fit(self, state: TargetState, history: Series, now: float) -> None:
        spec = state.spec
        # `auto` fits and backtests every candidate (seconds per target, so minutes for a fleet
        # at start-up). A target with no model yet gets the cheap baseline first and is due for
        # the real selection right after: it prewarms within a step instead of staying reactive.
        quick = spec.model == "auto" and state.model is None
        kind = QUICK_MODEL if quick else spec.model
        fit = functools.partial(
            artefact.fit,
            kind,
            history,
            forecast_steps(spec, self.settings.model_step),
            quantile=spec.quantile,
        )
        try:
            state.model = artefact.load(
                await asyncio.get_running_loop().run_in_executor(self._pool, fit)
            )
            state.model_note = f"{state.model.kind} fitted on {len(history)} points"
            self.telemetry.fits.labels(kind, "ok").inc()
            logger.info("%s: %s", spec.key, state.model_note)
            state.fitted_at = -math.inf if quick else now
        except ModelError as exc:
            state.model_note = str(exc)
            self.telemetry.fits.labels(kind, "error").inc()
            logger.info("%s: no model, staying reactive: %s", spec.key, exc)
            state.fitted_at = now - self.settings.refit_every + FIT_RETRY
        except Exception as exc:  # a crashed worker must not leave the target without retries
            logger.exception("%s: model fit crashed", spec.key)
            state.model_note = f"fit crashed: {exc!r}"
            self.telemetry.fits.labels(kind, "crash").inc()
            state.fitted_at = now - self.settings.refit_every + FIT_RETRY
        finally:
            state.fitting = False
