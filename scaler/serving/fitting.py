"""Fitting models off the serving loop: supervised worker processes (or a thread with
fit_workers 0), one fit in flight per target, a refit every `refit_every` (later while the retrain
job keeps the target's schedule: refit_due.py), retries after failures.

Only plain data crosses the process boundary (a Series in, a JSON-ready artefact out). A fit that
kills its worker, runs past `fit_timeout` or exceeds `fit_memory` is charged to its own target
(a clear `model_note` and an exponential backoff); the worker is replaced and every other target
keeps fitting. `healthy` is False while no worker can be started (/readyz reports it).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
from collections.abc import Callable
from typing import Any, Protocol

from models import artefact
from models.base import DAY, ModelError, Series
from models.calibrate import CalibratedModel
from scaler.serving import refit_due, workers
from scaler.serving.state import TargetState, forecast_steps
from scaler.serving.telemetry import Telemetry
from scaler.settings import EngineSettings

logger = logging.getLogger(__name__)

QUICK_MODEL = "seasonal"
"""Fitted first for a new `auto` target, while the full selection runs."""
FIT_RETRY = 3600.0
"""Seconds before a failed fit (e.g. less than a day of history) is tried again."""
UNAVAILABLE_RETRY = 60.0
"""Seconds before a fit that found no worker (not the target's fault) is tried again."""


class Publisher(Protocol):
    """The model store's side of fitting (scaler/serving/champions.py)."""

    def allow(self, state: TargetState, now: float) -> bool: ...

    async def adopt_newer(self, state: TargetState) -> bool: ...

    async def publish(
        self,
        state: TargetState,
        data: dict[str, Any],
        *,
        quick: bool,
        replaces: int | None,
        early: bool = False,
        reason: str = "",
    ) -> CalibratedModel: ...


def _job(state: TargetState) -> refit_due.JobSeen | None:
    """The retrain job's latest sign for the target, if it has a model the job's schedule
    covers: a target serving none (its fit failed, its champion was refused) is fitted when it
    can be, whoever runs when."""
    return state.retrain_seen if state.model is not None else None


def backoff(failures: int, *, ceiling: float) -> float:
    """Seconds before the next fit of a target whose fits broke `failures` workers in a row:
    FIT_RETRY, doubling each time, at most `ceiling` (the refit period)."""
    return min(FIT_RETRY * 2.0 ** max(failures - 1, 0), ceiling)


class Fitter:
    def __init__(
        self,
        settings: EngineSettings,
        telemetry: Telemetry,
        *,
        fit: Callable[..., dict[str, Any]] = artefact.fit,
        store: Publisher | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        """Where fitted models are shared (scaler/serving/champions.py); None keeps them here."""
        self.telemetry = telemetry
        self._fit_fn = fit
        """What runs in the worker; a module-level function, so that it pickles."""
        self.pool: workers.WorkerPool | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._late: dict[str, float] = {}
        """Per target key, the retrain job's sign the job-late warning was logged for."""
        telemetry.fit_workers_up.set_function(lambda: 1.0 if self.healthy else 0.0)

    @property
    def healthy(self) -> bool:
        """False while the last attempt to start a fit worker failed."""
        return self.pool is None or self.pool.healthy

    @property
    def problem(self) -> str | None:
        return None if self.pool is None else self.pool.problem

    def start(self) -> None:
        """Create the pool (workers start on first use, from the event loop's thread)."""
        if self.pool is None and self.settings.fit_workers > 0:
            self.pool = workers.WorkerPool(
                size=self.settings.fit_workers,
                memory_limit=self.settings.fit_memory,
                timeout=self.settings.fit_timeout,
                preload=(self._fit_fn.__module__,),
                on_restart=lambda cause: self.telemetry.fit_worker_restarts.labels(cause).inc(),
            )

    def close(self) -> None:
        """Cancel every queued fit and kill the workers (a running fit is abandoned)."""
        for task in self._tasks:
            task.cancel()
        if self.pool is not None:
            self.pool.close()
            self.pool = None

    async def wait(self) -> None:
        """Until every fit started so far has finished (or failed)."""
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def maybe_fit(self, state: TargetState, now: float) -> None:
        """Start a fit of `state`'s model in the background when one is due."""
        due = state.refit_early or self._scheduled(state, now)
        if state.fitting or not due or state.history is None:
            return
        if self.store is not None and not self.store.allow(state, now):
            return
        state.fitting = True
        task = asyncio.ensure_future(self._fit(state, state.history, now))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _scheduled(self, state: TargetState, now: float) -> bool:
        """Is the target's scheduled refit due? (refit_due.due: the job's week first.)"""
        job, settings = _job(state), self.settings
        grace = settings.retrain_grace
        return now >= refit_due.due(
            state.fitted_at, job=job, refit_every=settings.refit_every, grace=grace
        )

    def _why(self, state: TargetState, now: float, *, quick: bool, scheduled: bool) -> str:
        """Why this fit runs, for the stored version's meta. Stepping in for a late retrain job
        is also a warning, once per sign of the job: the operator learns the job is broken."""
        job, key = _job(state), state.spec.key
        why = refit_due.reason(
            quick=quick,
            first=state.model is None,
            scheduled=scheduled,
            fitted_at=state.fitted_at,
            job=job,
            now=now,
        )
        if job is None or not scheduled or not refit_due.stands_in(state.fitted_at, job):
            return why
        if self._late.get(key) != job.at:
            self._late[key] = job.at
            logger.warning(
                "%s: the retrain job is late: it last %s %.1f days ago (its week and %.0f h of "
                "grace have passed), so serve refits the target in its place; check the retrain "
                "CronJob (kubectl get cronjob,jobs) and its newest Job's log",
                key,
                job.what,
                (now - job.at) / DAY,
                self.settings.retrain_grace / 3600.0,
            )
        return why

    async def _run(self, fit: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        if self.pool is None:
            return await asyncio.get_running_loop().run_in_executor(None, fit)
        result: dict[str, Any] = await self.pool.run(fit)
        return result

    async def _fit(self, state: TargetState, history: Series, now: float) -> None:
        spec = state.spec
        # `auto` fits and backtests every candidate (seconds per target, so minutes for a fleet
        # at start-up). A target with no model yet gets the cheap baseline first and is due for
        # the real selection right after: it prewarms within a step instead of staying reactive.
        quick = spec.model == "auto" and state.model is None
        # A drift refit between two scheduled ones leaves the schedule where it was.
        scheduled = self._scheduled(state, now)
        state.refit_early = False
        kind = QUICK_MODEL if quick else spec.model
        if not scheduled and spec.model == "auto" and state.model is not None:
            kind = state.model.kind  # a drift refit: selection stays with the scheduled fits
        fit = functools.partial(
            self._fit_fn,
            kind,
            history,
            forecast_steps(spec, self.settings.model_step),
            quantile=spec.quantile,
            **({"holidays": spec.holidays} if spec.holidays else {}),
        )
        try:
            if self.store is not None and await self.store.adopt_newer(state):
                return  # another writer's champion, adopted instead of fitting
            serving = state.model_version  # the champion this fit means to replace
            why = self._why(state, now, quick=quick, scheduled=scheduled)
            data = await self._run(fit)
            if self.store is None:
                state.model = artefact.load(data)
            else:
                state.model = await self.store.publish(
                    state, data, quick=quick, replaces=serving, early=not scheduled, reason=why
                )
            state.model_fitted_at = now
            state.model_note = f"{state.model.kind} fitted on {len(history)} points"
            state.fit_failures = 0
            self.telemetry.fits.labels(kind, "ok").inc()
            logger.info("%s: %s", spec.key, state.model_note)
            if quick or scheduled:
                state.fitted_at = -math.inf if quick else now
        except ModelError as exc:
            state.model_note = str(exc)
            self.telemetry.fits.labels(kind, "error").inc()
            logger.info("%s: no model, staying reactive: %s", spec.key, exc)
            state.fitted_at = now - self.settings.refit_every + FIT_RETRY
        except workers.PoolUnavailable as exc:  # no worker: not this target's fault
            state.model_note = f"fit postponed: {exc}"
            self.telemetry.fits.labels(kind, exc.result).inc()
            state.fitted_at = now - self.settings.refit_every + UNAVAILABLE_RETRY
        except workers.WorkerError as exc:  # this target's fit broke its worker: charge it
            state.fit_failures += 1
            delay = backoff(state.fit_failures, ceiling=self.settings.refit_every)
            state.model_note = (
                f"{kind} fit failed: {exc}; {state.fit_failures} in a row, next try in "
                f"{delay / 60:.0f} min (check leadTime/horizon, or raise --fit-memory / "
                "--fit-timeout)"
            )
            self.telemetry.fits.labels(kind, exc.result).inc()
            logger.warning("%s: %s", spec.key, state.model_note)
            state.fitted_at = now - self.settings.refit_every + delay
        except Exception as exc:  # a failing fit must not leave the target without retries
            logger.exception("%s: model fit crashed", spec.key)
            state.model_note = f"fit crashed: {exc!r}"
            self.telemetry.fits.labels(kind, "crash").inc()
            state.fitted_at = now - self.settings.refit_every + FIT_RETRY
        finally:
            state.fitting = False
