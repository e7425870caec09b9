"""ScaledObject manifests -> the targets this scaler serves: every `external` or
`external-push` trigger (whose scalerAddress points at us, when an address is given), its
metadata parsed by scaler.decision.spec. Reads a `--targets FILE` (multi-document YAML, or the
List `kubectl get scaledobjects -A -o yaml` prints) or objects listed from the cluster.

YAML aliases are read as kubectl reads them: a document whose aliases would expand it past
go-yaml's bound (`alias_share_allowed`) is refused before it is built, so that an alias bomb
of a few hundred bytes cannot become gigabytes in a message or a merge.

A trigger that does not parse is reported as a `Problem` naming the object, the trigger and the
key, and the others still count: one team's typo must not stop everyone's retraining.

Must not: talk to the API (scaledobjects.py does).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
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


@dataclass(frozen=True)
class Document:
    """One object of a manifest file, and where it is for a reader of the file."""

    where: str
    """The YAML document's number in the file, 1 first; `3.2` is the second item of the List
    (`kubectl get -o yaml`) that is the third document."""
    body: dict[str, Any]


class NotYaml(ConfigError):
    """Text that is not YAML: `line` (1 first, 0 when unknown) is where the parser stopped."""

    heading = "not YAML"
    """What `scaler check` prints before the problem: `FILE:LINE: error: HEADING: PROBLEM`."""

    def __init__(self, source: str, line: int, problem: str) -> None:
        self.source, self.line, self.problem = source, line, problem
        super().__init__(self.describe())

    def describe(self) -> str:
        at = f" at line {self.line}" if self.line else ""
        return f"{self.source}: not YAML{at} ({self.problem}); give ScaledObject manifests"


class ExcessiveAliasing(NotYaml):
    """YAML whose aliases would expand it past kubectl's bound (`alias_share_allowed`), or an
    anchor holding an alias of itself: refused before it is built. `problem` says the fix."""

    heading = "excessive aliasing"

    def describe(self) -> str:
        return f"{self.source}: excessive aliasing at line {self.line}: {self.problem}"


ALIAS_FLOOR_NODES = 1000
ALIAS_FLOOR_REPEATS = 100
"""A document reading at most ALIAS_FLOOR_NODES nodes, or at most ALIAS_FLOOR_REPEATS of them
through aliases, is never refused for its aliases (go-yaml's floors)."""
ALIAS_SHARE_SMALL = 0.99
ALIAS_SHARE_LARGE = 0.10
ALIAS_SMALL_NODES = 400_000
ALIAS_LARGE_NODES = 4_000_000
"""Up to ALIAS_SMALL_NODES nodes read, ALIAS_SHARE_SMALL of them may come through aliases (an
expansion up to 100-fold); from ALIAS_LARGE_NODES on, ALIAS_SHARE_LARGE; evenly between."""


def alias_share_allowed(nodes: int) -> float:
    """The share of a document's `nodes` read, aliases expanded, that may come through aliases:
    the rule kubectl's YAML reader (go-yaml, `allowedAliasRatio`) refuses "excessive aliasing"
    by. A `<<: *defaults` in every object of a file is far inside it; an alias bomb (9 anchors
    of 9 aliases each: 600 bytes that would read as 387 million nodes) is refused after a few
    thousand."""
    if nodes <= ALIAS_SMALL_NODES:
        return ALIAS_SHARE_SMALL
    if nodes >= ALIAS_LARGE_NODES:
        return ALIAS_SHARE_LARGE
    falling = (nodes - ALIAS_SMALL_NODES) / (ALIAS_LARGE_NODES - ALIAS_SMALL_NODES)
    return ALIAS_SHARE_SMALL - (ALIAS_SHARE_SMALL - ALIAS_SHARE_LARGE) * falling


def _excessive(nodes: int, repeated: int) -> bool:
    if nodes <= ALIAS_FLOOR_NODES or repeated <= ALIAS_FLOOR_REPEATS:
        return False
    return repeated / nodes > alias_share_allowed(nodes)


class _AliasError(yaml.YAMLError):
    """A document refused for its aliases at `line` (1 first); documents() turns it into
    ExcessiveAliasing."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(problem)
        self.line, self.problem = line, problem


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def bound_aliases(root: yaml.Node) -> None:
    """Refuse a composed document whose aliases expand it past `alias_share_allowed`, or whose
    anchor holds an alias of itself, before anything builds it: PyYAML shares an anchored value
    among its aliases, but a message or a merge key that reads the value through every alias
    would build all of it.

    An alias is the anchored node itself again, so the walk counts each node once as the
    document's own and adds a repeated node's whole size (memoised) at each alias: linear in the
    document, however far it would expand. The error's line is the collection holding the
    alias that crosses the bound."""
    sizes: dict[int, int] = {}
    """id(node) -> nodes read for it, itself included, aliases expanded; set when it closes."""
    opened = {id(root)}
    own, repeated = 1, 0
    stack: list[tuple[yaml.Node, Iterator[yaml.Node], list[int]]] = [
        (root, iter(_children(root)), [1])
    ]
    while stack:
        node, rest, size = stack[-1]
        child = next(rest, None)
        if child is None:
            stack.pop()
            sizes[id(node)] = size[0]
            opened.discard(id(node))
            if stack:
                stack[-1][2][0] += size[0]
            continue
        if id(child) in opened:
            raise _AliasError(
                node.start_mark.line + 1,
                f"the node anchored at line {child.start_mark.line + 1} holds an alias "
                'of itself, which never ends (kubectl refuses it: "anchor contains itself"); '
                "remove that alias",
            )
        if id(child) not in sizes:  # the document's own node, read for the first time
            own += 1
            opened.add(id(child))
            stack.append((child, iter(_children(child)), [1]))
            continue
        repeated += sizes[id(child)]
        size[0] += sizes[id(child)]
        if _excessive(own + repeated, repeated):
            share = alias_share_allowed(own + repeated)
            raise _AliasError(
                node.start_mark.line + 1,
                f"an alias here of the node at line {child.start_mark.line + 1} brings "
                f"the document to {own + repeated:,} nodes read, {repeated:,} of them through "
                f"aliases (its own: {own:,}); kubectl refuses a document more than {share:.0%} "
                "of whose nodes are read through aliases; write the repeated values out rather "
                "than aliasing aliases",
            )


# libyaml's loader when PyYAML has it: 4x faster on 1,000 ScaledObjects, at start-up.
_LIBYAML: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE = "tag:yaml.org,2002:merge"


class _Loader(_LIBYAML):  # type: ignore[misc]
    """The safe loader, refusing excessive aliasing (bound_aliases) before it builds a
    document."""

    def construct_document(self, node: yaml.Node) -> Any:
        bound_aliases(node)
        return super().construct_document(node)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        try:
            return int(super().construct_yaml_int(node))
        except ValueError as exc:  # past Python's limit on the digits of an int read from text
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"a number of {len(node.value):,} characters, more digits than the "
                f"{sys.get_int_max_str_digits():,} Python reads; quote it if it is text",
                node.start_mark,
            ) from exc


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)


class _UniqueKeys(_Loader):
    """Refuses a mapping that repeats a key, as kubectl does ("mapping key already defined"):
    PyYAML keeps the last silently, so a second `maxReplicas` would hide the first."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> Any:
        seen: dict[str, int] = {}
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag == _MERGE:
                continue
            if key.value in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"key {key.value!r} is repeated (first at line {seen[key.value]}); kubectl "
                    "refuses it, and a reader keeping the last value drops the first",
                    key.start_mark,
                )
            seen[key.value] = key.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def documents(text: str, source: str, *, unique_keys: bool = False) -> list[Document]:
    """The mappings of a multi-document YAML text, Lists flattened, with where each is;
    NotYaml naming `source` and the line (a repeated key too, with `unique_keys`)."""
    loader = _UniqueKeys if unique_keys else _Loader
    try:
        loaded = list(yaml.load_all(text, Loader=loader))
    except _AliasError as exc:
        raise ExcessiveAliasing(source, exc.line, exc.problem) from exc
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = "; ".join(str(part) for part in (exc.context, exc.problem) if part)
        raise NotYaml(source, mark.line + 1 if mark else 0, problem or str(exc)) from exc
    except yaml.YAMLError as exc:
        raise NotYaml(source, 0, str(exc)) from exc
    found: list[Document] = []
    for number, doc in enumerate(loaded, 1):
        listed = isinstance(doc, dict) and isinstance(doc.get("kind"), str)
        if listed and doc["kind"].endswith("List"):  # not str(kind): it may be a huge list
            items = doc.get("items") or []
            found.extend(
                Document(f"{number}.{index}", item)
                for index, item in enumerate(items if isinstance(items, list) else [], 1)
                if isinstance(item, dict)
            )
        elif isinstance(doc, dict):
            found.append(Document(str(number), doc))
    return found


def read_text(path: Path) -> str:
    """A manifest file's text; ConfigError if it cannot be read, is too large or not UTF-8."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ConfigError(f"{path}: larger than {MAX_FILE_BYTES} bytes; split the targets")
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the targets file ({exc})") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc}); give ScaledObject manifests") from exc


def read_file(path: Path) -> list[dict[str, Any]]:
    """The ScaledObject dicts in a YAML file (documents, Lists flattened); ConfigError if the
    file cannot be read or is not YAML."""
    found = documents(read_text(path), str(path))
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
    name = spec.echo(text_of(key))
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
            f"metadata.{name} is {spec.shown(value)}: KEDA's CRD takes strings only and `kubectl "
            f"apply` refuses it; give a string"
        )
    quoted = spec.shown(value)
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
