"""`scaler retrain` when a part of it breaks: one target's fit that crashes (an error no layer
expected: a bug, an out-of-memory) fails that target alone, the others still train; a champion
the store cannot load is replaced, and the reason says so."""

from __future__ import annotations

import asyncio
import math
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from models import artefact
from models.base import Series
from scaler.decision.spec import TargetSpec, parse_duration
from scaler.kube import targets as manifests
from scaler.offline import retrain, retrain_race, retrain_summary
from scaler.store.base import StoreError, StoreKey
from scaler.store.directory import DirectoryStore
from tests.store_artefacts import fitted


class DailyLoad:
    """A Source (our seam) of a plain daily cycle for any query."""

    def history(
        self,
        spec: object,
        *,
        start: float,
        end: float,
        step: float,
        resolution: float | None = None,
    ) -> Series:
        times = np.arange(start, end + step / 2, step)
        return Series(start, step, 100 + 50 * np.sin(2 * np.pi * times / 86400.0))


def scaled_object(name: str) -> dict[str, Any]:
    """One ScaledObject whose external trigger queries `name` with the seasonal model."""
    meta = {"query": name, "threshold": "10", "model": "seasonal"}
    return {
        "kind": "ScaledObject",
        "metadata": {"namespace": "gpu", "name": name},
        "spec": {"triggers": [{"type": "external", "metadata": meta}]},
    }


def test_a_fit_that_crashes_fails_its_target_alone_and_the_others_still_train(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    objects = [scaled_object(name) for name in ("crashes", "trains")]
    found, problems = manifests.from_objects(objects)
    assert len(found) == 2 and not problems
    real = retrain_race.challenge

    def challenge(spec: TargetSpec, *args: Any) -> dict[str, Any]:
        if spec.query == "crashes":
            raise MemoryError("a bug or an absurd input, not a ScalerError")
        return real(spec, *args)

    monkeypatch.setattr(retrain_race, "challenge", challenge)
    settings = retrain.RetrainSettings(history=3 * 86400.0, workers=0, peaks_every=None)
    trainer = retrain.Retrainer(DirectoryStore(tmp_path), DailyLoad(), settings)  # type: ignore[arg-type]
    try:
        crashed, trained = asyncio.run(trainer.run(found, now=10 * 86400.0))
    finally:
        trainer.close()
    assert crashed.failed and "MemoryError" in crashed.reason
    assert not trained.failed and trained.promoted


def test_a_champion_the_store_cannot_load_is_replaced_saying_so(tmp_path: Path) -> None:
    (target,), _ = manifests.from_objects([scaled_object("llm")])
    settings = retrain.RetrainSettings(history=3 * 86400.0, workers=0, peaks_every=None)
    store = DirectoryStore(tmp_path)

    def run() -> retrain_summary.Outcome:
        trainer = retrain.Retrainer(store, DailyLoad(), settings)  # type: ignore[arg-type]
        try:
            (outcome,) = asyncio.run(trainer.run([target], now=10 * 86400.0))
        finally:
            trainer.close()
        return outcome

    first = run()
    assert first.promoted and first.reason == "no champion yet"
    for version in tmp_path.rglob("v*.json"):
        version.write_text("{truncated")
    second = run()
    assert second.promoted
    assert second.reason == "no readable champion: v1 and every older version cannot be loaded"


class PausedLoad(DailyLoad):
    """The daily cycle until `paused`, then `then`: 0 (a service paused for its latest week),
    or NaN, no sample at all (a series that went away: a renamed metric, a service scaled to
    nothing whose pods exported it)."""

    def __init__(self, paused: float, *, then: float = 0.0) -> None:
        self.paused = paused
        self.then = then

    def history(self, spec: object, **kwargs: Any) -> Series:
        series = super().history(spec, **kwargs)
        times = series.start + series.step * np.arange(len(series))
        values = np.where(times >= self.paused, self.then, series.values)
        return Series(series.start, series.step, values)


NOW = 40 * 86400.0


def run_28d(store: DirectoryStore, source: DailyLoad, target: Any) -> retrain_summary.Outcome:
    """One `scaler retrain` of `target` at NOW on 28 days of `source`."""
    settings = retrain.RetrainSettings(history=28 * 86400.0, workers=0, peaks_every=None)
    trainer = retrain.Retrainer(store, source, settings)  # type: ignore[arg-type]
    try:
        (outcome,) = asyncio.run(trainer.run([target], now=NOW))
    finally:
        trainer.close()
    return outcome


def test_a_week_of_no_load_does_not_replace_the_champion_with_a_model_of_nothing(
    tmp_path: Path,
) -> None:
    """Scored on a week of zeros, a challenger that forecasts 0 beat any champion: the next
    week, when the service was back, it prewarmed nothing."""
    (target,), _ = manifests.from_objects([scaled_object("llm")])
    store = DirectoryStore(tmp_path)
    assert run_28d(store, DailyLoad(), target).promoted
    paused = run_28d(store, PausedLoad(paused=NOW - 8 * 86400.0), target)
    assert not paused.promoted and paused.champion == 1, paused
    assert paused.reason.startswith("v1 stays: the load was 0 over the whole latest week")
    assert paused.challenger_loss is not None and paused.champion_loss is not None
    assert paused.challenger_loss < paused.champion_loss  # what promoted it before
    assert store.champion_version(target.key) == 1
    partly = run_28d(
        store, PausedLoad(paused=NOW - 2 * 86400.0), target
    )  # a part of the week: scored as ever
    assert "load was 0" not in partly.reason and partly.champion_loss is not None


def test_a_challenger_that_loses_the_promotion_race_is_not_left_for_a_fallback_to_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs at once: the second stored its challenger, lost the compare-and-set and left
    the version behind; a damaged pointer later made it champion, a model no run chose."""
    (target,), _ = manifests.from_objects([scaled_object("llm")])
    settings = retrain.RetrainSettings(history=3 * 86400.0, workers=0, peaks_every=None)
    store = DirectoryStore(tmp_path)
    first = store.put(target.key, fitted(0))
    assert store.promote(target.key, first, expected=None)
    real = retrain_race.challenge

    def challenge(*args: Any) -> dict[str, Any]:
        # The other run promotes its model while this one fits.
        other = store.put(target.key, fitted(1))
        assert store.promote(target.key, other, expected=first)
        return real(*args)

    monkeypatch.setattr(retrain_race, "challenge", challenge)
    trainer = retrain.Retrainer(store, DailyLoad(), settings)  # type: ignore[arg-type]
    try:
        (outcome,) = asyncio.run(trainer.run([target], now=10 * 86400.0))
    finally:
        trainer.close()
    assert not outcome.promoted and not outcome.failed and outcome.version is None, outcome
    assert outcome.reason == "another writer promoted v2 first; it stays (this run's v3 removed)"
    assert store.versions(target.key) == [1, 2]
    (tmp_path / target.key.slug / "champion.json").write_text("{damaged")
    assert store.champion_version(target.key) == 2


def retrain_once(
    store: DirectoryStore, target: manifests.Target, *, step: float
) -> retrain_summary.Outcome:
    """One `scaler retrain` of `target` at `--model-step step` on the daily cycle."""
    settings = retrain.RetrainSettings(
        history=3 * 86400.0, workers=0, peaks_every=None, model_step=step
    )
    trainer = retrain.Retrainer(store, DailyLoad(), settings)  # type: ignore[arg-type]
    try:
        (outcome,) = asyncio.run(trainer.run([target], now=10 * 86400.0))
    finally:
        trainer.close()
    return outcome


def test_a_run_at_another_model_step_replaces_no_champion_and_the_default_run_races_as_before(
    tmp_path: Path,
) -> None:
    """`--model-step 10m` replaced every champion (a champion at another step could not be
    scored, so it lost), and the next default run replaced them all again, at 5m: a flip-flop
    of models `scaler serve`, which forecasts at 5m, served at the wrong step half the time."""
    (target,), _ = manifests.from_objects([scaled_object("llm")])
    store = DirectoryStore(tmp_path)
    assert retrain_once(store, target, step=300.0).promoted
    coarse = retrain_once(store, target, step=600.0)
    assert not coarse.promoted and not coarse.failed, coarse
    assert coarse.reason.startswith(
        "not promoted (v1 stays): fitted at a 10m model step (--model-step), and scaler serve "
        "forecasts at 5m"
    )
    assert coarse.challenger_loss is not None  # how the 10m fit scored, for whoever asked
    assert store.versions(target.key) == [1] and store.champion_version(target.key) == 1
    default = retrain_once(store, target, step=300.0)
    assert default.champion == 1 and default.champion_loss is not None  # a race, as ever
    assert "re-baseline" not in default.reason


def test_a_champion_left_at_another_step_is_replaced_once_saying_so_and_stays_replaced(
    tmp_path: Path,
) -> None:
    """A store an older job filled at 10m: the next default run re-baselines it at the step
    `scaler serve` forecasts at, saying so, and a run at 10m does not put it back."""
    (target,), _ = manifests.from_objects([scaled_object("llm")])
    store = DirectoryStore(tmp_path)
    series = DailyLoad().history(None, start=86400.0, end=10 * 86400.0, step=600.0)
    left = store.put(target.key, artefact.fit("seasonal", series, 4))
    assert store.promote(target.key, left, expected=None)
    rebased = retrain_once(store, target, step=300.0)
    assert rebased.promoted and rebased.version == 2, rebased
    assert rebased.reason.startswith(
        "re-baseline: v1 was fitted at a 10m model step, and scaler serve forecasts at 5m; "
        "replaced without a race"
    )
    assert not retrain_once(store, target, step=600.0).promoted
    again = retrain_once(store, target, step=300.0)
    assert again.champion == 2 and "re-baseline" not in again.reason, again


class FullStore(DirectoryStore):
    """A directory store on a full disk: every read works, no version can be written."""

    def put(self, key: StoreKey, data: dict[str, Any], meta: dict[str, Any] | None = None) -> int:
        raise StoreError(f"{key}: cannot write under {self.root} (No space left on device)")


def test_a_store_that_refuses_the_winner_keeps_both_losses_in_the_failed_row(
    tmp_path: Path,
) -> None:
    """The row of a challenger the store could not write showed both losses as null, though
    the fit and the race were done: the operator could not tell what had won."""
    (target,), _ = manifests.from_objects([scaled_object("llm")])
    store = FullStore(tmp_path)
    first = DirectoryStore(tmp_path).put(target.key, fitted(0))
    assert store.promote(target.key, first, expected=None)
    settings = retrain.RetrainSettings(history=3 * 86400.0, workers=0, peaks_every=None)
    trainer = retrain.Retrainer(store, DailyLoad(), settings)  # type: ignore[arg-type]
    try:
        (outcome,) = asyncio.run(trainer.run([target], now=10 * 86400.0))
    finally:
        trainer.close()
    assert outcome.failed and not outcome.promoted and outcome.champion == first, outcome
    assert outcome.challenger_loss is not None and outcome.champion_loss is not None
    assert outcome.challenger_loss < outcome.champion_loss
    assert outcome.reason.startswith("not promoted: the store refused it (")
    assert "No space left on device" in outcome.reason and "it had won: pinball" in outcome.reason
    assert store.statuses()[target.key].retrain_failure is not None


def stopped(at: float) -> PausedLoad:
    """The daily cycle until `at`, then no sample at all."""
    return PausedLoad(at, then=math.nan)


def test_a_latest_week_with_no_observed_load_fails_the_target_and_records_no_success(
    tmp_path: Path,
) -> None:
    """A series that stopped over a week ago: no champion and a challenger with no score was
    a row saying "the champion stays", recorded as a success, though the target had no model
    and PredictiveScalerRetrainFailed never fired."""
    (target,), _ = manifests.from_objects([scaled_object("llm")])
    store = DirectoryStore(tmp_path)
    outcome = run_28d(store, stopped(NOW - 7.5 * 86400.0), target)
    assert outcome.failed and not outcome.promoted and outcome.champion is None, outcome
    latest, _, reason = outcome.reason.partition(" (where ")
    assert reason == (
        "challenger and champion are graded) has no observed load: check the query still "
        "returns recent data, or whether the service is paused; not promoted, the target has "
        "no model"
    )
    # graded where the challenger's fit held out: a quarter of the 20.5 days observed
    window = parse_duration(latest.removeprefix("the latest "))
    assert abs(window - 20.5 * 86400.0 / 4) <= 300.0
    assert outcome.observed_points == 0 and outcome.window_points == 1 + window // 300
    status = store.statuses()[target.key]
    assert status.retrain_success is None and status.retrain_failure is not None
    assert store.champion_version(target.key) is None


def test_a_champion_stays_over_a_week_with_no_load_but_the_retrain_is_a_failure(
    tmp_path: Path,
) -> None:
    (target,), _ = manifests.from_objects([scaled_object("llm")])
    store = DirectoryStore(tmp_path)
    assert run_28d(store, DailyLoad(), target).promoted
    success = store.statuses()[target.key].retrain_success
    outcome = run_28d(store, stopped(NOW - 7.5 * 86400.0), target)
    assert outcome.failed and not outcome.promoted and outcome.champion == 1, outcome
    assert outcome.reason.endswith("or whether the service is paused; v1 stays")
    status = store.statuses()[target.key]
    assert status.retrain_success == success and status.retrain_failure is not None
    assert store.champion_version(target.key) == 1


def test_a_challenger_graded_on_an_hour_of_the_latest_week_is_not_promoted(
    tmp_path: Path,
) -> None:
    """Data ending 6 d 23 h ago: a first model was promoted on the one hour of the latest week
    that held load, its scores graded on a dozen points."""
    (target,), _ = manifests.from_objects([scaled_object("llm")])
    store = DirectoryStore(tmp_path)
    outcome = run_28d(store, stopped(NOW - (6 * 86400.0 + 23 * 3600.0)), target)
    assert outcome.failed and not outcome.promoted, outcome
    assert outcome.observed_points == 12 and outcome.window_points == 2017
    assert outcome.reason.startswith(
        "only 12 of the latest 7d's 2017 points were observed, under the 288 a grade needs "
        "(a day's worth): check the query"
    )
    assert outcome.challenger_loss is not None  # how it scored, on what little there was
    assert store.champion_version(target.key) is None and store.versions(target.key) == []
    assert store.statuses()[target.key].retrain_success is None


def test_a_day_of_the_latest_week_is_enough_to_race() -> None:
    assert retrain_race.needed(7 * 86400.0, 300.0) == 288
    assert retrain_race.needed(12 * 3600.0, 300.0) == 72  # --history 2d: half its window

    def why(loss: float, observed: int) -> str:
        return retrain_race.ungraded(
            loss, observed=observed, points=2017, window=7 * 86400.0, step=300.0, champion=3
        )

    assert why(1.0, 288) == ""
    assert why(1.0, 287).startswith("only 287 of the latest 7d's 2017 points were observed")
    assert why(math.nan, 2017) == "the challenger has no out-of-sample score; v3 stays"


def test_a_fit_past_the_timeout_fails_its_target_with_no_workers_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With --workers 0 nothing timed the fit, though --help said "past it the worker is
    killed": a fit that hung held the job until the CronJob's deadline."""
    found, _ = manifests.from_objects([scaled_object(name) for name in ("hangs", "trains")])
    release = threading.Event()
    real = retrain_race.challenge

    def challenge(spec: TargetSpec, *args: Any) -> dict[str, Any]:
        if spec.query == "hangs":
            release.wait(30.0)  # a fit that never ends, until the test's clean-up
        return real(spec, *args)

    monkeypatch.setattr(retrain_race, "challenge", challenge)
    settings = retrain.RetrainSettings(
        history=3 * 86400.0, workers=0, peaks_every=None, fit_timeout=5.0
    )
    trainer = retrain.Retrainer(DirectoryStore(tmp_path), DailyLoad(), settings)  # type: ignore[arg-type]
    try:
        hung, trained = asyncio.run(trainer.run(found, now=10 * 86400.0))
    finally:
        release.set()
        trainer.close()
    assert hung.failed and hung.seconds < 20.0, hung
    assert hung.reason.startswith(
        "the fit ran past its bound of 5s (--fit-timeout); with --workers 0"
    )
    assert "abandoned" in hung.reason
    assert trained.promoted and not trained.failed
