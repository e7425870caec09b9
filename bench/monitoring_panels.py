"""The dashboard's panels: every query of deploy/monitoring/dashboard.json, its unit and how it is
drawn, as data. bench/monitoring.py builds the JSON from `PANELS`; the tests run each query
against a Prometheus scraping a live scaler. Data only: no Grafana SDK here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

T = '{target="$target"}'
"""The selector every panel narrows to the chosen target with."""


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str


@dataclass(frozen=True)
class Override:
    """Field settings (Grafana's ids, e.g. `unit`, `custom.lineStyle`) for the series of one
    query, named by its legend."""

    legend: str
    settings: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Panel:
    title: str
    description: str
    kind: str
    """timeseries, stat or statetimeline."""
    unit: str
    queries: tuple[Query, ...]
    width: int = 12
    fill_below: tuple[str, str] | None = None
    """(series, series it fills down to): the quantile band."""
    overrides: tuple[Override, ...] = ()
    thresholds: tuple[tuple[float | None, str], ...] = ()
    """(from value, colour) steps, the first from None; Grafana's default (red from 80) when
    empty."""
    no_value: str | None = None
    """What a stat shows when no query has data."""


EIGHT_DAYS = 8 * 86400.0
"""The model-age and retrain alerts' bound (deploy/prometheus/rules.yaml), as a stat's red."""
DASHED = ("custom.lineStyle", {"fill": "dash", "dash": [10, 10]})


def tq(metric: str, extra: str = "") -> str:
    """`metric` of the chosen target (plus `extra` matchers), the max across scaler pods."""
    selector = f'{{target="$target"{"," + extra if extra else ""}}}'
    return f"max({metric}{selector})"


def so(metric: str) -> str:
    """`metric` recorded per ScaledObject (namespace, name), for the chosen target's, labelled
    with the target's `currency` (money is in it, whatever it is)."""
    owner = 'max by (namespace, name, currency) (scaler_target_info{target="$target"})'
    return f"max by (currency) ({metric} * on (namespace, name) group_left (currency) {owner})"


def ratio(numerator: str, denominator: str, window: str = "1h") -> str:
    """Per-horizon ratio of two counters' increases over `window`."""
    return (
        f"max by (horizon) (increase({numerator}{T}[{window}]))"
        f" / max by (horizon) (increase({denominator}{T}[{window}]))"
    )


PANELS = (
    Panel(
        "Forecast vs actual",
        "Each actual against the forecast made lead time before it: median, and the band up to "
        "the target's quantile. `load now` is the latest sample.",
        "timeseries",
        "short",
        (
            Query(tq("scaler_forecast_scored_actual_load"), "actual"),
            Query(tq("scaler_forecast_scored_load", 'bound="median"'), "median forecast"),
            Query(tq("scaler_forecast_scored_load", 'bound="upper"'), "upper forecast"),
            Query(tq("scaler_load"), "load now"),
        ),
        fill_below=("upper forecast", "median forecast"),
    ),
    Panel(
        "Coverage against the nominal quantile",
        "Share of recent actuals at or under the upper forecast made lead time before; it should "
        "hover around the nominal quantile (lower: the band is too narrow, prewarm too small).",
        "timeseries",
        "percentunit",
        (
            Query(tq("scaler_forecast_coverage_ratio"), "coverage (last 12 actuals)"),
            Query(tq("scaler_forecast_quantile"), "nominal quantile"),
            Query(tq("scaler_forecast_read_quantile"), "quantile read (budget-adjusted)"),
        ),
    ),
    Panel(
        "Error by horizon (WAPE, 1h windows)",
        "Weighted absolute percentage error of the median forecast, per seconds ahead.",
        "timeseries",
        "percentunit",
        (
            Query(
                ratio("scaler_forecast_absolute_error_total", "scaler_forecast_actual_total"),
                "{{horizon}}s ahead",
            ),
        ),
    ),
    Panel(
        "Coverage by horizon (1h windows)",
        "Share of the last hour's actuals at or under the upper forecast made that many seconds "
        "before, per horizon, against the target's nominal quantile (dashed: the coverage it "
        "is calibrated for, e.g. 95 %).",
        "timeseries",
        "percentunit",
        (
            Query(
                ratio("scaler_forecast_covered_total", "scaler_forecast_scored_total"),
                "{{horizon}}s ahead",
            ),
            Query(tq("scaler_forecast_quantile"), "nominal quantile"),
        ),
        overrides=(Override("nominal quantile", (DASHED,)),),
    ),
    Panel(
        "Pinball loss by horizon (1h windows)",
        "Mean pinball loss of the upper forecast at the target's quantile over the last hour, "
        "per horizon, in the units of the trigger's query (its load): lower is better.",
        "timeseries",
        "short",
        (
            Query(
                ratio("scaler_forecast_pinball_loss_sum_total", "scaler_forecast_scored_total"),
                "{{horizon}}s ahead",
            ),
        ),
    ),
    Panel(
        "Reactive vs desired replicas",
        "What KEDA is told (desired), what the predictive decision wants (differs in shadow "
        "mode), and what a reactive autoscaler would ask for.",
        "timeseries",
        "short",
        (
            Query(tq("scaler_desired_replicas"), "desired"),
            Query(tq("scaler_predictive_desired_replicas"), "predictive"),
            Query(tq("scaler_reactive_replicas"), "reactive"),
            Query(tq("scaler_prewarm_replicas"), "prewarm"),
        ),
    ),
    Panel(
        "Prewarm spend against budget",
        "Replica-hours of prewarm spent in the budget window, against the window's budget.",
        "timeseries",
        "short",
        (
            Query(tq("scaler_prewarm_budget_spent_replica_hours"), "spent (replica-hours)"),
            Query(tq("scaler_prewarm_budget_replica_hours"), "budget (replica-hours)"),
            Query(tq("scaler_prewarm_budget_remaining_replica_hours"), "remaining (replica-hours)"),
        ),
    ),
    Panel(
        "Drift episodes and decision reason",
        "1 while the drift monitor holds the target at reactive; the reason of each decision.",
        "statetimeline",
        "short",
        (
            Query(tq("scaler_drift_fallback"), "drift fallback"),
            Query(
                f"max by (reason) (scaler_decision_reason{T}) == 1",
                "{{reason}}",
            ),
        ),
    ),
    Panel(
        "Model age and fingerprint",
        "Time since the end of the model's training data (red past 8 days; "
        "PredictiveScalerModelStale fires only when the retrain job has not succeeded for the "
        "target either: a champion the job keeps on purpose ages past it, and the retrain row "
        "says so), and the model in use: its kind, its model store version (v1, v2, ...: "
        "scaler_model_info's `store_version`; none when not stored) and its fingerprint (the "
        "`version` label, the decision log's model_version: a hash of the fitted model and its "
        "training data), which is not the store's version number.",
        "stat",
        "s",
        (
            Query(f"time() - {tq('scaler_model_trained_until_timestamp_seconds')}", "age"),
            Query(
                f"max by (model, store_version, version) (scaler_model_info{T})",
                "{{model}} {{store_version}}, fingerprint {{version}}",
            ),
        ),
        width=8,
        overrides=(
            Override(
                "{{model}} {{store_version}}, fingerprint {{version}}",
                (
                    ("unit", "none"),
                    ("mappings", [{"type": "value", "options": {"1": {"text": "in use"}}}]),
                    ("color", {"mode": "fixed", "fixedColor": "text"}),
                ),
            ),
        ),
        thresholds=((None, "green"), (EIGHT_DAYS, "red")),
    ),
    Panel(
        "GPU spend this month",
        "The target's ScaledObject, every trigger it had this month (edits too): month to date "
        "(recording rule), the projected month end, and the monthly budget. Money is in the "
        "target's `currency` trigger key (USD unless set), shown in each legend: the axis "
        "carries no currency sign, since targets differ.",
        "timeseries",
        "short",
        (
            Query(so("scaledobject:scaler_gpu_cost:month_to_date"), "month to date ({{currency}})"),
            Query(
                so("scaledobject:scaler_gpu_cost:projected_month_end"),
                "projected month end ({{currency}})",
            ),
            Query(
                so("scaledobject:scaler_monthly_budget_cost:max"), "monthly budget ({{currency}})"
            ),
        ),
        width=8,
    ),
    Panel(
        "GPU replicas paid for",
        "Replicas answered to KEDA, as replica-hours per hour (GPU use), and their cost per hour.",
        "timeseries",
        "short",
        (
            Query(f"3600 * max(rate(scaler_gpu_replica_hours_total{T}[5m]))", "replicas"),
            Query(f"3600 * max(rate(scaler_gpu_cost_total{T}[5m]))", "cost per hour"),
        ),
        width=8,
    ),
    Panel(
        "Since the last retrain success",
        "Time since the weekly retrain job (`scaler retrain`) last retrained this target, as "
        "the model store records it (the scaler reads it every --store-poll). Red past 8 days: "
        "PredictiveScalerRetrainOverdue; a run that exits before it reaches the store records "
        "nothing, so this is where a broken CronJob shows. `never`: the job has not succeeded "
        "for it, or the scaler runs without --store.",
        "stat",
        "s",
        (Query(f"time() - max(scaler_retrain_last_success_timestamp_seconds{T} > 0)", "success"),),
        thresholds=((None, "green"), (EIGHT_DAYS, "red")),
        no_value="never",
    ),
    Panel(
        "Since the last retrain failure",
        "Time since the retrain job last failed for this target (the summary in the Job's log "
        "says why). Newer than the last success: PredictiveScalerRetrainFailed, and the "
        "scaler keeps serving the previous model. `never`: no failure recorded.",
        "stat",
        "s",
        (Query(f"time() - max(scaler_retrain_last_failure_timestamp_seconds{T} > 0)", "failure"),),
        thresholds=((None, "text"),),
        no_value="never",
    ),
)
