"""Every Prometheus metric the scaler exports, on an injected registry, and the HTTP endpoint
that serves them with /healthz and /readyz.

Names: `scaler_` prefix, base units, `_total`/`_seconds` suffixes. Labels are bounded: `target`
is one per trigger the scaler serves (`namespace/name#fingerprint`); `scaler_target_info` maps it
to `namespace`, `name`, `metric`, `mode` and `currency` for joins (`* on (target) group_left`).
`reason`, `bound`, `horizon` (scorecard.HORIZONS), `method` and `code` are fixed sets, and
`scaler_model_info` has one series per target (the old one is removed when the model changes).
Money is in the target's `currency` (`_cost` suffix). docs/observability.md lists them all.
"""

from __future__ import annotations

import contextlib

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)

from scaler.serving import target_metrics


class Telemetry:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        target = ["target"]
        self.load = Gauge(
            "scaler_load", "Latest load of the target's query.", target, registry=registry
        )
        self.forecast_peak = Gauge(
            "scaler_forecast_peak",
            "Peak calibrated forecast over lead time + horizon.",
            target,
            registry=registry,
        )
        self.desired = Gauge(
            "scaler_desired_replicas", "Replicas answered to KEDA.", target, registry=registry
        )
        self.predictive = Gauge(
            "scaler_predictive_desired_replicas",
            "Replicas the predictive decision asks for (differs from desired in shadow mode).",
            target,
            registry=registry,
        )
        self.reactive = Gauge(
            "scaler_reactive_replicas", "ceil(load / threshold).", target, registry=registry
        )
        self.prewarm = Gauge(
            "scaler_prewarm_replicas",
            "Replicas asked for above reactive.",
            target,
            registry=registry,
        )
        self.prewarm_spent = Counter(
            "scaler_prewarm_replica_hours",
            "Replica-hours spent on prewarming (active mode: what was asked of KEDA). The "
            "prewarm ledger is rebuilt from it after a restart.",
            target,
            registry=registry,
        )
        self.reactive_spent = Counter(
            "scaler_reactive_replica_hours",
            "Replica-hours of the reactive part of each decision; a share budget "
            '(prewarmBudget: "10%") is a share of it, rebuilt from it after a restart.',
            target,
            registry=registry,
        )
        self.shadow_prewarm = Counter(
            "scaler_shadow_prewarm_replica_hours",
            "Replica-hours shadow mode would have spent on prewarming (never asked of KEDA).",
            target,
            registry=registry,
        )
        self.budget_remaining = Gauge(
            "scaler_prewarm_budget_remaining",
            "Prewarm budget left in the current window, in the budget's unit (replica-hours, or "
            "money when costPerReplicaHour is set).",
            target,
            registry=registry,
        )
        self.spend_record_missing = Gauge(
            "scaler_spend_record_missing",
            "1 while the ledger's Prometheus does not hold this scaler's prewarm spend of the "
            "target, minutes after it was charged: a restart would read back nothing spent and "
            "start a fresh budget, so its prewarm is held at 0 (reason spend_unrecorded).",
            target,
            registry=registry,
        )
        self.drift_fallback = Gauge(
            "scaler_drift_fallback",
            "1 while forecasts have drifted and the target is held at reactive.",
            target,
            registry=registry,
        )
        self.forecast_coverage = Gauge(
            "scaler_forecast_coverage_ratio",
            "Share of recent actuals at or under the forecast made lead time earlier.",
            target,
            registry=registry,
        )
        self.forecast_wape = Gauge(
            "scaler_forecast_wape_ratio",
            "Weighted absolute percentage error of recent median forecasts.",
            target,
            registry=registry,
        )
        self.active = Gauge(
            "scaler_target_active", "1 when IsActive answers true.", target, registry=registry
        )
        self.decisions = Counter(
            "scaler_decisions", "Decisions by reason.", ["reason"], registry=registry
        )
        self.refresh_errors = Counter(
            "scaler_refresh_errors", "Failed target refreshes by kind.", ["kind"], registry=registry
        )
        self.fits = Counter(
            "scaler_model_fits",
            "Model fits by kind and result.",
            ["model", "result"],
            registry=registry,
        )
        self.fit_worker_restarts = Counter(
            "scaler_fit_worker_restarts",
            "Fit worker processes replaced, by cause (died, timeout, memory).",
            ["cause"],
            registry=registry,
        )
        self.fit_workers_up = Gauge(
            "scaler_fit_workers_up",
            "1 while fit workers can be started (or fits run in a thread), 0 while they cannot.",
            registry=registry,
        )
        self.targets = Gauge("scaler_targets", "Targets the engine refreshes.", registry=registry)
        self.rpc_seconds = Histogram(
            "scaler_rpc_duration_seconds",
            "ExternalScaler RPC latency.",
            ["method", "code"],
            registry=registry,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1.0),
        )
        self.prometheus_requests = Counter(
            "scaler_prometheus_requests",
            "HTTP requests to Prometheus by kind (range, instant, ledger, leadtime) and outcome "
            "(ok, retried, failed); divided by scaler_targets, the queries per target.",
            ["kind", "outcome"],
            registry=registry,
        )
        self.lead_time = Gauge(
            "scaler_lead_time_seconds",
            "Lead time (cold start) a target's decisions use.",
            target,
            registry=registry,
        )
        self.lead_time_learned = Gauge(
            "scaler_lead_time_learned",
            "1 when the lead time is learned from kube-state-metrics (leadTime: auto), 0 when "
            "it is the metadata's or the default (the decision log says why).",
            target,
            registry=registry,
        )
        self.tls_expiry = Gauge(
            "scaler_tls_certificate_expiry_timestamp_seconds",
            "When the gRPC server's certificate in use expires (epoch seconds; no series "
            "without --tls-cert). A renewal is read at the next connection or scrape.",
            ["file"],
            registry=registry,
        )

        self.per_target = target_metrics.PerTarget(registry)
        """The per-target metrics of issue 9: spend, budget in both units, model, scorecard."""
        ProcessCollector(registry=registry)  # process_cpu_seconds_total, process_resident_...
        PlatformCollector(registry=registry)  # python_info
        GCCollector(registry=registry)  # python_gc_*

    def forget(self, target: str) -> None:
        """Drop a target's series when it is no longer served."""
        self.per_target.forget(target)
        for metric in (
            self.load,
            self.forecast_peak,
            self.desired,
            self.predictive,
            self.reactive,
            self.prewarm,
            self.prewarm_spent,
            self.reactive_spent,
            self.shadow_prewarm,
            self.budget_remaining,
            self.spend_record_missing,
            self.active,
            self.drift_fallback,
            self.forecast_coverage,
            self.forecast_wape,
            self.lead_time,
            self.lead_time_learned,
        ):
            with contextlib.suppress(KeyError):
                metric.remove(target)
