"""KEDA's ScaledObject CRD as a validator: the served version's openAPIV3Schema, closed to
unknown fields, run by jsonschema; and the CRD's one CEL rule (minReplicaCount <=
maxReplicaCount), which jsonschema cannot run, in Python.

jsonschema is a development dependency, not in the image: it is imported only when a CRD is
given (`scaler check --crd`, the manifest tests), and its absence is a ConfigError naming the
fix. The CRD itself is read by the caller (yamldocs.documents), not shipped with the scaler.

Must not: read files, or know about this scaler's metadata (check.py does).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scaler.decision import spec
from scaler.errors import ConfigError

GROUP = "keda.sh"
KEDA_DEFAULT_MAX = 100
"""maxReplicaCount when a ScaledObject leaves it out, as the CRD's CEL rule and KEDA read it."""


def closed(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of a structural schema in which unknown fields are errors.

    The API server prunes unknown fields of a custom resource silently, or rejects them under
    strict field validation (kubectl's default); either way a misspelt field does nothing, so
    it is an error here.
    """
    out = dict(schema)
    if "properties" in out:
        out["properties"] = {name: closed(s) for name, s in out["properties"].items()}
        open_ended = out.get("x-kubernetes-preserve-unknown-fields", False)
        if "additionalProperties" not in out and not open_ended:
            out["additionalProperties"] = False
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = closed(out["additionalProperties"])
    if isinstance(out.get("items"), dict):
        out["items"] = closed(out["items"])
    for key in ("allOf", "anyOf", "oneOf"):
        if key in out:
            out[key] = [closed(s) for s in out[key]]
    return out


def path(parts: Iterable[object]) -> str:
    """A JSON path as the messages write it: spec.triggers.0.metadata."""
    return ".".join(str(p) for p in parts) or "(root)"


def schema_errors(body: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """`PATH: message` for every way `body` breaks `schema`, in path order."""
    validator = _validator_class()(schema)
    errors = sorted(validator.iter_errors(body), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{path(e.absolute_path)}: {message(e)}" for e in errors]


def message(error: Any) -> str:
    """A jsonschema error's message with the value it opens with ("[...] is not of type
    'integer'"), which it quotes whole, cut to what spec.shown says of it when long."""
    quoted = repr(error.instance)
    if len(quoted) <= spec.ECHO_CHARS or not error.message.startswith(quoted):
        return str(error.message)
    value = error.instance
    short = repr(spec.echo(value)) if isinstance(value, str) else spec.shown(value)
    return f"{short}{error.message[len(quoted) :]}"


def _validator_class() -> Any:
    try:
        import jsonschema
    except ImportError as exc:
        raise ConfigError(
            "checking against KEDA's CRD needs the jsonschema package, which the scaler's image "
            "does not carry: `pip install jsonschema` (a development dependency of this "
            "project), or leave out --crd"
        ) from exc
    return jsonschema.Draft202012Validator


def cel_errors(body: dict[str, Any]) -> list[str]:
    """The ScaledObject CRD's x-kubernetes-validations rule, which jsonschema cannot run."""
    spec = body.get("spec")
    if not isinstance(spec, dict):
        return []
    low, high = spec.get("minReplicaCount"), spec.get("maxReplicaCount", KEDA_DEFAULT_MAX)
    if _count(low) and _count(high) and low > high:
        return ["spec: minReplicaCount must be less than or equal to maxReplicaCount"]
    return []


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def find(documents: Iterable[dict[str, Any]], kind: str = "ScaledObject") -> dict[str, Any]:
    """The CustomResourceDefinition of KEDA's `kind` among `documents`; ConfigError if none."""
    for doc in documents:
        names = (doc.get("spec") or {}).get("names") or {}
        if doc.get("kind") == "CustomResourceDefinition" and names.get("kind") == kind:
            return doc
    raise ConfigError(
        f"no CustomResourceDefinition of {kind} in it; give KEDA's "
        f"config/crd/bases/keda.sh_{kind.lower()}s.yaml or `kubectl get crd "
        f"{kind.lower()}s.keda.sh -o yaml`"
    )


class Validator:
    """A KEDA CRD's served versions, closed, each compiled once."""

    def __init__(self, crd: dict[str, Any]) -> None:
        try:
            self.group = str(crd["spec"]["group"])
            self.name = str(crd["metadata"]["name"])
            served = [v for v in crd["spec"]["versions"] if v.get("served")]
            schemas = {str(v["name"]): closed(v["schema"]["openAPIV3Schema"]) for v in served}
        except (KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"not a CustomResourceDefinition with schemas ({exc!r})") from exc
        cls = _validator_class()
        self._versions = {version: cls(schema) for version, schema in schemas.items()}

    def errors(self, body: dict[str, Any]) -> list[str]:
        """`PATH: message` for every way `body` breaks the CRD, CEL rule included."""
        api = body.get("apiVersion", "")
        if not isinstance(api, str):  # not str(api): it may be a list of thousands of items
            return [f"apiVersion is {spec.shown(api)}; give {self.group}/VERSION"]
        group, _, version = api.partition("/")
        if group != self.group:
            return [f"apiVersion: group {group!r} is not {self.group!r}"]
        validator = self._versions.get(version)
        if validator is None:
            served = ", ".join(sorted(self._versions))
            return [f"apiVersion: {self.name} serves no version {version!r} (it serves {served})"]
        found = sorted(validator.iter_errors(body), key=lambda e: [str(p) for p in e.path])
        return [f"{path(e.absolute_path)}: {message(e)}" for e in found] + cel_errors(body)
