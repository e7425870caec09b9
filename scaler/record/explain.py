"""What `scaler explain` says: a target's decision-log records in plain words and figures, over a
period or at an instant, and the total of a ScaledObject over its triggers. The spans, gaps and
totals it reads are scaler/record/timeline.py's (a ScaledObject's scaler/record/scaledobject.py's),
the times and targets it is asked about scaler/record/explain_args.py's. Pure: no clock, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from scaler.decision.spec import format_duration
from scaler.record import decisionrecord, scaledobject, timeline
from scaler.record.decisionrecord import Record
from scaler.record.timeline import HOUR, Gap, Totals


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
        "spend_unrecorded": "the ledger's Prometheus does not hold this scaler's prewarm spend "
        f"(a restart would start a fresh budget): reactive only, {floor}",
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
    all_spans, gaps = timeline.spans(mine, seen_until=(seen_until or {}).get(key))
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
    inside = timeline.clip(all_spans, since, until)
    lines = [head, f"period {when(since)} to {when(until)} ({hours_text((until - since) / HOUR)})"]
    if not inside:
        return [*lines, f"no decision of {key} in this period: {_nearest(mine, since)}"]
    lines += [
        "  " + line
        for line in summary(timeline.totals(inside), shadow=first.get("mode") == "shadow")
    ]
    lines += _no_record(gaps, since=since, until=until)
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


def _no_record(gaps: Sequence[Gap], *, since: float, until: float) -> list[str]:
    return [
        f"  no record {when(max(g.start, since))} to {when(min(g.end, until))}: {g.why}; "
        "not counted"
        for g in gaps
        if g.end > since and g.start < until
    ]


def object_report(
    records: Sequence[Record],
    *,
    keys: Sequence[str],
    since: float,
    until: float,
    seen_until: Mapping[str, float] | None = None,
) -> list[str]:
    """The text of the total over [since, until] of the ScaledObject whose triggers (or
    fingerprints of one trigger) are `keys`: what its HPA ran, the max of their requests at
    each time (scaler/record/scaledobject.py), or at the instant `since == until`; empty when
    none was in force then."""
    triggers = scaledobject.timelines(records, keys=keys, seen_until=seen_until or {})
    name = keys[0].split("#", 1)[0]
    if since == until:
        return _object_at(scaledobject.ran_at(triggers, at=since), name=name, count=len(keys))
    got = scaledobject.combine(triggers, since=since, until=until)
    if got.totals.known_hours <= 0:
        return []
    return [
        f"{name}, the ScaledObject: the max of its {len(keys)} triggers' requests at each time, "
        "as its HPA scales (the sections below are each trigger's own)",
        f"period {when(since)} to {when(until)} ({hours_text((until - since) / HOUR)})",
        *("  " + line for line in summary(got.totals, shadow=False)),
        f"  prewarm here is what prewarm added to the max; the triggers' own (the sections' "
        f"sum) is {got.triggers_prewarm_replica_hours:.2f} replica-hours; the reason and price at "
        "each time are the trigger's that set the max",
        *_no_record(got.gaps, since=since, until=until),
    ]


def _object_at(ran: Record | str | None, *, name: str, count: int) -> list[str]:
    """The ScaledObject's line for an instant (`scaledobject.ran_at`'s answer)."""
    if ran is None:
        return []
    head = f"{name}, the ScaledObject:"
    if isinstance(ran, str):
        return [f"{head} what its HPA ran then is not known: {ran}"]
    return [
        f"{head} its HPA ran {num(ran['desired'])}, the max of its {count} triggers' requests: "
        f"{ran['target']}'s, of which prewarm added {num(ran['prewarm'])} to the max"
    ]


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
