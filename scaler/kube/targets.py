"""ScaledObject manifests -> the targets this scaler serves: every `external` or
`external-push` trigger (whose scalerAddress points at us, when an address is given), its
metadata parsed by scaler.decision.spec. Reads a `--targets FILE` (multi-document YAML, or the
List `kubectl get scaledobjects -A -o yaml` prints) or objects listed from the cluster.

The YAML itself is read by yamldocs.py, as kubectl reads it (a bound on aliases included).

A trigger that does not parse is reported as a `Problem` naming the object, the trigger and the
key, and the others still count: one team's typo must not stop everyone's retraining.

Must not: talk to the API (scaledobjects.py does).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scaler.decision import quoting, spec
from scaler.decision.spec import TargetSpec
from scaler.errors import ConfigError, ScalerError
from scaler.kube import yamldocs
from scaler.store.base import StoreKey

EXTERNAL_TYPES = frozenset({"external", "external-push"})


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
    found = yamldocs.documents(yamldocs.read_text(path), str(path))
    return [doc.body for doc in found if is_scaled_object(doc.body)]


def is_scaled_object(obj: dict[str, Any]) -> bool:
    return obj.get("kind") == "ScaledObject"


def nothing_to_serve(count: int, scaler_address: str | None) -> str:
    """Why `count` ScaledObjects (0: none at all) gave `from_objects` no target and no problem:
    a wrong file, or a wrong --scaler-address, said in words for serve's warning and retrain's
    refusal."""
    if count == 0:
        return "it holds no ScaledObject"
    pointing = f" with scalerAddress {scaler_address}" if scaler_address else ""
    return f"none of its {count} ScaledObjects has an external or external-push trigger{pointing}"


def identity(obj: dict[str, Any], unnamed: str) -> tuple[str, str] | Problem:
    """(namespace, name) of a ScaledObject, namespace `default` when unset, or the Problem that
    makes it no target at all; `unnamed` says where an object without a usable name is."""
    meta, body = obj.get("metadata") or {}, obj.get("spec") or {}
    if not isinstance(meta, dict):
        fix = "metadata is not a mapping; give metadata.name and metadata.namespace"
        return Problem(unnamed, fix)
    namespace, name = meta.get("namespace") or "default", meta.get("name") or ""
    if not (isinstance(namespace, str) and isinstance(name, str)):
        fix = "metadata.name and metadata.namespace must be strings (DNS labels)"
        return Problem(unnamed, fix)
    if not isinstance(body, dict):
        fix = "spec is not a mapping; give spec.triggers, a list of triggers"
        return Problem(f"{namespace}/{name}", fix)
    return namespace, name


def external_triggers(obj: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """(index in spec.triggers, trigger) of every external or external-push trigger."""
    body = obj.get("spec") or {}
    triggers = (body.get("triggers") or []) if isinstance(body, dict) else []
    return [
        (index, trigger)
        for index, trigger in enumerate(triggers if isinstance(triggers, list) else [])
        if isinstance(trigger, dict) and trigger.get("type") in EXTERNAL_TYPES
    ]


def names(trigger: dict[str, Any], scaler_address: str | None) -> bool:
    """Whether an external trigger is this scaler's: any, without an address to match."""
    metadata = trigger.get("metadata")
    found = metadata.get("scalerAddress") if isinstance(metadata, dict) else None
    return not scaler_address or found == scaler_address


def text_of(value: object) -> str:
    """A YAML scalar as the text it stands for (`true`, not Python's `True`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def value_problem(key: object, value: object) -> str | None:
    """Why a metadata value is not one KEDA's CRD takes (strings only), or None for a string."""
    name = quoting.echo(text_of(key))
    if isinstance(value, str):
        return None
    if value is None:
        return (
            f"metadata.{name} has no value: the API server drops a null from KEDA's CRD, which "
            f"takes strings only, so the trigger would run with {name}'s default; quote a value "
            f'({name}: "...") or remove the key'
        )
    if isinstance(value, list | dict):
        return (
            f"metadata.{name} is {quoting.shown(value)}: KEDA's CRD takes strings only and "
            f"`kubectl apply` refuses it; give a string"
        )
    quoted = quoting.shown(value)
    example = f': {name}: "{quoted}"' if quoted == text_of(value) else ""
    return (
        f"metadata.{name} is {quoted} ({type(value).__name__}): KEDA's CRD takes strings only "
        f"and `kubectl apply` refuses it; quote it{example}"
    )


def parse_trigger(namespace: str, name: str, metadata: Any) -> TargetSpec:
    """A trigger's metadata as the server reads it (spec.parse); ScalerError naming the key.
    A key without a value (`maxReplicas:`), a list or a mapping is refused, as `scaler check`
    refuses it (KEDA's CRD takes strings only): not read as the text "None", nor made into text
    however large it is. A number or a boolean is read as str() writes it."""
    if not name:
        raise ConfigError("the ScaledObject has no metadata.name")
    if not isinstance(metadata, dict):
        raise ConfigError("trigger metadata is not a mapping of strings")
    for key, value in metadata.items():
        problem = value_problem(key, value)
        if problem and (value is None or isinstance(value, list | dict)):
            raise ConfigError(problem)
    parsed = spec.parse(namespace, name, {str(k): str(v) for k, v in metadata.items()})
    StoreKey.of(parsed)  # a name no store key can hold fails this trigger alone
    return parsed


def from_objects(
    objects: Iterable[dict[str, Any]], *, scaler_address: str | None = None
) -> tuple[list[Target], list[Problem]]:
    """The targets in `objects` and the triggers that could not be read."""
    targets: list[Target] = []
    problems: list[Problem] = []
    for number, obj in enumerate(objects, 1):
        known = identity(obj, f"ScaledObject {number}")
        if isinstance(known, Problem):
            problems.append(known)
            continue
        namespace, name = known
        for index, trigger in external_triggers(obj):
            if not names(trigger, scaler_address):
                continue
            try:
                parsed = parse_trigger(namespace, name, trigger.get("metadata") or {})
                targets.append(Target(parsed, index))
            except ScalerError as exc:
                problems.append(Problem(f"{namespace}/{name} trigger {index}", str(exc)))
    return targets, problems
