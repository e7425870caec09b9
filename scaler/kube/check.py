"""What `scaler check` finds in a ScaledObject, offline: every external trigger this scaler
would serve (targets.py picks them as `serve --targets` and `retrain` do) read by the server's
own parser, and what the scaler can see that KEDA's validation does not.

Errors (KEDA or the scaler would refuse it, or it scales wrongly):
- metadata the server answers INVALID_ARGUMENT, with the server's message (spec.parse);
- a metadata value that is not a string (KEDA's CRD takes strings only);
- `metricType` other than AverageValue: the answer is a replica count with a target of 1;
- a replica count or period of the spec (minReplicaCount, fallback.replicas, pollingInterval...)
  that is not a whole number within the CRD's int32 bounds, which the API server refuses;
- a `fallback` that is not a mapping or lacks `replicas` or `failureThreshold` (the CRD needs
  both), and an idleReplicaCount not below minReplicaCount (KEDA refuses it; not in the CRD);
- minReplicaCount above maxReplicaCount (the CRD's CEL rule), and with a CRD every schema error;
- a second ScaledObject with the namespace/name of one before it in the documents checked
  together (Names): on apply it replaces the first.

Warnings (it works, not as the author believes; `--strict` makes them errors):
- `minReplicas`/`maxReplicas` that differ from `minReplicaCount`/`maxReplicaCount`;
- `fallback.replicas` outside [minReplicas, maxReplicas];
- no `fallback` on a ScaledObject with an active trigger of this scaler;
- an `external` trigger of a workload that can sit at zero whose pollingInterval is longer than
  the trigger's horizon: the first replica can start after the cold start the forecast planned.

The manifest tests (tests/integration/test_manifests.py) apply these same functions to deploy/.

Must not: read files or print (check_cli.py does), or import jsonschema (crd.py does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scaler.decision import quoting
from scaler.decision.spec import TargetSpec
from scaler.errors import ScalerError, SpecError
from scaler.kube import crd, targets

ERROR = "error"
WARNING = "warning"
KEDA_DEFAULT_MIN = 0
"""minReplicaCount when a ScaledObject leaves it out."""
KEDA_DEFAULT_POLLING = 30
"""pollingInterval, seconds, when a ScaledObject leaves it out."""
AVERAGE_VALUE = "AverageValue"
CRD_MESSAGE_CHARS = 2 * quoting.QUERY_ECHO_CHARS
"""Longest CRD schema message quoted: jsonschema quotes the whole value it refuses (a list of
thousands of items), so a message is cut past its path, its rule and a usual value."""


@dataclass(frozen=True)
class Finding:
    where: str
    """`namespace/name`, or `namespace/name trigger N` (N: the index in spec.triggers, as
    KEDA's `sN-` metric prefix)."""
    severity: str
    message: str


@dataclass
class Report:
    """What one ScaledObject gave."""

    findings: list[Finding] = field(default_factory=list)
    checked: int = 0
    """Triggers of this scaler read."""
    elsewhere: int = 0
    """External triggers left alone because their scalerAddress names another scaler."""


@dataclass
class Names:
    """Where each ScaledObject's namespace/name was first seen, across every document and file
    checked together: applied together, a second of the same name replaces the first, so the
    first's checked triggers and counts are not what runs."""

    first: dict[tuple[str, str], tuple[str, bool]] = field(default_factory=dict)
    """(namespace, name) -> (where it was first seen, whether it set metadata.namespace)."""

    def repeated(self, obj: dict[str, Any], where: str) -> Finding | None:
        """The error of `obj`, seen at `where` (FILE:DOC), when an earlier one has its name."""
        known = targets.identity(obj, "ScaledObject")
        if isinstance(known, targets.Problem) or not known[1]:
            return None  # no name to collide on: check() says so
        meta = obj.get("metadata") or {}
        namespaced = bool(meta.get("namespace"))
        first = self.first.setdefault(known, (where, namespaced))
        if first[0] == where:  # the first, or the same file given twice
            return None
        label = "/".join(known)
        unset = (
            ""
            if namespaced and first[1]
            else " (a ScaledObject without metadata.namespace is read as in default, as check "
            "names it; kubectl puts it in the namespace of its context or of -n)"
        )
        return Finding(
            label,
            ERROR,
            f"another ScaledObject {label} is at {first[0]}: applied together, this one replaces "
            f"it, so the triggers and counts checked there are not what runs{unset}; rename one "
            f"or remove one",
        )


def _address(trigger: dict[str, Any]) -> str:
    """The trigger's scalerAddress, "" when missing, empty or not a string."""
    metadata = trigger.get("metadata")
    found = metadata.get("scalerAddress") if isinstance(metadata, dict) else None
    return found.strip() if isinstance(found, str) else ""


def check(
    obj: dict[str, Any], *, scaler_address: str | None = None, schema: crd.Validator | None = None
) -> Report:
    """The findings of one ScaledObject: the object's first, then each trigger's in order."""
    report = Report()
    known = targets.identity(obj, "ScaledObject")
    if isinstance(known, targets.Problem):
        report.findings.append(Finding(known.where, ERROR, known.error))
        return report
    namespace, name = known
    label = f"{namespace}/{name or '<no name>'}"
    external = targets.external_triggers(obj)
    unaddressed = [(i, t) for i, t in external if not _address(t)]
    for index, _ in unaddressed:  # KEDA: "scaler Address is a required field"
        report.findings.append(
            Finding(
                f"{label} trigger {index}",
                ERROR,
                "no scalerAddress: KEDA refuses an external trigger without one; set it to "
                "this scaler's Service, e.g. scaler.keda.svc:9000",
            )
        )
    external = [(i, t) for i, t in external if _address(t)]
    ours = [(i, t) for i, t in external if targets.names(t, scaler_address)]
    report.elsewhere = len(external) - len(ours)
    report.checked = len(ours)
    counts = crd.count_errors(obj)
    mine = {f"spec.triggers.{index}.metadata." for index, _ in ours} | {f"{c}:" for c in counts}
    for problem in schema.errors(obj) if schema else crd.cel_errors(obj):
        # A metadata value or a count reported below with its fix is not said twice.
        if not any(problem.startswith(prefix) for prefix in mine):
            quoted = quoting.echo(problem, CRD_MESSAGE_CHARS)
            report.findings.append(Finding(label, ERROR, f"KEDA's CRD: {quoted}"))
    report.findings.extend(Finding(label, ERROR, problem) for problem in counts.values())
    if not name:
        report.findings.append(Finding(label, ERROR, "no metadata.name: KEDA needs one"))
        return report
    so_spec: dict[str, Any] = obj["spec"] if isinstance(obj.get("spec"), dict) else {}
    active = False
    for index, trigger in ours:
        where = f"{label} trigger {index}"
        found, parsed = check_trigger(namespace, name, trigger, so_spec)
        report.findings.extend(Finding(where, severity, text) for severity, text in found)
        active = active or (parsed is not None and parsed.mode == "active")
    missing = missing_fallback(so_spec) if active else None
    if missing:
        report.findings.append(Finding(label, WARNING, missing))
    return report


def check_trigger(
    namespace: str, name: str, trigger: dict[str, Any], so_spec: dict[str, Any]
) -> tuple[list[tuple[str, str]], TargetSpec | None]:
    """(severity, message) of one trigger, and its TargetSpec when the server would accept it."""
    found: list[tuple[str, str]] = []
    wrong_type = metric_type_error(trigger)
    if wrong_type:
        found.append((ERROR, wrong_type))
    metadata = trigger.get("metadata") or {}
    if not isinstance(metadata, dict):
        return [*found, (ERROR, "trigger metadata is not a mapping of strings")], None
    found += [(ERROR, text) for text in value_errors(metadata)]
    try:
        parsed = targets.parse_trigger(namespace, name, as_sent(metadata))
    except ScalerError as exc:  # the very message KEDA gets with INVALID_ARGUMENT
        return [*found, (ERROR, str(exc))], None
    found += [(WARNING, text) for text in replica_bounds(so_spec, parsed, as_sent(metadata))]
    found += [(WARNING, text) for text in fallback_bounds(so_spec, parsed)]
    late = late_wake(so_spec, trigger, parsed)
    if late:
        found.append((WARNING, late))
    return found, parsed


def as_sent(metadata: dict[Any, Any]) -> dict[str, str]:
    """Metadata as the scaler would read it: a key without a value, or with a list or a mapping,
    is no key, the rest text (value_errors has said those are not strings)."""
    return {
        str(k): targets.text_of(v)
        for k, v in metadata.items()
        if v is not None and not isinstance(v, list | dict)
    }


def value_errors(metadata: dict[Any, Any]) -> list[str]:
    """Metadata values KEDA's CRD refuses: it takes strings only."""
    found = (targets.value_problem(key, value) for key, value in metadata.items())
    return [problem for problem in found if problem]


def metric_type_error(trigger: dict[str, Any]) -> str | None:
    """Why the trigger's metricType scales wrongly, or None for AverageValue (the default)."""
    kind = trigger.get("metricType")
    if kind is None or kind == AVERAGE_VALUE:
        return None
    quoted = quoting.quoted(kind)
    return (
        f"metricType {quoted}: the scaler answers the desired replica count with a target of "
        f"1, which only AverageValue (the default) turns into that many replicas; Value makes "
        f"the HPA multiply it by the ready pods; set metricType: AverageValue or leave it out"
    )


def replica_bounds(
    so_spec: dict[str, Any], target: TargetSpec, metadata: dict[str, str]
) -> list[str]:
    """Where the trigger's minReplicas/maxReplicas differ from KEDA's minReplicaCount/
    maxReplicaCount: one of the two caps is then a lie. `metadata` is the trigger's, as sent:
    a fix names a trigger value only if the scaler's parser takes it."""
    low = crd.count(so_spec, "minReplicaCount", KEDA_DEFAULT_MIN)
    high = crd.count(so_spec, "maxReplicaCount", crd.KEDA_DEFAULT_MAX)
    if low is None or high is None or low > high:  # KEDA refuses the spec: an error said why
        return []
    keda = {"minReplicas": low, "maxReplicas": high}
    mine = {"minReplicas": target.min_replicas, "maxReplicas": target.max_replicas}
    differ = {key: str(keda[key]) for key in keda if keda[key] != mine[key]}
    problems = []
    if "minReplicas" in differ:
        effect = (
            "the HPA never goes below minReplicaCount, so the scaler's floor is not what runs"
            if low > target.min_replicas
            else "the scaler never asks below minReplicas, so KEDA's floor is not what runs"
        )
        fix = _fix("minReplicas", differ, metadata=metadata, target=target)
        problems.append(
            f"minReplicas {target.min_replicas} differs from minReplicaCount {low}: {effect}; {fix}"
        )
    if "maxReplicas" in differ:
        effect = (
            "the scaler may ask for replicas the HPA will not run, and its decision log and "
            "prewarm budget count them"
            if high < target.max_replicas
            else "the HPA may run more than the scaler's cap (fallback, other triggers)"
        )
        fix = _fix("maxReplicas", differ, metadata=metadata, target=target)
        problems.append(
            f"maxReplicas {target.max_replicas} differs from maxReplicaCount {high}: {effect}; "
            f"{fix}"
        )
    return problems


def _fix(key: str, differ: dict[str, str], *, metadata: dict[str, str], target: TargetSpec) -> str:
    """How to make the trigger's `key` agree with KEDA's count: the trigger follows KEDA's
    value (`differ`, by key), alone or with the other key when it needs that one too, unless the
    scaler's parser refuses it (above its own cap, say); then KEDA's count follows the
    trigger."""
    field, mine = (
        ("minReplicaCount", target.min_replicas)
        if key == "minReplicas"
        else ("maxReplicaCount", target.max_replicas)
    )
    alone = _refusal(target, {**metadata, key: differ[key]})
    if alone is None:
        return f'set {key}: "{differ[key]}" (or {field}: {mine})'
    if len(differ) > 1 and _refusal(target, {**metadata, **differ}) is None:
        both = " and ".join(f'{name}: "{value}"' for name, value in differ.items())
        return f"set {both} (or {field}: {mine})"
    return f'set {field}: {mine}; the scaler refuses {key}: "{differ[key]}" ({alone})'


def _refusal(target: TargetSpec, metadata: dict[str, str]) -> str | None:
    """Why the scaler's parser refuses the trigger `metadata` (the fix of a key's error), None
    when it takes it."""
    try:
        targets.parse_trigger(target.namespace, target.name, metadata)
    except SpecError as exc:
        return exc.fix
    except ScalerError as exc:
        return str(exc)
    return None


def fallback_bounds(so_spec: dict[str, Any], target: TargetSpec) -> list[str]:
    """A fallback.replicas outside the trigger's [minReplicas, maxReplicas]."""
    replicas = crd.count(so_spec, "fallback.replicas", None)
    if replicas is None:  # none, or one KEDA refuses: an error said why
        return []
    if replicas > target.max_replicas:
        return [
            f"fallback.replicas {replicas} is above maxReplicas {target.max_replicas}: while "
            "the scaler cannot answer, KEDA runs more than the cap you set on it"
        ]
    if replicas < target.min_replicas:
        return [
            f"fallback.replicas {replicas} is below minReplicas {target.min_replicas}: while "
            "the scaler cannot answer, KEDA runs less than the floor you set on it"
        ]
    return []


def late_wake(so_spec: dict[str, Any], trigger: dict[str, Any], target: TargetSpec) -> str | None:
    """Why a workload that can sit at zero wakes later than the forecast allows: KEDA asks an
    `external` trigger's IsActive once per pollingInterval, so the first replica is asked for up
    to that long after the scaler says active. The forecast looks `horizon` past the cold start,
    which absorbs a wait shorter than it; a longer one makes the first replica late even when
    the forecast saw the load coming. None when it cannot happen or the wait fits."""
    if trigger.get("type") != "external":  # external-push: StreamIsActive wakes it at once
        return None
    low = crd.count(so_spec, "minReplicaCount", KEDA_DEFAULT_MIN)
    idle = crd.count(so_spec, "idleReplicaCount", None)
    polling = crd.count(so_spec, "pollingInterval", KEDA_DEFAULT_POLLING)
    if low is None or polling is None or (low > 0 and idle != 0):
        return None
    if polling <= target.horizon:
        return None
    return (
        f"pollingInterval {polling}s is longer than the trigger's horizon "
        f"({target.horizon:g}s, how far past the cold start the forecast looks): waking from "
        f"zero, KEDA asks whether to start the first replica only every {polling}s, so it can "
        f"start after the cold start the forecast planned for; lower pollingInterval, or use "
        f"type: external-push (the scaler's StreamIsActive wakes it at once)"
    )


def missing_fallback(so_spec: dict[str, Any]) -> str | None:
    """Why an active trigger wants a `fallback`, or None when the ScaledObject has one."""
    if so_spec.get("fallback"):
        return None
    return (
        "no spec.fallback: when the scaler has no trustworthy answer (no data, data older than "
        "--staleness, Prometheus down) it answers UNAVAILABLE rather than guess, and only a "
        "fallback tells KEDA what to run meanwhile (without one the HPA holds whatever count "
        "it had, whatever the load does); add fallback: {failureThreshold: 3, replicas: N}"
    )
