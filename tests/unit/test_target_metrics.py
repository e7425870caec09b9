"""scaler.serving.target_metrics: spend counters, budget units, and bounded label sets."""

from __future__ import annotations

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from models import artefact
from models.base import DAY, Forecast, Series
from scaler.decision import budget, policy, spec
from scaler.serving.state import Basis, TargetState, forecast_steps
from scaler.serving.target_metrics import PerTarget

STEP = 60.0


def state(**meta: str) -> TargetState:
    meta = {"query": "q", "threshold": "10", "prewarmBudget": "24", **meta}
    target = spec.parse("gpu", "llm", meta)
    ledger = budget.Ledger(
        budget=target.prewarm_budget,
        window=target.prewarm_budget_window,
        cost_per_replica_hour=target.cost_per_replica_hour,
    )
    s = TargetState(spec=target, ledger=ledger, last_asked=0.0)
    d = policy.Decision(
        load=25.0,
        forecast_peak=40.0,
        reactive=3,
        predictive=4,
        prewarm=1,
        desired=4,
        reason=policy.Reason.FORECAST,
    )
    s.decision = s.predictive = d
    s.basis = Basis.of(s)  # as the engine keeps with each decision
    s.ledger.charge(0.0, 1, STEP)
    return s


def series(registry: CollectorRegistry, key: str) -> set[str]:
    return {
        sample.name
        for metric in registry.collect()
        for sample in metric.samples
        if sample.labels.get("target") == key
    }


def test_gpu_spend_counts_desired_replicas_for_each_step_in_hours_and_money() -> None:
    registry = CollectorRegistry()
    metrics = PerTarget(registry)
    s = state(costPerReplicaHour="3", prewarmBudget="30", monthlyBudget="1000")
    for now in (0.0, STEP, 2 * STEP):
        metrics.publish(s, now=now, step=STEP)
    labels = {"target": s.spec.key}
    hours = registry.get_sample_value("scaler_gpu_replica_hours_total", labels)
    assert hours == pytest.approx(3 * 4 * STEP / 3600)
    assert registry.get_sample_value("scaler_gpu_cost_total", labels) == pytest.approx(hours * 3)
    assert registry.get_sample_value("scaler_prewarm_budget_cost", labels) == 30
    assert registry.get_sample_value("scaler_prewarm_budget_replica_hours", labels) == 10
    spent = registry.get_sample_value("scaler_prewarm_budget_spent_replica_hours", labels)
    assert spent == pytest.approx(STEP / 3600)  # the one charged replica-step
    assert registry.get_sample_value("scaler_monthly_budget_cost", labels) == 1000


def test_without_a_price_nothing_is_exported_in_money() -> None:
    registry = CollectorRegistry()
    metrics = PerTarget(registry)
    s = state(prewarmBudget="24")
    metrics.publish(s, now=0.0, step=STEP)
    names = series(registry, s.spec.key)
    assert "scaler_gpu_replica_hours_total" in names
    assert not {n for n in names if n.endswith("_cost") or n.startswith("scaler_gpu_cost")}


def test_a_monthly_budget_without_a_price_is_refused_naming_both_keys() -> None:
    with pytest.raises(spec.SpecError, match=r"monthlyBudget.*costPerReplicaHour"):
        spec.parse("gpu", "llm", {"query": "q", "threshold": "1", "monthlyBudget": "10"})


def test_forgetting_a_target_drops_every_one_of_its_series() -> None:
    registry = CollectorRegistry()
    metrics = PerTarget(registry)
    s = state(costPerReplicaHour="3", monthlyBudget="1000")
    p50 = np.full(30, 20.0)
    history = Series(0.0, 300.0, np.full(40, 20.0))
    for k in range(5):
        origin = history.end + 300.0 * (k - 4)
        f = Forecast(origin=origin, step=300.0, p50=p50, upper=p50 * 1.5, quantile=0.95)
        metrics.forecast(s.spec, f, history, now=origin)
    metrics.publish(s, now=0.0, step=STEP)
    assert len(series(registry, s.spec.key)) > 10
    metrics.forget(s.spec.key)
    assert series(registry, s.spec.key) == set()


def test_the_model_in_use_is_named_by_kind_fingerprint_and_store_version() -> None:
    """The store's vN is what the retrain job's summary and the store's errors name: one
    series per target, the old one removed when the model or its store version changes."""
    registry = CollectorRegistry()
    metrics = PerTarget(registry)
    s = state()
    level = Series(0.0, 300.0, np.full(int(2 * DAY / 300.0) + 1, 20.0))
    model = artefact.load(artefact.fit("seasonal", level, forecast_steps(s.spec, 300.0)))

    def exported() -> list[dict[str, str]]:
        return [
            sample.labels
            for metric in registry.collect()
            if metric.name == "scaler_model_info"
            for sample in metric.samples
            if sample.value == 1
        ]

    seen = []
    for version in (3, 4, None):  # the champion, the next one, a fit the store refused
        s.model, s.model_version = model, version
        s.basis = Basis.of(s)
        metrics.publish(s, now=0.0, step=STEP)
        seen.append([labels["store_version"] for labels in exported()])
    assert seen == [["v3"], ["v4"], ["none"]]
    (labels,) = exported()
    assert (labels["model"], labels["version"]) == (model.kind, model.fingerprint)
