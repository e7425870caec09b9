"""The decisions a person should hear about, found in the stream of decision records: a
target entering or leaving drift fallback, its prewarm budget running out, a new model taking
over. Each becomes a `Notice`, which scaler/kube/events.py posts as a Kubernetes Event on the
ScaledObject. Pure: no I/O, no clock (times come from the records).

Must not: rate-limit (events.py does, per object and reason), or treat a target's first record
as a change (a restart must not announce what was already so).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

DRIFT_FALLBACK = "DriftFallback"
DRIFT_RECOVERED = "DriftRecovered"
BUDGET_EXHAUSTED = "PrewarmBudgetExhausted"
MODEL_PROMOTED = "ModelPromoted"

MEMORY_TARGETS = 4096
"""Targets remembered; the least recently seen is forgotten first (as the decision log)."""


@dataclass(frozen=True)
class Notice:
    namespace: str
    name: str
    reason: str
    """CamelCase, as Kubernetes Event reasons are."""
    message: str
    warning: bool
    at: float


@dataclass(frozen=True)
class _Seen:
    fallback: bool
    exhausted: bool
    model: str | None


class Notable:
    """Remembers each target's last record and says what changed with the next one."""

    def __init__(self) -> None:
        self._last: OrderedDict[str, _Seen] = OrderedDict()

    def changes(self, record: dict[str, Any]) -> list[Notice]:
        key = str(record["target"])
        now = _Seen(
            fallback=record.get("drift") == "fallback",
            exhausted=_exhausted(record),
            model=record.get("model_version"),
        )
        before = self._last.pop(key, None)
        self._last[key] = now
        while len(self._last) > MEMORY_TARGETS:
            self._last.popitem(last=False)
        if before is None:
            return []
        found = []

        def notice(reason: str, message: str, *, warning: bool) -> None:
            found.append(
                Notice(
                    str(record["namespace"]),
                    str(record["name"]),
                    reason,
                    message,
                    warning,
                    float(record["at"]),
                )
            )

        if now.fallback and not before.fallback:
            notice(DRIFT_FALLBACK, _drift_message(record, entering=True), warning=True)
        if before.fallback and not now.fallback:
            notice(DRIFT_RECOVERED, _drift_message(record, entering=False), warning=False)
        if now.exhausted and not before.exhausted:
            notice(
                BUDGET_EXHAUSTED,
                f"prewarm budget spent: {record.get('budget_spent', 0):.4g} of "
                f"{record.get('budget', 0):.4g} {record.get('budget_unit')} in the last "
                f"{float(record.get('budget_window') or 0) / 3600:.4g}h; no prewarm until it "
                f"refills (scaling reactively)",
                warning=True,
            )
        if now.model is not None and before.model is not None and now.model != before.model:
            notice(
                MODEL_PROMOTED,
                f"model {record.get('model_kind')} {now.model} replaces {before.model}",
                warning=False,
            )
        return found


def _exhausted(record: dict[str, Any]) -> bool:
    remaining, limit = record.get("budget_remaining"), record.get("budget")
    if not record.get("budget_known") or remaining is None or not limit:
        return False
    return float(remaining) <= 0 and float(limit) > 0


def _drift_message(record: dict[str, Any], *, entering: bool) -> str:
    coverage, wape = record.get("coverage"), record.get("wape")
    figures = []
    if coverage is not None:
        figures.append(f"coverage {coverage * 100:.0f}%")
    if wape is not None:
        figures.append(f"WAPE {wape * 100:.0f}%")
    said = f" ({', '.join(figures)})" if figures else ""
    if entering:
        return f"forecast drifted{said}: scaling reactively until it earns trust back"
    return f"forecast trusted again{said}: prewarming resumes"
