"""The Kubernetes API emulator answers the official client as a real API server would: the
adapters in scaler/kube/ and the raw client, through a generated kubeconfig."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from kubernetes import client

from scaler.errors import ConfigError
from scaler.kube import api
from scaler.kube.configmaps import ConfigMap, ConfigMaps
from scaler.kube.scaledobjects import ScaledObjects
from tests.integration.kube_api import KubeAPI, scaled_object


def connected(tmp_path: Path) -> client.ApiClient:
    return api.connect(tmp_path / "kubeconfig")


def test_configmaps_are_created_read_and_replaced_with_bytes_intact(
    kube_api: KubeAPI, tmp_path: Path
) -> None:
    maps = ConfigMaps(connected(tmp_path), "gpu")
    blob = bytes(range(256)) * 10
    made = maps.create(ConfigMap("m", data={"a": "1"}, binary_data={"b": blob}, labels={"x": "y"}))
    got = maps.get("m")
    assert got is not None and got.binary_data["b"] == blob and got.data == {"a": "1"}
    done = maps.replace(ConfigMap("m", data={"a": "2"}, resource_version=made.resource_version))
    assert done.resource_version != made.resource_version
    assert kube_api.get("v1", "configmaps", "gpu", "m")["data"] == {"a": "2"}
    assert [cm.name for cm in maps.list("x")] == []  # replace dropped the labels
    assert maps.get("absent") is None


def test_a_replace_on_a_stale_resource_version_is_a_409_conflict(
    kube_api: KubeAPI, tmp_path: Path
) -> None:
    maps = ConfigMaps(connected(tmp_path), "gpu")
    first = maps.create(ConfigMap("m", data={"v": "1"}))
    maps.replace(ConfigMap("m", data={"v": "2"}, resource_version=first.resource_version))
    with pytest.raises(api.Conflict, match="409 Conflict"):
        maps.replace(ConfigMap("m", data={"v": "3"}, resource_version=first.resource_version))
    with pytest.raises(api.Conflict, match="AlreadyExists"):
        maps.create(ConfigMap("m"))


def test_list_by_label_selects_only_matching_configmaps(kube_api: KubeAPI, tmp_path: Path) -> None:
    maps = ConfigMaps(connected(tmp_path), "gpu")
    maps.create(ConfigMap("a", labels={"role": "model", "key": "k1"}))
    maps.create(ConfigMap("b", labels={"role": "model", "key": "k2"}))
    maps.create(ConfigMap("c", labels={"role": "other"}))
    assert [cm.name for cm in maps.list("role=model,key=k2")] == ["b"]
    maps.delete("b")
    maps.delete("b")  # already gone is fine
    assert [cm.name for cm in maps.list("role=model")] == ["a"]


def test_scaledobjects_are_listed_across_namespaces_and_watched(
    kube_api: KubeAPI, tmp_path: Path
) -> None:
    kube_api.add(scaled_object("gpu", "llm"))
    kube_api.add(scaled_object("web", "api"))
    objects = ScaledObjects(connected(tmp_path))
    items, revision = objects.list()
    assert sorted(o["metadata"]["name"] for o in items) == ["api", "llm"]
    assert [o["metadata"]["name"] for o in objects.list("gpu")[0]] == ["llm"]

    def later() -> None:
        time.sleep(0.3)
        kube_api.add(scaled_object("gpu", "new"))
        kube_api.delete("keda.sh/v1alpha1", "scaledobjects", "web", "api")

    threading.Thread(target=later).start()
    seen = []
    for kind, obj in objects.watch(resource_version=revision, timeout=3):
        seen.append((kind, obj["metadata"]["name"]))
        if len(seen) == 2:
            break
    assert seen == [("ADDED", "new"), ("DELETED", "api")]


def test_deployments_are_read_and_events_created_with_the_raw_client(
    kube_api: KubeAPI, tmp_path: Path
) -> None:
    kube_api.add(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"namespace": "gpu", "name": "llm"},
            "spec": {
                "selector": {"matchLabels": {"app": "llm"}},
                "replicas": 2,
                "template": {
                    "metadata": {"labels": {"app": "llm"}},
                    "spec": {"containers": [{"name": "llm", "image": "llm:1"}]},
                },
            },
        }
    )
    apps = client.AppsV1Api(connected(tmp_path))
    assert apps.read_namespaced_deployment("llm", "gpu").spec.selector.match_labels == {
        "app": "llm"
    }
    core = client.CoreV1Api(connected(tmp_path))
    event = client.CoreV1Event(
        metadata=client.V1ObjectMeta(generate_name="llm."),
        involved_object=client.V1ObjectReference(kind="ScaledObject", name="llm", namespace="gpu"),
        reason="ModelPromoted",
        message="v2 beats v1",
        type="Normal",
    )
    core.create_namespaced_event("gpu", event)
    (stored,) = kube_api.objects("v1", "events", "gpu")
    assert stored["reason"] == "ModelPromoted" and stored["metadata"]["name"].startswith("llm.")


def test_an_injected_server_error_becomes_kube_unavailable(
    kube_api: KubeAPI, tmp_path: Path
) -> None:
    kube_api.fail_next("GET", "/configmaps/m", 503)
    with pytest.raises(api.KubeUnavailable, match="get configmap gpu/m: 503"):
        ConfigMaps(connected(tmp_path), "gpu").get("m")


def test_an_unreachable_api_server_is_kube_unavailable(tmp_path: Path) -> None:
    with KubeAPI() as gone:
        gone.kubeconfig(tmp_path / "kubeconfig")
    with pytest.raises(api.KubeUnavailable, match="unreachable"):
        ConfigMaps(connected(tmp_path), "gpu").get("m")


@pytest.mark.parametrize("text", ["clusters: [", "- a list", "a string", "clusters: 5"])
def test_a_kubeconfig_that_is_not_one_is_a_config_error_naming_the_file(
    tmp_path: Path, text: str
) -> None:
    (tmp_path / "kubeconfig").write_text(text)
    with pytest.raises(ConfigError, match=f"from {tmp_path / 'kubeconfig'}"):
        api.connect(tmp_path / "kubeconfig")
