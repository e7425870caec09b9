"""The weekly retrain of a fleet: per target, pull the history window from the source, fit a
challenger, backtest it against the champion on the latest week, and promote it in the store
only when it is better. Targets run side by side in supervised worker processes
(scaler/serving/workers.py), so one target's fit that hangs or runs out of memory costs that
target only; every outcome, failures included, is returned for the summary.

The comparison: the challenger's out-of-sample pinball loss on its own calibration window (the
newest week of the history; models.calibrate) against the champion's pinball loss over the very
same window, each forecast made from data before its origin (retrain_score.champion_loss, the
number models.challenge.backtest_loss gives, in one pass).
A champion fitted a week ago has not seen that week, so the race is fair; one fitted minutes ago
has, which favours it: re-running the job promotes nothing new, rather than churning models.

The race is run at one model step only: losses at two steps grade two different series (each
point the peak of a 5- or a 10-minute bucket), so they decide nothing. And `scaler serve`
forecasts at SERVE_STEP, whatever step a model was fitted at: a model at another step would be
served at the wrong step on every replica. So a run at another `--model-step` promotes nothing
(its rows say how those fits scored), and a champion at another step (written by an older
version of this job) is replaced by a challenger at SERVE_STEP without a race, the row saying
so: a step change is never decided by a comparison that means nothing, and never flips back.

A promoted model carries what serve writes with its own fits: its drift null (in the artefact)
and `fallback_at_fit`, whether the replicas hold the target in drift fallback (their exported
gauge, `live_fallback`). Every target's outcome is recorded in the store, from which serve
exports the retrain gauges.

Must not: parse flags or print (retrain_cli.py does), or know which store backend it writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from models import artefact
from models.base import ModelError, Series
from models.calibrate import calibration_window
from scaler.decision import drift_measure
from scaler.decision.literals import format_duration
from scaler.decision.spec import TargetSpec
from scaler.errors import ConfigError, ScalerError
from scaler.kube.targets import Target
from scaler.offline import abandonable, retrain_score
from scaler.serving import driftstate, workers
from scaler.serving.state import forecast_steps
from scaler.settings import EngineSettings
from scaler.sources.base import Source
from scaler.store.base import ModelStore, Stored, StoreError, StoreKey

if TYPE_CHECKING:
    from scaler.sources.prometheus import PrometheusSource

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

SERVE_STEP = EngineSettings().model_step
"""The step `scaler serve` fits and forecasts at (no flag changes it): the one step whose
models the store may hold as champions."""
DRIFT_GAUGE = "scaler_drift_fallback"
"""What every serve replica exports per target, 1 while in drift fallback (serving/telemetry.py)."""
LiveFallback = Callable[[TargetSpec, float], "bool | None"]
"""(target, time) -> whether the serving replicas hold it in drift fallback; None: unknown."""


@dataclass(frozen=True)
class RetrainSettings:
    model_step: float = SERVE_STEP
    """Resolution models are fitted at, seconds. `scaler serve` fits and forecasts at
    SERVE_STEP, which no flag changes: at any other step nothing is promoted (verdict)."""
    history: float = 28 * 86400.0
    """Seconds of history per fit."""
    peaks_every: float | None = 30.0
    """Sampling step of the bucket peaks the models are fitted on, as `scaler serve` fits
    (its --step); None: the value at each model-step point (scaler/sources/fit_input.py)."""
    workers: int = 2
    """Fit processes side by side; 0 fits in threads of this process."""
    fit_timeout: float = 900.0
    """Seconds one target's fit and backtest may take before its worker is killed."""
    fit_memory: int = 2 * 1024**3
    """Bytes of address space per fit worker; 0 leaves it unbounded."""


@dataclass(frozen=True)
class Shard:
    """`--shard I/N`: this run trains the targets whose key hashes to I (1-based) of N."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.index <= self.count <= 100_000:
            raise ConfigError(
                f"--shard {self.index}/{self.count}: give I/N with 1 <= I <= N <= 100000"
            )

    @classmethod
    def parse(cls, text: str) -> Shard:
        index, slash, count = text.partition("/")
        if not slash or not index.strip().isdigit() or not count.strip().isdigit():
            raise ConfigError(f"--shard {text!r}: give I/N, e.g. 1/4 (the first of four)")
        return cls(int(index), int(count))

    def holds(self, key: StoreKey) -> bool:
        """Stable across runs and machines: a hash of the key, not its place in a list."""
        bucket = int(hashlib.sha256(str(key).encode()).hexdigest()[:16], 16) % self.count
        return bucket == self.index - 1


class Terminated(ScalerError):
    """The job was told to stop (SIGTERM: the CronJob's deadline, a node drain) before this
    target finished."""


@dataclass(frozen=True)
class Outcome:
    """What happened to one target (one row of the summary)."""

    target: str
    """`namespace/name`, or where a trigger that did not parse sits."""
    key: str
    model: str = ""
    challenger_loss: float | None = None
    champion: int | None = None
    """The champion version before this run."""
    champion_loss: float | None = None
    promoted: bool = False
    version: int | None = None
    """Version the challenger was stored as (only when promoted)."""
    reason: str = ""
    failed: bool = False
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def verdict(
    loss: float,
    old: float,
    *,
    champion: int | None,
    problem: str = "",
    idle: bool = False,
    step: float = SERVE_STEP,
    champion_step: float | None = None,
) -> tuple[bool, str]:
    """Promote the challenger? And why, in words. `idle`: the latest week's load was 0
    throughout, so both are scored on nothing and a challenger that forecasts 0 wins. `step`:
    the challenger's model step; `champion_step`: the champion's (None: unknown, it does not
    load). Pure."""
    if not math.isfinite(loss):
        return False, "challenger has no out-of-sample score; the champion stays"
    if step != SERVE_STEP:
        kept = "no champion yet" if champion is None else f"v{champion} stays"
        return False, (
            f"not promoted ({kept}): fitted at a {format_duration(step)} model step "
            f"(--model-step), and scaler serve forecasts at {format_duration(SERVE_STEP)}, "
            "so it would serve this model at the wrong step"
        )
    if champion is None:
        return True, "no champion yet"
    if idle:
        return False, (
            f"v{champion} stays: the load was 0 over the whole latest week, so a challenger "
            "fitted on it learned no load to forecast (a paused service, or a query that "
            "matches an idle series: check it)"
        )
    if problem:
        return True, f"champion v{champion} cannot be scored ({problem})"
    if champion_step is not None and champion_step != step:
        return True, (
            f"re-baseline: v{champion} was fitted at a {format_duration(champion_step)} model "
            f"step, and scaler serve forecasts at {format_duration(step)}; replaced without a "
            "race (losses at two steps grade two different series)"
        )
    if not math.isfinite(old):
        return True, f"champion v{champion} has no forecast over the latest week"
    if loss < old:
        return True, f"pinball {loss:.4g} beats v{champion}'s {old:.4g} on the latest week"
    return False, f"v{champion} stays: its pinball {old:.4g} <= challenger's {loss:.4g}"


def challenge(
    spec: TargetSpec, history: Series, steps: int, champion: dict[str, Any] | None
) -> dict[str, Any]:
    """Fit the trigger's model on `history`, score the champion on the challenger's
    calibration window (not one at another model step: `verdict`), and measure the
    challenger's drift null as `scaler serve` does with a model it fits
    (scaler/serving/champions.py publish), stored in the artefact so that no replica measures
    it again. Runs in a fit worker: plain data in and out. ModelError when the challenger
    cannot be fitted."""
    quantile = spec.quantile
    data = artefact.fit(spec.model, history, steps, quantile=quantile)
    loss = float(data.get("scores", {}).get("pinball", math.nan))
    fitted = artefact.load(data)
    null = drift_measure.null_for(fitted, history, lead_time=spec.lead_time, quantile=quantile)
    data = {**data, driftstate.NULL_KEY: driftstate.null_to_json(null, spec, fitted.step)}
    old, problem, champion_step = math.nan, "", None
    if champion is not None:
        try:
            model = artefact.load(champion)
            champion_step = model.step
            if model.step == history.step:
                since = history.end - calibration_window(history.span)
                old = retrain_score.champion_loss(
                    model, history, since=since, steps=steps, quantile=quantile
                )
        except ModelError as exc:
            problem = str(exc)
    return {
        "artefact": data,
        "loss": loss,
        "champion_loss": old,
        "problem": problem,
        "idle": idle(history),
        "step": history.step,
        "champion_step": champion_step,
    }


def idle(history: Series) -> bool:
    """Whether every sample of `history`'s latest week (its calibration window, where
    challenger and champion are scored) is 0."""
    window = history.since(history.end - calibration_window(history.span)).values
    seen = window[~np.isnan(window)]
    return seen.size > 0 and not np.any(seen)


def live_fallback(source: PrometheusSource) -> LiveFallback:
    """Whether the replicas hold a target in drift fallback now, from the gauge they export
    (DRIFT_GAUGE, max over replicas: they agree) in the Prometheus that scrapes them, the
    default one (the ledger's): a refit made in fallback starts in it on every replica
    (scaler/serving/driftstate.py `carried_fallback`), as with serve's own fits. None when no
    replica exported it (never served, or that Prometheus does not scrape the scaler)."""

    def read(spec: TargetSpec, at: float) -> bool | None:
        target = spec.key.replace("\\", "\\\\").replace('"', '\\"')
        query = f'max({DRIFT_GAUGE}{{target="{target}"}})'
        found = source.values(replace(spec, server_address=None), query, at=at)
        return None if not found else max(found) >= 1.0

    return read


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
        """The replicas' drift fallback per target (live_fallback); None: taken as none."""
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
        stop: asyncio.Event | None = None,
    ) -> list[Outcome]:
        """Every target's outcome, in the order given; `on_done` hears each as it ends. Once
        `stop` is set no target starts, those reading history or fitting are stopped, and each
        is a failure that says the job was terminated (recorded in the store like any other).
        A stopped read is abandoned, not waited for (scaler/offline/abandonable.py): the
        run returns once the outcomes are recorded, whatever Prometheus does."""
        # A few targets ahead of the fits, so histories are fetched while others fit, and
        # memory holds a handful of histories rather than the fleet's.
        slots = asyncio.Semaphore(max(self.settings.workers, 1) * 2)
        stop = stop or asyncio.Event()

        async def one(target: Target) -> Outcome:
            async with slots:
                if stop.is_set():
                    reason = f"{TERMINATED} before this target started"
                    spec, key = target.spec, str(target.key)
                    outcome = Outcome(spec.label, key, spec.model, reason=reason, failed=True)
                else:
                    outcome = await self._one(target, now, stop)
                await self._record(target.key, outcome)
            on_done(outcome)
            return outcome

        return list(await asyncio.gather(*(one(t) for t in targets)))

    async def _one(self, target: Target, now: float, stop: asyncio.Event) -> Outcome:
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
                challenge, spec, history, steps, champion.artefact if champion else None
            )
            result = await _unless(stop, self._fit(job), "during its fit (the fit was killed)")
            result["fallback"] = await _unless(
                stop, self._fallback(spec, now), "while the replicas' drift state was read"
            )
            held = champion.version if champion else None
            outcome = await self._decide(base, key, result, held, pointer, now)
            return replace(outcome, seconds=time.monotonic() - started)
        except (ScalerError, ModelError) as exc:
            logger.warning("%s: retrain failed: %s", key, exc)
            return replace(base, reason=str(exc), failed=True, seconds=time.monotonic() - started)
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
        PrometheusRule alerts on; a store that refuses it costs the gauge, not the model."""
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
        if self._pool is None:  # a fit in a thread cannot be killed: SIGTERM abandons it
            return await abandonable.call(job, name="fit")
        result: dict[str, Any] = await self._pool.run(job)
        return result

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
        promote, reason = verdict(
            loss,
            old,
            champion=champion,
            problem=result["problem"],
            idle=bool(result["idle"]),
            step=float(result["step"]),
            champion_step=result["champion_step"],
        )
        if champion is None and pointer is not None and promote:
            # The store fell back past every version it could not load: not a first model.
            reason = f"no readable champion: v{pointer} and every older version cannot be loaded"
        row = replace(
            base,
            model=str(data.get("kind", base.model)),
            challenger_loss=_finite(loss),
            champion=champion,
            champion_loss=_finite(old),
            reason=reason,
        )
        if not promote:
            return row
        meta = {"reason": reason, "scores": data.get("scores", {}), "champion": champion}
        # What serve writes with its own fits (champions.publish): a target in drift fallback
        # when this model was fitted starts it in fallback on every replica.
        meta |= {"writer": "scaler retrain", "at": now, "quick": False}
        meta |= {"fallback_at_fit": bool(result.get("fallback", False))}
        version = await asyncio.to_thread(self.store.put, key, data, meta)
        won = await asyncio.to_thread(self.store.promote, key, version, expected=pointer)
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


TERMINATED = "not retrained: the job was terminated (SIGTERM)"


async def _unless(stop: asyncio.Event, work: Awaitable[_T], when: str) -> _T:
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
        raise Terminated(f"{TERMINATED} {when}")
    return task.result()


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None
