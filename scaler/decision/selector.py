"""Kubernetes label selectors (`podSelector: app=llm,tier in (gpu)`): parsed, validated, and
turned into PromQL matchers on kube-state-metrics' `kube_pod_labels`.

Owns: the selector grammar Kubernetes accepts (`k=v`, `k==v`, `k!=v`, `k in (a,b)`,
`k notin (a,b)`, `k`, `!k`), the syntax of label keys and values, and the `label_<key>` names
kube-state-metrics gives pod labels. Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?"
KEY_RE = re.compile(rf"^({_PREFIX}/)?{_NAME}$")
VALUE_RE = re.compile(rf"^({_NAME})?$")
MAX_REQUIREMENTS = 16
_SET_RE = re.compile(r"^(\S+)\s+(in|notin)\s+\(([^()]*)\)$")
_EQ_RE = re.compile(r"^([^=!\s]+)\s*(==|=|!=)\s*(\S*)$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str
    """One of =, !=, in, notin, exists, !exists."""
    values: tuple[str, ...] = ()


def parse(text: str) -> tuple[Requirement, ...]:
    """The requirements of a selector; ValueError naming the part that is wrong."""
    parts = _split(text)
    if not parts:
        raise ValueError("is empty; give at least one requirement such as app=llm-serve")
    if len(parts) > MAX_REQUIREMENTS:
        raise ValueError(f"has {len(parts)} requirements; at most {MAX_REQUIREMENTS}")
    return tuple(_requirement(part) for part in parts)


def _split(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise ValueError("has a ')' without its '('")
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    if depth:
        raise ValueError("has a '(' without its ')'")
    parts.append(current.strip())
    if any(not p for p in parts) and text.strip():
        raise ValueError("has an empty requirement (two commas in a row, or a trailing one)")
    return [p for p in parts if p]


def _requirement(part: str) -> Requirement:
    found = _SET_RE.match(part)
    if found:
        key, op, inner = found.groups()
        values = tuple(v.strip() for v in inner.split(","))
        for value in values:
            _check_value(value, part)
        return Requirement(_check_key(key, part), op, values)
    found = _EQ_RE.match(part)
    if found:
        key, op, value = found.groups()
        _check_value(value, part)
        return Requirement(_check_key(key, part), "!=" if op == "!=" else "=", (value,))
    if part.startswith("!"):
        return Requirement(_check_key(part[1:].strip(), part), "!exists")
    return Requirement(_check_key(part, part), "exists")


def _check_key(key: str, part: str) -> str:
    if not KEY_RE.match(key) or len(key) > 317:
        raise ValueError(
            f"{part!r}: {key!r} is not a label key ([prefix/]name, name at most 63 letters, "
            f"digits, '-', '_', '.')"
        )
    return key


def _check_value(value: str, part: str) -> None:
    if not VALUE_RE.match(value):
        raise ValueError(
            f"{part!r}: {value!r} is not a label value (at most 63 letters, digits, '-', '_', '.')"
        )


def label_name(key: str) -> str:
    """The label kube-state-metrics gives pod label `key` on kube_pod_labels."""
    return "label_" + re.sub(r"[^A-Za-z0-9_]", "_", key)


def promql_matchers(requirements: tuple[Requirement, ...]) -> list[str]:
    """PromQL matchers selecting the pods of `requirements` on kube_pod_labels. Values are
    label-value syntax (no quotes, backslashes or regex metacharacters but '.')."""
    matchers = []
    for req in requirements:
        name = label_name(req.key)
        if req.op in ("=", "!="):
            matchers.append(f'{name}{req.op}"{req.values[0]}"')
        elif req.op in ("in", "notin"):
            alternatives = "|".join(re.escape(v).replace("\\", "\\\\") for v in req.values)
            matchers.append(f'{name}{"=~" if req.op == "in" else "!~"}"{alternatives}"')
        elif req.op == "exists":
            matchers.append(f'{name}!=""')
        else:
            matchers.append(f'{name}=""')
    return matchers
