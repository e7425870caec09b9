"""Serving checkpoints on a real Prometheus and a real directory store
(scaler/serving/checkpoints.py): a replica writes each target's fit input up to the hour, once
its history is whole; a fresh replica starts from it and reads from Prometheus only what came
after, and ends with the drift state, the history and the first decision of a replica that read
it all (the ablation), bit for bit. A damaged checkpoint, or one written for another query, is
ignored with a warning and the whole history is read."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from models import artefact
from models.base import DAY, Series
from scaler.clock import ManualClock
from scaler.decision import drift_measure, spec
from scaler.serving import champions, checkpoints, driftstate, warmup
from scaler.serving.engine import Engine
from scaler.serving.state import TargetState, forecast_steps
from scaler.serving.telemetry import Telemetry
from scaler.settings import EngineSettings
from scaler.sources.prometheus import PrometheusSource
from scaler.store.base import StoreKey
from scaler.store.directory import DirectoryStore
from tests.integration.prometheus_server import PrometheusServer
from tests.unit.test_many_origins import assert_same_tracker

pytestmark = pytest.mark.prometheus

STEP, PEAKS, WINDOW = 300.0, 30.0, 14 * DAY
"""serve's model step and bucket peaks (--peaks-every 30s), and a two-week window."""
FIT_INPUT = (STEP, PEAKS)


@dataclass
class Replica:
    """One `scaler serve` replica's engine and store reader at a time of its own clock."""

    engine: Engine
    models: champions.Champions
    reads: list[tuple[float, float]] = field(default_factory=list)

    @property
    def state(self) -> TargetState:
        return next(iter(self.engine.targets.values()))


class RecordingSource(PrometheusSource):
    """The real source, noting the span of each history read (our own seam)."""

    reads: list[tuple[float, float]]

    def history(
        self,
        spec: spec.TargetSpec,
        *,
        start: float,
        end: float,
        step: float,
        resolution: float | None = None,
    ) -> Series:
        self.reads.append((start, end))
        return super().history(spec, start=start, end=end, step=step, resolution=resolution)


@pytest.fixture
def source(prometheus_server: PrometheusServer) -> Iterator[RecordingSource]:
    src = RecordingSource(prometheus_server.url, timeout=10.0)
    src.reads = []
    yield src
    src.close()


def target(prometheus_server: PrometheusServer, query: str | None = None) -> spec.TargetSpec:
    selector = prometheus_server.traces["nasa_http_5min"].selector
    meta = {"query": query or f"sum({selector})", "threshold": "40", "model": "seasonal"}
    return spec.parse("web", "nasa", meta)


def stored_champion(
    store: DirectoryStore, source: PrometheusSource, target: spec.TargetSpec, fit_at: float
) -> None:
    """A seasonal champion fitted on the window up to `fit_at`, with its drift null."""
    known = source.history(
        target, start=fit_at - WINDOW + STEP, end=fit_at, step=STEP, resolution=PEAKS
    )
    data = artefact.fit("seasonal", known, forecast_steps(target, STEP), quantile=target.quantile)
    null = drift_measure.null_for(
        artefact.load(data), known, lead_time=target.lead_time, quantile=target.quantile
    )
    data[driftstate.NULL_KEY] = driftstate.null_to_json(null, target, STEP)
    key = StoreKey.of(target)
    assert store.promote(key, store.put(key, data), expected=None)


def warmed(
    store: DirectoryStore,
    source: RecordingSource,
    target: spec.TargetSpec,
    now: float,
    *,
    fit_input: tuple[float, float | None] | None = FIT_INPUT,
) -> Replica:
    engine = Engine(
        settings=EngineSettings(
            step=30.0, model_step=STEP, history=WINDOW, history_peaks=PEAKS, fit_workers=0
        ),
        source_for=lambda _spec: source,
        clock=ManualClock(now),
        telemetry=Telemetry(CollectorRegistry()),
    )
    engine.fitter.maybe_fit = lambda *_: None  # type: ignore[method-assign]  # the store's model
    models = champions.Champions(store, poll=60.0, fit_input=fit_input)
    before = len(source.reads)
    asyncio.run(warmup.warm_up(engine, [target], load=models.load))
    replica = Replica(engine, models, reads=source.reads[before:])
    assert replica.state.drift is not None and replica.state.decision is not None
    return replica


def checkpointed(replica: Replica) -> bool:
    """The older history read (the backfill's one step), then the checkpoint written."""
    state = replica.state
    asyncio.run(warmup._complete(replica.engine, state, asyncio.Semaphore(1)))
    assert not state.history_partial
    return asyncio.run(replica.models.checkpoint(state))


def same_replicas(a: Replica, b: Replica) -> None:
    """The same drift state, first decision and history (over the shorter of the two)."""
    assert a.state.drift is not None and b.state.drift is not None
    assert_same_tracker(a.state.drift, b.state.drift, arrays=("upper", "p50"), null=True)
    assert a.state.decision == b.state.decision
    x, y = a.state.history, b.state.history
    assert x is not None and y is not None and x.end == y.end
    first = max(x.start, y.start)
    assert np.array_equal(x.since(first).values, y.since(first).values, equal_nan=True)


@pytest.fixture
def times(prometheus_server: PrometheusServer) -> tuple[float, float, float]:
    """The champion's fit, a replica serving since 6 hours after it, and a fresh one 5 hours
    later still (the newest checkpoint hour and some)."""
    end = np.floor(prometheus_server.traces["nasa_http_5min"].end / STEP) * STEP - DAY
    return end - DAY, end - DAY + 6 * 3600.0, end - DAY + 11 * 3600.0 + 7 * STEP


def test_a_fresh_replica_restored_from_a_checkpoint_equals_one_that_read_it_all(
    prometheus_server: PrometheusServer,
    source: RecordingSource,
    tmp_path: Path,
    times: tuple[float, float, float],
) -> None:
    fit_at, serving, fresh = times
    spec_ = target(prometheus_server)
    store = DirectoryStore(tmp_path / "store")
    stored_champion(store, source, spec_, fit_at)
    writer = warmed(store, source, spec_, serving)
    assert checkpointed(writer)
    other = warmed(store, source, spec_, serving)
    assert not checkpointed(other)  # the same hour: the first writer's stays
    assert not asyncio.run(writer.models.checkpoint(writer.state))  # nothing new due
    at = checkpoints.due_at(writer.state.history)  # type: ignore[arg-type]
    assert at is not None and serving - at < checkpoints.EVERY + checkpoints.SETTLE * STEP

    restored = warmed(store, source, spec_, fresh)
    whole = warmed(store, source, spec_, fresh, fit_input=None)  # the ablation: no checkpoint
    same_replicas(restored, whole)
    # What each read from Prometheus before its first decision: after the hour, or days.
    assert restored.reads and all(start > at for start, _ in restored.reads)
    assert sum(e - s for s, e in restored.reads) <= fresh - at
    model = whole.state.model
    assert model is not None
    assert min(s for s, _ in whole.reads) == driftstate.replay_start(
        model, window=WINDOW, null_stored=True
    )


@pytest.mark.parametrize("damage", ["truncated", "another query"])
def test_a_damaged_or_foreign_checkpoint_is_ignored_with_a_warning_and_the_history_read(
    prometheus_server: PrometheusServer,
    source: RecordingSource,
    tmp_path: Path,
    times: tuple[float, float, float],
    damage: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fit_at, serving, fresh = times
    spec_ = target(prometheus_server)
    store = DirectoryStore(tmp_path / "store")
    stored_champion(store, source, spec_, fit_at)
    writer = warmed(store, source, spec_, serving)
    assert checkpointed(writer)
    (path,) = (tmp_path / "store" / StoreKey.of(spec_).slug).glob("c0*.json")
    if damage == "truncated":
        path.write_text(path.read_text()[:1000])
    else:  # the same target's key, another query (edited in the ScaledObject since)
        history = writer.state.history
        assert history is not None
        foreign = target(prometheus_server, query=f"2 * {spec_.query}")
        data = checkpoints.encode(foreign, history, at=history.end - 2 * STEP, peaks=PEAKS)
        assert store.put_checkpoint(StoreKey.of(spec_), 1, int(history.end), data)

    with caplog.at_level(logging.WARNING):
        ignored = warmed(store, source, spec_, fresh)
    assert f"{spec_.key}: checkpoint of v1 ignored, reading the whole history" in caplog.text
    model = ignored.state.model
    assert model is not None
    assert min(s for s, _ in ignored.reads) == driftstate.replay_start(
        model, window=WINDOW, null_stored=True
    )
    same_replicas(ignored, warmed(store, source, spec_, fresh, fit_input=None))
