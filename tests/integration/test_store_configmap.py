"""The ConfigMap model store through the official client and the Kubernetes API emulator:
versions as immutable ConfigMaps, the champion pointer as a compare-and-set on resourceVersion
(409 -> re-read, bounded), the 1 MiB object limit, damaged versions skipped, and serve's poll of
every pointer and retrain outcome as one LIST."""

from __future__ import annotations

import asyncio
import base64
import threading
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from scaler.decision import budget, spec
from scaler.errors import ConfigError
from scaler.serving import champions
from scaler.serving.state import TargetState
from scaler.serving.telemetry import Telemetry
from scaler.store import configmap
from scaler.store.base import ArtefactRejected, StoreError, StoreKey
from scaler.store.configmap import ConfigMapStore
from scaler.store.location import open_store
from tests.integration.kube_api import KubeAPI
from tests.store_artefacts import fitted, promoted_twice

KEY = StoreKey("gpu", "llm-serve", "s0-llm")
NAMESPACE = "keda"


def store(tmp_path: Path, keep: int = 5) -> ConfigMapStore:
    opened = open_store(f"configmap:{NAMESPACE}", kubeconfig=tmp_path / "kubeconfig", keep=keep)
    assert isinstance(opened, ConfigMapStore)
    return opened


def test_a_version_round_trips_compressed_in_an_immutable_configmap(
    kube_api: KubeAPI, tmp_path: Path
) -> None:
    models = store(tmp_path)
    version = models.put(KEY, fitted(), {"reason": "first"})
    got = models.get(KEY, version)
    assert (got.artefact, got.meta) == (fitted(), {"reason": "first"})
    (stored,) = kube_api.objects("v1", "configmaps", NAMESPACE)
    assert stored["immutable"] is True
    assert len(base64.b64decode(stored["binaryData"][configmap.ARTEFACT])) < len(str(fitted()))
    assert models.keys() == [KEY]


def test_the_first_writer_wins_the_champion_pointer(kube_api: KubeAPI, tmp_path: Path) -> None:
    models = store(tmp_path)
    first, second = models.put(KEY, fitted(0)), models.put(KEY, fitted(1))
    assert models.promote(KEY, first, expected=None)
    assert not models.promote(KEY, second, expected=None)
    assert models.champion_version(KEY) == first
    assert models.promote(KEY, second, expected=first)
    champion = models.champion(KEY)
    assert champion is not None and champion.version == second


def test_the_log_of_a_first_promotion_says_there_was_no_champion(
    kube_api: KubeAPI, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    models = store(tmp_path)
    caplog.set_level("INFO", logger="scaler.store")
    assert models.promote(KEY, models.put(KEY, fitted(0)), expected=None)
    assert "v1 is champion (there was no champion)" in caplog.text
    assert "vNone" not in caplog.text


def test_a_conflict_on_the_pointer_is_re_read_and_retried(
    kube_api: KubeAPI, tmp_path: Path
) -> None:
    models = store(tmp_path)
    first, second = models.put(KEY, fitted(0)), models.put(KEY, fitted(1))
    models.promote(KEY, first, expected=None)
    kube_api.fail_next("PUT", f"configmaps/{configmap.PREFIX}-{KEY.slug}", 409, count=2)
    assert models.promote(KEY, second, expected=first)
    assert models.champion_version(KEY) == second
    puts = kube_api.requests("PUT", f"{configmap.PREFIX}-{KEY.slug}")
    assert len(puts) == 3


def test_racing_writers_get_distinct_versions_and_exactly_one_champion(
    kube_api: KubeAPI, tmp_path: Path
) -> None:
    won: list[bool] = []

    def race(seed: int) -> None:
        models = store(tmp_path)
        won.append(models.promote(KEY, models.put(KEY, fitted(seed % 2)), expected=None))

    threads = [threading.Thread(target=race, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(won) == [False, False, False, True]
    assert store(tmp_path).versions(KEY) == [1, 2, 3, 4]


def test_old_versions_are_deleted_but_never_the_champion(kube_api: KubeAPI, tmp_path: Path) -> None:
    models = store(tmp_path, keep=2)
    models.promote(KEY, models.put(KEY, fitted()), expected=None)
    for _ in range(4):
        models.put(KEY, fitted())
    assert models.versions(KEY) == [1, 4, 5]
    assert len(kube_api.objects("v1", "configmaps", NAMESPACE)) == 4  # three versions + pointer


def test_an_artefact_past_the_object_limit_is_refused_with_its_size(
    kube_api: KubeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(configmap, "MAX_BYTES", 1000)  # our own seam: the limit, not the client
    with pytest.raises(StoreError, match=r"bytes compressed, past the 1000-byte ConfigMap limit"):
        store(tmp_path).put(KEY, fitted())
    assert kube_api.objects("v1", "configmaps", NAMESPACE) == []


def test_a_damaged_champion_is_skipped_for_the_last_good_version(
    kube_api: KubeAPI, tmp_path: Path
) -> None:
    models = store(tmp_path)
    good, bad = promoted_twice(models, KEY)
    name = f"{configmap.PREFIX}-{KEY.slug}-v{bad:06d}"
    damaged = kube_api.get("v1", "configmaps", NAMESPACE, name)
    blob = base64.b64decode(damaged["binaryData"][configmap.ARTEFACT])
    damaged["binaryData"][configmap.ARTEFACT] = base64.b64encode(blob[: len(blob) // 2]).decode()
    kube_api.tamper(damaged, plural="configmaps")
    with pytest.raises(ArtefactRejected, match=f"{KEY} v{bad}: artefact rejected"):
        models.get(KEY, bad)
    champion = models.champion(KEY)
    assert champion is not None and champion.version == good


def test_a_damaged_pointer_names_the_newest_version_and_the_next_promotion_repairs_it(
    kube_api: KubeAPI, tmp_path: Path
) -> None:
    models = store(tmp_path)
    _, second = promoted_twice(models, KEY)
    pointer = kube_api.get("v1", "configmaps", NAMESPACE, f"{configmap.PREFIX}-{KEY.slug}")
    pointer["data"]["champion"] = "edited by hand"
    kube_api.tamper(pointer, plural="configmaps")
    assert models.champion_version(KEY) == second
    held = models.champion_version(KEY)
    third = models.put(KEY, fitted(0))
    assert models.promote(KEY, third, expected=held)
    assert models.champion_version(KEY) == third


def test_a_version_whose_promotion_lost_is_discarded_but_never_the_champion(
    kube_api: KubeAPI, tmp_path: Path
) -> None:
    models = store(tmp_path)
    winner, loser = models.put(KEY, fitted(0)), models.put(KEY, fitted(1))
    assert models.promote(KEY, winner, expected=None)
    assert not models.promote(KEY, loser, expected=None)
    assert models.discard(KEY, loser) and models.versions(KEY) == [winner]
    assert not models.discard(KEY, winner) and models.versions(KEY) == [winner]


def test_a_fallback_takes_a_version_once_promoted_never_one_a_writer_left_unpromoted(
    kube_api: KubeAPI, tmp_path: Path
) -> None:
    models = store(tmp_path)
    _, second = promoted_twice(models, KEY)
    abandoned = models.put(KEY, fitted(0))  # its writer was killed before its promote
    pointer = kube_api.get("v1", "configmaps", NAMESPACE, f"{configmap.PREFIX}-{KEY.slug}")
    pointer["data"]["champion"] = "edited by hand"
    kube_api.tamper(pointer, plural="configmaps")
    assert models.champion_version(KEY) == second != abandoned
    fourth = models.put(KEY, fitted(1))
    assert models.promote(KEY, fourth, expected=second)
    name = f"{configmap.PREFIX}-{KEY.slug}-v{fourth:06d}"
    damaged = kube_api.get("v1", "configmaps", NAMESPACE, name)
    damaged["binaryData"][configmap.ARTEFACT] = base64.b64encode(b"not gzip").decode()
    kube_api.tamper(damaged, plural="configmaps")
    champion = models.champion(KEY)
    assert champion is not None and champion.version == second


def test_an_unreachable_api_is_a_store_error_naming_the_key(tmp_path: Path) -> None:
    with KubeAPI() as gone:
        gone.kubeconfig(tmp_path / "kubeconfig")
    with pytest.raises(StoreError, match=f"{KEY}: .*unreachable"):
        store(tmp_path).champion_version(KEY)


@pytest.mark.parametrize("location", ["configmap:", "configmap:Bad_NS", ""])
def test_a_store_location_that_names_nothing_is_refused(location: str) -> None:
    with pytest.raises(ConfigError, match="--store"):
        open_store(location)


def serving_states(count: int) -> dict[str, TargetState]:
    states = {}
    for i in range(count):
        parsed = spec.parse("gpu", f"llm-{i}", {"query": f"load{i}", "threshold": "20"})
        ledger = budget.Ledger(budget=1.0, window=86400.0)
        states[parsed.key] = TargetState(spec=parsed, ledger=ledger, last_asked=0)
    return states


@pytest.mark.parametrize("count", [3, 20])
def test_serve_polls_every_champion_and_retrain_outcome_with_one_list(
    kube_api: KubeAPI, tmp_path: Path, count: int
) -> None:
    models = store(tmp_path)
    states = serving_states(count)
    keys = [StoreKey.of(s.spec) for s in states.values()]
    for key in keys:
        models.promote(key, models.put(key, fitted()), expected=None)
    models.record_retrain(keys[0], ok=True, at=1000.0, reason="kept v1")
    models.record_retrain(keys[0], ok=False, at=2000.0, reason="no data")
    telemetry = Telemetry(CollectorRegistry())
    seen = champions.Champions(models, poll=60.0, on_status=champions.retrain_gauges(telemetry))
    asyncio.run(seen.poll_once(states))  # adopts every v1
    assert all(s.model_version == 1 for s in states.values())
    before = len(kube_api.requests())
    asyncio.run(seen.poll_once(states))  # nothing new: one request for the whole store
    assert [m for m, _ in kube_api.requests()[before:]] == ["GET"]
    (path,) = [p for _, p in kube_api.requests()[before:]]
    assert "labelSelector" in path and "/configmaps/" not in path
    registry = telemetry.registry
    first = next(iter(states))
    success = "scaler_retrain_last_success_timestamp_seconds"
    failure = "scaler_retrain_last_failure_timestamp_seconds"
    assert registry.get_sample_value(success, {"target": first}) == 1000.0
    assert registry.get_sample_value(failure, {"target": first}) == 2000.0
    other = list(states)[1]
    assert registry.get_sample_value(success, {"target": other}) is None  # never retrained
    key = keys[1]
    models.promote(key, models.put(key, fitted(1)), expected=1)
    asyncio.run(seen.poll_once(states))
    assert states[other].model_version == 2 and states[first].model_version == 1
