"""Generate the monitoring artefacts from their one source each:

- deploy/monitoring/dashboard.json: the Grafana dashboard (forecast accuracy and cost), built
  with grafana-foundation-sdk, Grafana Labs' typed builder (a dev dependency: only this script
  imports it). `PANELS` holds every query, so the tests can run each one against Prometheus.
- deploy/monitoring/prometheusrule.yaml: deploy/prometheus/rules.yaml's groups as a
  prometheus-operator PrometheusRule.

    .venv/bin/python -m bench.monitoring          # rewrite both
    .venv/bin/python -m bench.monitoring --check  # exit 1 if either is stale

The ConfigMap for Grafana's dashboard sidecar is made by deploy/monitoring/kustomization.yaml
(configMapGenerator) from the JSON file itself.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from grafana_foundation_sdk.builders import common as common_builder
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import prometheus, stat, statetimeline, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models.dashboard import (
    DataSourceRef,
    DynamicConfigValue,
    GridPos,
    VariableRefresh,
    VariableSort,
)

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "deploy" / "monitoring" / "dashboard.json"
RULES = ROOT / "deploy" / "prometheus" / "rules.yaml"
PROMETHEUS_RULE = ROOT / "deploy" / "monitoring" / "prometheusrule.yaml"
UID = "predictive-scaler"
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
T = '{target="$target"}'
"""The selector every panel narrows to the chosen target with."""


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str


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


def tq(metric: str, extra: str = "") -> str:
    """`metric` of the chosen target (plus `extra` matchers), the max across scaler pods."""
    selector = f'{{target="$target"{"," + extra if extra else ""}}}'
    return f"max({metric}{selector})"


def so(metric: str) -> str:
    """`metric` recorded per ScaledObject (namespace, name), for the chosen target's."""
    owner = 'max by (namespace, name) (scaler_target_info{target="$target"})'
    return f"max({metric} * on (namespace, name) group_left () {owner})"


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
        "Coverage and pinball loss by horizon (1h windows)",
        "Coverage of the upper forecast per horizon, and the mean pinball loss at the quantile.",
        "timeseries",
        "short",
        (
            Query(
                ratio("scaler_forecast_covered_total", "scaler_forecast_scored_total"),
                "coverage {{horizon}}s",
            ),
            Query(
                ratio("scaler_forecast_pinball_loss_sum_total", "scaler_forecast_scored_total"),
                "pinball {{horizon}}s",
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
        "Model age",
        "Time since the end of the model's training data (alert past 8 days), and its version.",
        "stat",
        "s",
        (
            Query(f"time() - {tq('scaler_model_trained_until_timestamp_seconds')}", "age"),
            Query(f"max by (model, version) (scaler_model_info{T})", "{{model}} {{version}}"),
        ),
        width=8,
    ),
    Panel(
        "GPU spend this month",
        "The target's ScaledObject, every trigger it had this month (edits too): month to date "
        "(recording rule), the projected month end, and the monthly budget, in its currency.",
        "timeseries",
        "currencyUSD",
        (
            Query(so("scaledobject:scaler_gpu_cost:month_to_date"), "month to date"),
            Query(so("scaledobject:scaler_gpu_cost:projected_month_end"), "projected month end"),
            Query(so("scaledobject:scaler_monthly_budget_cost:max"), "monthly budget"),
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
)


def _panel(panel: Panel, x: int, y: int) -> Any:
    kinds: dict[str, Callable[[], Any]] = {
        "timeseries": timeseries.Panel,
        "stat": stat.Panel,
        "statetimeline": statetimeline.Panel,
    }
    builder = kinds[panel.kind]()
    builder = (
        builder.title(panel.title)
        .description(panel.description)
        .datasource(DATASOURCE)
        .unit(panel.unit)
        .grid_pos(_grid(panel.width, x, y))
    )
    for i, query in enumerate(panel.queries):
        builder = builder.with_target(
            prometheus.Dataquery()
            .expr(query.expr)
            .legend_format(query.legend)
            .ref_id(chr(ord("A") + i))
            .datasource(DATASOURCE)
        )
    if panel.kind == "timeseries":
        builder = builder.legend(
            common_builder.VizLegendOptions()
            .display_mode(common.LegendDisplayMode.LIST)
            .placement(common.LegendPlacement.BOTTOM)
            .show_legend(True)
        )
    if panel.fill_below is not None:
        top, bottom = panel.fill_below
        builder = builder.override_by_name(
            top,
            [
                DynamicConfigValue(id_val="custom.fillBelowTo", value=bottom),
                DynamicConfigValue(id_val="custom.fillOpacity", value=20),
            ],
        )
    return builder


def _grid(width: int, x: int, y: int) -> GridPos:
    return GridPos(h=8, w=width, x=x, y=y)


def dashboard() -> dict[str, Any]:
    """The dashboard as JSON-ready data."""
    target = (
        dash.QueryVariable("target")
        .label("target")
        .description("namespace/name#trigger of a target the scaler serves")
        .datasource(DATASOURCE)
        .query("label_values(scaler_target_info, target)")
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(VariableSort.ALPHABETICAL_ASC)
    )
    datasource = dash.DatasourceVariable("datasource").label("Prometheus").type("prometheus")
    builder = (
        dash.Dashboard("Predictive scaler: forecast accuracy and cost")
        .uid(UID)
        .tags(["keda", "autoscaling", "gpu", "finops"])
        .description(
            "Forecast accuracy, replicas, prewarm budget, drift, model age and GPU spend per "
            "target of the predictive KEDA scaler. Generated by bench/monitoring.py."
        )
        .time("now-24h", "now")
        .refresh("1m")
        .timezone("utc")
        .with_variable(datasource)
        .with_variable(target)
    )
    x = y = 0
    for panel in PANELS:
        if x + panel.width > 24:
            x, y = 0, y + 8
        builder = builder.with_panel(_panel(panel, x, y))
        x += panel.width
    data: dict[str, Any] = json.loads(json.dumps(builder.build(), cls=JSONEncoder))
    return data


def dashboard_text() -> str:
    return json.dumps(dashboard(), indent=2, sort_keys=True) + "\n"


def prometheus_rule_text() -> str:
    """rules.yaml's groups wrapped in a PrometheusRule."""
    groups = yaml.safe_load(RULES.read_text())["groups"]
    rule = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "predictive-scaler",
            "labels": {
                "app.kubernetes.io/name": "predictive-scaler",
                "app.kubernetes.io/component": "keda-external-scaler",
            },
        },
        "spec": {"groups": groups},
    }
    header = (
        "# GENERATED from deploy/prometheus/rules.yaml by `python -m bench.monitoring`; edit that\n"
        "# file, not this one. REQUIRES prometheus-operator (monitoring.coreos.com/v1). Your\n"
        "# Prometheus may only select PrometheusRules carrying a label such as `release: <name>`.\n"
    )
    return header + yaml.dump(rule, Dumper=_LiteralDumper, sort_keys=False, width=100)


class _LiteralDumper(yaml.SafeDumper):
    """Multi-line strings (the PromQL blocks) as `|` literals, as rules.yaml writes them."""


def _str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_LiteralDumper.add_representer(str, _str)


OUTPUTS = {DASHBOARD: dashboard_text, PROMETHEUS_RULE: prometheus_rule_text}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if an output is stale")
    args = parser.parse_args(argv)
    stale = []
    for path, make in OUTPUTS.items():
        text = make()
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path.relative_to(ROOT)))
        else:
            path.write_text(text)
    if stale:
        print(f"stale: {', '.join(stale)}; run `python -m bench.monitoring`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
