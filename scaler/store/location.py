"""`--store DIR | configmap:NAMESPACE` -> the ModelStore it names."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path

from scaler.errors import ConfigError
from scaler.store import base
from scaler.store.base import ModelStore

CONFIGMAP = "configmap:"


def add_keep_flag(
    group: argparse._ArgumentGroup, env: Callable[[str, str | None], str | None]
) -> None:
    """`--keep N` (env SCALER_KEEP), the same for `scaler serve` and `scaler retrain`: both
    prune after they store, so they must keep the same number; `env(name, default)` reads
    SCALER_<name>."""
    group.add_argument(
        "--keep",
        type=int,
        metavar="N",
        default=env("KEEP", None) or base.DEFAULT_KEEP,
        help="versions the store keeps per target, the champion always (env SCALER_KEEP; 5): "
        "`scaler serve` and `scaler retrain` both prune to it, so give both the same N",
    )


def open_store(
    location: str,
    *,
    kubeconfig: Path | None = None,
    keep: int = base.DEFAULT_KEEP,
    create: bool = True,
) -> ModelStore:
    """A directory path, or `configmap:NAMESPACE` (the Kubernetes client from `kubeconfig`,
    else the pod's service account). A missing directory is created unless `create` is false
    (a reader that must write nothing: it then reads as an empty store)."""
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
    try:  # a path that can never be made would fail each write, only after its target's fit
        if create:
            Path(location).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"--store {location}: cannot create the directory ({exc.strerror}); give a "
            "directory the scaler can create or read, or configmap:NAMESPACE"
        ) from None
    from scaler.store.directory import DirectoryStore

    return DirectoryStore(Path(location), keep=keep)
