"""Serving checkpoints in both model stores (scaler/store/, scaler/serving/checkpoints.py): one
per (key, version, time), the first writer wins (an exclusive create in the directory, a 409 in
ConfigMaps, through the official client and the Kubernetes API emulator), the newest of a
version is read, only the newest CHECKPOINTS_KEPT are kept, and serve's poll of every pointer
never lists them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from scaler.store import base
from scaler.store.base import ModelStore, StoreError, StoreKey
from scaler.store.configmap import ConfigMapStore
from scaler.store.directory import DirectoryStore
from scaler.store.location import open_store
from tests.integration.kube_api import KubeAPI
from tests.store_artefacts import fitted

KEY = StoreKey("gpu", "llm-serve", "s0-llm")
HOUR = 3600


def data(mark: float) -> dict[str, object]:
    return {"format": 1, "values": [mark, None, 2.5]}


@pytest.fixture(params=["directory", "configmap"])
def models(request: pytest.FixtureRequest, tmp_path: Path) -> ModelStore:
    if request.param == "directory":
        return DirectoryStore(tmp_path / "store")
    request.getfixturevalue("kube_api")  # the API the kubeconfig in tmp_path points at
    opened = open_store("configmap:keda", kubeconfig=tmp_path / "kubeconfig")
    assert isinstance(opened, ConfigMapStore)
    return opened


def test_the_first_writer_of_a_checkpoint_wins_and_the_newest_of_a_version_is_read(
    models: ModelStore,
) -> None:
    version = models.put(KEY, fitted())
    assert models.checkpoint(KEY, version) is None
    assert models.put_checkpoint(KEY, version, 10 * HOUR, data(1.0))
    assert not models.put_checkpoint(KEY, version, 10 * HOUR, data(9.0))  # another replica
    assert models.checkpoint(KEY, version) == data(1.0)
    assert models.put_checkpoint(KEY, version, 11 * HOUR, data(2.0))
    assert models.checkpoint(KEY, version) == data(2.0)
    assert models.checkpoint(KEY, version + 1) is None  # another model's state is not this one's


def test_only_the_newest_checkpoints_are_kept(models: ModelStore) -> None:
    version = models.put(KEY, fitted())
    for hour in range(base.CHECKPOINTS_KEPT + 3):
        assert models.put_checkpoint(KEY, version, hour * HOUR, data(float(hour)))
    newest = base.CHECKPOINTS_KEPT + 2
    assert models.checkpoint(KEY, version) == data(float(newest))
    # An old hour is gone: writing it again is a new write, not a loss to another writer.
    assert models.put_checkpoint(KEY, version, 0, data(0.0))
    assert models.checkpoint(KEY, version) == data(float(newest))


def test_serve_polls_no_checkpoint(models: ModelStore, tmp_path: Path) -> None:
    version = models.put(KEY, fitted())
    assert models.promote(KEY, version, expected=None)
    models.put_checkpoint(KEY, version, HOUR, data(1.0))
    assert models.statuses() == {KEY: base.Status(champion=version)}
    assert models.keys() == [KEY]


def test_a_damaged_checkpoint_file_is_a_store_error_naming_the_key(tmp_path: Path) -> None:
    models = DirectoryStore(tmp_path / "store")
    version = models.put(KEY, fitted())
    models.put_checkpoint(KEY, version, HOUR, data(1.0))
    (path,) = (tmp_path / "store" / KEY.slug).glob("c0*.json")
    path.write_text(path.read_text()[:20])
    with pytest.raises(StoreError, match=str(KEY)):
        models.checkpoint(KEY, version)
    path.write_text(json.dumps({"version": version + 1, "checkpoint": data(1.0)}))
    with pytest.raises(StoreError, match="not a checkpoint"):
        models.checkpoint(KEY, version)


def test_a_checkpoint_past_the_object_limit_is_refused_with_its_size(
    kube_api: KubeAPI, tmp_path: Path
) -> None:
    models = open_store("configmap:keda", kubeconfig=tmp_path / "kubeconfig")
    version = models.put(KEY, fitted())
    digits = np.random.default_rng(0).integers(0, 2**48, 300_000)  # about 3 bits a character
    noise = {"values": digits.tolist()}
    with pytest.raises(StoreError, match="bytes compressed"):
        models.put_checkpoint(KEY, version, HOUR, noise)
