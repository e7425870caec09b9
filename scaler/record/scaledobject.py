"""A ScaledObject's totals over a period from the timelines of its triggers (scaler/record/
timeline.py): what `scaler explain NAMESPACE/NAME` prints above the sections of a ScaledObject
with more than one trigger or fingerprint. Pure: no clock, no I/O, no words.

The triggers of one ScaledObject are not fleets to add up: KEDA hands their metrics to one HPA,
which scales the workload to the largest of their desired replica counts. So at each instant the
ScaledObject ran the max of the `desired` of its triggers' decisions in force, and its GPU-hours
are that max's integral. The instant's reason and price are those of the trigger that set the
max (of the triggers asking it, the one with the least prewarm in it: the replicas were there
without the others' prewarm).

An edit of a trigger's metadata is a new fingerprint (a new target, `ns/name#newfingerprint`);
the old one is decided for until the scaler finds it superseded, a poll or two later, though
KEDA asks only the new one by then (docs/decision-log.md, `start`). The max counts those
minutes at the larger of the two requests: at most that difference above what the HPA ran, for
those minutes, and never less. The old and new are not told apart from two live triggers.

Prewarm: each trigger's ledger pays for the prewarm of its own decisions above its own reactive
(the sections' prewarm replica-hours, summed as `triggers_prewarm_replica_hours`). The
ScaledObject ran prewarm replicas only where prewarm raised the max: at each instant, the max of
`desired` minus the max of what each trigger asked without its prewarm (a shadow trigger serves
none of its prewarm). That is the sections' sum for one trigger at a time (an edit's
fingerprints), and less where another trigger's own need already ran those replicas.

An instant is known when a decision of a trigger is in force and no trigger is in a gap of its
own (timeline.Gap): in one trigger's gap what the HPA ran is not known (that trigger may have
asked more, or KEDA's fallback applied). Those gaps, and the stretches between the period's
first and last decisions where no trigger has a decision in force, are the ScaledObject's
stretches with no record, not counted. `combine` sums a period; `ran_at` answers an instant.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scaler.record import timeline
from scaler.record.decisionrecord import Record
from scaler.record.timeline import Gap, Span, Totals

NO_TRIGGER = "no trigger of the ScaledObject had a decision in force"

Timelines = Mapping[str, tuple[Sequence[Span], Sequence[Gap]]]
"""Each trigger's (target key's) spans and gaps, as timeline.spans returns them."""


@dataclass(frozen=True)
class ObjectTotals:
    totals: Totals
    """The ScaledObject's: replica-hours of the max request, prewarm that raised the max,
    money at the price of the trigger that set it, time per that trigger's reason."""
    gaps: list[Gap]
    """Stretches of the period with no known request of the ScaledObject, not counted."""
    triggers_prewarm_replica_hours: float
    """The sum of the triggers' own prewarm replica-hours (what their sections say)."""


def timelines(
    records: Sequence[Record], *, keys: Sequence[str], seen_until: Mapping[str, float]
) -> Timelines:
    """The timelines of the triggers `keys` from their records (any order). A trigger whose
    last line is `unanswered` (timeline.left_open) is in a gap until a trigger of the
    ScaledObject starts after it (an edit that fixed its query: the old target is superseded
    without a `stop`), else until the last decision of the others ends."""
    mine = {key: [r for r in records if r.get("target") == key] for key in keys}
    firsts = [min(float(r["at"]) for r in rs) for rs in mine.values() if rs]
    out = {key: timeline.spans(rs, seen_until=seen_until.get(key)) for key, rs in mine.items()}
    last = max((s[-1].end for s, _ in out.values() if s), default=-math.inf)
    for key, rs in mine.items():
        for g in timeline.left_open(rs):
            end = min((t for t in firsts if t > g.start), default=last)
            if end > g.start:
                out[key][1].append(Gap(g.start, end, g.why))
    return out


def combine(triggers: Timelines, *, since: float, until: float) -> ObjectTotals:
    """The totals over [since, until] of the ScaledObject whose triggers' timelines these are."""
    spans = {key: timeline.clip(s, since, until) for key, (s, _) in sorted(triggers.items())}
    gaps = [
        Gap(max(g.start, since), min(g.end, until), g.why)
        for _, trigger_gaps in triggers.values()
        for g in trigger_gaps
        if g.end > since and g.start < until
    ]
    edges = sorted(
        {x for s in spans.values() for span in s for x in (span.start, span.end)}
        | {x for g in gaps for x in (g.start, g.end)}
    )
    known: list[Span] = []
    missing: list[Gap] = []
    for start, end in itertools.pairwise(edges):
        ran = _ran(spans, gaps, at=start) if end > start else None
        if isinstance(ran, str):
            missing.append(Gap(start, end, ran))
        elif ran is not None:
            known.append(Span(ran, start, end))
    charged = sum(timeline.totals(s).prewarm_replica_hours for s in spans.values())
    return ObjectTotals(timeline.totals(known), _merged(missing), charged)


def ran_at(triggers: Timelines, *, at: float) -> Record | str | None:
    """What the ScaledObject ran at the instant `at`: the record of the trigger that set the
    max, its `prewarm` what prewarm added to the max; or why that is not known (a trigger's
    gap); None when no trigger had a decision in force."""
    ran = _ran(
        {key: list(s) for key, (s, _) in sorted(triggers.items())},
        [g for _, gaps in triggers.values() for g in gaps],
        at=at,
    )
    return None if ran == NO_TRIGGER else ran


def _ran(spans: Mapping[str, Sequence[Span]], gaps: Sequence[Gap], *, at: float) -> Record | str:
    """The served record at `at` (`spans`: each trigger's in time order), or the why of a
    trigger's gap, or NO_TRIGGER."""
    hole = next((g for g in gaps if g.start <= at < g.end), None)
    if hole is not None:
        return hole.why
    asked = []
    for s in spans.values():
        i = bisect.bisect_right(s, at, key=lambda span: span.start) - 1
        if i >= 0 and at < s[i].end:
            asked.append(s[i].record)
    return _served(asked) if asked else NO_TRIGGER


def _without_prewarm(r: Record) -> float:
    """What a trigger's decision asked without its prewarm (a shadow one serves none)."""
    desired = float(r["desired"])
    return desired if r.get("mode") == "shadow" else desired - float(r["prewarm"])


def _served(asked: Sequence[Record]) -> Record:
    """The record the ScaledObject ran on while `asked` were in force: the largest request,
    its prewarm the part of the max that prewarm made."""
    top = max(asked, key=lambda r: (float(r["desired"]), _without_prewarm(r)))
    prewarm = float(top["desired"]) - max(_without_prewarm(r) for r in asked)
    return {**top, "prewarm": prewarm}


def _merged(pieces: Sequence[Gap]) -> list[Gap]:
    """Adjacent pieces of the same why as one gap."""
    out: list[Gap] = []
    for g in pieces:
        if out and out[-1].end == g.start and out[-1].why == g.why:
            out[-1] = Gap(out[-1].start, g.end, g.why)
        else:
            out.append(g)
    return out
