"""KEDA's ScaledObject CRD as a validator: the served version's openAPIV3Schema, closed to
unknown fields, run by jsonschema; and, in Python, what check needs without jsonschema: the
CRD's one CEL rule (minReplicaCount <= maxReplicaCount), which jsonschema cannot run, and its
replica counts and periods (int32 with a minimum), which the API server refuses otherwise.

jsonschema is a development dependency, not in the image: it is imported only when a CRD is
given (`scaler check --crd`, the manifest tests), and its absence is a ConfigError naming the
fix. The CRD itself is read by the caller (yamldocs.documents), not shipped with the scaler.

Must not: read files, or know about this scaler's metadata (check.py does).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from scaler.decision import quoting
from scaler.errors import ConfigError

GROUP = "keda.sh"
KEDA_DEFAULT_MAX = 100
"""maxReplicaCount when a ScaledObject leaves it out, as the CRD's CEL rule and KEDA read it."""
INT32_MAX = 2**31 - 1
"""The largest value of the CRD's `format: int32` counts."""
COUNTS = {
    "minReplicaCount": 0,
    "maxReplicaCount": 1,
    "idleReplicaCount": 0,
    "pollingInterval": 1,
    "cooldownPeriod": 0,
    "initialCooldownPeriod": 0,
    "fallback.failureThreshold": 0,
    "fallback.replicas": 0,
}
"""Every integer field of a ScaledObject's spec and fallback in KEDA's CRD (v2.20), with its
`minimum`; each is `format: int32`. tests/unit/test_check.py holds this to the CRD file."""


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
    'integer'"), which it quotes whole, cut to what quoting.quoted says of it when long."""
    quoted = repr(error.instance)
    if len(quoted) <= quoting.ECHO_CHARS or not error.message.startswith(quoted):
        return str(error.message)
    return f"{quoting.quoted(error.instance)}{error.message[len(quoted) :]}"


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
    low = whole(spec.get("minReplicaCount"))
    high = whole(spec.get("maxReplicaCount", KEDA_DEFAULT_MAX))
    if low is not None and high is not None and low > high:
        return ["spec: minReplicaCount must be less than or equal to maxReplicaCount"]
    return []


def whole(value: object) -> int | None:
    """A YAML value as the CRD's integer: an int, or a float without a fraction (16.0, which
    kubectl sends as 16); None for anything else, a boolean included."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, float) and value.is_integer() else None


def count(so_spec: dict[str, Any], field: str, default: int | None) -> int | None:
    """A ScaledObject spec's count `field` (a key of COUNTS) as KEDA runs it: `default` when it
    is left out, None when the CRD refuses it (count_errors says why)."""
    found = _lookup(so_spec, field)
    if found is None:
        return default
    value = whole(found[0])
    return value if value is not None and COUNTS[field] <= value <= INT32_MAX else None


def count_errors(body: dict[str, Any]) -> dict[str, str]:
    """{`spec.FIELD`: why} for every count of COUNTS the CRD refuses: not a whole number, a
    null (the API server drops it, so KEDA's default runs), below the CRD's minimum or past
    int32. Worded with the fix, as check says it; `--crd` would say the same in the schema's
    words."""
    errors: dict[str, str] = {}
    for field, low in COUNTS.items():
        found = _lookup(body.get("spec"), field)
        problem = None if found is None else count_problem(field, found[0], low)
        if problem:
            errors[f"spec.{field}"] = problem
    fallback = fallback_problem(body.get("spec"))
    if fallback:
        errors["spec.fallback"] = fallback
    if "spec.idleReplicaCount" not in errors and "spec.minReplicaCount" not in errors:
        idle = idle_problem(body.get("spec"))
        if idle:
            errors["spec.idleReplicaCount"] = idle
    return errors


def fallback_problem(so_spec: object) -> str | None:
    """Why KEDA's CRD refuses the spec's `fallback` as a whole (not a mapping, or without one
    of the two keys it requires), with the fix; None when it takes it or there is none."""
    found = _lookup(so_spec, "fallback")
    if found is None:
        return None
    value = found[0]
    fix = "give fallback: {failureThreshold: 3, replicas: N}"
    if not isinstance(value, dict):
        return f"spec.fallback is {quoting.shown(value)}, not a mapping; {fix}"
    missing = [key for key in ("failureThreshold", "replicas") if key not in value]
    if not missing:
        return None
    keys = " and ".join(f"fallback.{key}" for key in missing)
    verb = "is" if len(missing) == 1 else "are"
    return f"{keys} {verb} missing: KEDA's CRD requires both, so kubectl apply refuses it; {fix}"


def idle_problem(so_spec: object) -> str | None:
    """An idleReplicaCount not below minReplicaCount (default 0), which KEDA refuses (its
    admission webhook, or the ScaledObject never becomes Ready): not in the CRD's schema."""
    found, low = _lookup(so_spec, "idleReplicaCount"), _lookup(so_spec, "minReplicaCount")
    idle = whole(found[0]) if found is not None else None
    minimum = whole(low[0]) if low is not None else 0
    if idle is None or minimum is None or idle < minimum:
        return None
    return (
        f"spec.idleReplicaCount {idle} is not below minReplicaCount {minimum}: KEDA "
        "refuses it (idle must be less than min; the ScaledObject is never Ready); lower "
        "idleReplicaCount, or raise minReplicaCount"
    )


def count_problem(field: str, value: object, low: int) -> str | None:
    """Why the CRD refuses `value` for the count `field`, with the fix; None if it takes it."""
    where, key = f"spec.{field}", field.rpartition(".")[2]
    span = f"a whole number from {low} to {INT32_MAX:,}"
    if value is None:
        return (
            f"{where} has no value: the API server drops a null, so KEDA's default would run; "
            f"give {span}, or remove the key"
        )
    number = whole(value)
    if number is None:
        shown = quoting.quoted(value)
        if not isinstance(value, list | dict):  # a list or a mapping says its kind already
            shown = f"{shown} ({type(value).__name__})"
        typed = _integer(value) if isinstance(value, str) else None
        fix = (
            f"write it unquoted: {key}: {typed}"
            if typed is not None and low <= typed <= INT32_MAX
            else f"give {span}"
        )
        return (
            f"{where} is {shown}: KEDA's CRD takes a whole number "
            f"(int32) and `kubectl apply` refuses anything else; {fix}"
        )
    if number < low:
        return f"{where} is {number}: KEDA's CRD refuses it below {low}; give {span}"
    if number > INT32_MAX:
        return f"{where} is {number:,}: past KEDA's CRD's int32; give {span}"
    return None


def _integer(text: str) -> int | None:
    """The integer a quoted count spells ("40"), None for other text."""
    digits = text.strip()
    return int(digits) if re.fullmatch(r"-?[0-9]{1,10}", digits) else None


def _lookup(so_spec: object, field: str) -> tuple[object] | None:
    """(value,) at the dotted `field` of a ScaledObject's spec, None when it or a mapping on the
    way is missing (a spec or fallback that is no mapping is the schema's to refuse)."""
    node = so_spec
    *parents, key = field.split(".")
    for part in parents:
        node = node.get(part) if isinstance(node, dict) else None
    return (node[key],) if isinstance(node, dict) and key in node else None


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
            return [f"apiVersion is {quoting.shown(api)}; give {self.group}/VERSION"]
        group, _, version = api.partition("/")
        if group != self.group:
            return [f"apiVersion: group {group!r} is not {self.group!r}"]
        validator = self._versions.get(version)
        if validator is None:
            served = ", ".join(sorted(self._versions))
            return [f"apiVersion: {self.name} serves no version {version!r} (it serves {served})"]
        found = sorted(validator.iter_errors(body), key=lambda e: [str(p) for p in e.path])
        return [f"{path(e.absolute_path)}: {message(e)}" for e in found] + cel_errors(body)
