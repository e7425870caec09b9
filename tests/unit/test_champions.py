"""`serve --store`: first writer wins, the loser adopts the winner's artefact, a promotion is
hot-reloaded, early refits are rate-limited; on a real directory store."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

import pytest

from models import artefact, resample
from scaler.decision import budget, spec
from scaler.errors import ConfigError
from scaler.serving import champions
from scaler.serving.state import TargetState
from scaler.store import location
from scaler.store.base import StoreError, StoreKey
from scaler.store.directory import DirectoryStore
from tests.contract import synthetic

SPEC = spec.parse("gpu", "llm", {"query": "load", "threshold": "20", "model": "seasonal"})


def fresh_state() -> TargetState:
    return TargetState(spec=SPEC, ledger=budget.Ledger(budget=1.0, window=86400.0), last_asked=0)


@functools.cache
def _fitted(seed: int) -> dict[str, Any]:
    return artefact.fit("seasonal", synthetic.load(15, seed=seed), steps=6)


def fitted(seed: int) -> dict[str, Any]:
    """A fresh copy of a real artefact; seeds give different models."""
    return dict(_fitted(seed))


def test_the_first_writer_wins_and_the_second_serves_the_winners_artefact(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    first, second = fresh_state(), fresh_state()
    a, b = champions.Champions(store, poll=1), champions.Champions(store, poll=1)
    won = asyncio.run(a.publish(first, fitted(1), quick=False, replaces=None))
    lost = asyncio.run(b.publish(second, fitted(2), quick=False, replaces=None))
    assert won.fingerprint == lost.fingerprint
    assert first.model_version == second.model_version == 1
    assert store.champion_version(StoreKey.of(SPEC)) == 1
    assert store.versions(StoreKey.of(SPEC)) == [1]  # the loser's is removed: no fallback serves it


def test_a_promotion_is_hot_reloaded_and_the_same_champion_is_not_reloaded(
    tmp_path: Path,
) -> None:
    store = DirectoryStore(tmp_path)
    state = fresh_state()
    watcher = champions.Champions(store, poll=1)
    key = StoreKey.of(SPEC)
    store.promote(key, store.put(key, fitted(1)), expected=None)
    asyncio.run(watcher.load(state))
    assert state.model_version == 1 and state.model is not None
    assert not asyncio.run(watcher.refresh(state))
    store.promote(key, store.put(key, fitted(3)), expected=1)
    assert asyncio.run(watcher.refresh(state))
    assert state.model_version == 2
    assert state.model.fingerprint == artefact.load(fitted(3)).fingerprint


def test_a_fit_that_began_before_a_promotion_does_not_replace_it(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    state = fresh_state()
    writer = champions.Champions(store, poll=1)
    key = StoreKey.of(SPEC)
    store.promote(key, store.put(key, fitted(1)), expected=None)  # promoted while it fitted
    asyncio.run(writer.refresh(state))
    asyncio.run(writer.publish(state, fitted(2), quick=False, replaces=None))
    assert store.champion_version(key) == 1 and state.model_version == 1


def test_early_refits_of_a_stored_model_are_rate_limited_and_weekly_ones_wait_for_a_poll(
    tmp_path: Path,
) -> None:
    gate = champions.Champions(DirectoryStore(tmp_path), poll=1)
    state = fresh_state()
    assert gate.allow(state, 0.0)  # no stored model yet: the first fit
    state.model, state.model_version = artefact.load(fitted(1)), 1
    state.fitted_at, state.refit_early = 50.0, True  # a drift alarm asked for a refit
    assert gate.allow(state, 100.0)
    assert not gate.allow(state, 100.0 + champions.EARLY_REFIT_GAP - 1)
    assert gate.allow(state, 100.0 + champions.EARLY_REFIT_GAP)
    state.refit_early = False  # due by the refit period: once a poll read the job's outcome
    assert not gate.allow(state, 101.0)
    asyncio.run(gate.poll_once({SPEC.key: state}))
    assert gate.allow(state, 101.0)
    assert gate.allow(state, 102.0)  # never rate-limited


def test_an_unwritable_store_keeps_the_fitted_model_in_memory(tmp_path: Path) -> None:
    blocker = tmp_path / "volume"
    blocker.write_text("")  # the store's root lies under a file: nothing can be written
    state = fresh_state()
    writer = champions.Champions(DirectoryStore(blocker / "store"), poll=1)
    model = asyncio.run(writer.publish(state, fitted(1), quick=False, replaces=None))
    assert model.fingerprint == artefact.load(fitted(1)).fingerprint
    assert state.model_version is None  # not stored: the next fit tries the store again


def test_a_store_path_that_is_a_file_is_refused_naming_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_text("")
    with pytest.raises(ConfigError, match="not a directory"):
        location.open_store(str(path))


def _fitted_at_10m() -> dict[str, Any]:
    """A real artefact fitted at a 10-minute model step (`scaler retrain --model-step 10m`)."""
    return artefact.fit("seasonal", resample.peaks(synthetic.load(15, seed=5), 600.0), steps=3)


def test_a_champion_fitted_at_another_model_step_is_refused_and_the_fit_here_replaces_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store, key = DirectoryStore(tmp_path), StoreKey.of(SPEC)
    store.promote(key, store.put(key, _fitted_at_10m()), expected=None)
    state, served = fresh_state(), champions.Champions(store, poll=1, model_step=300.0)
    with pytest.raises(StoreError, match="v1 was fitted at a 600 s model step") as refused:
        asyncio.run(served.load(state))
    assert "scaler retrain` without --model-step" in str(refused.value)
    assert state.model is None and state.model_version is None  # nothing half-adopted
    caplog.clear()
    asyncio.run(served.poll_once({SPEC.key: state}))  # refused once, not again every poll
    assert state.model is None and "not reloaded" not in caplog.text
    model = asyncio.run(served.publish(state, fitted(1), quick=False, replaces=None))
    assert model.step == 300.0 and state.model_version == 2
    assert store.champion_version(key) == 2  # the 5m model replaces the 10m champion


def test_a_replica_keeps_its_model_when_a_champion_at_another_step_is_promoted(
    tmp_path: Path,
) -> None:
    store, key = DirectoryStore(tmp_path), StoreKey.of(SPEC)
    store.promote(key, store.put(key, fitted(1)), expected=None)
    state, served = fresh_state(), champions.Champions(store, poll=1, model_step=300.0)
    asyncio.run(served.load(state))
    store.promote(key, store.put(key, _fitted_at_10m()), expected=1)
    asyncio.run(served.poll_once({SPEC.key: state}))
    assert state.model_version == 1 and state.model is not None and state.model.step == 300.0
