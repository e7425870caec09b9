"""The retrain job owns the weekly schedule of the targets it retrains; `scaler serve` refits on
schedule only when the job is late (scaler/serving/refit_due.py). serve used to refit a job's
champion a refit period after its training data ended, minutes before the job's next run, and
publish it unraced: the job's challenger then lost to a model fitted on the week it was graded
on, and never got promoted. The rule alone, then serve's real fitter and store reader on a real
directory store, with the real (seasonal) fit."""

from __future__ import annotations

import asyncio
import logging
import math
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from models import artefact
from models.base import DAY
from scaler.decision import budget, spec
from scaler.serving import champions, fitting, refit_due
from scaler.serving.state import TargetState
from scaler.serving.telemetry import Telemetry
from scaler.settings import EngineSettings
from scaler.store.base import RETRAIN_WRITER, StoreKey
from scaler.store.directory import DirectoryStore
from tests.contract import synthetic
from tests.unit.test_refit_schedule import fit_once

SETTINGS = EngineSettings()
WEEK, GRACE = SETTINGS.refit_every, SETTINGS.retrain_grace
SPEC = spec.parse("gpu", "llm", {"query": "load", "threshold": "20", "model": "seasonal"})
KEY = StoreKey.of(SPEC)
HISTORY = synthetic.load(15, seed=3)
FITTED = HISTORY.end
"""Where the stored champions' training data ends."""


def due(fitted_at: float, job: refit_due.JobSeen | None) -> float:
    return refit_due.due(fitted_at, job=job, refit_every=WEEK, grace=GRACE)


def test_a_job_champion_is_due_a_week_and_a_grace_after_the_job_not_after_its_data() -> None:
    wrote = refit_due.JobSeen(FITTED + 120.0, "wrote v3")  # the job's run, 2 min after the data
    assert due(FITTED, wrote) == FITTED + 120.0 + WEEK + GRACE
    assert due(FITTED, None) == FITTED + WEEK  # serve's own or another replica's: as before
    kept = refit_due.newer(wrote, refit_due.JobSeen(FITTED + WEEK, "succeeded"))
    assert kept is not None and kept.what == "succeeded"  # a week on, the job kept v3
    assert due(FITTED, kept) == FITTED + 2 * WEEK + GRACE
    assert refit_due.newer(kept, wrote) is kept and refit_due.newer(None, wrote) is wrote
    # serve stepped in for a late job: its own week counts from its fit
    assert due(FITTED + 9 * DAY, wrote) == FITTED + 9 * DAY + WEEK
    # due at once (no model, the selection after a quick one, a longer lead time), job or not
    assert due(-math.inf, wrote) == -math.inf


def test_the_reason_stored_says_why_serve_fitted() -> None:
    job = refit_due.JobSeen(100.0, "wrote v3")

    def why(**kw: object) -> str:
        args: dict[str, object] = dict(
            quick=False, first=False, scheduled=True, fitted_at=50.0, job=job, now=100.0 + 8.1 * DAY
        )
        return refit_due.reason(**(args | kw))  # type: ignore[arg-type]

    assert why() == "scheduled refit by serve: the retrain job last wrote v3 8.1 days ago"
    assert refit_due.stands_in(50.0, job) and not refit_due.stands_in(-math.inf, job)
    assert not refit_due.stands_in(50.0, None)
    assert "never seen" in why(job=None)
    assert why(scheduled=False).startswith("drift refit")
    assert why(first=True).startswith("first model") and "quick" in why(quick=True, first=True)
    assert "auto selection" in why(fitted_at=-math.inf)


def stored(tmp_path: Path, *, writer: str, at: float | None = None) -> DirectoryStore:
    """A store whose champion v1 (data up to FITTED) was written by `writer`, at `at`."""
    store = DirectoryStore(tmp_path)
    meta = {"writer": writer, "quick": False} | ({} if at is None else {"at": at})
    version = store.put(KEY, artefact.fit("seasonal", HISTORY, steps=6), meta)
    assert store.promote(KEY, version, expected=None)
    return store


def serving(store: DirectoryStore) -> tuple[fitting.Fitter, champions.Champions, TargetState]:
    """A replica serving the store's champion, its history in."""
    gate = champions.Champions(store, poll=60.0)
    fitter = fitting.Fitter(SETTINGS, Telemetry(CollectorRegistry()), store=gate)
    state = TargetState(
        spec=SPEC, ledger=budget.Ledger(budget=1.0, window=86400.0), last_asked=FITTED
    )
    asyncio.run(gate.load(state))
    state.history = HISTORY
    assert state.model_version == 1 and state.fitted_at == FITTED
    return fitter, gate, state


def test_serve_leaves_a_job_champion_to_the_job_and_steps_in_once_it_is_late(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ran = FITTED + 180.0
    store = stored(tmp_path, writer=RETRAIN_WRITER, at=ran)
    fitter, gate, state = serving(store)
    asyncio.run(gate.poll_once({SPEC.key: state}))
    assert not fit_once(fitter, state, FITTED + WEEK + 60.0)  # where serve used to refit
    assert not fit_once(fitter, state, ran + WEEK + GRACE - 60.0)
    with caplog.at_level(logging.WARNING, logger="scaler.serving.fitting"):
        late = ran + WEEK + GRACE + 2.4 * 3600.0
        assert fit_once(fitter, state, late)  # the job missed its week and the grace
    assert store.champion_version(KEY) == 2 and state.model_version == 2
    reason = store.get(KEY, 2).meta["reason"]
    assert reason == "scheduled refit by serve: the retrain job last wrote v1 8.1 days ago"
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith(f"{SPEC.key}: the retrain job is late: it last wrote v1 8.1 days ago")
    assert "in its place" in warning
    assert state.model_fitted_at == late and state.fitted_at == late
    # the job still silent a week later: serve's own week, the warning not repeated
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="scaler.serving.fitting"):
        assert not fit_once(fitter, state, late + WEEK - 60.0)
        assert fit_once(fitter, state, late + WEEK)
    assert "15.1 days ago" in store.get(KEY, 3).meta["reason"]
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]


def test_a_champion_the_job_kept_is_not_refitted_by_serve_the_day_after(tmp_path: Path) -> None:
    """The job ran a week on and kept v1 (its challenger was no better): a success recorded,
    nothing written. Taking v1's age for the job being late, serve would override the verdict."""
    ran = FITTED + 180.0
    store = stored(tmp_path, writer=RETRAIN_WRITER, at=ran)
    store.record_retrain(KEY, ok=True, at=ran + WEEK, reason="v1 stays")
    fitter, gate, state = serving(store)
    assert not fit_once(fitter, state, ran + WEEK + GRACE + 60.0)  # before any poll: waits
    asyncio.run(gate.poll_once({SPEC.key: state}))
    assert not fit_once(fitter, state, ran + WEEK + GRACE + 60.0)
    assert fit_once(fitter, state, ran + 2 * WEEK + GRACE + 60.0)
    assert "last succeeded 8.0 days ago" in store.get(KEY, 2).meta["reason"]


def test_a_champion_serve_wrote_keeps_serves_schedule(tmp_path: Path) -> None:
    store = stored(tmp_path, writer="scaler-0/7")
    fitter, gate, state = serving(store)
    asyncio.run(gate.poll_once({SPEC.key: state}))
    assert state.retrain_seen is None
    assert not fit_once(fitter, state, FITTED + WEEK - 60.0)
    assert fit_once(fitter, state, FITTED + WEEK)
    assert "never seen" in store.get(KEY, 2).meta["reason"]


def test_a_drift_refit_of_a_job_champion_is_not_held_back(tmp_path: Path) -> None:
    store = stored(tmp_path, writer=RETRAIN_WRITER, at=FITTED + 180.0)
    fitter, _gate, state = serving(store)
    state.refit_early = True  # a drift alarm, two days in
    assert fit_once(fitter, state, FITTED + 2 * DAY)
    assert store.get(KEY, 2).meta["reason"].startswith("drift refit")
    assert state.fitted_at == FITTED  # the schedule stays the job's
