"""Multi-document YAML text -> the mappings in it, read as kubectl reads manifests: a key
repeated in a mapping refused (when asked), aliases bounded by go-yaml's rule, so that an alias
bomb of a few hundred bytes cannot become gigabytes in a message or a merge, and every failure a
`NotYaml` naming the source and the line. The one home of `yaml`.

Must not: know what a ScaledObject is (targets.py does).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from scaler.errors import ConfigError

MAX_FILE_BYTES = 64 * 1024 * 1024
"""A targets file larger than this is refused: 100,000 ScaledObjects fit well under it."""


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


def read_text(path: Path, what: str = "targets file") -> str:
    """A manifest file's text; ConfigError naming it as `what` (the targets file of serve and
    retrain, check's manifest) if it cannot be read, is too large or not UTF-8."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ConfigError(f"{path}: larger than {MAX_FILE_BYTES} bytes; split the {what}")
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the {what} ({exc})") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc}); give ScaledObject manifests") from exc
