"""A scaler checks that the Prometheus its ledger is rebuilt from holds its prewarm spend, on a
real Prometheus: one holding no spend of the target (it does not scrape the scaler), and one
whose record shows the target's spend rising after the scaler charged it.

The scaler's clock runs a minute a second, two hours in the past, so that the record can be
backfilled (a Prometheus scraping the scaler stamps samples with the wall clock); the load is
a PromQL expression of time(): 300 for a minute every 20 minutes, 100 otherwise, so the lead
time's hold prewarms (paid) for 5 minutes after each peak, with or without a model."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import grpc
import numpy as np
import pytest

from scaler._pb import externalscaler_pb2 as pb
from scaler._pb import externalscaler_pb2_grpc as pb_grpc
from scaler.clock import ReplayClock
from scaler.decision import policy, spec
from scaler.serving.state import TargetState
from tests.integration.prometheus_server import CounterSeries, PrometheusServer
from tests.integration.scaler_server import RunningScaler, eventually, fast_settings

pytestmark = pytest.mark.prometheus

SPEED = 60.0
PAST = 2 * 3600.0
LOAD = "vector(100) + 200 * (vector(time()) % 1200 < bool 60)"
META = {"query": LOAD, "threshold": "10", "prewarmBudget": "24", "maxPrewarmReplicas": "5"}
KEY = spec.parse("gpu", "spender", META).key


def record(start: float, *, spending: bool) -> list[CounterSeries]:
    """Another scaler pod's spend counter of the target over the scaler's two hours: rising
    (the record holds the decisions it charged too) or absent."""
    if not spending:
        return []
    times = np.arange(start - 3600.0, start + PAST, 30.0)
    values = np.maximum(0.0, times - start) / 3600.0  # a replica-hour an hour
    labels = {"job": "scaler", "pod": "scaler-b", "target": KEY}
    return [CounterSeries("scaler_prewarm_replica_hours", labels, times, values)]


@contextmanager
def scaler_on(tmp_path: Path, *, spending: bool) -> Iterator[tuple[RunningScaler, TargetState]]:
    start = time.time() - PAST
    with PrometheusServer(tmp_path, [], record(start, spending=spending)) as prometheus:
        settings = fast_settings("prometheus")
        settings = replace(
            settings,
            prometheus=replace(settings.prometheus, url=prometheus.url, timeout=5.0),
            engine=replace(settings.engine, step=30.0, model_step=300.0, history=86400.0),
        )
        clock = ReplayClock(start=start, speed=SPEED)
        with (
            RunningScaler(settings, clock=clock) as running,
            grpc.insecure_channel(running.address) as channel,
        ):
            stub = pb_grpc.ExternalScalerStub(channel)
            ref = pb.ScaledObjectRef(namespace="gpu", name="spender", scalerMetadata=META)
            request = pb.GetMetricsRequest(scaledObjectRef=ref, metricName="m")
            stub.GetMetricSpec(ref)
            eventually(lambda: stub.GetMetrics(request), timeout=30)
            assert running.engine is not None
            yield running, running.engine.targets[KEY]


def watch(state: TargetState, wall: float) -> list[policy.Decision]:
    """The target's predictive decisions, one per step, for `wall` seconds."""
    seen: list[policy.Decision] = []
    deadline = time.monotonic() + wall
    while time.monotonic() < deadline:
        if state.predictive is not None and (not seen or state.predictive is not seen[-1]):
            seen.append(state.predictive)
        time.sleep(0.05)
    return seen


def test_a_prometheus_without_the_scalers_spend_is_named_and_holds_prewarm_at_0(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="scaler.serving.ledgeraudit")
    with scaler_on(tmp_path, spending=False) as (scaler, state):
        decisions = watch(state, wall=45.0)  # 45 minutes of the scaler's clock: two peaks
        registry = scaler.engine.telemetry.registry if scaler.engine else None
        assert registry is not None
        gauge = registry.get_sample_value("scaler_spend_record_missing", {"target": KEY})
        url = scaler.settings.prometheus.url
    assert any(d.prewarm > 0 for d in decisions), "the hold should have prewarmed"
    held = [i for i, d in enumerate(decisions) if d.reason is policy.Reason.SPEND_UNRECORDED]
    assert held, "the missing record should hold the target's prewarm"
    assert all(d.prewarm == 0 for d in decisions[held[0] :])
    assert gauge == 1.0
    ours = [r for r in caplog.records if r.name == "scaler.serving.ledgeraudit"]
    errors = [r.getMessage() for r in ours if r.levelno == logging.ERROR]
    assert len(errors) == 1
    for named in (KEY, url, "scaler_prewarm_replica_hours_total", "servicemonitor.yaml"):
        assert named in errors[0]


def test_a_prometheus_whose_record_shows_the_spend_changes_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="scaler.serving.ledgeraudit")
    with scaler_on(tmp_path, spending=True) as (scaler, state):
        decisions = watch(state, wall=45.0)
        registry = scaler.engine.telemetry.registry if scaler.engine else None
        assert registry is not None
        gauge = registry.get_sample_value("scaler_spend_record_missing", {"target": KEY})
    charged = [i for i, d in enumerate(decisions) if d.prewarm > 0]
    assert len(charged) >= 8, "the hold should have prewarmed after a peak"
    assert not any(d.reason is policy.Reason.SPEND_UNRECORDED for d in decisions)
    assert gauge == 0.0  # checked, and found
    assert state.reserve is None  # the rebuild's reserve settled on the same record
    assert not [r for r in caplog.records if r.name == "scaler.serving.ledgeraudit"]
