"""A freshly started scaler rebuilds its prewarm ledger from the spend counter earlier scaler
pods left in a real Prometheus, and stays reactive while it cannot."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

import grpc
import pytest

from scaler._pb import externalscaler_pb2 as pb
from scaler._pb import externalscaler_pb2_grpc as pb_grpc
from scaler.clock import ReplayClock
from scaler.decision import policy, unrecorded
from scaler.serving.ledgerrebuild import LEDGER_STEP
from scaler.serving.state import TargetState
from tests.integration import spend_history
from tests.integration.prometheus_server import PrometheusServer
from tests.integration.scaler_server import RunningScaler, eventually, fast_settings

pytestmark = pytest.mark.prometheus

UNREACHABLE = "http://127.0.0.1:9"


@contextmanager
def fresh_scaler(
    prometheus_server: PrometheusServer, *, ledger_url: str | None = None
) -> Iterator[tuple[RunningScaler, pb_grpc.ExternalScalerStub]]:
    """A scaler started now, its clock at the end of the backfilled data, and a stub to it."""
    settings = fast_settings("prometheus")
    settings = replace(
        settings,
        prometheus=replace(
            settings.prometheus, url=prometheus_server.url, timeout=5.0, ledger_url=ledger_url
        ),
        engine=replace(settings.engine, model_step=300.0, history=2 * 86400.0),
    )
    clock = ReplayClock(start=prometheus_server.end + 1, speed=1.0)
    with (
        RunningScaler(settings, clock=clock) as running,
        grpc.insecure_channel(running.address) as channel,
    ):
        yield running, pb_grpc.ExternalScalerStub(channel)


def served(
    scaler: RunningScaler, stub: pb_grpc.ExternalScalerStub, name: str
) -> tuple[TargetState, Callable[[], pb.GetMetricsResponse]]:
    """Ask for trigger `name` of spend_history until it answers; its state and a GetMetrics."""
    ref = pb.ScaledObjectRef(
        namespace=spend_history.NAMESPACE, name=name, scalerMetadata=spend_history.NAMES[name]
    )
    request = pb.GetMetricsRequest(scaledObjectRef=ref, metricName="m")
    stub.GetMetricSpec(ref)
    eventually(lambda: stub.GetMetrics(request), timeout=30)
    assert scaler.engine is not None
    return scaler.engine.targets[spend_history.key(name)], lambda: stub.GetMetrics(request)


def test_a_restarted_scaler_has_only_what_earlier_pods_left_of_the_budget(
    prometheus_server: PrometheusServer,
) -> None:
    with fresh_scaler(prometheus_server) as (scaler, stub):
        hours, _ = served(scaler, stub, "spender")
        money, _ = served(scaler, stub, "spender-money")
        assert hours.ledger_known and money.ledger_known
        now = scaler.clock.now()
        reserve = unrecorded.unrecorded_spend(
            max_prewarm_replicas=hours.spec.max_prewarm_replicas,
            step=scaler.settings.engine.step,
            scrape_interval=scaler.settings.engine.ledger_scrape_interval,
            sample_step=LEDGER_STEP,
        )
        assert reserve > 0
        left = spend_history.BUDGET - spend_history.SPENT_HOURS - reserve
        # 20 of 24 replica-hours, across two pods and a reset, counted once, less the reserve
        # for spend a killed pod left unscraped; what the scaler prewarmed itself since (0.2 s
        # steps) is a few thousandths of a replica-hour.
        assert left - 0.05 < hours.ledger.remaining(now) <= left + 1e-6
        # The same 20 replica-hours at 1.2 USD are the whole 24 USD: no prewarm at all.
        assert money.ledger.remaining(now) < 1e-6
        assert money.ledger.allowance(now, scaler.settings.engine.step) == 0
        for _ in range(10):
            assert money.predictive is not None and money.predictive.prewarm == 0
            assert hours.ledger.spent(scaler.clock.now()) <= spend_history.BUDGET + 1e-9
            time.sleep(scaler.settings.engine.step)
        assert scaler.engine is not None
        gauge = scaler.engine.telemetry.registry.get_sample_value(
            "scaler_prewarm_budget_remaining", {"target": spend_history.key("spender")}
        )
        assert gauge is not None and left - 0.05 < gauge <= left + 1e-6


def test_a_restarted_scaler_rebuilds_a_shadow_triggers_ledger_from_its_simulated_spend(
    prometheus_server: PrometheusServer,
) -> None:
    """A shadow trigger's ledger was rebuilt from the active spend counter, where it has no
    series: every restart handed it a fresh budget, and its would-be prewarm was overstated."""
    with fresh_scaler(prometheus_server) as (scaler, stub):
        shadow, _ = served(scaler, stub, "spender-shadow")
        assert shadow.spec.mode == "shadow" and shadow.ledger_known
        reserve = unrecorded.unrecorded_spend(
            max_prewarm_replicas=shadow.spec.max_prewarm_replicas,
            step=scaler.settings.engine.step,
            scrape_interval=scaler.settings.engine.ledger_scrape_interval,
            sample_step=LEDGER_STEP,
        )
        left = spend_history.BUDGET - spend_history.SPENT_HOURS - reserve
        assert left - 0.05 < shadow.ledger.remaining(scaler.clock.now()) <= left + 1e-6


def test_a_restarted_scaler_rebuilds_the_reactive_hours_its_share_budget_is_a_share_of(
    prometheus_server: PrometheusServer,
) -> None:
    newcomer = {**spend_history.SHARE, "horizon": "20m"}  # no record in Prometheus at all
    with fresh_scaler(prometheus_server) as (scaler, stub):
        share, _ = served(scaler, stub, "spender-share")
        ref = pb.ScaledObjectRef(namespace="fresh", name="newcomer", scalerMetadata=newcomer)
        stub.GetMetricSpec(ref)
        request = pb.GetMetricsRequest(scaledObjectRef=ref, metricName="m")
        eventually(lambda: stub.GetMetrics(request), timeout=30)
        assert scaler.engine is not None
        fresh = next(s for s in scaler.engine.targets.values() if s.spec.namespace == "fresh")
        assert share.ledger_known and fresh.ledger_known
        now = scaler.clock.now()
        # 10 % of the 300 reactive replica-hours two pods (one restarted) recorded in the
        # window, less the 20 they prewarmed and the reserve for spend a killed pod left
        # unscraped; the scaler's own 0.2 s steps add almost nothing.
        used = 24 * spend_history.REACTIVE_PER_HOUR
        assert 0.1 * used - 0.1 < share.ledger.limit(now) <= 0.1 * used + 0.05
        reserve = unrecorded.unrecorded_spend(
            max_prewarm_replicas=share.spec.max_prewarm_replicas,
            step=scaler.settings.engine.step,
            scrape_interval=scaler.settings.engine.ledger_scrape_interval,
            sample_step=LEDGER_STEP,
        )
        left = 0.1 * used - spend_history.SPENT_HOURS - reserve
        assert left - 0.1 < share.ledger.remaining(now) <= left + 0.05
        # Without a record the window starts empty: the budget is only what its own steps made.
        assert fresh.ledger.limit(now) < 0.05
        registry = scaler.engine.telemetry.registry
        exported = registry.get_sample_value(
            "scaler_reactive_replica_hours_total", {"target": spend_history.key("spender-share")}
        )
        assert exported is not None and exported > 0


def test_a_scaler_that_cannot_read_its_ledger_stays_reactive_and_says_why_once(
    prometheus_server: PrometheusServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="scaler.serving.ledgerrebuild")
    with fresh_scaler(prometheus_server, ledger_url=UNREACHABLE) as (scaler, stub):
        state, get_metrics = served(scaler, stub, "spender")
        for _ in range(10):  # retried every step, never trusted
            answer = get_metrics()
            decision = state.predictive
            assert decision is not None and decision.reason == policy.Reason.BUDGET_UNKNOWN
            assert decision.prewarm == 0 and decision.desired == decision.reactive
            assert answer.metricValues[0].metricValue >= 1  # reactive answers keep coming
            time.sleep(scaler.settings.engine.step)
        assert not state.ledger_known and UNREACHABLE in (state.ledger_note or "")
    warnings = [r for r in caplog.records if "prewarm budget unknown" in r.getMessage()]
    assert len(warnings) == 1 and spend_history.key("spender") in warnings[0].getMessage()


def test_editing_a_triggers_metadata_does_not_hand_it_a_fresh_budget(
    prometheus_server: PrometheusServer,
) -> None:
    edited = {**spend_history.NAMES["spender"], "horizon": "20m"}  # a new target key
    with fresh_scaler(prometheus_server) as (scaler, stub):
        ref = pb.ScaledObjectRef(
            namespace=spend_history.NAMESPACE, name="spender", scalerMetadata=edited
        )
        stub.GetMetricSpec(ref)
        request = pb.GetMetricsRequest(scaledObjectRef=ref, metricName="m")
        eventually(lambda: stub.GetMetrics(request), timeout=30)
        assert scaler.engine is not None
        state = next(s for s in scaler.engine.targets.values() if s.spec.horizon == 20 * 60.0)
        assert state.spec.key != spend_history.key("spender")
        assert state.ledger_known
        left = spend_history.BUDGET - spend_history.SPENT_HOURS
        assert state.ledger.remaining(scaler.clock.now()) <= left + 1e-6


def test_cutting_a_triggers_price_does_not_hand_back_money_spent_at_the_old_one(
    prometheus_server: PrometheusServer,
) -> None:
    """The spend record is in replica-hours, and was priced at the edited trigger's new price:
    the 24 USD spent at 1.2 became 12 USD at 0.6, and 12 USD more could be spent in the same
    window (36 USD of a 24 USD budget)."""
    cheaper = {**spend_history.MONEY, "costPerReplicaHour": "0.6"}  # a new target key
    # and a trigger budgeted in replica-hours, given a price: its spend at the new one
    priced = {**spend_history.HOURS, "costPerReplicaHour": "1.5", "prewarmBudget": "36"}
    with fresh_scaler(prometheus_server) as (scaler, stub):
        for name, meta in (("spender-money", cheaper), ("spender", priced)):
            ref = pb.ScaledObjectRef(
                namespace=spend_history.NAMESPACE, name=name, scalerMetadata=meta
            )
            stub.GetMetricSpec(ref)
            request = pb.GetMetricsRequest(scaledObjectRef=ref, metricName="m")
            eventually(lambda r=request: stub.GetMetrics(r), timeout=30)
        assert scaler.engine is not None
        states = {s.spec.cost_per_replica_hour: s for s in scaler.engine.targets.values()}
        now = scaler.clock.now()
        state = states[0.6]
        assert state.spec.key != spend_history.key("spender-money") and state.ledger_known
        # 20 replica-hours at the 1.2 USD they were paid at: the whole 24 USD.
        assert state.ledger.spent(now) >= spend_history.BUDGET - 1e-6
        assert state.ledger.remaining(now) < 1e-6
        assert state.ledger.allowance(now, scaler.settings.engine.step) == 0
        # 20 replica-hours at 1.5 are 30 of 36 USD, and the reserve for unscraped spend.
        reserve = unrecorded.unrecorded_spend(
            max_prewarm_replicas=state.spec.max_prewarm_replicas,
            step=scaler.settings.engine.step,
            scrape_interval=scaler.settings.engine.ledger_scrape_interval,
            sample_step=LEDGER_STEP,
        )
        expected = (spend_history.SPENT_HOURS + reserve) * 1.5
        assert states[1.5].ledger_known
        assert expected - 1e-6 <= states[1.5].ledger.spent(now) <= expected + 0.05
