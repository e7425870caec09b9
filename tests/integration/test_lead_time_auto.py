"""`leadTime: auto` against a real Prometheus backfilled with kube-state-metrics series of pods
that started with known cold starts: learned through podSelector, the default with too little
evidence, the Ready-condition fallback, and the value and its source in the decision log and
in /metrics of a running scaler."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import grpc
import numpy as np
import pytest

from scaler._pb import externalscaler_pb2 as pb
from scaler._pb import externalscaler_pb2_grpc as pb_grpc
from scaler.decision import spec
from scaler.kube import api, selectors
from scaler.serving import leadtime
from scaler.settings import PrometheusSettings
from scaler.sources.prometheus import PrometheusSource
from tests.integration.kube_api import KubeAPI
from tests.integration.prometheus_server import CounterSeries, PrometheusServer
from tests.integration.scaler_server import RunningScaler, eventually, fast_settings

pytestmark = pytest.mark.prometheus

NOW = time.time()
SCRAPE = 60.0
RNG = np.random.default_rng(8)
LLM_STARTS = RNG.uniform(240.0, 900.0, size=24).round()
"""Cold starts of the target's pods: what a GPU model server takes, 4 to 15 minutes."""


def pod(namespace: str, name: str, app: str, *, created: float, cold: float, ready_time: bool):
    """The kube-state-metrics series of one pod, alive for two hours from `created`."""
    times = np.arange(created, min(created + 7200.0, NOW), SCRAPE)
    ready_at = created + cold
    ids = {"namespace": namespace, "pod": name}
    series = [
        CounterSeries("kube_pod_created", ids, times, np.full(times.size, created), "gauge"),
        CounterSeries(
            "kube_pod_labels", {**ids, "label_app": app}, times, np.ones(times.size), "gauge"
        ),
    ]
    if ready_time:
        after = times[times >= ready_at]
        series.append(
            CounterSeries(
                "kube_pod_status_ready_time", ids, after, np.full(after.size, ready_at), "gauge"
            )
        )
    else:
        ready = {**ids, "condition": "true"}
        flags = (times >= ready_at).astype(float)
        series.append(CounterSeries("kube_pod_status_ready", ready, times, flags, "gauge"))
    return series


def fleet() -> list[CounterSeries]:
    found: list[CounterSeries] = []
    for i, cold in enumerate(LLM_STARTS):
        created = NOW - (i + 1) * 3 * 3600.0
        found += pod("gpu", f"llm-{i}", "llm-serve", created=created, cold=cold, ready_time=True)
    for i in range(12):  # another app in the same namespace, much slower: not the target's
        created = NOW - (i + 1) * 5 * 3600.0
        found += pod("gpu", f"batch-{i}", "batch", created=created, cold=3000.0, ready_time=True)
    # A pod of the target that lived before the last week: outside the window.
    found += pod("gpu", "llm-old", "llm-serve", created=NOW - 9 * 86400, cold=5000, ready_time=True)
    for i in range(3):
        created = NOW - (i + 1) * 3 * 3600.0
        found += pod("sparse", f"tiny-{i}", "tiny", created=created, cold=120.0, ready_time=True)
    for i, cold in enumerate(LLM_STARTS[:12]):
        created = NOW - (i + 1) * 3 * 3600.0
        found += pod("legacy", f"old-{i}", "llm", created=created, cold=cold, ready_time=False)
    return found


@pytest.fixture(scope="module")
def ksm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    server = PrometheusServer(tmp_path_factory.mktemp("ksm"), traces=[], counters=fleet())
    server.start()
    try:
        yield server
    finally:
        server.stop()


def target(namespace: str = "gpu", **meta: str) -> spec.TargetSpec:
    return spec.parse(
        namespace, "llm-serve", {"query": "vector(5)", "threshold": "1", "leadTime": "auto", **meta}
    )


def p90(values: np.ndarray) -> float:
    return float(np.percentile(values, 90, method="inverted_cdf"))


def test_the_lead_time_is_the_p90_of_the_selected_pods_cold_starts(ksm: PrometheusServer) -> None:
    found = leadtime.learn(PrometheusSource(ksm.url), target(podSelector="app=llm-serve"), at=NOW)
    assert found.learned, found.source
    assert found.starts == LLM_STARTS.size  # neither the batch pods nor last month's pod
    assert found.seconds == p90(LLM_STARTS)
    assert "kube_pod_status_ready_time" in found.source


def test_a_selector_matching_another_app_learns_that_apps_cold_start(
    ksm: PrometheusServer,
) -> None:
    found = leadtime.learn(PrometheusSource(ksm.url), target(podSelector="app in (batch)"), at=NOW)
    assert (found.seconds, found.starts) == (3000.0, 12)


def test_too_few_pod_starts_keep_the_default_and_say_why(ksm: PrometheusServer) -> None:
    found = leadtime.learn(
        PrometheusSource(ksm.url), target("sparse", podSelector="app=tiny"), at=NOW
    )
    assert not found.learned
    assert found.seconds == leadtime.DEFAULT
    assert "3 pod starts" in found.source and f"at least {leadtime.MIN_STARTS}" in found.source


def test_without_ready_time_the_ready_condition_transition_is_used(ksm: PrometheusServer) -> None:
    found = leadtime.learn(
        PrometheusSource(ksm.url), target("legacy", podSelector="app=llm"), at=NOW
    )
    assert found.learned and 'condition="true"' in found.source
    # Seen ready at the first scrape after the transition, read on the subquery's 1-minute grid:
    # up to one scrape plus one minute late.
    assert p90(LLM_STARTS[:12]) <= found.seconds <= p90(LLM_STARTS[:12]) + SCRAPE + 60.0


def test_without_a_pod_selector_the_default_names_the_key(ksm: PrometheusServer) -> None:
    found = leadtime.learn(PrometheusSource(ksm.url), target(), at=NOW)
    assert (found.seconds, found.learned) == (leadtime.DEFAULT, False)
    assert "podSelector" in found.source


def test_a_running_scaler_decides_with_the_learned_lead_time_and_records_it(
    ksm: PrometheusServer, tmp_path: Path
) -> None:
    log = tmp_path / "decisions.jsonl"
    settings = replace(
        fast_settings("prometheus"),
        prometheus=PrometheusSettings(url=ksm.url),
        ledger_source="none",
        decision_log=log,
    )
    meta = {
        "query": "vector(5)",
        "threshold": "1",
        "leadTime": "auto",
        "podSelector": "app=llm-serve",
    }
    ref = pb.ScaledObjectRef(name="llm-serve", namespace="gpu", scalerMetadata=meta)
    with RunningScaler(settings) as scaler:
        with grpc.insecure_channel(scaler.address) as channel:
            stub = pb_grpc.ExternalScalerStub(channel)
            request = pb.GetMetricsRequest(scaledObjectRef=ref, metricName="m")
            eventually(lambda: stub.GetMetrics(request), timeout=30)
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{scaler.http_port}/metrics").read()
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert records and all(r["lead_time"] == p90(LLM_STARTS) for r in records)
    assert all(r["lead_time_source"].startswith("learned: P90 of 24") for r in records)
    assert records[0]["lookahead"] == p90(LLM_STARTS) + 900.0
    text = metrics.decode()
    assert f'scaler_lead_time_seconds{{target="{records[0]["target"]}"}} {p90(LLM_STARTS)}' in text
    assert f'scaler_lead_time_learned{{target="{records[0]["target"]}"}} 1.0' in text


def scaled_object(name: str, target: dict[str, str]) -> dict[str, object]:
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": name, "namespace": "gpu"},
        "spec": {"scaleTargetRef": target, "triggers": []},
    }


def test_without_pod_selector_the_scale_targets_selector_comes_from_the_kubernetes_api(
    ksm: PrometheusServer, kube_api: KubeAPI, tmp_path: Path
) -> None:
    kube_api.add(scaled_object("llm-serve", {"name": "llm-serve"}))
    kube_api.add(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "llm-serve", "namespace": "gpu"},
            "spec": {
                "selector": {
                    "matchLabels": {"app": "llm-serve"},
                    "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}],
                },
                "template": {
                    "metadata": {"labels": {"app": "llm-serve"}},
                    "spec": {"containers": [{"name": "server", "image": "vllm"}]},
                },
            },
        }
    )
    found_selectors = selectors.PodSelectors(api.connect(tmp_path / "kubeconfig"))
    assert found_selectors.pod_selector("gpu", "llm-serve") == "app=llm-serve,!tier"
    found = leadtime.learn(
        PrometheusSource(ksm.url), target(), at=NOW, selectors=found_selectors.pod_selector
    )
    assert found.learned and found.seconds == p90(LLM_STARTS)


def test_a_scale_target_the_api_cannot_resolve_keeps_the_default_and_says_why(
    ksm: PrometheusServer, kube_api: KubeAPI, tmp_path: Path
) -> None:
    kube_api.add(scaled_object("llm-serve", {"name": "gone"}))  # no such Deployment
    found_selectors = selectors.PodSelectors(api.connect(tmp_path / "kubeconfig"))
    found = leadtime.learn(
        PrometheusSource(ksm.url), target(), at=NOW, selectors=found_selectors.pod_selector
    )
    assert (found.seconds, found.learned) == (leadtime.DEFAULT, False)
    assert "scaleTargetRef" in found.source
