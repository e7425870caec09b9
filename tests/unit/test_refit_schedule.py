"""A drift refit in the live engine comes on top of the weekly schedule, as in the replay: the
fitter runs it at once and leaves `fitted_at` (the schedule) where it was, and an `auto` target
refits its champion's kind (selection stays with the scheduled fits); a scheduled fit moves the
schedule. The real fitter (in-process, no worker pool) on synthetic load."""

from __future__ import annotations

import asyncio
import dataclasses
import math
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from models import artefact
from models.base import ModelError, Series
from scaler.decision import budget, spec
from scaler.offline import replay_walk
from scaler.serving import champions, fitting
from scaler.serving.state import Basis, TargetState
from scaler.serving.telemetry import Telemetry
from scaler.settings import EngineSettings
from scaler.store.directory import DirectoryStore
from tests.contract import synthetic

SETTINGS = EngineSettings()
NOW = 30 * 86400.0
SCHEDULED = NOW - 2 * 86400.0
"""The last scheduled fit, two days before the alarm."""


def fitted_state() -> TargetState:
    parsed = spec.parse("gpu", "llm", {"query": "load", "threshold": "20", "model": "seasonal"})
    history = synthetic.load(15, seed=3)
    state = TargetState(
        spec=parsed, ledger=budget.Ledger(budget=1.0, window=86400.0), last_asked=NOW
    )
    state.history = history
    state.model = artefact.load(artefact.fit("seasonal", history, steps=6))
    state.fitted_at = SCHEDULED
    return state


def fit_once(fitter: fitting.Fitter, state: TargetState, now: float) -> bool:
    """maybe_fit at `now` and wait for it; True when a fit ran."""

    async def main() -> bool:
        fitter.maybe_fit(state, now)
        started = state.fitting
        await fitter.wait()
        return started

    return asyncio.run(main())


def test_a_drift_refit_runs_at_once_and_keeps_the_weekly_schedule() -> None:
    fitter = fitting.Fitter(SETTINGS, Telemetry(CollectorRegistry()))
    state = fitted_state()
    assert not fit_once(fitter, state, NOW)  # not due: two days into the week
    state.refit_early = True  # what the engine sets on a drift alarm (take_retrain)
    before = state.model
    assert fit_once(fitter, state, NOW)
    assert state.model is not before
    assert state.fitted_at == SCHEDULED and not state.refit_early
    assert not fit_once(fitter, state, NOW + 3600)  # the early fit did not make one due
    due = SCHEDULED + SETTINGS.refit_every
    assert fit_once(fitter, state, due)  # the weekly one comes on its own day
    assert state.fitted_at == due


def test_a_scheduled_fit_moves_the_schedule_and_restarts_it_as_before() -> None:
    """The ablation: without the early flag a fit that was due sets the schedule to its time."""
    fitter = fitting.Fitter(SETTINGS, Telemetry(CollectorRegistry()))
    state = fitted_state()
    state.fitted_at = NOW - SETTINGS.refit_every
    assert fit_once(fitter, state, NOW)
    assert state.fitted_at == NOW


def test_a_replica_adopting_a_stored_drift_refit_keeps_its_own_schedule(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    writer, reader = fitted_state(), fitted_state()
    gate_w, gate_r = champions.Champions(store, poll=1), champions.Champions(store, poll=1)
    data = artefact.fit("seasonal", synthetic.load(15, seed=4), steps=6)
    asyncio.run(gate_w.publish(writer, data, quick=False, replaces=None, early=True))
    assert asyncio.run(gate_r.refresh(reader))
    assert reader.fitted_at == SCHEDULED
    fresh = fitted_state()
    fresh.fitted_at = -math.inf  # a replica that never had a schedule takes the model's
    assert asyncio.run(gate_r.refresh(fresh))
    assert math.isfinite(fresh.fitted_at)


def test_an_auto_targets_drift_refit_fits_its_champions_kind_and_a_scheduled_one_selects() -> None:
    kinds: list[str] = []

    def recording_fit(kind: str, history: Series, steps: int, **kw: Any) -> dict[str, Any]:
        kinds.append(kind)
        return artefact.fit("seasonal", history, steps, quantile=kw["quantile"])

    fitter = fitting.Fitter(SETTINGS, Telemetry(CollectorRegistry()), fit=recording_fit)
    state = fitted_state()
    state.spec = dataclasses.replace(state.spec, model="auto")
    state.refit_early = True
    assert fit_once(fitter, state, NOW)
    state.fitted_at = NOW - SETTINGS.refit_every
    assert fit_once(fitter, state, NOW)
    assert kinds == ["seasonal", "auto"]  # the champion's kind early, the selection on schedule
    assert replay_walk.drift_refit_kind("auto", state.model) == "seasonal"  # the replay's rule
    assert replay_walk.drift_refit_kind("ets", state.model) == "ets"


def failing_fit(*_args: Any, **_kwargs: Any) -> dict[str, Any]:
    raise ModelError("too few points")


def test_the_fitted_time_exported_is_the_models_not_the_schedules() -> None:
    """scaler_model_fitted_timestamp_seconds reads the decision's Basis: after a failed fit it
    showed the schedule's retry time set back a refit period (a week ago), and a drift refit
    (which keeps the schedule) did not move it."""
    fitter = fitting.Fitter(SETTINGS, Telemetry(CollectorRegistry()))
    state = fitted_state()
    state.fitted_at = NOW - SETTINGS.refit_every
    assert fit_once(fitter, state, NOW)
    assert Basis.of(state).fitted_at == NOW
    state.refit_early = True
    assert fit_once(fitter, state, NOW + 3600)  # a drift refit: a new model, the same schedule
    assert state.fitted_at == NOW and Basis.of(state).fitted_at == NOW + 3600
    broken = fitting.Fitter(SETTINGS, Telemetry(CollectorRegistry()), fit=failing_fit)
    later = NOW + SETTINGS.refit_every
    assert fit_once(broken, state, later)  # fails: the model of NOW + 3600 is still served
    assert state.fitted_at < later - 86400.0  # the retry schedule, set back
    assert Basis.of(state).fitted_at == NOW + 3600
