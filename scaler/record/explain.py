"""What `scaler explain` says: decision-log records turned into spans, totals and plain words.
Pure: no clock (`now` is passed in), no I/O.

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
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from scaler.decision.spec import format_duration, parse_duration
from scaler.errors import ScalerError
from scaler.record import decisionrecord
from scaler.record.decisionrecord import Record

HOUR = 3600.0
SLACK_STEPS = 2
"""Steps a line may come after its predecessor's `next_by` and still continue it (a slow
refresh delays a step; a stopped scaler misses many)."""


class ExplainError(ScalerError):
    """A bad argument or an unknown target; the message names it and the fix."""


def parse_time(text: str, *, now: float) -> float:
    """An ISO time (UTC when no offset is given), `now`, a duration before now (`6h`), or
    `@EPOCH` seconds; from 1970 to a year after `now` (a duration of 1e320s was minus
    infinity, and /explain answered 500)."""
    value = _parse_time(text.strip(), now=now)
    if not 0 <= value <= now + 366 * 86400:
        raise ExplainError(
            f"time {text.strip()!r} is out of range; give one from 1970 to a year from now"
        )
    return value


def _parse_time(text: str, *, now: float) -> float:
    if text == "now":
        return now
    if text.startswith("@"):
        try:
            value = float(text[1:])
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 0:
            raise ExplainError(f"time {text!r} is not @EPOCH seconds, e.g. @1764322200")
        return value
    try:
        return now - parse_duration(text)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ExplainError(
            f"time {text!r} is neither an ISO time (2026-11-28T09:30, UTC unless an offset is "
            "given) nor a duration before now (6h, 2d), nor @EPOCH seconds"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def matching(keys: Iterable[str], wanted: str) -> list[str]:
    """The target keys (`ns/name#fingerprint`) that `wanted` names: `ns/name` matches every
    trigger of that ScaledObject, `ns/name#fp` only that one."""
    wanted = wanted.strip()
    if "#" in wanted:
        return sorted(k for k in set(keys) if k == wanted)
    return sorted(k for k in set(keys) if k.split("#", 1)[0] == wanted)


def check_target(wanted: str) -> str:
    if re.fullmatch(r"[^/#\s]+/[^/#\s]+(#[0-9a-f]+)?", wanted.strip()) is None:
        raise ExplainError(
            f"target {wanted!r} is not NAMESPACE/NAME (or NAMESPACE/NAME#FINGERPRINT for one "
            "trigger), e.g. inference/llm"
        )
    return wanted.strip()


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


# ---- words -------------------------------------------------------------------------------------
def when(at: float) -> str:
    """`2026-11-28 Sat 09:30:00Z`: the weekday answers "that Saturday"."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %a %H:%M:%SZ")


def num(x: Any) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "?"
    value = float(x)
    if value == round(value) or abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.3g}"


def hours_text(h: float) -> str:
    return format_duration(h * HOUR) if h > 0 else "0s"


def _quantile(q: Any) -> str:
    return "P?" if q is None else f"P{float(q) * 100:.3g}"


def _budget(r: Record) -> str:
    if not r.get("budget_known", True):
        return "budget not known yet"
    unit = str(r.get("budget_unit") or "replica-hours")
    window = format_duration(float(r.get("budget_window") or 0))
    left, budget = num(r.get("budget_remaining")), num(r.get("budget"))
    return f"budget {left} of {budget} {unit} left per {window}"


def why(r: Record) -> str:
    """The reason of a decision in words and figures."""
    reason = str(r.get("reason"))
    peak, q = r.get("forecast_peak"), _quantile(r.get("quantile"))
    within = format_duration(float(r.get("lookahead") or 0))
    need = (
        f"forecast {q} of {num(peak)} within {within} needs {num(r.get('predictive'))} "
        f"at {num(r.get('threshold'))} per replica"
    )
    floor = (
        f"load {num(r.get('floor'))} (max over the HPA's 5 minutes) needs {num(r.get('reactive'))}"
    )
    held = num(r.get("prewarm"))
    no_forecast = (
        f"reactive, plus {held} replicas held from the last lead time's load, paid from the "
        f"budget; {floor}"
        if float(r.get("prewarm") or 0) > 0
        else f"reactive only, {floor}"
    )
    coverage = f"{float(r['coverage']):.0%}" if r.get("coverage") is not None else "?"
    drifted = (
        f"forecasts drifted (coverage {coverage} against {_quantile(r.get('nominal_quantile'))})"
    )
    words = {
        "forecast": need,
        "reactive": f"{need}, no more than {floor}",
        "budget_capped": f"{need}, but the budget allowed only {num(r.get('prewarm'))} prewarm",
        "hold": f"{need}; the load of the last lead time is held past the HPA's 5 minutes, "
        f"{num(r.get('prewarm'))} replicas above reactive paid from the budget",
        "level": f"{need}, below the level the load is at: the load of the HPA's 5 minutes is "
        f"insured at the forecast's band (levelInsurance), {num(r.get('prewarm'))} replicas "
        "above reactive paid from the budget",
        "prewarm_capped": f"{need}, capped at maxPrewarmReplicas "
        f"{num(r.get('max_prewarm_replicas'))} above reactive",
        "prewarm_off": f"{need}, but the trigger turns prewarm off ({_off(r)}): reactive "
        f"only, {floor}",
        "max_replicas": f"{need if peak is not None else floor}; "
        f"maxReplicas {num(r.get('max_replicas'))} cut the request",
        "min_replicas": f"{floor}; minReplicas {num(r.get('min_replicas'))} raised the request",
        "drift_fallback": f"{drifted}: {no_forecast}",
        "drift_margin": f"{drifted}: reactive plus a margin from the load's recent growth, "
        f"{held} replicas above reactive paid from the budget; {floor}",
        "no_model": f"no usable model ({r.get('model_note') or 'not fitted'}): {no_forecast}",
        "budget_unknown": "the window's prewarm spend could not be read back yet: reactive only, "
        f"{floor}",
        "no_data": "no current load sample (no data), so nothing was decided",
    }
    return words.get(reason, f"reason {reason}")


def _off(r: Record) -> str:
    """Which key of the trigger turns its prewarm off (reason prewarm_off)."""
    if r.get("max_prewarm_replicas") is not None and float(r["max_prewarm_replicas"]) <= 0:
        return "maxPrewarmReplicas 0"
    return "prewarmBudget 0"


def _bound(r: Record) -> str:
    """What made the request differ from reactive + prewarm: maxReplicas or minReplicas (the
    three are numbers in every record: explain_cli.NUMBERS)."""
    asked, parts = float(r["desired"]), float(r["reactive"]) + float(r["prewarm"])
    if asked < parts:
        return f", cut to maxReplicas {num(r.get('max_replicas'))}"
    if asked > parts:
        return f", raised to minReplicas {num(r.get('min_replicas'))}"
    return ""


def describe(r: Record) -> str:
    """One decision in a line: what was asked, why, the budget, the model and drift."""
    head = (
        f"asked {num(r['desired'])} (reactive {num(r['reactive'])} + prewarm {num(r['prewarm'])}"
        f"{_bound(r)})"
    )
    if r.get("reason") == "no_data":  # decided nothing: its reactive and prewarm are 0
        head = f"asked {num(r['desired'])} (the last request, held)"
    if r.get("mode") == "shadow":
        head = (
            f"served {num(r['desired'])} (shadow: reactive only); the forecast would ask "
            f"{num(r.get('predictive_desired'))} (prewarm {num(r['prewarm'])})"
        )
    model = r.get("model_kind")
    extra = f"model {model} {r.get('model_version')}" if model else "no model"
    if r.get("drift") not in (None, "ok"):
        extra += f", drift {r['drift']}"
    return f"{head}: {why(r)}; {_budget(r)}; {extra}"


def summary(t: Totals, *, shadow: bool) -> list[str]:
    lines = [f"decisions known for {hours_text(t.known_hours)}"]
    money = f" = {t.money:.2f} {t.currency}" if t.money is not None else ""
    lines.append(f"GPU-hours (replica-hours served): {t.replica_hours:.2f}{money}")
    pre_money = f" = {t.prewarm_money:.2f} {t.currency}" if t.prewarm_money is not None else ""
    note = " (shadow: not served)" if shadow else ""
    lines.append(f"prewarm replica-hours: {t.prewarm_replica_hours:.2f}{pre_money}{note}")
    if t.known_hours > 0:
        parts = [
            f"{reason} {hours_text(h)} ({h / t.known_hours:.0%})"
            for reason, h in t.reason_hours.items()
        ]
        lines.append("time per reason: " + ", ".join(parts))
    return lines


def report(
    records: Sequence[Record],
    *,
    key: str,
    since: float,
    until: float,
    seen_until: Mapping[str, float] | None = None,
) -> list[str]:
    """The text of one target's explanation over [since, until]; `since == until` explains
    the decision in force at that instant."""
    mine = [r for r in records if r.get("target") == key]
    all_spans, gaps = spans(mine, seen_until=(seen_until or {}).get(key))
    first = mine[0] if mine else {}
    head = (
        f"{key}  metric {first.get('metric')}  query {first.get('query')!r}  "
        f"mode {first.get('mode')}"
    )
    if since == until:
        held = [s for s in all_spans if s.start <= since < s.end]
        if not held:
            nearest = _nearest(mine, since)
            return [head, f"no decision of {key} in force at {when(since)}: {nearest}"]
        s = held[-1]
        return [
            head,
            f"at {when(since)} the decision in force since {when(float(s.record['since']))} was:",
            f"  {describe(s.record)}",
        ]
    inside = clip(all_spans, since, until)
    lines = [head, f"period {when(since)} to {when(until)} ({hours_text((until - since) / HOUR)})"]
    if not inside:
        return [*lines, f"no decision of {key} in this period: {_nearest(mine, since)}"]
    lines += ["  " + line for line in summary(totals(inside), shadow=first.get("mode") == "shadow")]
    for g in gaps:
        if g.end > since and g.start < until:
            lines.append(
                f"  no record {when(max(g.start, since))} to {when(min(g.end, until))}: "
                f"{g.why}; not counted"
            )
    lines.append("changes:")
    previous: tuple[Any, ...] | None = None
    for s in inside:
        decision = decisionrecord.decision_of(s.record)
        if decision == previous:
            continue
        previous = decision
        began = float(s.record.get("since") or s.start)
        earlier = f" (in force since {when(began)})" if began < s.start else ""
        lines.append(f"  {when(s.start)}{earlier} {describe(s.record)}")
    return lines


def _nearest(records: Sequence[Record], at: float) -> str:
    if not records:
        return "no records at all"
    times = [float(r["at"]) for r in records]
    before = [t for t in times if t <= at]
    after = [t for t in times if t > at]
    parts = []
    if before:
        parts.append(f"the last record before is at {when(max(before))}")
    if after:
        parts.append(f"the next record is at {when(min(after))}")
    return "; ".join(parts) + " (widen --since/--until, or give --at inside)"
