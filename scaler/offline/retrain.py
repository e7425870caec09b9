"""The weekly retrain of a fleet: per target, pull the history window from the source, fit a
challenger, backtest it against the champion on the latest week, and promote it in the store
only when it is better. Targets run side by side in supervised worker processes
(scaler/serving/workers.py), so one target's fit that hangs or runs out of memory costs that
target only; every outcome, failures included, is returned for the summary.

The race itself (the fit, the champion's score, the verdict, and why losses are compared at one
model step only) is retrain_race.py; this module runs it per target and acts on its verdict.

A promoted model carries what serve writes with its own fits: its drift null (in the artefact)
and `fallback_at_fit`, whether the replicas hold the target in drift fallback (their exported
gauge, retrain_live.py). Every target's outcome is recorded in the store, from which serve
exports the retrain gauges.

Must not: parse flags or print (retrain_cli.py does), or know which store backend it writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from models.base import ModelError
from scaler.decision.spec import TargetSpec
from scaler.errors import ScalerError, SourceRefused, SourceUnavailable, Unreachable
from scaler.kube.targets import Target
from scaler.offline import abandonable, retrain_race
from scaler.offline.retrain_live import LiveFallback
from scaler.offline.retrain_race import SERVE_STEP
from scaler.offline.retrain_summary import Outcome
from scaler.serving import workers
from scaler.serving.state import forecast_steps
from scaler.sources.base import Source
from scaler.store import base as store_base
from scaler.store.base import RETRAIN_WRITER, ModelStore, Stored, StoreError, StoreKey

logger = logging.getLogger(__name__)
_T = TypeVar("_T")


@dataclass(frozen=True)
class RetrainSettings:
    model_step: float = SERVE_STEP
    """Resolution models are fitted at, seconds. `scaler serve` fits and forecasts at
    SERVE_STEP, which no flag changes: at any other step nothing is promoted
    (retrain_race.verdict)."""
    history: float = 28 * 86400.0
    """Seconds of history per fit."""
    peaks_every: float | None = 30.0
    """Sampling step of the bucket peaks the models are fitted on, as `scaler serve` fits
    (its --step); None: the value at each model-step point (scaler/sources/fit_input.py)."""
    workers: int = 2
    """Fit processes side by side; 0 fits in threads of this process."""
    fit_timeout: float = 900.0
    """Seconds one target's fit and backtest may take before its worker is killed (with no
    workers, before the fit is abandoned: Retrainer._fit_here)."""
    fit_memory: int = 2 * 1024**3
    """Bytes of address space per fit worker; 0 leaves it unbounded."""
    dry_run: bool = False
    """Read, fit and race as ever, but never write the store: no version stored, none
    promoted, no retrain outcome recorded (serve's retrain gauges and their alert are left as
    the last real run set them)."""


class Terminated(ScalerError):
    """The job was told to stop (SIGTERM: the CronJob's deadline, a node drain; SIGINT:
    Ctrl-C) before this target finished."""


class Stop(asyncio.Event):
    """A run's stop, set on SIGTERM or SIGINT (retrain_cli), and the signal that set it first,
    which the reason of every unfinished target names."""

    def __init__(self) -> None:
        super().__init__()
        self.signal = "SIGTERM"

    def by(self, signal_name: str) -> None:
        if not self.is_set():
            self.signal = signal_name
        self.set()


class Retrainer:
    """Retrains targets into one store from one source; `run` them all, then `close`."""

    def __init__(
        self,
        store: ModelStore,
        source: Source,
        settings: RetrainSettings,
        *,
        live: LiveFallback | None = None,
    ) -> None:
        self.store = store
        self.source = source
        self.settings = settings
        self.live = live
        """The replicas' drift fallback per target (retrain_live.live_fallback); None: taken
        as none."""
        self._pool: workers.WorkerPool | None = None
        if settings.workers > 0:
            self._pool = workers.WorkerPool(
                size=settings.workers,
                memory_limit=settings.fit_memory,
                timeout=settings.fit_timeout,
                preload=(__name__,),
            )

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()

    async def run(
        self,
        targets: Sequence[Target],
        *,
        now: float,
        on_done: Callable[[Outcome], None] = lambda _o: None,
        stop: Stop | None = None,
    ) -> list[Outcome]:
        """Every target's outcome, in the order given; `on_done` hears each as it ends. Once
        `stop` is set (SIGTERM or SIGINT) no target starts, those reading history or fitting
        are stopped, and each is a failure that says the job was terminated by that signal
        (recorded in the store like any other).
        A stopped read is abandoned, not waited for (scaler/offline/abandonable.py): the
        run returns once the outcomes are recorded, whatever Prometheus does."""
        # A few targets ahead of the fits, so histories are fetched while others fit, and
        # memory holds a handful of histories rather than the fleet's.
        slots = asyncio.Semaphore(max(self.settings.workers, 1) * 2)
        stop = stop or Stop()

        async def one(target: Target) -> Outcome:
            async with slots:
                if stop.is_set():
                    reason = f"{terminated(stop)} before this target started"
                    spec, key = target.spec, str(target.key)
                    outcome = Outcome(spec.label, key, spec.model, reason=reason, failed=True)
                else:
                    outcome = await self._one(target, now, stop)
                await self._record(target.key, outcome)
            on_done(outcome)
            return outcome

        return list(await asyncio.gather(*(one(t) for t in targets)))

    async def _one(self, target: Target, now: float, stop: Stop) -> Outcome:
        started = time.monotonic()
        spec, key = target.spec, target.key
        base = Outcome(target=spec.label, key=str(key), model=spec.model)
        try:
            step, window = self.settings.model_step, self.settings.history
            end = math.floor(now / step) * step  # the grid `scaler serve` fits on
            read = functools.partial(
                self.source.history,
                spec,
                start=end - window + step,
                end=end,
                step=step,
                resolution=self.settings.peaks_every,
            )
            # In a thread SIGTERM abandons: a Prometheus that never answers holds no exit.
            history = await _unless(
                stop, abandonable.call(read, name=f"history {key}"), "while its history was read"
            )
            # Reads only, so SIGTERM abandons them too: a hung Kubernetes API holds no exit.
            pointer, champion = await _unless(
                stop,
                abandonable.call(functools.partial(self._champion, key), name=f"champion {key}"),
                "while its champion was read",
            )
            steps = forecast_steps(spec, step)
            job = functools.partial(
                retrain_race.challenge,
                spec,
                history,
                steps,
                champion.artefact if champion else None,
            )
            ended = "killed" if self._pool is not None else "abandoned: it runs on in this process"
            result = await _unless(stop, self._fit(job), f"during its fit (the fit was {ended})")
            result["fallback"] = await _unless(
                stop, self._fallback(spec, now), "while the replicas' drift state was read"
            )
            held = champion.version if champion else None
            outcome = await self._decide(base, key, result, held, pointer, now)
            return replace(outcome, seconds=time.monotonic() - started)
        except (ScalerError, ModelError) as exc:
            logger.warning("%s: retrain failed: %s", key, exc)
            # Its Prometheus, or the store gone mid-run (the champion read): a retry may pass.
            # One that answered 401/403/404 refused: only a fix of the trigger or flags helps.
            down = (
                isinstance(exc, SourceUnavailable | Unreachable)
                and not isinstance(exc, SourceRefused)
            ) or store_base.unreachable(exc)
            return replace(
                base,
                reason=str(exc),
                failed=True,
                unreachable=down,
                seconds=time.monotonic() - started,
            )
        except Exception as exc:
            # Not an error any layer expected (a bug, memory running out in a fit that runs in
            # this process): it fails this target, never the others still training.
            logger.exception("%s: retrain failed unexpectedly", key)
            reason = f"unexpected {type(exc).__name__}: {exc}; the log has its traceback"
            return replace(base, reason=reason, failed=True, seconds=time.monotonic() - started)

    def _champion(self, key: StoreKey) -> tuple[int | None, Stored | None]:
        """The store's champion pointer and the champion it leads to (None, None: no model)."""
        pointer = self.store.champion_version(key)
        return pointer, (self.store.champion(key) if pointer is not None else None)

    async def _record(self, key: StoreKey, outcome: Outcome) -> None:
        """Keep the outcome in the store, where serve exports it as the retrain gauges the
        PrometheusRule alerts on; a store that refuses it costs the gauge, not the model. A
        dry run records nothing: it retrained nothing, so it must not resolve the alert."""
        if self.settings.dry_run:
            return
        try:
            await asyncio.to_thread(
                self.store.record_retrain,
                key,
                ok=not outcome.failed,
                at=time.time(),
                reason=outcome.reason,
            )
        except StoreError as exc:
            logger.warning("%s: retrain outcome not recorded in the store: %s", key, exc)

    async def _fallback(self, spec: TargetSpec, now: float) -> bool:
        if self.live is None:
            return False
        try:
            held = await abandonable.call(
                functools.partial(self.live, spec, now), name=f"drift state {spec.key}"
            )
        except ScalerError as exc:
            logger.warning(
                "%s: drift state of the replicas unreadable, taken as none: %s", spec.key, exc
            )
            return False
        return bool(held)

    async def _fit(self, job: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        if self._pool is None:
            return await self._fit_here(job)
        result: dict[str, Any] = await self._pool.run(job)
        return result

    async def _fit_here(self, job: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """`job` in a thread of this process (--workers 0), bounded by --fit-timeout as a
        worker's fit is. A thread cannot be killed, so past the bound (or on SIGTERM) the fit
        is abandoned: its target fails and the job goes on, while the thread runs on until it
        ends or the process exits. An operator who sets a bound expects it to free the job
        from a fit that hangs; only a worker also frees the CPU."""
        bound = self.settings.fit_timeout
        try:
            async with asyncio.timeout(bound) as deadline:
                return await abandonable.call(job, name="fit")
        except TimeoutError as exc:
            if not deadline.expired():
                raise  # the fit's own error, not the bound
            raise workers.JobTimeout(
                f"the fit ran past its bound of {bound:.0f}s (--fit-timeout); with --workers 0 "
                "it runs in this process and cannot be killed, so it was abandoned and runs on "
                "until it ends or the job exits (--workers 1 or more kills it)"
            ) from exc

    async def _decide(
        self,
        base: Outcome,
        key: StoreKey,
        result: dict[str, Any],
        champion: int | None,
        pointer: int | None,
        now: float,
    ) -> Outcome:
        data, loss, old = result["artefact"], float(result["loss"]), float(result["champion_loss"])
        observed, points = int(result["observed"]), int(result["points"])
        row = replace(
            base,
            model=str(data.get("kind", base.model)),
            challenger_loss=_finite(loss),
            champion=champion,
            champion_loss=_finite(old),
            observed_points=observed,
            window_points=points,
        )
        step = float(result["step"])
        why = retrain_race.ungraded(
            loss,
            observed=observed,
            points=points,
            window=float(result["window"]),
            step=step,
            champion=champion,
        )
        if why:
            # Not a success: serve's retrain gauges would say the target was retrained, and
            # PredictiveScalerRetrainFailed would stay silent over a target with stale data.
            logger.warning("%s: retrain failed: %s", key, why)
            return replace(row, reason=why, failed=True)
        promote, reason = retrain_race.verdict(
            loss,
            old,
            champion=champion,
            problem=result["problem"],
            idle=bool(result["idle"]),
            step=step,
            champion_step=result["champion_step"],
        )
        if champion is None and pointer is not None and promote:
            # The store fell back past every version it could not load: not a first model.
            reason = f"no readable champion: v{pointer} and every older version cannot be loaded"
        row = replace(row, reason=reason)
        if not promote:
            return row
        if self.settings.dry_run:
            return replace(row, would_promote=True)
        meta = {"reason": reason, "scores": data.get("scores", {}), "champion": champion}
        # What serve writes with its own fits (champions.publish): a target in drift fallback
        # when this model was fitted starts it in fallback on every replica. The writer and
        # `at` tell serve the job keeps this target's weekly schedule (serving/refit_due.py).
        meta |= {"writer": RETRAIN_WRITER, "at": now, "quick": False}
        meta |= {"fallback_at_fit": bool(result.get("fallback", False))}
        try:
            version = await asyncio.to_thread(self.store.put, key, data, meta)
            won = await asyncio.to_thread(self.store.promote, key, version, expected=pointer)
        except StoreError as exc:
            # The fit and the race are done: the row keeps both losses, and says what won.
            logger.warning("%s: retrain failed: the store refused the challenger: %s", key, exc)
            why = f"not promoted: the store refused it ({exc}); it had won: {reason}"
            return replace(row, reason=why, failed=True)
        if not won:
            now_champion = await asyncio.to_thread(self.store.champion_version, key)
            lost = f"another writer promoted v{now_champion} first; it stays"
            return replace(row, reason=f"{lost} ({await self._discard(key, version)})")
        logger.info("%s: promoted v%d: %s", key, version, reason)
        return replace(row, promoted=True, version=version)

    async def _discard(self, key: StoreKey, version: int) -> str:
        """Remove a challenger whose promotion lost: stored only when promoted (docs/store.md),
        never left for a fallback to serve. What became of it, in words."""
        try:
            await asyncio.to_thread(self.store.discard, key, version)
        except StoreError as exc:
            logger.warning("%s: v%d lost its promotion and stays stored: %s", key, version, exc)
            return f"this run's v{version} could not be removed; no fallback takes it"
        return f"this run's v{version} removed"


def terminated(stop: Stop) -> str:
    """The reason of a target the stop left unfinished, up to when it came."""
    return f"not retrained: the job was terminated ({stop.signal})"


async def _unless(stop: Stop, work: Awaitable[_T], when: str) -> _T:
    """`work`'s result, unless `stop` is set first: then `work` is cancelled (a fit worker is
    killed) and Terminated says when. Storing and promoting never run under it: a promotion
    begun is finished, so its outcome is true."""
    task, stopped = asyncio.ensure_future(work), asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        raise Terminated(f"{terminated(stop)} {when}")
    return task.result()


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None
