"""`scaler serve --store --targets` as processes on a real Prometheus: ready means warm, two
replicas on one store answer alike, a restart keeps the drift state, and a SIGKILL in the middle
of a store write loses no artefact."""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from models import artefact
from models.base import DAY, HOUR, Series
from scaler.decision import spec as specs
from scaler.serving.state import forecast_steps
from scaler.store.base import StoreKey
from scaler.store.directory import DirectoryStore
from tests.contract import synthetic
from tests.integration.prometheus_server import JOB, BackfilledTrace, PrometheusServer
from tests.integration.serve_process import ServeProcess

pytestmark = pytest.mark.prometheus

STEP = 300.0
AHEAD = 2 * HOUR
"""Samples written past the session's start, so the load stays fresh while the tests run."""
JUMP_BEFORE = 4 * HOUR
"""The load triples this long before the session started: four hours into a new regime."""
FIT_BEFORE = 6 * HOUR
"""The stored champion was fitted this long before the session started (before the jump)."""


def jump_trace(now: float) -> BackfilledTrace:
    end = math.floor(now / STEP) * STEP + AHEAD
    days = 16
    base = synthetic.load(days, seed=5, start=end - days * DAY + STEP)
    values = base.values.copy()
    values[base.times() >= end - AHEAD - JUMP_BEFORE] *= 3
    return BackfilledTrace("jump", "trace_jump", STEP, 0.0, base.times().astype(np.float64), values)


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    server = PrometheusServer(tmp_path_factory.mktemp("prom"), [jump_trace(time.time())])
    server.start()
    try:
        yield server
    finally:
        server.stop()


QUERY = f'sum(trace_jump{{job="{JOB}",trace="jump"}})'
META = {
    "scalerAddress": "scaler:9000",
    "query": QUERY,
    "threshold": "20",
    "model": "seasonal",
    "prewarmBudget": "100000",  # never binding: replicas that started apart spend alike
}


def manifest(names: list[str]) -> str:
    docs = []
    for name in names:
        docs.append(
            {
                "apiVersion": "keda.sh/v1alpha1",
                "kind": "ScaledObject",
                "metadata": {"name": name, "namespace": "gpu"},
                "spec": {
                    "scaleTargetRef": {"name": name},
                    "triggers": [{"type": "external", "metadata": META}],
                },
            }
        )
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})


def spec_of(name: str) -> specs.TargetSpec:
    return specs.parse("gpu", name, META)


def store_a_champion_fitted_before_the_jump(
    store: Path, prometheus: PrometheusServer, name: str
) -> None:
    trace = prometheus.traces["jump"]
    fit_at = math.floor((trace.end - AHEAD - FIT_BEFORE) / STEP) * STEP
    keep = trace.times <= fit_at
    history = Series(float(trace.times[0]), STEP, trace.values[keep])
    spec = spec_of(name)
    data = artefact.fit("seasonal", history, forecast_steps(spec, STEP), quantile=spec.quantile)
    target = DirectoryStore(store)
    version = target.put(StoreKey.of(spec), data, {"writer": "test"})
    assert target.promote(StoreKey.of(spec), version, expected=None)


class Replica(ServeProcess):
    """One `scaler serve --store --targets` process on the test Prometheus."""

    def __init__(self, log: Path, *, prometheus: str, store: Path, targets: Path) -> None:
        flags = ["--prometheus-url", prometheus, "--store", str(store), "--targets", str(targets)]
        super().__init__(log, flags, metadata=META)


@contextlib.contextmanager
def replica(
    tmp: Path, tag: str, prometheus: PrometheusServer, store: Path, targets: Path
) -> Iterator[Replica]:
    running = Replica(tmp / f"{tag}.log", prometheus=prometheus.url, store=store, targets=targets)
    try:
        yield running
    finally:
        running.kill()


def test_serving_means_every_target_answers_and_a_restart_keeps_the_drift_fallback(
    prometheus: PrometheusServer, tmp_path: Path
) -> None:
    store, targets = tmp_path / "store", tmp_path / "targets.yaml"
    targets.write_text(manifest(["drifting", "new"]))
    store_a_champion_fitted_before_the_jump(store, prometheus, "drifting")
    for tag in ("first", "restarted"):
        with replica(tmp_path, tag, prometheus, store, targets) as r:
            r.wait_serving()
            gauges = r.metrics()  # read at once: nothing had time to happen after SERVING
            assert gauges["scaler_drift_fallback{gpu/drifting}"] == 1.0, r.log.read_text()
            for name in ("drifting", "new"):  # the first call answers: no UNAVAILABLE
                assert r.answer(name) >= gauges[f"scaler_reactive_replicas{{gpu/{name}}}"]
            assert "seasonal v1 from the model store" in r.log.read_text()


def test_two_replicas_on_one_store_give_identical_answers_and_end_on_one_artefact(
    prometheus: PrometheusServer, tmp_path: Path
) -> None:
    store, targets = tmp_path / "store", tmp_path / "targets.yaml"
    names = ["drifting", "new-a", "new-b"]
    targets.write_text(manifest(names))
    store_a_champion_fitted_before_the_jump(store, prometheus, "drifting")
    with (
        replica(tmp_path, "a", prometheus, store, targets) as a,
        replica(tmp_path, "b", prometheus, store, targets) as b,
    ):
        a.wait_serving()
        b.wait_serving()
        shared = DirectoryStore(store)
        keys = [StoreKey.of(spec_of(n)) for n in names]
        deadline = time.monotonic() + 60  # each new target: fitted, raced, adopted
        while any(shared.champion_version(k) is None for k in keys):
            assert time.monotonic() < deadline, a.log.read_text() + b.log.read_text()
            time.sleep(0.2)
        while not all(  # every target decided from its model on both
            math.isfinite(r.metrics().get(f"scaler_forecast_peak{{gpu/{n}}}", math.nan))
            for r in (a, b)
            for n in names
        ):
            assert time.monotonic() < deadline + 30, a.log.read_text() + b.log.read_text()
            time.sleep(0.2)
        # Within one 5-minute model step and one 2 s decision step, after a store poll.
        compared = 0
        while compared < 3:
            assert time.monotonic() < deadline + 120, "never compared within a step"
            if not 20 < time.time() % STEP < STEP - 20 or not 0.3 < time.time() % 2 < 1.2:
                time.sleep(0.05)
                continue
            time.sleep(1.2)  # both have adopted the champions (store poll 1 s)
            first, second = a.metrics(), b.metrics()
            if time.time() % 2 < 1.2:
                continue  # a step boundary passed between the reads
            kinds = (
                "scaler_desired_replicas", "scaler_forecast_peak", "scaler_drift_fallback",
                "scaler_predictive_desired_replicas", "scaler_prewarm_replicas",
            )  # fmt: skip
            mine = {k: v for k, v in first.items() if k.split("{")[0] in kinds}
            theirs = {k: v for k, v in second.items() if k.split("{")[0] in kinds}
            assert all(f"scaler_forecast_peak{{gpu/{n}}}" in mine for n in names)
            assert mine == theirs
            compared += 1
        assert first["scaler_drift_fallback{gpu/drifting}"] == 1.0
        for key in keys:  # one artefact per target: the losers adopted the winner's
            assert len(shared.versions(key)) >= 1
            assert shared.champion(key) is not None
        lost = a.log.read_text().count("lost the race") + b.log.read_text().count("lost the race")
        won = a.log.read_text().count("fitted here") + b.log.read_text().count("fitted here")
        assert won >= 2 and won + lost >= 2


def test_a_sigkill_in_the_middle_of_store_writes_loses_no_artefact(
    prometheus: PrometheusServer, tmp_path: Path
) -> None:
    store, targets = tmp_path / "store", tmp_path / "targets.yaml"
    names: list[str] = []
    rng = np.random.default_rng(1)
    for attempt in range(3):
        # Targets of their own, so every attempt has writes to interrupt: a warm-up that
        # finished the last attempt's writes would otherwise load them all and write nothing.
        names += [f"k{attempt}t{i}" for i in range(8)]
        targets.write_text(manifest(names))
        with replica(tmp_path, f"kill{attempt}", prometheus, store, targets) as r:
            deadline = time.monotonic() + 90
            while "stored v" not in r.log.read_text():  # writes have begun
                assert r.proc.poll() is None and time.monotonic() < deadline, r.log.read_text()
                time.sleep(0.01)
            time.sleep(float(rng.uniform(0.0, 0.3)))
        # killed by the context's exit, mid-way through the targets' writes
        shared = DirectoryStore(store)
        for name in names:
            key = StoreKey.of(spec_of(name))
            for version in shared.versions(key):
                shared.get(key, version)  # every version on disk is whole (raises if not)
            pointer = shared.champion_version(key)
            if pointer is not None:
                champion = shared.champion(key)
                assert champion is not None and champion.version == pointer
    with replica(tmp_path, "after", prometheus, store, targets) as r:
        r.wait_serving()
        deadline = time.monotonic() + 90
        while any(
            DirectoryStore(store).champion_version(StoreKey.of(spec_of(n))) is None for n in names
        ):
            assert time.monotonic() < deadline, r.log.read_text()
            time.sleep(0.2)
        for name in names:
            assert r.answer(name) >= 0
