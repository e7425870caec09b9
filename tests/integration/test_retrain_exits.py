"""`scaler retrain`'s exit status when it cannot start, or its store goes out of reach mid-run,
as the CronJob's podFailurePolicy reads it: 2 is a bad setting, which fails the Job at once (a
retry gives the same answer), 3 an API server or model store that could not be reached or
answered 5xx, which the Job retries. Nothing is fitted either way. The Kubernetes API is the
HTTP emulator, spoken to by the official client; Prometheus is the real one."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaler import cli, errors
from scaler.store.directory import DirectoryStore
from tests.integration.kube_api import KubeAPI, scaled_object
from tests.integration.prometheus_server import PrometheusServer

FROM_CLUSTER = ["--scaler-address", "scaler.keda.svc:9000"]


def retrain(
    kubeconfig: Path,
    store: str,
    *,
    prometheus: str = "http://127.0.0.1:1",
    retry: tuple[str, ...] = ("--retry-unreachable", "0s"),
) -> int:
    argv = ["retrain", "--store", store, *FROM_CLUSTER, "--kubeconfig", str(kubeconfig)]
    return cli.main([*argv, "--prometheus-url", prometheus, "--workers", "0", *retry])


@pytest.mark.parametrize(("code", "exit_status"), [(503, 3), (429, 3), (403, 2)])
def test_listing_the_scaled_objects_fails_as_retryable_or_not_by_the_answer(
    kube_api: KubeAPI,
    tmp_path: Path,
    code: int,
    exit_status: int,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = tmp_path / "models"
    store.mkdir()
    kube_api.fail_next("GET", "scaledobjects", code)
    assert retrain(kube_api.kubeconfig(tmp_path / "kubeconfig"), str(store)) == exit_status
    assert f"list scaledobjects in all namespaces: {code}" in capsys.readouterr().err
    assert DirectoryStore(store).statuses() == {}


@pytest.mark.parametrize(("code", "exit_status"), [(500, 3), (403, 2)])
def test_a_configmap_store_that_fails_its_first_read_stops_the_run_before_any_fit(
    kube_api: KubeAPI,
    tmp_path: Path,
    code: int,
    exit_status: int,
    capsys: pytest.CaptureFixture[str],
) -> None:
    kube_api.fail_next("GET", "configmaps", code)
    assert retrain(kube_api.kubeconfig(tmp_path / "kubeconfig"), "configmap:keda") == exit_status
    err = capsys.readouterr().err
    assert "--store configmap:keda: cannot" in err
    assert ("retry later" in err) == (exit_status == 3)
    assert kube_api.requests("GET", "scaledobjects") == []  # stopped before the targets
    assert kube_api.requests("POST") == []  # nothing recorded


def test_an_api_server_that_is_gone_exits_3(tmp_path: Path) -> None:
    """The ScaledObjects' listing; a ConfigMap store's is test_retrain_parts'."""
    with KubeAPI() as gone:
        kubeconfig = gone.kubeconfig(tmp_path / "kubeconfig")
    store = tmp_path / "models"
    store.mkdir()
    assert retrain(kubeconfig, str(store)) == errors.UNREACHABLE_EXIT == 3


def test_a_configmap_store_gone_mid_run_for_every_target_exits_3_not_a_verdict(
    prometheus_server: PrometheusServer,
    kube_api: KubeAPI,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The store answers the start-up check, then 503s every champion read (the API server
    restarting mid-run): each target's history was read, nothing fitted. That exited 1, which
    the Job takes as a verdict and never retries: the fleet kept last week's models."""
    selector = prometheus_server.traces["nasa_http_5min"].selector
    for name in ("api", "chat"):
        kube_api.add(scaled_object("web", name, address=FROM_CLUSTER[1], query=selector))
    kube_api.fail_next("GET", "/configmaps/scaler-model-", 503, count=1000)  # reads by name
    code = retrain(tmp_path / "kubeconfig", "configmap:keda", prometheus=prometheus_server.url)
    assert code == errors.UNREACHABLE_EXIT
    err = capsys.readouterr().err
    assert err.count("retrain failed: ") == 2 and "503" in err
    assert "Prometheus or the model store could not be reached for any; exit 3" in err
    assert kube_api.requests("POST") == []  # nothing stored, and no outcome could be recorded


def test_a_store_that_answers_503_for_a_while_is_waited_for_and_the_week_is_not_lost(
    prometheus_server: PrometheusServer,
    kube_api: KubeAPI,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An API server restarting at the CronJob's hour: the start-up check and then a champion
    read get 503. The job exited 3 at once, and the Job's one retry came 10 s later, inside the
    restart: the week was lost. Now both are tried again within --retry-unreachable."""
    selector = prometheus_server.traces["nasa_http_5min"].selector
    obj = scaled_object("web", "api", address=FROM_CLUSTER[1], query=selector)
    obj["spec"]["triggers"][0]["metadata"]["model"] = "seasonal"
    kube_api.add(obj)
    kube_api.fail_next("GET", "/configmaps?", 503)  # the start-up check lists the store
    kube_api.fail_next("GET", "/configmaps/scaler-model-", 503)  # the champion read
    code = retrain(
        tmp_path / "kubeconfig",
        "configmap:keda",
        prometheus=prometheus_server.url,
        retry=("--retry-unreachable", "2s"),
    )
    err = capsys.readouterr().err
    assert code == 0, err
    assert "--store configmap:keda: " in err and "trying again in 2s" in err
    assert "1 of 1 targets could not reach Prometheus or the model store" in err
    (version,) = [
        cm for cm in kube_api.objects("v1", "configmaps", "keda") if cm["data"].get("version")
    ]
    assert version["data"]["version"] == "1"  # promoted on the second try
