"""`scaler serve --store`: answer from the store's champions, hot-reload promotions, and write
the models fitted here so that every replica ends up on the same artefact.

- `load`: a target's champion, read once when the target is first seen (at warm-up for the
  `--targets` ones). Its model, its drift null (stored with it by the replica that fitted it,
  scaler/serving/driftstate.py) and whether it was fitted in drift fallback go on the state.
- `poll`: every `--store-poll`, every champion pointer and retrain outcome in one read
  (`statuses`: one LIST for the ConfigMap store, whatever the number of targets); each target's
  retrain outcome goes on its scaler_retrain_last_*_timestamp_seconds gauges, and a new version
  is loaded in a thread and swapped in whole on the event loop, between two refreshes, so every
  answer comes from the old model or the new one and none is missing. A store that cannot be
  read keeps the models in use.
- `publish`: the fit pool's result for a target is stored as a new version and offered as champion
  by a compare-and-set on the version this replica was serving (None for the first model). The
  first writer wins; a replica that lost the race adopts the winner's artefact, so replicas never
  serve two models of one target for longer than a poll.
- `keep` and `restore`: the serving checkpoints (scaler/serving/checkpoints.py): each target's
  history up to the hour, written once per (target, version, hour) by whichever replica comes
  first; `load` starts a target's history from its champion's newest one.
- `allow`: an early refit (a drift alarm, or the full `auto` selection after the quick first
  model) of a target whose model came through the store runs at most once per EARLY_REFIT_GAP on
  a replica; a champion promoted meanwhile by another replica is adopted instead of fitting.
  A scheduled refit of a stored model waits until a poll has read the target's retrain outcome.
- What the store says of the retrain job goes on the state (`retrain_seen`: the `at` of a
  champion it wrote, its last success): while it keeps coming the job owns the weekly schedule,
  and serve refits on schedule only when the job is late (scaler/serving/refit_due.py).

Only scaler/store/ touches the bytes; this module never decides which model is better (the
retrain job does: a model fitted here replaces the champion only where there was none, or when
the engine asked for a refit). Without --store none of this runs and serve fits in memory.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import socket
import time
from collections.abc import Callable
from typing import Any

from models import artefact
from models.base import Series
from models.calibrate import CalibratedModel
from scaler.decision import drift_measure
from scaler.decision.spec import TargetSpec
from scaler.errors import ScalerError
from scaler.serving import checkpoints, driftstate, refit_due
from scaler.serving.state import TargetState
from scaler.serving.telemetry import Telemetry
from scaler.store.base import (
    RETRAIN_WRITER,
    ModelStore,
    Status,
    Stored,
    StoreError,
    StoreKey,
)

logger = logging.getLogger(__name__)

EARLY_REFIT_GAP = 3600.0
"""Seconds between two early refits of one target on one replica: a drift alarm asks again
every day it lasts (scaler/decision/drift.py), a flapping one must not keep a fit worker busy."""


def key_of(spec: TargetSpec) -> StoreKey:
    """The store key of a trigger, the one `scaler retrain` writes."""
    return StoreKey.of(spec)


def _written_by_job(stored: Stored) -> refit_due.JobSeen | None:
    """The retrain job's run that wrote `stored` (its meta's `at`), if the job wrote it."""
    at = stored.meta.get("at")
    if stored.meta.get("writer") != RETRAIN_WRITER or not isinstance(at, int | float):
        return None
    return refit_due.JobSeen(float(at), f"wrote v{stored.version}") if math.isfinite(at) else None


def retrain_gauges(telemetry: Telemetry) -> Callable[[str, Status], None]:
    """Export the retrain job's last outcome per target, as read from the store, on
    scaler_retrain_last_{success,failure}_timestamp_seconds (deploy/prometheus alerts on them):
    the pods Prometheus already scrapes report the job's result, no Pushgateway needed."""
    per_target = telemetry.per_target

    def export(target: str, status: Status) -> None:
        for gauge, at in (
            (per_target.retrain_success, status.retrain_success),
            (per_target.retrain_failure, status.retrain_failure),
        ):
            if at is not None:
                gauge.labels(target).set(at)

    return export


class Champions:
    def __init__(
        self,
        store: ModelStore,
        *,
        poll: float,
        on_status: Callable[[str, Status], None] = lambda _key, _status: None,
        fit_input: tuple[float, float | None] | None = None,
        model_step: float = 300.0,
    ) -> None:
        self.store = store
        self.model_step = model_step
        """The step this replica forecasts at: a champion fitted at another is refused."""
        self._refused: dict[str, int] = {}
        """The champion version of each target refused for its model step (warned of once)."""
        self.poll_every = poll
        self.on_status = on_status
        """Hears each served target's store status every poll (retrain_gauges)."""
        self.fit_input = fit_input
        """The engine's (model step, bucket-peak resolution): what a checkpoint holds; None
        writes and reads no checkpoints."""
        self._checkpointed: dict[str, tuple[int, float]] = {}
        """(version, T) of each target's newest checkpoint this replica wrote or read."""
        self.writer = f"{socket.gethostname()}/{os.getpid()}"
        """Who wrote a version, in its meta (for people reading the store)."""
        self._early: dict[str, float] = {}
        """When each target key's last early refit was allowed."""
        self._polled: set[str] = set()
        """Target keys whose retrain outcome a poll has read (`allow`)."""

    # ---- reading -----------------------------------------------------------------------------
    async def load(self, state: TargetState) -> None:
        """Adopt the target's champion, if the store has one (StoreError when unreadable)."""
        stored = await asyncio.to_thread(self.store.champion, key_of(state.spec))
        if stored is not None:
            self._use(state, stored)
            if state.history is None:
                state.history = await self.restore(state)

    def _use(self, state: TargetState, stored: Stored) -> None:
        model = artefact.load(stored.artefact)
        spec = state.spec
        problem = self._wrong_step(model, stored.version)
        if problem is not None:
            self._refused[spec.key] = stored.version
            raise StoreError(f"{key_of(spec)}: {problem}")
        state.model = model
        state.model_fitted_at = model.trained_until
        state.model_version = stored.version
        state.model_null = driftstate.null_from_json(
            stored.artefact.get(driftstate.NULL_KEY), spec, model.step
        )
        state.model_fallback = bool(stored.meta.get("fallback_at_fit", False))
        state.retrain_seen = refit_due.newer(state.retrain_seen, _written_by_job(stored))
        # Due again a refit period after its fit (a job's model: after the job's next week and
        # a grace, refit_due.py); a quick first model at once (fitting.py).
        quick = bool(stored.meta.get("quick", False))
        if not (stored.meta.get("early", False) and math.isfinite(state.fitted_at)):
            state.fitted_at = -math.inf if quick else model.trained_until  # a drift refit: kept
        state.model_note = f"{model.kind} v{stored.version} from the model store"
        logger.info("%s: %s", spec.key, state.model_note)

    async def poll(self, states: dict[str, TargetState]) -> None:
        """Hot reload and the retrain gauges, until cancelled (module docstring)."""
        while True:
            await self.poll_once(states)
            await asyncio.sleep(self.poll_every)

    async def poll_once(self, states: dict[str, TargetState]) -> None:
        """One read of every pointer and retrain outcome (`statuses`: one request, however
        many targets), then the new champions loaded, one target at a time."""
        try:
            statuses = await asyncio.to_thread(self.store.statuses)
        except ScalerError as exc:
            logger.warning("model store unreadable, champions not reloaded: %s", exc)
            return
        for state in list(states.values()):
            status = statuses.get(key_of(state.spec), Status())
            self.on_status(state.spec.key, status)
            self._polled.add(state.spec.key)
            if status.retrain_success is not None:  # the job ran; kept or promoted, its call
                ran = refit_due.JobSeen(status.retrain_success, "succeeded")
                state.retrain_seen = refit_due.newer(state.retrain_seen, ran)
            if status.champion in (None, state.model_version, self._refused.get(state.spec.key)):
                continue
            try:
                await self._reload(state)
            except ScalerError as exc:
                logger.warning("%s: champion not reloaded: %s", state.spec.key, exc)

    async def refresh(self, state: TargetState) -> bool:
        """Adopt a champion other than the one in use; True when it did."""
        key = key_of(state.spec)
        version = await asyncio.to_thread(self.store.champion_version, key)
        if version is None or version == state.model_version:
            return False
        return await self._reload(state)

    async def _reload(self, state: TargetState) -> bool:
        stored = await asyncio.to_thread(self.store.champion, key_of(state.spec))
        if stored is None or stored.version == state.model_version:
            return False
        self._use(state, stored)
        return True

    async def restore(self, state: TargetState) -> Series | None:
        """The history of the newest checkpoint of the target's model version; None (read it
        all from Prometheus) when there is none, or it is unreadable or does not match."""
        if self.fit_input is None or state.model_version is None:
            return None
        step, peaks = self.fit_input
        key, version = key_of(state.spec), state.model_version
        try:
            data = await asyncio.to_thread(self.store.checkpoint, key, version)
            if data is None:
                return None
            history = checkpoints.decode(data, state.spec, step=step, peaks=peaks)
        except (StoreError, checkpoints.Rejected) as exc:
            logger.warning(
                "%s: checkpoint of v%d ignored, reading the whole history: %s",
                state.spec.key,
                version,
                exc,
            )
            return None
        self._checkpointed[state.spec.key] = (version, history.end)
        return history

    async def keep(self, states: dict[str, TargetState]) -> None:
        """Write each target's checkpoint when one is due, one at a time, every poll, until
        cancelled (checkpoints.py). Logged when it wrote any, and once all are up to date."""
        all_logged = False
        while True:
            await asyncio.sleep(self.poll_every)
            began, wrote = time.monotonic(), 0
            for state in list(states.values()):
                wrote += await self.checkpoint(state)
            current = sum(1 for state in states.values() if self._current(state))
            if wrote or (current == len(states) and not all_logged):
                all_logged = current == len(states)
                logger.info(
                    "checkpoints written for %d targets in %.1fs; %d of %d up to date",
                    wrote,
                    time.monotonic() - began,
                    current,
                    len(states),
                )

    def _current(self, state: TargetState) -> bool:
        """The target's newest due checkpoint is in the store (this replica wrote or read it)."""
        done, history = self._checkpointed.get(state.spec.key), state.history
        if done is None or history is None or done[0] != state.model_version:
            return False
        at = checkpoints.due_at(history)
        return at is None or done[1] >= at

    async def checkpoint(self, state: TargetState) -> bool:
        """Write the target's checkpoint if one is due and not written yet; True when this
        replica wrote it (False too when another replica was first)."""
        history, version = state.history, state.model_version
        if self.fit_input is None or history is None or version is None:
            return False
        step, peaks = self.fit_input
        if state.history_partial or history.step != step:
            return False
        at, spec = checkpoints.due_at(history), state.spec
        if at is None or self._current(state):
            return False
        data = checkpoints.encode(spec, history, at=at, peaks=peaks)
        try:
            wrote = await asyncio.to_thread(
                self.store.put_checkpoint, key_of(spec), version, int(at), data
            )
        except StoreError as exc:  # tried again next poll
            logger.warning("%s: checkpoint not written: %s", spec.key, exc)
            return False
        self._checkpointed[spec.key] = (version, at)
        return wrote

    def _wrong_step(self, model: CalibratedModel, version: int) -> str | None:
        """Why champion `version` cannot be served here (fitted at another model step: its
        points would be read as steps of this replica's), or None."""
        if math.isclose(model.step, self.model_step):
            return None
        return (
            f"champion v{version} was fitted at a {model.step:g} s model step and this replica "
            f"forecasts at {self.model_step:g} s, so it is not served: the model fitted here "
            "replaces it (or run `scaler retrain` without --model-step)"
        )

    # ---- writing -----------------------------------------------------------------------------
    def allow(self, state: TargetState, now: float) -> bool:
        """May the fitter start this due fit? An early one (fitted_at reset by a drift alarm or
        a quick first model) of a stored model at most once per EARLY_REFIT_GAP; a scheduled one
        once a poll has read the target's retrain outcome: a champion the job kept last night
        is not the job being late (refit_due.py), whatever the champion's own age."""
        early = state.refit_early or not math.isfinite(state.fitted_at)
        if state.model_version is None:
            return True
        if not early:
            return state.spec.key in self._polled
        if now - self._early.get(state.spec.key, -math.inf) < EARLY_REFIT_GAP:
            return False
        self._early[state.spec.key] = now
        return True

    async def adopt_newer(self, state: TargetState) -> bool:
        """Before a fit: True when the store has a champion this replica does not serve yet
        (another replica or the retrain job wrote it), now adopted instead of fitting."""
        try:
            return await self.refresh(state)
        except ScalerError as exc:
            logger.warning(
                "%s: store unreadable before a fit, fitting anyway: %s", state.spec.key, exc
            )
            return False

    async def _replace_wrong_step(self, key: StoreKey, version: int, champion: int) -> bool:
        """Make `version` champion in place of `champion`, refused for its model step; False
        when another writer moved the pointer first or the store failed."""
        try:
            won = await asyncio.to_thread(self.store.promote, key, version, expected=champion)
        except StoreError as exc:
            logger.warning("%s: v%d not promoted over v%d: %s", key, version, champion, exc)
            return False
        if won:
            logger.warning(
                "%s: v%d replaces champion v%d, fitted at another model step",
                key,
                version,
                champion,
            )
        return won

    async def publish(
        self,
        state: TargetState,
        data: dict[str, Any],
        *,
        quick: bool,
        replaces: int | None,
        early: bool = False,
        reason: str = "",
    ) -> CalibratedModel:
        """Store a model fitted here, with why it was fitted (`reason`, refit_due.reason), and
        make it champion if the champion is still `replaces`, the version served when the fit
        began (a champion adopted while it ran is newer, and wins); else adopt the winner's.
        Returns the model the target now uses."""
        spec = state.spec
        model = artefact.load(data)
        fallback = state.drift is not None and state.drift.monitor.in_fallback
        null = None
        if state.history is not None:  # measured once here, read by every replica
            null = await asyncio.to_thread(
                drift_measure.null_for,
                model,
                state.history,
                lead_time=spec.lead_time,
                quantile=spec.quantile,
            )
            data = {**data, driftstate.NULL_KEY: driftstate.null_to_json(null, spec, model.step)}
        meta = {"writer": self.writer, "quick": quick, "fallback_at_fit": fallback, "early": early}
        meta["reason"] = reason
        key, expected = key_of(spec), replaces
        try:
            version = await asyncio.to_thread(self.store.put, key, data, meta)
            won = await asyncio.to_thread(self.store.promote, key, version, expected=expected)
        except StoreError as exc:  # serve it from memory; the next fit tries the store again
            logger.warning("%s: fitted model not stored, serving it from memory: %s", spec.key, exc)
            state.model_null, state.model_fallback = null, fallback
            return model
        if won:
            state.model_version, state.model_null, state.model_fallback = version, null, fallback
            logger.info("%s: fitted here, stored as v%d, champion", spec.key, version)
            return model
        stored = await asyncio.to_thread(self.store.champion, key)
        if stored is not None and self._wrong_step(artefact.load(stored.artefact), stored.version):
            # served here either way; a pointer moved meanwhile is adopted at the next poll
            await self._replace_wrong_step(key, version, stored.version)
            stored = None
        if stored is None:  # the winner's version is unreadable or refused: serve ours, stored
            state.model_version, state.model_null, state.model_fallback = version, null, fallback
            return model
        logger.info("%s: v%d lost the race to v%d, adopting it", spec.key, version, stored.version)
        try:  # never left stored for a fallback to take as champion
            await asyncio.to_thread(self.store.discard, key, version)
        except StoreError as exc:
            logger.warning("%s: v%d lost and stays stored: %s", spec.key, version, exc)
        self._use(state, stored)
        assert state.model is not None
        return state.model
