"""The per-target metrics a platform team watches (issue 9): what the target is, why it got
the replicas it got, what that costs, how good its forecast is by horizon, and which model made it.

Fed by the engine at two points of a refresh: `forecast` when a forecast is made, `publish` when
the step's decision is published. Every series carries the `target` label only (bounded: one per
trigger served); `scaler_target_info` joins it to namespace/name/metric. Spend is exported as
counters (replica-hours and money since the process started): Prometheus' increase() survives
restarts, `max by (target)` dedupes replicas that book the same decisions, and the recording
rules in deploy/prometheus/rules.yaml turn them into month-to-date figures.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge

from models.base import HOUR, Forecast, Series
from scaler.decision import policy
from scaler.decision.spec import TargetSpec
from scaler.serving.scorecard import Scorecard
from scaler.serving.state import Basis, TargetState

BOUNDS = ("median", "upper")
"""Values of the `bound` label: the p50 and the calibrated forecast at the target's quantile."""


class PerTarget:
    def __init__(self, registry: CollectorRegistry) -> None:
        t, r = ["target"], registry
        self.info = Gauge(
            "scaler_target_info",
            "1 per target; its labels name the ScaledObject, the HPA metric, mode and currency.",
            ["target", "namespace", "name", "metric", "mode", "currency"],
            registry=r,
        )
        self.forecast_load = Gauge(
            "scaler_forecast_load",
            "Forecast for lead time from now, made now: median and upper (target quantile).",
            ["target", "bound"],
            registry=r,
        )
        self.forecast_replicas = Gauge(
            "scaler_forecast_replicas",
            "Replicas the median forecast for lead time from now needs (within min/max).",
            t,
            registry=r,
        )
        self.scored_load = Gauge(
            "scaler_forecast_scored_load",
            "The forecast made lead time before the newest actual scored: median and upper.",
            ["target", "bound"],
            registry=r,
        )
        self.scored_actual = Gauge(
            "scaler_forecast_scored_actual_load",
            "The newest actual scored against the forecast made lead time before it.",
            t,
            registry=r,
        )
        self.quantile = Gauge(
            "scaler_forecast_quantile",
            "The target's nominal quantile (trigger key).",
            t,
            registry=r,
        )
        self.read_quantile = Gauge(
            "scaler_forecast_read_quantile",
            "The quantile the step's forecast was read at (lower while the budget runs short).",
            t,
            registry=r,
        )
        self.pinball = Gauge(
            "scaler_forecast_pinball_loss",
            "Mean pinball loss of the upper forecast at the lead time, recent actuals, in load "
            "units.",
            t,
            registry=r,
        )
        horizon = ["target", "horizon"]
        self.scored = Counter(
            "scaler_forecast_scored",
            "Actuals scored per horizon (seconds ahead of the forecast's last observation).",
            horizon,
            registry=r,
        )
        self.covered = Counter(
            "scaler_forecast_covered",
            "Scored actuals at or under the upper forecast, per horizon.",
            horizon,
            registry=r,
        )
        self.abs_error = Counter(
            "scaler_forecast_absolute_error",
            "Sum of |actual - median forecast|, per horizon, in load units.",
            horizon,
            registry=r,
        )
        self.actual_sum = Counter(
            "scaler_forecast_actual",
            "Sum of scored actuals per horizon (the WAPE denominator), in load units.",
            horizon,
            registry=r,
        )
        self.pinball_sum = Counter(
            "scaler_forecast_pinball_loss_sum",
            "Sum of the pinball loss of the upper forecast, per horizon, in load units.",
            horizon,
            registry=r,
        )
        self.reason = Gauge(
            "scaler_decision_reason",
            "1 for the reason of the target's current predictive decision, 0 for the others.",
            ["target", "reason"],
            registry=r,
        )
        self.budget_hours = Gauge(
            "scaler_prewarm_budget_replica_hours",
            "The window's prewarm budget in replica-hours.",
            t,
            registry=r,
        )
        self.spent_hours = Gauge(
            "scaler_prewarm_budget_spent_replica_hours",
            "Prewarm spent in the current budget window, in replica-hours.",
            t,
            registry=r,
        )
        self.remaining_hours = Gauge(
            "scaler_prewarm_budget_remaining_replica_hours",
            "Prewarm left in the current budget window, in replica-hours.",
            t,
            registry=r,
        )
        self.budget_cost = Gauge(
            "scaler_prewarm_budget_cost",
            "The window's prewarm budget in money (only with costPerReplicaHour).",
            t,
            registry=r,
        )
        self.spent_cost = Gauge(
            "scaler_prewarm_budget_spent_cost",
            "Prewarm spent in the current budget window, in money (only with costPerReplicaHour).",
            t,
            registry=r,
        )
        self.remaining_cost = Gauge(
            "scaler_prewarm_budget_remaining_cost",
            "Prewarm left in the current budget window, in money (only with costPerReplicaHour).",
            t,
            registry=r,
        )
        self.gpu_hours = Counter(
            "scaler_gpu_replica_hours",
            "Replica-hours answered to KEDA (desired replicas x step): the target's GPU use.",
            t,
            registry=r,
        )
        self.gpu_cost = Counter(
            "scaler_gpu_cost",
            "The same replica-hours x costPerReplicaHour (only with costPerReplicaHour).",
            t,
            registry=r,
        )
        self.price = Gauge(
            "scaler_cost_per_replica_hour", "The costPerReplicaHour trigger key.", t, registry=r
        )
        self.monthly_budget = Gauge(
            "scaler_monthly_budget_cost",
            "The monthlyBudget trigger key: the target's GPU budget per calendar month, in money.",
            t,
            registry=r,
        )
        self.model_info = Gauge(
            "scaler_model_info",
            "1 for the model the target forecasts with: its kind, version (fingerprint) and "
            "store_version (the model store's vN; none when not stored).",
            ["target", "model", "version", "store_version"],
            registry=r,
        )
        self.model_trained = Gauge(
            "scaler_model_trained_until_timestamp_seconds",
            "End of the model's training data (model age = time() - this).",
            t,
            registry=r,
        )
        self.model_fitted = Gauge(
            "scaler_model_fitted_timestamp_seconds",
            "When this scaler last fitted or adopted the target's model.",
            t,
            registry=r,
        )
        self.retrain_success = Gauge(
            "scaler_retrain_last_success_timestamp_seconds",
            "When the retrain job last stored a model for the target (set from the model store).",
            t,
            registry=r,
        )
        self.retrain_failure = Gauge(
            "scaler_retrain_last_failure_timestamp_seconds",
            "When the retrain job last failed for the target (set from the model store).",
            t,
            registry=r,
        )
        self._cards: dict[str, Scorecard] = {}
        self._labels: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        """The info and model-info label values last set per target, removed on change."""
        self._horizons: dict[str, set[str]] = {}
        """The `horizon` label values exported per target."""
        self._children: dict[str, dict[tuple[int, tuple[str, ...]], Any]] = {}
        """Each target's labelled children by (metric id, labels): `labels()` costs ~20 us, and
        a step sets ~30 of them per target."""
        self._reasons: dict[str, policy.Reason] = {}
        """The reason last exported per target: the 13 reason series change only with it."""

    def _of(self, metric: Gauge | Counter, key: str, *rest: str) -> Any:
        """metric.labels(key, *rest), cached per target until `forget`."""
        children = self._children.setdefault(key, {})
        child = children.get((id(metric), rest))
        if child is None:
            child = children[(id(metric), rest)] = metric.labels(key, *rest)
        return child

    def forecast(
        self, spec: TargetSpec, forecast: Forecast, history: Series, *, now: float
    ) -> None:
        """A forecast was made at `now` from `history`: export it, and score the actuals of
        `history` that earlier forecasts were made for."""
        key = spec.key
        times = forecast.times()
        if times.size:
            i = int(np.argmin(np.abs(times - (now + spec.lead_time))))
            p50, upper = float(forecast.p50[i]), float(forecast.upper[i])
            self._of(self.forecast_load, key, "median").set(p50)
            self._of(self.forecast_load, key, "upper").set(upper)
            if math.isfinite(p50):
                need = math.ceil(max(p50, 0.0) / spec.threshold - 1e-9)
                self._of(self.forecast_replicas, key).set(
                    min(max(need, spec.min_replicas), spec.max_replicas)
                )
        card = self._cards.get(key)
        if card is None:
            card = self._cards[key] = Scorecard(lead_time=spec.lead_time, quantile=spec.quantile)
        lead = card.lead_horizon(history.step)
        for score in card.score(history):
            h = f"{score.horizon:.0f}"
            self._horizons.setdefault(key, set()).add(h)
            self._of(self.scored, key, h).inc()
            self._of(self.covered, key, h).inc(1 if score.covered() else 0)
            self._of(self.abs_error, key, h).inc(abs(score.actual - score.p50))
            self._of(self.actual_sum, key, h).inc(max(score.actual, 0.0))
            self._of(self.pinball_sum, key, h).inc(score.pinball(spec.quantile))
            if score.horizon == lead:
                self._of(self.scored_load, key, "median").set(score.p50)
                self._of(self.scored_load, key, "upper").set(score.upper)
                self._of(self.scored_actual, key).set(score.actual)
        self._of(self.pinball, key).set(card.pinball())
        card.record(forecast)

    def publish(self, state: TargetState, *, now: float, step: float) -> None:
        """The step's decision was published: export its reason, budget, spend and model. The
        model, quantile and budget's knowledge are the decision's (`state.basis`): a step held
        from it exports what the decision was made with, as its log line says."""
        spec, decision, predictive, basis = (
            state.spec,
            state.decision,
            state.predictive,
            state.basis,
        )
        assert decision is not None and predictive is not None and basis is not None
        key, price = spec.key, spec.cost_per_replica_hour
        self._relabel(
            self.info,
            key,
            "info",
            (key, spec.namespace, spec.name, spec.metric_name, spec.mode, spec.currency),
        )
        if self._reasons.get(key) is not predictive.reason:
            for reason in policy.Reason:
                self._of(self.reason, key, reason.value).set(reason is predictive.reason)
            self._reasons[key] = predictive.reason
        self._of(self.quantile, key).set(spec.quantile)
        if basis.read_quantile is not None:
            self._of(self.read_quantile, key).set(basis.read_quantile)
        hours = decision.desired * step / HOUR
        self._of(self.gpu_hours, key).inc(hours)
        if price is not None:
            self._of(self.gpu_cost, key).inc(hours * price)
            self._of(self.price, key).set(price)
        if spec.monthly_budget is not None:
            self._of(self.monthly_budget, key).set(spec.monthly_budget)
        self._budget(state, now, known=basis.budget_known)
        self._model(key, basis)

    def _budget(self, state: TargetState, now: float, *, known: bool) -> None:
        key, ledger, price = state.spec.key, state.ledger, state.spec.cost_per_replica_hour
        if not known:  # nothing known was spent yet, and nothing may be
            self._of(self.remaining_hours, key).set(0)
            return
        units = (ledger.limit(now), ledger.spent(now), ledger.remaining(now))
        per_hour = 1.0 if price is None else price
        gauges = (self.budget_hours, self.spent_hours, self.remaining_hours)
        for gauge, amount in zip(gauges, units, strict=True):
            self._of(gauge, key).set(amount / per_hour)
        if price is not None:
            money = (self.budget_cost, self.spent_cost, self.remaining_cost)
            for gauge, amount in zip(money, units, strict=True):
                self._of(gauge, key).set(amount)

    def _model(self, key: str, basis: Basis) -> None:
        model = basis.model
        if model is None:
            return
        stored = "none" if basis.store_version is None else f"v{basis.store_version}"
        self._relabel(self.model_info, key, "model", (key, model.kind, model.fingerprint, stored))
        self._of(self.model_trained, key).set(model.trained_until)
        if math.isfinite(basis.fitted_at):
            self._of(self.model_fitted, key).set(basis.fitted_at)

    def _relabel(self, gauge: Gauge, key: str, kind: str, labels: tuple[str, ...]) -> None:
        """Set gauge{labels} to 1, removing the series it replaces for the same target."""
        info, model = self._labels.get(key, ((), ()))
        old = info if kind == "info" else model
        if old and old != labels:
            with contextlib.suppress(KeyError):
                gauge.remove(*old)
        gauge.labels(*labels).set(1)
        self._labels[key] = (labels, model) if kind == "info" else (info, labels)

    def forget(self, key: str) -> None:
        """Drop every series of a target that is no longer served."""
        self._cards.pop(key, None)
        self._children.pop(key, None)
        self._reasons.pop(key, None)
        info, model = self._labels.pop(key, ((), ()))
        for gauge, labels in ((self.info, info), (self.model_info, model)):
            if labels:
                with contextlib.suppress(KeyError):
                    gauge.remove(*labels)
        second: list[tuple[Gauge | Counter, str]]
        second = [(m, b) for m in (self.forecast_load, self.scored_load) for b in BOUNDS]
        second += [(self.reason, r.value) for r in policy.Reason]
        per_horizon = (self.scored, self.covered, self.abs_error, self.actual_sum, self.pinball_sum)
        seen = self._horizons.pop(key, set())
        second += [(m, h) for m in per_horizon for h in sorted(seen)]
        for metric, label in second:
            with contextlib.suppress(KeyError):
                metric.remove(key, label)
        single: tuple[Gauge | Counter, ...] = (
            self.forecast_replicas,
            self.scored_actual,
            self.quantile,
            self.read_quantile,
            self.pinball,
            self.budget_hours,
            self.spent_hours,
            self.remaining_hours,
            self.budget_cost,
            self.spent_cost,
            self.remaining_cost,
            self.gpu_hours,
            self.gpu_cost,
            self.price,
            self.monthly_budget,
            self.model_trained,
            self.model_fitted,
            self.retrain_success,
            self.retrain_failure,
        )
        for one in single:
            with contextlib.suppress(KeyError):
                one.remove(key)
