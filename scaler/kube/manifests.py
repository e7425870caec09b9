"""ScaledObject manifests -> the targets they define: `--targets FILE` of `scaler serve` (and of
`scaler retrain`).

A file is a multi-document YAML stream of ScaledObjects, or the List that `kubectl get
scaledobjects -A -o yaml` prints (`kind: List` or `ScaledObjectList`, with `items`). Each
`external` / `external-push` trigger is one target, its metadata parsed by
scaler.decision.spec exactly as KEDA's scalerMetadata would be, so a target found here has the
key KEDA's first call will have. Other trigger types and other kinds are skipped. When
`scaler_address` is given, only triggers whose `scalerAddress` is that address are read (the
ScaledObjects of another scaler are not ours).

Every error names the file, the object and the trigger, and says what to fix. Must not: talk to
a cluster (discovery does), read the environment.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from scaler.decision import spec as specs
from scaler.errors import ConfigError, SpecError

EXTERNAL = frozenset({"external", "external-push"})
"""Trigger types that reach an external scaler."""
LIST_KINDS = frozenset({"List", "ScaledObjectList"})
MAX_BYTES = 64 * 2**20
"""Largest manifest file read: about 30,000 ScaledObjects."""
MAX_TARGETS = 100_000


@dataclass(frozen=True)
class Target:
    """One trigger of one ScaledObject: what KEDA would send as a ScaledObjectRef."""

    namespace: str
    name: str
    metadata: dict[str, str]
    spec: specs.TargetSpec


def load(path: Path, *, scaler_address: str | None = None) -> list[Target]:
    """The targets of the manifests in `path` (module docstring); ConfigError when the file
    cannot be read or an object is malformed, naming where and the fix."""
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise ConfigError(f"--targets {path}: {size} bytes is more than {MAX_BYTES}; split it")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--targets {path}: cannot read it ({exc}); give a YAML file") from exc
    return parse(text, source=str(path), scaler_address=scaler_address)


def parse(text: str, *, source: str, scaler_address: str | None = None) -> list[Target]:
    """The targets of a YAML text (see `load`); `source` names it in errors."""
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise ConfigError(f"--targets {source}: not valid YAML: {exc}") from exc
    targets: list[Target] = []
    seen: set[str] = set()
    for where, obj in _objects(documents, source):
        for target in _targets(obj, where, scaler_address):
            if target.spec.key in seen:  # the same trigger twice (a file concatenated twice)
                continue
            seen.add(target.spec.key)
            targets.append(target)
            if len(targets) > MAX_TARGETS:
                raise ConfigError(f"--targets {source}: more than {MAX_TARGETS} targets; shard")
    return targets


def _objects(documents: list[Any], source: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for i, doc in enumerate(documents, 1):
        if not isinstance(doc, Mapping):
            raise ConfigError(
                f"--targets {source}: document {i} is a {type(doc).__name__}, not a Kubernetes "
                "object; give ScaledObjects or a List of them"
            )
        if doc.get("kind") in LIST_KINDS:
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise ConfigError(f"--targets {source}: document {i}: `items` is not a list")
            for j, item in enumerate(items):
                if not isinstance(item, Mapping):
                    raise ConfigError(f"--targets {source}: document {i} item {j} is no object")
                yield f"{source} document {i} item {j}", item
        else:
            yield f"{source} document {i}", doc


def _targets(obj: Mapping[str, Any], where: str, scaler_address: str | None) -> Iterator[Target]:
    if obj.get("kind") != "ScaledObject":
        return
    meta = obj.get("metadata") or {}
    name, namespace = meta.get("name"), meta.get("namespace") or "default"
    if not isinstance(name, str) or not name or not isinstance(namespace, str):
        raise ConfigError(f"--targets {where}: a ScaledObject without metadata.name; name it")
    where = f"{where} (ScaledObject {namespace}/{name})"
    triggers = (obj.get("spec") or {}).get("triggers") or []
    if not isinstance(triggers, list):
        raise ConfigError(f"--targets {where}: spec.triggers is not a list")
    for index, trigger in enumerate(triggers):
        if not isinstance(trigger, Mapping) or trigger.get("type") not in EXTERNAL:
            continue
        metadata = _metadata(trigger.get("metadata"), f"{where} trigger {index}")
        if scaler_address is not None and metadata.get("scalerAddress") != scaler_address:
            continue
        try:
            spec = specs.parse(namespace, name, metadata)
        except SpecError as exc:
            raise ConfigError(f"--targets {where} trigger {index}: {exc}") from exc
        yield Target(namespace=namespace, name=name, metadata=metadata, spec=spec)


def _metadata(raw: Any, where: str) -> dict[str, str]:
    """The trigger's metadata as KEDA sends it: a map of strings (the CRD allows nothing else)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"--targets {where}: metadata is not a map of strings")
    out: dict[str, str] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ConfigError(
                f"--targets {where}: metadata {key!r} is {value!r}, not a string; quote it "
                f'(e.g. {key}: "{value}"), as the ScaledObject CRD requires'
            )
        out[key] = value
    return out
