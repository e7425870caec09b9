"""Cluster discovery (scaler/kube/discovery.py) through the official client against the
Kubernetes API emulator over HTTP: the first list, a watch that follows creations, edits and
deletions, a watch resumed from its resourceVersion, and a relist after 410 Gone."""

from __future__ import annotations

import queue
import time
from pathlib import Path
from typing import Any

import pytest

from scaler import cli
from scaler.kube import api
from scaler.kube.discovery import Change, Discovery
from scaler.kube.scaledobjects import ScaledObjects
from tests.integration.kube_api import KubeAPI
from tests.integration.kube_api import scaled_object as external_trigger_object

ADDRESS = "scaler.keda.svc:9000"
SO = ("keda.sh/v1alpha1", "scaledobjects")


def scaled_object(namespace: str, name: str, *, address: str = ADDRESS) -> dict[str, Any]:
    """Behind a cpu trigger, which discovery must step over."""
    cpu = {"type": "cpu", "metadata": {"value": "80"}}
    return external_trigger_object(namespace, name, address=address, before=(cpu,))


def discovery(tmp_path: Path, **kwargs: Any) -> Discovery:
    objects = ScaledObjects(api.connect(tmp_path / "kubeconfig"))
    return Discovery(objects, scaler_address=ADDRESS, backoff=(0.05, 0.2), **kwargs)


class Changes:
    """What `on_change` was called with, from the discovery thread."""

    def __init__(self) -> None:
        self.seen: queue.Queue[Change] = queue.Queue()

    def __call__(self, change: Change) -> None:
        self.seen.put(change)

    def next(self, timeout: float = 10.0) -> tuple[list[str], list[str]]:
        """(names added, keys removed) of the next change."""
        change = self.seen.get(timeout=timeout)
        return sorted(s.name for s in change.added), sorted(change.removed)


def test_the_first_list_finds_only_triggers_pointing_at_this_scaler(
    kube_api: KubeAPI, tmp_path: Path
) -> None:
    kube_api.add(scaled_object("gpu", "llm"))
    kube_api.add(scaled_object("web", "api"))
    kube_api.add(scaled_object("web", "elsewhere", address="other-scaler:9000"))
    found = discovery(tmp_path).initial()
    assert sorted((s.namespace, s.name) for s in found) == [("gpu", "llm"), ("web", "api")]
    only_gpu = discovery(tmp_path, namespace="gpu").initial()
    assert [s.name for s in only_gpu] == ["llm"]


def test_the_watch_follows_creations_edits_and_deletions(kube_api: KubeAPI, tmp_path: Path) -> None:
    kube_api.add(scaled_object("gpu", "llm"))
    found = discovery(tmp_path)
    (first,) = found.initial()
    changes = Changes()
    found.start(changes)
    try:
        kube_api.add(scaled_object("gpu", "new"))
        assert changes.next() == (["new"], [])
        edited = kube_api.get(*SO, "gpu", "llm")
        edited["spec"]["triggers"][1]["metadata"]["threshold"] = "7"
        kube_api.tamper(edited, plural="scaledobjects")
        # The edit changes the trigger's key: the old target goes, the new one comes.
        added, removed = changes.next()
        assert (added, removed) == (["llm"], [first.key])
        kube_api.delete(*SO, "gpu", "new")
        (_, (gone,)) = changes.next()
        assert gone.startswith("gpu/new#")
        kube_api.add(scaled_object("gpu", "foreign", address="other:9000"))
        kube_api.add(scaled_object("gpu", "last"))
        assert changes.next() == (["last"], [])  # nothing for the foreign one
        assert sorted(s.name for s in found.targets()) == ["last", "llm"]
        assert found.lists == 1
    finally:
        found.stop()


def test_a_broken_watch_resumes_from_its_resource_version_without_listing_again(
    kube_api: KubeAPI, tmp_path: Path
) -> None:
    kube_api.add(scaled_object("gpu", "llm"))
    found = discovery(tmp_path)
    found.initial()
    changes = Changes()
    found.start(changes)
    try:
        kube_api.add(scaled_object("gpu", "a"))
        assert changes.next() == (["a"], [])
        kube_api.fail_next("GET", "watch=", 500, count=2)  # the next two reconnects fail
        kube_api.end_watches()
        kube_api.add(scaled_object("gpu", "b"))  # while no watch is open
        assert changes.next() == (["b"], [])
        assert found.lists == 1
        assert found.resumes >= 1
        watches = kube_api.requests("GET", "watch=")
        assert all("resourceVersion=" in path for _, path in watches)
    finally:
        found.stop()


def test_a_410_gone_relists_and_delivers_what_changed_meanwhile(
    kube_api: KubeAPI, tmp_path: Path
) -> None:
    kube_api.add(scaled_object("gpu", "stays"))
    kube_api.add(scaled_object("gpu", "deleted-meanwhile"))
    found = discovery(tmp_path)
    before = {s.name: s.key for s in found.initial()}
    changes = Changes()
    found.start(changes)
    try:
        kube_api.fail_next("GET", "watch=", 500, count=1000)  # no watch while things change
        watches = len(kube_api.requests("GET", "watch="))
        kube_api.end_watches()
        deadline = time.monotonic() + 10.0  # the stream is down once a reconnect was refused
        while len(kube_api.requests("GET", "watch=")) == watches:
            assert time.monotonic() < deadline, "discovery never tried to reconnect its watch"
            time.sleep(0.02)
        kube_api.delete(*SO, "gpu", "deleted-meanwhile")
        kube_api.add(scaled_object("gpu", "created-meanwhile"))
        kube_api.compact()  # the events above are gone from the history
        kube_api.clear_failures()
        added, removed = changes.next()
        assert (added, removed) == (["created-meanwhile"], [before["deleted-meanwhile"]])
        assert found.lists == 2
        assert sorted(s.name for s in found.targets()) == ["created-meanwhile", "stays"]
    finally:
        found.stop()


def test_without_rbac_to_list_scaledobjects_start_up_fails_naming_the_grant(
    kube_api: KubeAPI, tmp_path: Path
) -> None:
    kube_api.fail_next("GET", "scaledobjects", 403)
    with pytest.raises(api.Forbidden, match="grant"):
        discovery(tmp_path).initial()


def test_an_unreachable_api_server_at_start_up_is_retried_by_the_watch_thread(
    kube_api: KubeAPI, tmp_path: Path
) -> None:
    kube_api.add(scaled_object("gpu", "llm"))
    kube_api.fail_next("GET", "scaledobjects", 503, count=3)
    found = discovery(tmp_path)
    assert found.initial() == []
    changes = Changes()
    found.start(changes)
    try:
        assert changes.next() == (["llm"], [])
    finally:
        found.stop()


def test_serve_without_rbac_for_discovery_exits_2_naming_the_grant(
    kube_api: KubeAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kube_api.fail_next("GET", "scaledobjects", 403)
    argv = ["serve", "--scaler-address", ADDRESS, "--kubeconfig", str(tmp_path / "kubeconfig")]
    argv += ["--grpc-port", "0", "--http-port", "-1", "--source", "file:"]
    assert cli.main(argv) == 2
    error = capsys.readouterr().err
    assert "list scaledobjects" in error and "grant" in error
