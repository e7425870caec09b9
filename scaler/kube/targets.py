"""ScaledObject manifests -> the targets this scaler serves: every `external` or
`external-push` trigger (whose scalerAddress points at us, when an address is given), its
metadata parsed by scaler.decision.spec. Reads a `--targets FILE` (multi-document YAML, or the
List `kubectl get scaledobjects -A -o yaml` prints) or objects listed from the cluster.

A trigger that does not parse is reported as a `Problem` naming the object, the trigger and the
key, and the others still count: one team's typo must not stop everyone's retraining.

Must not: talk to the API (scaledobjects.py does).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from scaler.decision import spec
from scaler.decision.spec import TargetSpec
from scaler.errors import ConfigError, ScalerError
from scaler.store.base import StoreKey

EXTERNAL_TYPES = frozenset({"external", "external-push"})
MAX_FILE_BYTES = 64 * 1024 * 1024
"""A targets file larger than this is refused: 100,000 ScaledObjects fit well under it."""


@dataclass(frozen=True)
class Target:
    spec: TargetSpec
    trigger: int
    """Index of the trigger in the ScaledObject's spec.triggers."""

    @property
    def key(self) -> StoreKey:
        return StoreKey.of(self.spec)


@dataclass(frozen=True)
class Problem:
    where: str
    """`namespace/name trigger N`; `namespace/name` or `ScaledObject N` (its place in the
    list) when the object itself cannot be read."""
    error: str


def scaler_address(text: str | None) -> str | None:
    """--scaler-address as the triggers' scalerAddress spells it, HOST:PORT; ConfigError naming
    the fix for a URL or a missing port (it would silently match no trigger)."""
    if not text or not text.strip():
        return None
    host, colon, port = text.strip().rpartition(":")
    if "://" in text or "/" in text or not colon or not host or not port.isdigit():
        raise ConfigError(
            f"--scaler-address {text!r}: give HOST:PORT exactly as the triggers' scalerAddress, "
            "e.g. predictive-scaler.keda.svc.cluster.local:9000 (no scheme, no path)"
        )
    return text.strip()


def read_file(path: Path) -> list[dict[str, Any]]:
    """The ScaledObject dicts in a YAML file (documents, Lists flattened); ConfigError if the
    file cannot be read or is not YAML."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ConfigError(f"{path}: larger than {MAX_FILE_BYTES} bytes; split the targets")
        # libyaml's loader when PyYAML has it: 4x faster on 1,000 ScaledObjects, at start-up.
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        documents = list(yaml.load_all(path.read_text(), Loader=loader))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the targets file ({exc})") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not YAML ({exc}); give ScaledObject manifests") from exc
    found: list[dict[str, Any]] = []
    for doc in documents:
        if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List"):
            found.extend(item for item in doc.get("items") or [] if isinstance(item, dict))
        elif isinstance(doc, dict):
            found.append(doc)
    return [obj for obj in found if obj.get("kind") == "ScaledObject"]


def nothing_to_serve(count: int, scaler_address: str | None) -> str:
    """Why `count` ScaledObjects (0: none at all) gave `from_objects` no target and no problem:
    a wrong file, or a wrong --scaler-address, said in words for serve's warning and retrain's
    refusal."""
    if count == 0:
        return "it holds no ScaledObject"
    pointing = f" with scalerAddress {scaler_address}" if scaler_address else ""
    return f"none of its {count} ScaledObjects has an external or external-push trigger{pointing}"


def from_objects(
    objects: Iterable[dict[str, Any]], *, scaler_address: str | None = None
) -> tuple[list[Target], list[Problem]]:
    """The targets in `objects` and the triggers that could not be read."""
    targets: list[Target] = []
    problems: list[Problem] = []
    for number, obj in enumerate(objects, 1):
        meta, body = obj.get("metadata") or {}, obj.get("spec") or {}
        if not isinstance(meta, dict):
            fix = "metadata is not a mapping; give metadata.name and metadata.namespace"
            problems.append(Problem(f"ScaledObject {number}", fix))
            continue
        namespace, name = meta.get("namespace") or "default", meta.get("name") or ""
        if not (isinstance(namespace, str) and isinstance(name, str)):
            fix = "metadata.name and metadata.namespace must be strings (DNS labels)"
            problems.append(Problem(f"ScaledObject {number}", fix))
            continue
        if not isinstance(body, dict):
            fix = "spec is not a mapping; give spec.triggers, a list of triggers"
            problems.append(Problem(f"{namespace}/{name}", fix))
            continue
        triggers = body.get("triggers") or []
        for index, trigger in enumerate(triggers if isinstance(triggers, list) else []):
            if not isinstance(trigger, dict) or trigger.get("type") not in EXTERNAL_TYPES:
                continue
            metadata = trigger.get("metadata") or {}
            if scaler_address and metadata.get("scalerAddress") != scaler_address:
                continue
            where = f"{namespace}/{name} trigger {index}"
            try:
                if not name:
                    raise ConfigError("the ScaledObject has no metadata.name")
                if not isinstance(metadata, dict):
                    raise ConfigError("trigger metadata is not a mapping of strings")
                parsed = spec.parse(namespace, name, {str(k): str(v) for k, v in metadata.items()})
                StoreKey.of(parsed)  # a name no store key can hold fails this trigger alone
                targets.append(Target(parsed, index))
            except ScalerError as exc:
                problems.append(Problem(where, str(exc)))
    return targets, problems
