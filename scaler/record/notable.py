"""The decisions a person should hear about, found in the stream of decision records: a
target entering or leaving drift fallback, its prewarm budget running out, a new model taking
over. Each becomes a `Notice`, which scaler/kube/events.py posts as a Kubernetes Event on the
ScaledObject. Pure: no I/O, no clock (times come from the records).

A target's first known state (its first record with a drift state, its first with a known
budget ledger) is no change, but a replica that starts into fallback or with its budget spent
must still say so: that becomes a Notice marked `initial`, which events.py posts only when no
Event on the object says it already (so a restart, or a second replica, does not repeat it).

Must not: rate-limit (events.py does, per object and reason), or announce a first state that is
the ordinary one (trusted, budget left, the model in use).
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
    initial: bool = False
    """The target's first known state in this process, not a change it saw happen."""


@dataclass(frozen=True)
class _Seen:
    fallback: bool | None
    """None: no drift state yet (no model)."""
    exhausted: bool | None
    """None: the budget ledger is not known yet."""
    model: str | None


class Notable:
    """Remembers each target's last record and says what changed with the next one."""

    def __init__(self) -> None:
        self._last: OrderedDict[str, _Seen] = OrderedDict()

    def changes(self, record: dict[str, Any]) -> list[Notice]:
        key = str(record["target"])
        drift = record.get("drift")
        now = _Seen(
            fallback=None if drift is None else drift == "fallback",
            exhausted=_exhausted(record),
            model=record.get("model_version"),
        )
        before = self._last.pop(key, None) or _Seen(None, None, None)
        if now.fallback is None or now.exhausted is None:  # unknown for now: nothing changed
            now = _Seen(
                before.fallback if now.fallback is None else now.fallback,
                before.exhausted if now.exhausted is None else now.exhausted,
                now.model,
            )
        self._last[key] = now
        while len(self._last) > MEMORY_TARGETS:
            self._last.popitem(last=False)
        found = []

        def notice(reason: str, message: str, *, warning: bool, initial: bool = False) -> None:
            found.append(
                Notice(
                    str(record["namespace"]),
                    str(record["name"]),
                    reason,
                    message,
                    warning,
                    float(record["at"]),
                    initial,
                )
            )

        if now.fallback and not before.fallback:
            notice(
                DRIFT_FALLBACK,
                _drift_message(record, entering=True),
                warning=True,
                initial=before.fallback is None,
            )
        if before.fallback and now.fallback is False:
            notice(DRIFT_RECOVERED, _drift_message(record, entering=False), warning=False)
        if now.exhausted and not before.exhausted:
            notice(
                BUDGET_EXHAUSTED,
                f"prewarm budget spent: {record.get('budget_spent', 0):.4g} of "
                f"{record.get('budget', 0):.4g} {record.get('budget_unit')} in the last "
                f"{float(record.get('budget_window') or 0) / 3600:.4g}h; no prewarm until it "
                f"refills (scaling reactively)",
                warning=True,
                initial=before.exhausted is None,
            )
        if now.model is not None and before.model is not None and now.model != before.model:
            notice(
                MODEL_PROMOTED,
                f"model {record.get('model_kind')} {now.model} replaces {before.model}",
                warning=False,
            )
        return found


def _exhausted(record: dict[str, Any]) -> bool | None:
    """None while the ledger is unknown (rebuilt from Prometheus after a start)."""
    remaining, limit = record.get("budget_remaining"), record.get("budget")
    if not record.get("budget_known") or remaining is None:
        return None
    if not limit:
        return False
    return float(remaining) <= 0 < float(limit)


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
