"""`scaler explain NAMESPACE/NAME` over a ScaledObject with more than one trigger or fingerprint:
one total for the ScaledObject, the max of its triggers' requests at each time, as its HPA
scales (scaler/record/scaledobject.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from scaler.decision.policy import Reason
from scaler.record import scaledobject
from scaler.record.decisionlog import DecisionLog
from scaler.serving.state import TargetState
from tests.unit.decision_records import STEP, decide, target
from tests.unit.exits import exit_code

HOUR = 3600.0
T0 = datetime(2026, 11, 28, 0, 0, tzinfo=UTC).timestamp()  # a Saturday
Plan = list[tuple[int, int]]


def run(log: DecisionLog, state: TargetState, plan: Plan, *, first: int) -> dict[float, Any]:
    """Decide `plan` (reactive, prewarm per step) for `state` from step `first`; the record of
    each step by its time."""
    out = {}
    for i, (reactive, prewarm) in enumerate(plan, first):
        at = T0 + i * STEP
        why = Reason.FORECAST if prewarm else Reason.REACTIVE
        record = decide(state, at=at, reactive=reactive, prewarm=prewarm, reason=why)
        log.write(record)
        out[at] = record
    return out


def served(*triggers: dict[float, Any]) -> tuple[float, float]:
    """GPU-hours and prewarm replica-hours the HPA ran: the max of the requests at each step,
    and the max minus the max of what each asked without its prewarm."""
    gpu = prewarm = 0.0
    for at in sorted(set().union(*triggers)):
        asked = [t[at] for t in triggers if at in t]
        top = max(float(r["desired"]) for r in asked)
        gpu += top * STEP / HOUR
        prewarm += (top - max(float(r["desired"] - r["prewarm"]) for r in asked)) * STEP / HOUR
    return gpu, prewarm


def edited(path: Path) -> tuple[dict[float, Any], dict[float, Any]]:
    """A trigger decided for 6 hours, then its metadata edited (a new fingerprint, a new
    target) and decided for 6 more; the old one is decided for 2 steps after the new one came
    in, until the scaler finds it superseded and stops it."""
    log = DecisionLog(path)
    old = target(costPerReplicaHour="2.5", prewarmBudget="1000")
    new = target(costPerReplicaHour="2.5", prewarmBudget="1000", threshold="40")
    assert old.spec.key != new.spec.key
    half = int(6 * HOUR / STEP)
    before = run(log, old, [(8, 2)] * (half // 2) + [(9, 0)] * (half // 2 + 2), first=0)
    after = run(log, new, [(6, 1)] * half, first=half)
    log.stop(old.spec.key)
    log.close()
    return before, after


def records_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_an_edited_trigger_s_fingerprints_get_one_scaledobject_total(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: a section per fingerprint and no total, so "what did inference/llm cost this
    week" had no single answer."""
    path = tmp_path / "decisions.jsonl"
    before, after = edited(path)
    gpu, prewarm = served(before, after)
    until = T0 + 12 * HOUR
    code = exit_code(
        ["explain", "team-a/llm", "--log", str(path), "--since", f"@{T0}", "--until", f"@{until}"]
    )
    out = capsys.readouterr().out
    assert code == 0
    total = out.split("\nteam-a/llm#")[0]  # the total comes before the sections
    assert "team-a/llm, the ScaledObject" in total
    assert f"GPU-hours (replica-hours served): {gpu:.2f} = {2.5 * gpu:.2f} USD" in total
    assert f"prewarm replica-hours: {prewarm:.2f} = {2.5 * prewarm:.2f} USD" in total
    assert "decisions known for 12h" in total and "no record" not in total


def test_two_live_triggers_run_the_max_of_their_requests_and_prewarm_only_above_it() -> None:
    """Two triggers (two metrics) of one ScaledObject are not two fleets: the HPA runs the max.
    B's prewarm buys nothing while A's reactive need is higher, though B's ledger pays it."""
    a = target(metricName="llm-queue", prewarmBudget="1000", costPerReplicaHour="3")
    b = target(metricName="llm-tokens", prewarmBudget="1000", costPerReplicaHour="3")
    log = DecisionLog(None)
    steps = int(HOUR / STEP)
    ra = run(log, a, [(10, 0)] * (2 * steps), first=0)
    rb = run(log, b, [(4, 4)] * steps + [(9, 4)] * steps, first=0)
    log.close()
    records = log.recent([a.spec.key, b.spec.key], since=T0, until=T0 + 3 * HOUR)
    got = scaledobject.combine(timelines(records), since=T0, until=T0 + 2 * HOUR)
    gpu, prewarm = served(ra, rb)
    assert got.totals.replica_hours == pytest.approx(gpu) == pytest.approx(10 + 13)
    assert got.totals.prewarm_replica_hours == pytest.approx(prewarm) == pytest.approx(3)
    assert got.totals.money == pytest.approx(3 * gpu)
    assert got.triggers_prewarm_replica_hours == pytest.approx(8)  # the two ledgers' sum
    # the reason of the trigger that set the replicas: A's the first hour, B's the second
    assert got.totals.reason_hours == pytest.approx({"reactive": 1.0, "forecast": 1.0})
    assert got.totals.known_hours == pytest.approx(2.0) and got.gaps == []


def timelines(records: list[dict[str, Any]]) -> scaledobject.Timelines:
    keys = sorted({str(r["target"]) for r in records})
    return scaledobject.timelines(records, keys=keys, seen_until={})


def refused(*, hours: int, back: bool) -> tuple[list[dict[str, Any]], str]:
    """Triggers A (10 replicas for `hours`) and B (4), B's query refused after its first hour
    and, when `back`, answered again in the third; the records and A's key."""
    a = target(metricName="llm-queue")
    b = target(metricName="llm-tokens")
    log = DecisionLog(None)
    steps = int(HOUR / STEP)
    run(log, a, [(10, 0)] * (hours * steps), first=0)
    run(log, b, [(4, 0)] * steps, first=0)
    log.unanswered(b.spec.key, at=T0 + HOUR, why="Prometheus refused the query")
    if back:
        run(log, b, [(4, 0)] * steps, first=2 * steps)
    log.close()
    return log.recent([a.spec.key, b.spec.key], since=T0, until=T0 + 4 * HOUR), a.spec.key


def test_while_one_trigger_is_unanswered_the_scaledobject_is_not_known_and_not_counted() -> None:
    """Its HPA ran KEDA's fallback or the other trigger's request, or more: not known."""
    records, _ = refused(hours=3, back=True)
    got = scaledobject.combine(timelines(records), since=T0, until=T0 + 3 * HOUR)
    assert got.totals.known_hours == pytest.approx(2.0)
    assert got.totals.replica_hours == pytest.approx(20.0)
    assert [(g.start, g.end) for g in got.gaps] == [(T0 + HOUR, T0 + 2 * HOUR)]
    assert "KEDA was not answered" in got.gaps[0].why


def test_a_stretch_between_fingerprints_with_no_decision_is_named_and_not_counted() -> None:
    old = target()
    new = target(threshold="40")
    log = DecisionLog(None)
    steps = int(HOUR / STEP)
    run(log, old, [(5, 0)] * steps, first=0)
    log.stop(old.spec.key)
    run(log, new, [(5, 0)] * steps, first=2 * steps)  # KEDA asked the new one an hour later
    log.close()
    records = log.recent([old.spec.key, new.spec.key], since=T0, until=T0 + 4 * HOUR)
    got = scaledobject.combine(timelines(records), since=T0, until=T0 + 4 * HOUR)
    assert got.totals.replica_hours == pytest.approx(10.0)
    assert [(g.start, g.end) for g in got.gaps] == [(T0 + HOUR, T0 + 2 * HOUR)]
    assert got.gaps[0].why == scaledobject.NO_TRIGGER


def test_a_shadow_trigger_s_prewarm_is_not_served_so_not_in_the_scaledobject_s_prewarm() -> None:
    a = target(mode="shadow", metricName="llm-queue")
    log = DecisionLog(None)
    for i in range(int(HOUR / STEP)):
        record = decide(a, at=T0 + i * STEP, reactive=6, prewarm=3, reason=Reason.FORECAST)
        log.write({**record, "desired": 6})  # shadow mode serves the reactive decision
    log.close()
    records = log.recent([a.spec.key], since=T0, until=T0 + 2 * HOUR)
    assert {(r["mode"], r["prewarm"]) for r in records} == {("shadow", 3)}
    got = scaledobject.combine(timelines(records), since=T0, until=T0 + 2 * HOUR)
    assert got.totals.replica_hours == pytest.approx(6.0)
    assert got.totals.prewarm_replica_hours == 0.0
    assert got.triggers_prewarm_replica_hours == pytest.approx(3.0)


def test_at_an_instant_the_scaledobject_says_what_its_hpa_ran_and_which_trigger_set_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "decisions.jsonl"
    before, after = edited(path)
    overlap = min(after) + STEP / 2  # both fingerprints decided: the old one asked more
    old, new = before[overlap - STEP / 2]["target"], after[overlap - STEP / 2]["target"]
    for at, asked, who, prewarm in ((overlap, 9, old, 0), (overlap + HOUR, 7, new, 1)):
        code = exit_code(["explain", "team-a/llm", "--log", str(path), "--at", f"@{at}"])
        out = capsys.readouterr().out
        assert code == 0
        assert (
            f"team-a/llm, the ScaledObject: its HPA ran {asked}, the max of its 2 triggers' "
            f"requests: {who}'s, of which prewarm added {prewarm} to the max"
        ) in out


def test_at_an_instant_in_one_trigger_s_gap_what_ran_is_not_known() -> None:
    records, a = refused(hours=2, back=False)
    ran = scaledobject.ran_at(timelines(records), at=T0 + HOUR / 2)
    assert isinstance(ran, dict) and ran["target"] == a and ran["desired"] == 10
    # B's query is still refused at its last line: not known while A still decides
    assert "KEDA was not answered" in str(scaledobject.ran_at(timelines(records), at=T0 + HOUR))
    got = scaledobject.combine(timelines(records), since=T0, until=T0 + 4 * HOUR)
    assert [(g.start, g.end) for g in got.gaps] == [(T0 + HOUR, T0 + 2 * HOUR)]
    assert scaledobject.ran_at(timelines(records), at=T0 + 3 * HOUR) is None


def test_an_edit_that_fixes_a_refused_query_ends_its_old_fingerprint_s_unanswered_gap() -> None:
    """The old target ends `unanswered` with no `stop` (superseded while not answered): the
    ScaledObject is not known from then until the new fingerprint starts, then known again."""
    old = target()
    new = target(threshold="40")
    log = DecisionLog(None)
    steps = int(HOUR / STEP)
    run(log, old, [(5, 0)] * steps, first=0)
    log.unanswered(old.spec.key, at=T0 + HOUR, why="Prometheus refused the query")
    log.stop(old.spec.key)  # superseded: no line after an unanswered one
    run(log, new, [(6, 0)] * steps, first=steps + 20)  # the fixed trigger, 10 minutes later
    log.close()
    records = log.recent([old.spec.key, new.spec.key], since=T0, until=T0 + 4 * HOUR)
    assert [r["event"] for r in records if r["target"] == old.spec.key][-1] == "unanswered"
    got = scaledobject.combine(timelines(records), since=T0, until=T0 + 4 * HOUR)
    fixed = T0 + HOUR + 20 * STEP
    assert [(g.start, g.end) for g in got.gaps] == [(T0 + HOUR, fixed)]
    assert "KEDA was not answered (Prometheus refused the query)" in got.gaps[0].why
    assert got.totals.replica_hours == pytest.approx(5 + 6)
