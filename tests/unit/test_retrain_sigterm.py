"""`scaler retrain` told to stop (SIGTERM: the CronJob's activeDeadlineSeconds, a node drain)
while a history read hangs (a Prometheus that accepted the query and never answers), or while
the champion is read from a store that hangs (a Kubernetes API that stopped answering): the run
returns at once, every unfinished target recorded as failed, rather than waiting on the read
past the pod's terminationGracePeriodSeconds. The process-level check, against a real HTTP
server that never answers, is in tests/integration/test_retrain.py."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from models.base import Series
from scaler.kube import targets as manifests
from scaler.offline import retrain, retrain_summary
from scaler.store.base import StoreKey
from scaler.store.directory import DirectoryStore
from tests.unit.test_retrain_isolation import DailyLoad, scaled_object

BOUND = 10.0
"""Seconds the run may take to return after the stop; the read it abandons never ends."""


class HungPrometheus:
    """A Source whose history read never returns until the test lets it go."""

    def __init__(self) -> None:
        self.reading = threading.Event()
        self.release = threading.Event()

    def history(self, spec: object, **kwargs: Any) -> Series:
        self.reading.set()
        self.release.wait()
        raise AssertionError("released by the test's clean-up: nobody waits for this any more")


class HungChampionStore(DirectoryStore):
    """A store whose champion pointer read never returns until the test lets it go; every
    other call (recording the outcome) works."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.reading = threading.Event()
        self.release = threading.Event()

    def champion_version(self, key: StoreKey) -> int | None:
        self.reading.set()
        self.release.wait()
        raise AssertionError("released by the test's clean-up: nobody waits for this any more")


def stopped_run(
    trainer: retrain.Retrainer, target: Any, reading: threading.Event
) -> list[retrain_summary.Outcome]:
    """Run `trainer` on `target` in a thread as `scaler retrain` does, set the stop once
    `reading` is set, and return the outcomes; fails if the run outlives the stop by BOUND."""
    outcomes: list[retrain_summary.Outcome] = []

    async def main() -> None:
        stop = retrain.Stop()
        run = asyncio.ensure_future(trainer.run([target], now=10 * 86400.0, stop=stop))
        await asyncio.to_thread(reading.wait, BOUND)
        stop.set()  # what the SIGTERM handler does
        outcomes.extend(await run)

    # asyncio.run, as `scaler retrain` runs it, in a thread: on a hang the test fails, not hangs.
    job = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    began = time.monotonic()
    job.start()
    assert reading.wait(BOUND), "the hanging read never began"
    job.join(BOUND)
    assert not job.is_alive(), f"still running {time.monotonic() - began:.0f} s after the stop"
    return outcomes


def test_a_stopped_run_returns_at_once_though_a_champion_read_never_ends(tmp_path: Path) -> None:
    (target,), _ = manifests.from_objects([scaled_object("llm")])
    store = HungChampionStore(tmp_path)
    settings = retrain.RetrainSettings(history=3 * 86400.0, workers=0, peaks_every=None)
    trainer = retrain.Retrainer(store, DailyLoad(), settings)  # type: ignore[arg-type]
    try:
        (outcome,) = stopped_run(trainer, target, store.reading)
    finally:
        store.release.set()
        trainer.close()
    assert outcome.failed and outcome.reason == (
        "not retrained: the job was terminated (SIGTERM) while its champion was read"
    )
    status = DirectoryStore(tmp_path).statuses()[target.key]  # a reader that does not hang
    assert status.retrain_failure is not None and "terminated" in status.retrain_reason


def test_a_stopped_run_returns_at_once_though_a_history_read_never_ends(tmp_path: Path) -> None:
    (target,), _ = manifests.from_objects([scaled_object("llm")])
    store = DirectoryStore(tmp_path)
    source = HungPrometheus()
    settings = retrain.RetrainSettings(history=3 * 86400.0, workers=0, peaks_every=None)
    trainer = retrain.Retrainer(store, source, settings)  # type: ignore[arg-type]
    try:
        outcomes = stopped_run(trainer, target, source.reading)
    finally:
        source.release.set()
        trainer.close()
    (outcome,) = outcomes
    assert outcome.failed and outcome.reason == (
        "not retrained: the job was terminated (SIGTERM) while its history was read"
    )
    status = store.statuses()[target.key]
    assert status.retrain_failure is not None and "terminated" in status.retrain_reason


def test_a_fit_stopped_in_this_process_is_said_to_be_abandoned_not_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With --workers 0 the fit runs in a thread, which a stop cannot kill: the reason said
    "the fit was killed", and an operator read that its CPU and memory were freed."""
    fitting, release = threading.Event(), threading.Event()

    def hung_fit(*_args: Any, **_kwargs: Any) -> dict[str, Any]:
        fitting.set()
        release.wait(BOUND)
        raise AssertionError("released by the test's clean-up")

    monkeypatch.setattr(retrain.retrain_race, "challenge", hung_fit)
    (target,), _ = manifests.from_objects([scaled_object("llm")])
    settings = retrain.RetrainSettings(history=3 * 86400.0, workers=0, peaks_every=None)
    trainer = retrain.Retrainer(DirectoryStore(tmp_path), DailyLoad(), settings)  # type: ignore[arg-type]
    try:
        (outcome,) = stopped_run(trainer, target, fitting)
    finally:
        release.set()
        trainer.close()
    assert outcome.failed and outcome.reason == (
        "not retrained: the job was terminated (SIGTERM) during its fit (the fit was abandoned: "
        "it runs on in this process)"
    )
