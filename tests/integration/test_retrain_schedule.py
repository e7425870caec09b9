"""`scaler retrain` and `scaler serve` on one store, as a cluster runs them: the job owns the
weekly schedule of the champions it writes (scaler/serving/refit_due.py). serve used to refit
the job's champion a week after its training data ended, minutes before the job's next run,
and publish its fit unraced, so the job's challenger lost to a model fitted on the week it was
graded on and the job in effect never promoted anything. The real job as a process against the
real Prometheus and a directory store, then serve's engine, fitter and store reader on a clock
of their own, days on."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from models.base import DAY, HOUR
from scaler.clock import ManualClock, quantise
from scaler.kube import targets as manifests
from scaler.serving import champions, warmup
from scaler.serving.engine import Engine
from scaler.serving.state import TargetState
from scaler.serving.telemetry import Telemetry
from scaler.settings import EngineSettings
from scaler.sources.prometheus import PrometheusSource
from scaler.store.base import RETRAIN_WRITER
from scaler.store.directory import DirectoryStore
from tests.integration.prometheus_server import PrometheusServer
from tests.integration.test_retrain import ROOT, nasa, scaled_object

pytestmark = pytest.mark.prometheus

SETTINGS = EngineSettings(
    step=30.0, model_step=300.0, history=14 * DAY, history_peaks=30.0, fit_workers=0
)
WEEK, GRACE = SETTINGS.refit_every, SETTINGS.retrain_grace


def fit_once(engine: Engine, state: TargetState, now: float) -> bool:
    """The engine's fitter at `now` (what each refresh asks), waited for; True when it fitted."""

    async def main() -> bool:
        engine.fitter.maybe_fit(state, now)
        started = state.fitting
        await engine.fitter.wait()
        return started

    return asyncio.run(main())


def test_serve_leaves_the_jobs_champion_to_the_job_and_refits_once_the_job_is_late(
    prometheus_server: PrometheusServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    obj = scaled_object("api", nasa(prometheus_server))
    (tmp_path / "so.yaml").write_text(yaml.safe_dump(obj))
    job = [sys.executable, "-m", "scaler", "retrain", "--targets", str(tmp_path / "so.yaml")]
    job += ["--store", str(tmp_path / "store"), "--prometheus-url", prometheus_server.url]
    done = subprocess.run(
        [*job, "--workers", "0"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    store = DirectoryStore(tmp_path / "store")
    (target,), _ = manifests.from_objects([obj])
    wrote = store.champion(target.key)
    assert wrote is not None and wrote.version == 1 and wrote.meta["writer"] == RETRAIN_WRITER
    ran = store.statuses()[target.key].retrain_success
    assert ran is not None and ran >= wrote.meta["at"]

    # One serve replica, warmed up as at start-up, up to the trace's end.
    source = PrometheusSource(prometheus_server.url, timeout=10.0)
    start = quantise(prometheus_server.traces["nasa_http_5min"].end, SETTINGS.step)
    engine = Engine(
        settings=SETTINGS,
        source_for=lambda _spec: source,
        clock=ManualClock(start),
        telemetry=Telemetry(CollectorRegistry()),
    )
    models = champions.Champions(store, poll=60.0)
    engine.fitter.store = models
    try:
        asyncio.run(warmup.warm_up(engine, [target.spec], load=models.load))
        state = engine.targets[target.spec.key]
        asyncio.run(warmup._complete(engine, state, asyncio.Semaphore(1)))  # the backfill's step
        asyncio.run(models.poll_once(engine.targets))
        assert state.model_version == 1 and state.model is not None and not state.history_partial
        trained_until = state.model.trained_until

        # A week after its data: where serve refitted and published, minutes before the job.
        assert not fit_once(engine, state, trained_until + WEEK + HOUR)
        assert not fit_once(engine, state, ran + WEEK + GRACE - HOUR)
        assert store.champion_version(target.key) == 1

        # The job missed its week and the grace: serve refits in its place, and says so.
        late = ran + WEEK + GRACE + HOUR
        with caplog.at_level(logging.WARNING, logger="scaler.serving.fitting"):
            assert fit_once(engine, state, late)
    finally:
        engine.close()
        source.close()
    assert store.champion_version(target.key) == 2 and state.model_version == 2
    meta = store.get(target.key, 2).meta
    assert meta["reason"] == (
        "scheduled refit by serve: the retrain job last succeeded 8.0 days ago"
    ), meta
    assert meta["writer"] != RETRAIN_WRITER
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith(f"{target.spec.key}: the retrain job is late: it last succeeded")
    assert "in its place" in warning
    assert state.model_fitted_at == late
