"""`--store DIR | configmap:NAMESPACE` -> the ModelStore it names."""

from __future__ import annotations

import re
from pathlib import Path

from scaler.errors import ConfigError
from scaler.store import base
from scaler.store.base import ModelStore

CONFIGMAP = "configmap:"


def open_store(
    location: str, *, kubeconfig: Path | None = None, keep: int = base.DEFAULT_KEEP
) -> ModelStore:
    """A directory path, or `configmap:NAMESPACE` (the Kubernetes client from `kubeconfig`,
    else the pod's service account)."""
    if location.startswith(CONFIGMAP):
        namespace = location.removeprefix(CONFIGMAP)
        if len(namespace) > 63 or not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", namespace):
            raise ConfigError(f"--store {location!r}: name a namespace, e.g. configmap:keda-scaler")
        # Imported here so the directory store never loads the Kubernetes client.
        from scaler.kube import api
        from scaler.kube.configmaps import ConfigMaps
        from scaler.store.configmap import ConfigMapStore

        return ConfigMapStore(ConfigMaps(api.connect(kubeconfig), namespace), keep=keep)
    if not location.strip():
        raise ConfigError("--store is empty: give a directory or configmap:NAMESPACE")
    if Path(location).exists() and not Path(location).is_dir():
        # Every write under it would fail, each only after its target's fit.
        raise ConfigError(
            f"--store {location}: a file, not a directory; give a directory (created when "
            "missing) or configmap:NAMESPACE"
        )
    from scaler.store.directory import DirectoryStore

    return DirectoryStore(Path(location), keep=keep)
