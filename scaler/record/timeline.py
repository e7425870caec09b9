"""The timeline of one target's decision-log records: when each decision was in force (spans),
when none was known (gaps), and the sums over spans (GPU-hours, prewarm, money, time per
reason) that `scaler explain` reports. Pure: no clock, no I/O, no words.

A record's decision holds from its `at` until the next record of its target, as long as that
next one came by the record's `next_by` (plus slack); otherwise the scaler stopped deciding for
the target for a while: the decision is counted for one step and the rest is a gap, reported
and not counted. A `stop` record closes the decision before it one step after its `at`, an
`unanswered` one at its `at`; a `start` record after a line with no `stop` means the process
that wrote it died, when is not known: that line counts one step, the rest is a gap. The last
record holds until the target was last seen deciding (the server knows), else one step.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from scaler.record import decisionrecord
from scaler.record.decisionrecord import Record

HOUR = 3600.0
SLACK_STEPS = 2
"""Steps a line may come after its predecessor's `next_by` and still continue it (a slow
refresh delays a step; a stopped scaler misses many)."""


@dataclass(frozen=True)
class Span:
    """A decision (its record) in force from `start` to `end`."""

    record: Record
    start: float
    end: float

    @property
    def hours(self) -> float:
        return max(0.0, self.end - self.start) / HOUR


@dataclass(frozen=True)
class Gap:
    start: float
    end: float
    why: str = "the scaler was not deciding for this target (stopped, or KEDA stopped asking)"


STOPPED = "the scaler was stopped"
RESTARTED = (
    "the scaler restarted without a clean stop; when it stopped answering before is not known"
)


@dataclass
class Totals:
    """Sums over the spans of one target within a period."""

    known_hours: float = 0.0
    replica_hours: float = 0.0
    """Replicas answered to KEDA x hours (GPU-hours for one GPU per replica)."""
    prewarm_replica_hours: float = 0.0
    """Prewarm replicas x hours (of the predictive decision; not served in shadow mode)."""
    money: float | None = None
    prewarm_money: float | None = None
    currency: str | None = None
    reason_hours: dict[str, float] = field(default_factory=dict)


def spans(
    records: Sequence[Record], *, seen_until: float | None = None
) -> tuple[list[Span], list[Gap]]:
    """The spans and gaps of ONE target's records (any order)."""
    lines = sorted(records, key=lambda r: float(r["at"]))
    out: list[Span] = []
    gaps: list[Gap] = []
    for i, line in enumerate(lines):
        nxt = lines[i + 1] if i + 1 < len(lines) else None
        event = line.get("event")
        if event in decisionrecord.ENDS:
            # Until it decides again (a restart, fresh data), nothing was answered or is known.
            ended = _ended(line)  # the span before's end
            if nxt is not None and float(nxt["at"]) > ended:
                why = STOPPED if event == decisionrecord.STOP else _unanswered(line)
                gaps.append(Gap(ended, float(nxt["at"]), why))
            continue
        at, step = float(line["at"]), float(line["step"])
        if nxt is None:
            end = max(at, seen_until if seen_until is not None else at) + step
        elif nxt.get("event") in decisionrecord.ENDS:
            end = _ended(nxt)
        elif nxt.get("event") == decisionrecord.START:  # written by a process that died
            end = min(at + step, float(nxt["at"]))
            if float(nxt["at"]) > end:
                gaps.append(Gap(end, float(nxt["at"]), RESTARTED))
        elif float(nxt["at"]) <= float(line.get("next_by") or at) + SLACK_STEPS * step:
            end = float(nxt["at"])
        else:
            end = at + step
            gaps.append(Gap(end, float(nxt["at"])))
        out.append(Span(line, at, end))
    return out, gaps


def left_open(records: Sequence[Record]) -> list[Gap]:
    """The gap ONE target's last line leaves open when it is `unanswered`: KEDA was not answered
    from its `at` on, for as long as the log knows (to infinity; clip it). `spans` reports no
    gap after a last line, as nothing after it is the target's; a ScaledObject's other triggers
    still decided then (scaler/record/scaledobject.py), but what its HPA ran is not known."""
    last = max(records, key=lambda r: float(r["at"]), default=None)
    if last is None or last.get("event") != decisionrecord.UNANSWERED:
        return []
    return [Gap(float(last["at"]), math.inf, _unanswered(last))]


def _ended(line: Record) -> float:
    """When the decision before an ending line stopped: one step after a `stop` (its last step
    ran), at an `unanswered` line's `at` (answers stopped then)."""
    if line.get("event") == decisionrecord.STOP:
        return float(line["at"]) + float(line.get("step") or 0.0)
    return float(line["at"])


def _unanswered(line: Record) -> str:
    why = line.get("error") or "no trusted decision"
    return f"KEDA was not answered ({why}); its ScaledObject's fallback applied"


def clip(items: Sequence[Span], since: float, until: float) -> list[Span]:
    return [
        Span(s.record, max(s.start, since), min(s.end, until))
        for s in items
        if s.end > since and s.start < until
    ]


def totals(items: Iterable[Span]) -> Totals:
    t = Totals()
    reasons: dict[str, float] = defaultdict(float)
    for s in items:
        r, h = s.record, s.hours
        t.known_hours += h
        t.replica_hours += float(r["desired"]) * h
        t.prewarm_replica_hours += float(r["prewarm"]) * h
        reasons[str(r["reason"])] += h
        price = r.get("cost_per_replica_hour")
        if price is not None:
            t.money = (t.money or 0.0) + float(r["desired"]) * h * float(price)
            t.prewarm_money = (t.prewarm_money or 0.0) + float(r["prewarm"]) * h * float(price)
            t.currency = str(r.get("currency") or "")
    t.reason_hours = dict(sorted(reasons.items(), key=lambda kv: -kv[1]))
    return t
