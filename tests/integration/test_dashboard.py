"""The Grafana dashboard: the committed JSON (and PrometheusRule) are what bench/monitoring.py
generates, every panel reads only metrics the scaler exports or rules.yaml records, and every
panel's query returns data from a real Prometheus that scrapes a live scaler and evaluates
deploy/prometheus/rules.yaml.

The scaler replays the bundled trace 300 times faster than the wall clock (forecasts meet their
actuals within seconds), from a directory model store holding a retrain success and failure for
its target; Prometheus scrapes it and evaluates the rules every second.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from prometheus_client import CollectorRegistry

from bench import monitoring
from scaler._pb import externalscaler_pb2 as pb
from scaler._pb import externalscaler_pb2_grpc as pb_grpc
from scaler.clock import ReplayClock
from scaler.serving.telemetry import Telemetry
from scaler.sources.file import bundled_trace
from scaler.store.base import StoreKey
from scaler.store.directory import DirectoryStore
from tests.integration.prometheus_server import PrometheusServer
from tests.integration.scaler_server import RunningScaler, eventually, fast_settings, ref

SPEED = 300.0
TARGET = ref(
    name="llm-serve",
    threshold="60",
    costPerReplicaHour="4.10",
    monthlyBudget="15000",
    prewarmBudget="100",
    leadTime="10m",
)
CONFIG = """\
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [rules.yaml]
scrape_configs:
  - job_name: predictive-scaler
    static_configs:
      - targets: ["127.0.0.1:{port}"]
"""


def test_the_committed_dashboard_and_prometheus_rule_are_the_generators_output() -> None:
    assert monitoring.main(["--check"]) == 0, "run `.venv/bin/python -m bench.monitoring`"


def test_the_dashboard_has_a_target_variable_and_every_panel_asked_for() -> None:
    data = json.loads(monitoring.DASHBOARD.read_text())
    variables = {v["name"]: v for v in data["templating"]["list"]}
    assert variables["target"]["query"] == "label_values(scaler_target_info, target)"
    titles = " | ".join(p["title"].lower() for p in data["panels"])
    for wanted in (
        "forecast vs actual",
        "coverage against the nominal quantile",
        "error by horizon",
        "reactive vs desired",
        "prewarm spend against budget",
        "drift episodes",
        "model age",
        "gpu spend",
        "coverage by horizon",
        "pinball loss by horizon",
        "since the last retrain success",
        "since the last retrain failure",
    ):
        assert wanted in titles
    queries = [t["expr"] for p in data["panels"] for t in p["targets"]]
    assert queries == [q.expr for p in monitoring.PANELS for q in p.queries]


def exported_metrics() -> set[str]:
    """Every sample name the scaler's /metrics can carry."""
    registry = CollectorRegistry()
    Telemetry(registry)
    suffixes = ("", "_total", "_count", "_sum", "_bucket")
    return {metric.name + suffix for metric in registry.collect() for suffix in suffixes}


def test_every_panel_reads_metrics_the_scaler_exports_or_the_rules_record() -> None:
    recorded = {
        rule["record"]
        for group in yaml.safe_load(monitoring.RULES.read_text())["groups"]
        for rule in group["rules"]
        if "record" in rule
    }
    exported = exported_metrics()
    for panel in monitoring.PANELS:
        for q in panel.queries:
            names = set(re.findall(r"\b[a-z_]+(?::[a-z0-9_]+)+|\bscaler_[a-z_]+", q.expr))
            assert names, f"{panel.title}: {q.expr} reads no metric"
            unknown = {n for n in names if n not in exported and n not in recorded}
            assert not unknown, f"{panel.title}: {q.expr} reads {unknown}"


def panel(title: str) -> dict[str, Any]:
    data = json.loads(monitoring.DASHBOARD.read_text())
    (found,) = [p for p in data["panels"] if p["title"] == title]
    return found


def test_ratios_and_losses_get_panels_of_their_own_units() -> None:
    """Coverage (0-1) and pinball loss (load units, ~60) on one axis flattened coverage to a
    line at zero."""
    for p in json.loads(monitoring.DASHBOARD.read_text())["panels"]:
        exprs = " ".join(t["expr"] for t in p["targets"])
        assert not ("pinball" in exprs and ("covered" in exprs or "coverage" in exprs)), p["title"]
    coverage = panel("Coverage by horizon (1h windows)")
    assert coverage["fieldConfig"]["defaults"]["unit"] == "percentunit"
    legends = [t["legendFormat"] for t in coverage["targets"]]
    assert "nominal quantile" in legends  # the coverage it should reach, drawn dashed
    (dashed,) = coverage["fieldConfig"]["overrides"]
    assert dashed["matcher"]["options"] == "B" and legends[1] == "nominal quantile"


def test_money_is_labelled_with_the_targets_currency_not_a_dollar_sign() -> None:
    spend = panel("GPU spend this month")
    assert "currency" not in spend["fieldConfig"]["defaults"]["unit"]
    assert all("{{currency}}" in t["legendFormat"] for t in spend["targets"])
    assert all("currency" in t["expr"] for t in spend["targets"])


def test_the_model_panel_calls_the_version_label_a_fingerprint() -> None:
    """scaler_model_info's `version` is a hash of the fitted model; the store's vN is
    `store_version`, kept by the panel's aggregation so that its legend can name it."""
    model = panel("Model age and fingerprint")
    (info,) = [t for t in model["targets"] if "scaler_model_info" in t["expr"]]
    assert info["legendFormat"] == "{{model}} {{store_version}}, fingerprint {{version}}"
    assert info["expr"].startswith("max by (model, store_version, version) (")
    assert "not the store's version number" in model["description"]


def test_the_retrain_panels_turn_red_when_the_overdue_alert_fires() -> None:
    groups = yaml.safe_load(monitoring.RULES.read_text())["groups"]
    alerts = {r["alert"]: r["expr"] for g in groups for r in g["rules"] if "alert" in r}
    overdue = " ".join(alerts["PredictiveScalerRetrainOverdue"].split())
    assert overdue.endswith("(scaler_retrain_last_success_timestamp_seconds > 0) > 8 * 86400")
    success = panel("Since the last retrain success")
    steps = success["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert steps[-1] == {"color": "red", "value": 8 * 86400}
    assert success["fieldConfig"]["defaults"]["noValue"] == "never"


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PrometheusServer, str]]:
    """(Prometheus, target key) once Prometheus holds scored forecasts and month-to-date spend."""
    settings = fast_settings(f"file:{bundled_trace()}")
    settings = replace(settings, engine=replace(settings.engine, step=60.0, idle_expiry=1e7))
    store = tmp_path_factory.mktemp("store")
    settings = replace(settings, store=str(store), store_poll=0.5)
    workdir = tmp_path_factory.mktemp("prometheus")
    shutil.copy(monitoring.RULES, workdir / "rules.yaml")
    clock = ReplayClock(start=time.time(), speed=SPEED)
    with RunningScaler(settings, clock=clock) as scaler:
        with grpc.insecure_channel(scaler.address) as channel:
            stub = pb_grpc.ExternalScalerStub(channel)
            stub.GetMetricSpec(TARGET)
            request = pb.GetMetricsRequest(scaledObjectRef=TARGET, metricName="m")
            eventually(lambda: stub.GetMetrics(request), timeout=60)
        assert scaler.engine is not None
        key = next(iter(scaler.engine.targets))
        # What `scaler retrain` records: a success a week ago, a failure a day ago.
        models = DirectoryStore(store)
        store_key = StoreKey.of(scaler.engine.targets[key].spec)
        models.record_retrain(store_key, ok=True, at=time.time() - 7 * 86400, reason="kept v1")
        models.record_retrain(store_key, ok=False, at=time.time() - 86400, reason="no data")
        server = PrometheusServer(workdir, [], config=CONFIG.format(port=scaler.http_port))
        with server:
            ready = "scaledobject:scaler_gpu_cost:projected_month_end"
            scored = f'increase(scaler_forecast_scored_total{{target="{key}"}}[1h]) > 0'
            retrain = "scaler_retrain_last_failure_timestamp_seconds"
            deadline = time.monotonic() + 120
            while not (query(server, ready) and query(server, scored) and query(server, retrain)):
                assert time.monotonic() < deadline, "Prometheus never held the scaler's figures"
                time.sleep(0.5)
            yield server, key


def query(server: PrometheusServer, promql: str) -> list[dict[str, Any]]:
    url = f"{server.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as reply:
        body = json.loads(reply.read())
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def substituted(expr: str, target: str) -> str:
    assert "$" not in expr.replace("$target", ""), f"unknown variable in {expr}"
    return expr.replace("$target", target)


PANEL_QUERIES = [
    pytest.param(panel.title, q.expr, id=f"{panel.title}: {q.legend}")
    for panel in monitoring.PANELS
    for q in panel.queries
]


@pytest.mark.parametrize(("title", "expr"), PANEL_QUERIES)
def test_every_panel_query_returns_data_from_prometheus_scraping_a_live_scaler(
    scraped: tuple[PrometheusServer, str], title: str, expr: str
) -> None:
    server, key = scraped
    result = query(server, substituted(expr, key))
    values = [float(r["value"][1]) for r in result]
    assert any(math.isfinite(v) for v in values), f"{title}: {expr} returned {result}"


def test_the_target_variable_lists_the_live_target(
    scraped: tuple[PrometheusServer, str],
) -> None:
    server, key = scraped
    url = f"{server.url}/api/v1/label/target/values?match[]=scaler_target_info"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as reply:
        assert key in json.loads(reply.read())["data"]


def test_a_query_for_a_target_nobody_serves_returns_nothing(
    scraped: tuple[PrometheusServer, str],
) -> None:
    server, _ = scraped  # the check above can fail: a query that ignores $target would not
    expr = monitoring.PANELS[0].queries[0].expr
    assert query(server, substituted(expr, "nobody/nothing#00000000")) == []


def test_the_dashboard_file_is_small_enough_for_a_config_map() -> None:
    assert Path(monitoring.DASHBOARD).stat().st_size < 256 * 1024  # kubectl apply's annotation
