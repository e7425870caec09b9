"""Generate the monitoring artefacts from their one source each:

- deploy/monitoring/dashboard.json: the Grafana dashboard (forecast accuracy and cost), built
  with grafana-foundation-sdk, Grafana Labs' typed builder (a dev dependency: only this script
  imports it) from `PANELS` (bench/monitoring_panels.py), which holds every query, so the
  tests can run each one against Prometheus.
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
    Threshold,
    ThresholdsMode,
    VariableRefresh,
    VariableSort,
)

# bench's scripts import each other by bare name (mypy checks them so); appended, so that it
# shadows nothing for a test that imports bench.monitoring.
sys.path.append(str(Path(__file__).resolve().parent))
from monitoring_panels import PANELS, Panel

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "deploy" / "monitoring" / "dashboard.json"
RULES = ROOT / "deploy" / "prometheus" / "rules.yaml"
PROMETHEUS_RULE = ROOT / "deploy" / "monitoring" / "prometheusrule.yaml"
UID = "predictive-scaler"
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")


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
    legends = [query.legend for query in panel.queries]
    for override in panel.overrides:
        ref = chr(ord("A") + legends.index(override.legend))
        settings = [DynamicConfigValue(id_val=key, value=value) for key, value in override.settings]
        builder = builder.override_by_query(ref, settings)
    if panel.thresholds:
        steps = [Threshold(value=value, color=color) for value, color in panel.thresholds]
        config = dash.ThresholdsConfig().mode(ThresholdsMode.ABSOLUTE).steps(steps)
        builder = builder.thresholds(config)
    if panel.no_value is not None:
        builder = builder.no_value(panel.no_value)
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
