"""The decision log (what is written, when, how it is bounded) and the pure reading and
wording of `scaler explain`."""

from __future__ import annotations

import io
import itertools
import json
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from scaler.decision.policy import Reason
from scaler.errors import ConfigError
from scaler.record import decisionrecord, explain, explain_args, explain_cli, timeline
from scaler.record.decisionlog import DecisionLog
from tests.unit.decision_records import STEP, decide, target
from tests.unit.exits import exit_code

HOUR = 3600.0
T0 = datetime(2026, 11, 28, 0, 0, tzinfo=UTC).timestamp()  # a Saturday


def schedule(steps: int, seed: int) -> list[tuple[int, int]]:
    """(reactive, prewarm) per step: runs of random length, as load and forecasts move."""
    rng = random.Random(seed)
    out: list[tuple[int, int]] = []
    while len(out) < steps:
        run = rng.randint(1, 120)
        out += [(rng.randint(1, 12), rng.choice([0, 0, 1, 2, 4]))] * run
    return out[:steps]


def write(log: DecisionLog, plan: list[tuple[int, int]], *, start: float = T0) -> list[float]:
    state = target(costPerReplicaHour="2.5", prewarmBudget="1000")
    times = []
    for i, (reactive, prewarm) in enumerate(plan):
        at = start + i * STEP
        reason = Reason.FORECAST if prewarm else Reason.REACTIVE
        log.write(decide(state, at=at, reactive=reactive, prewarm=prewarm, reason=reason))
        times.append(at)
    return times


def written_log(tmp_path: Path, steps: int, seed: int) -> tuple[Path, list[dict[str, Any]]]:
    """A decision log of `steps` random decisions, closed, and its records."""
    path = tmp_path / "decisions.jsonl"
    log = DecisionLog(path)
    write(log, schedule(steps, seed=seed))
    log.close()
    return path, lines(path)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_line_is_written_per_decision_change_plus_a_checkpoint_when_one_holds_long(
    tmp_path: Path,
) -> None:
    plan = schedule(2000, seed=1)
    log = DecisionLog(tmp_path / "d.jsonl", checkpoint=900.0)
    write(log, plan)
    log.close()
    written = lines(tmp_path / "d.jsonl")
    changes = 1 + sum(1 for a, b in itertools.pairwise(plan) if a != b)
    assert written[0]["event"] == "start"  # the process's first line of the target
    assert sum(1 for r in written if r["event"] in ("start", "change")) == changes
    assert written[-1]["event"] == "stop"
    assert len(written) < len(plan) / 5  # not a line per step
    # every line is followed by the next of its target by its own `next_by`
    for line, nxt in itertools.pairwise(written):
        assert nxt["at"] <= line["next_by"]
    assert all(r["v"] == 1 for r in written)


def test_the_reader_counts_every_step_once_as_a_per_step_sum_would(tmp_path: Path) -> None:
    plan = schedule(3000, seed=2)
    log = DecisionLog(tmp_path / "d.jsonl")
    times = write(log, plan)
    log.close()
    records = lines(tmp_path / "d.jsonl")
    key = str(records[0]["target"])
    since, until = T0 + 1000 * STEP + 7, T0 + 2500 * STEP
    spans, gaps = timeline.spans(records)
    got = timeline.totals(timeline.clip(spans, since, until))
    exact = sum(
        (r + p) * (min(t + STEP, until) - max(t, since)) / HOUR
        for t, (r, p) in zip(times, plan, strict=True)
        if t + STEP > since and t < until
    )
    assert gaps == []
    assert got.replica_hours == pytest.approx(exact)
    assert got.money == pytest.approx(exact * 2.5)
    assert got.known_hours == pytest.approx((until - since) / HOUR)
    assert sum(got.reason_hours.values()) == pytest.approx(got.known_hours)
    assert explain_args.matching([key], "team-a/llm") == [key]


def killed_and_restarted(path: Path, plan: list[tuple[int, int]], *, down: float) -> list[Any]:
    """The records of `plan` decided, the process killed (no stop line), and `plan` decided
    again by a new process `down` seconds after the first one's last step."""
    log = DecisionLog(path, checkpoint=900.0)
    write(log, plan)
    assert log._file is not None
    log._file.close()  # killed: no stop line
    restarted = DecisionLog(path, checkpoint=900.0)
    write(restarted, plan, start=T0 + len(plan) * STEP + down)
    restarted.close()
    return lines(path)


def test_a_killed_scaler_is_a_gap_not_a_bill_because_each_line_says_when_the_next_is_due(
    tmp_path: Path,
) -> None:
    plan = [(10, 0)] * 200
    down = 6 * HOUR
    records = killed_and_restarted(tmp_path / "d.jsonl", plan, down=down)
    spans, gaps = timeline.spans(records)
    counted = timeline.totals(spans).replica_hours
    served = 10 * 2 * len(plan) * STEP / HOUR
    assert len(gaps) == 1 and gaps[0].end - gaps[0].start >= down
    # what the last checkpoint leaves unknown is under the checkpoint interval
    assert served - 10 * 900.0 / HOUR <= counted <= served
    # ablation: without next_by, "a line holds until the next one" bills the 6 hours down
    naive = sum(
        float(a["desired"]) * (float(b["at"]) - float(a["at"])) / HOUR
        for a, b in itertools.pairwise(records)
        if a["event"] != "stop"
    )
    assert naive > served + 10 * (down - 900.0) / HOUR


def test_a_kill_shorter_than_a_checkpoint_is_a_gap_up_to_the_restart_not_a_bill(
    tmp_path: Path,
) -> None:
    """The restart's first line came before the killed process's `next_by`, so the 90 s down
    were billed as if the old decision had been answered through them."""
    plan = [(10, 0)] * 200
    records = killed_and_restarted(tmp_path / "d.jsonl", plan, down=90.0)
    back = T0 + len(plan) * STEP + 90.0
    spans, gaps = timeline.spans(records)
    assert [g.end for g in gaps] == [back] and gaps[0].why == timeline.RESTARTED
    assert timeline.totals(spans).replica_hours <= 10 * 2 * 2 * len(plan) * STEP / HOUR
    text = "\n".join(explain.report(records, key=records[0]["target"], since=T0, until=back + HOUR))
    assert "restarted without a clean stop" in text


def test_a_clean_stop_and_a_restart_hours_later_is_a_named_gap(tmp_path: Path) -> None:
    """A stop line closed the span, but the hours until the restart were in no gap: the report
    did not say the scaler was down, as it does for a kill."""
    plan = [(10, 0)] * 200
    log = DecisionLog(tmp_path / "d.jsonl", checkpoint=900.0)
    write(log, plan)
    log.close()  # a clean stop: a stop line
    down = 6 * HOUR
    restarted = DecisionLog(tmp_path / "d.jsonl", checkpoint=900.0)
    write(restarted, plan, start=T0 + len(plan) * STEP + down)
    restarted.close()
    records = lines(tmp_path / "d.jsonl")
    assert [r["event"] for r in records].count("stop") == 2
    spans, gaps = timeline.spans(records)
    assert len(gaps) == 1 and gaps[0].end - gaps[0].start >= down - STEP
    assert timeline.totals(spans).replica_hours == pytest.approx(10 * 2 * len(plan) * STEP / HOUR)
    key = records[0]["target"]
    text = "\n".join(explain.report(records, key=key, since=T0, until=T0 + 2 * down))
    assert "no record" in text and "not counted" in text


def test_the_server_s_records_of_a_period_bound_its_last_decision_by_the_next_one(
    tmp_path: Path,
) -> None:
    """/explain for a period ending inside a silence (KEDA stopped asking, the target expired)
    billed the silence: the first line after the period was dropped, so the period's last
    decision ran to the newest time the server had seen."""
    plan = [(10, 0)] * 40
    log = DecisionLog(tmp_path / "d.jsonl", checkpoint=900.0)
    write(log, plan)
    silent = 3 * HOUR
    back = T0 + len(plan) * STEP + silent
    write(log, plan, start=back)
    try:
        key = lines(tmp_path / "d.jsonl")[0]["target"]
        until = back - HOUR  # inside the silence
        records = log.recent([key], since=T0, until=until)
        assert records[-1]["at"] == back  # the next line, after the period
        spans, gaps = timeline.spans(records, seen_until=log.seen_until([key])[key])
        known = timeline.totals(timeline.clip(spans, T0, until)).known_hours
    finally:
        log.close()
    # what the last checkpoint (every 900 s) leaves unknown is not counted; the silence neither
    assert 900.0 / HOUR <= known <= len(plan) * STEP / HOUR
    assert gaps and gaps[0].start < until < gaps[0].end


def test_rotation_keeps_the_log_within_keep_plus_one_files_of_max_size(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    log = DecisionLog(path, max_bytes=4096, keep=3, checkpoint=60.0)
    write(log, schedule(3000, seed=3))
    log.close()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["d.jsonl", "d.jsonl.1", "d.jsonl.2", "d.jsonl.3"]
    assert all((tmp_path / f).stat().st_size <= 4096 for f in files)
    newest_rotated = lines(tmp_path / "d.jsonl.1")[-1]["at"]
    assert newest_rotated <= lines(path)[0]["at"]  # FILE.1 holds the lines just before FILE


def test_a_decision_is_described_in_words_and_figures() -> None:
    state = target(prewarmBudget="24", leadTime="10m", horizon="15m")
    state.ledger.charge(T0 + 6 * HOUR, 10, 20.9 * HOUR / 10)  # leaves 3.1 of 24 replica-h
    record = decide(state, at=T0 + 9.5 * HOUR, reactive=8, prewarm=4, reason=Reason.FORECAST)
    text = explain.describe(record)
    assert text.startswith("asked 12 (reactive 8 + prewarm 4): ")
    left = f"{record['budget_remaining']:.3g}"
    assert f"forecast P{100 * record['quantile']:.3g} of 410 within 25m needs 12" in text
    assert f"budget {left} of 24 replica-hours left per 1d" in text
    capped = decide(state, at=T0 + 9.6 * HOUR, reactive=8, prewarm=1, reason=Reason.BUDGET_CAPPED)
    assert "but the budget allowed only 1 prewarm" in explain.describe(capped)


def test_a_request_cut_by_max_replicas_says_so_and_a_decision_with_no_forecast_shows_none() -> None:
    """Explain read "asked 16 (reactive 18 + prewarm 0)", and with no model "forecast P? of ?"."""
    state = target(prewarmBudget="24", maxReplicas="16")
    record = decide(state, at=T0, reactive=18, prewarm=0, reason=Reason.MAX_REPLICAS)
    record = {**record, "desired": 16, "forecast_peak": None}
    text = explain.describe(record)
    assert text.startswith("asked 16 (reactive 18 + prewarm 0, cut to maxReplicas 16): ")
    assert "P?" not in text and "needs 18" in text and "maxReplicas 16 cut the request" in text


@pytest.mark.parametrize("reason", [Reason.DRIFT_FALLBACK, Reason.NO_MODEL])
def test_a_fallback_says_what_it_holds_and_reactive_only_when_it_holds_nothing(
    reason: Reason,
) -> None:
    held = explain.why(decide(target(), at=T0, reactive=8, prewarm=2, reason=reason))
    assert "plus 2 replicas held from the last lead time's load, paid from the budget" in held
    assert "reactive only" not in held
    bare = explain.why(decide(target(), at=T0, reactive=8, prewarm=0, reason=reason))
    assert "reactive only" in bare and "held" not in bare


def test_a_request_held_without_data_is_told_as_held_not_as_raised_to_min_replicas() -> None:
    # Before: "asked 12 (reactive 0 + prewarm 0, raised to minReplicas 0): no current load
    # sample: the last request is held" (a backtest's decisions.jsonl of an earlier scaler).
    record = decide(target(), at=T0, reactive=0, prewarm=0, reason=Reason.NO_DATA)
    record = {**record, "desired": 12, "min_replicas": 0}
    text = explain.describe(record)
    assert text.startswith("asked 12 (the last request, held): no current load sample (no data)")
    assert "minReplicas" not in text and "raised" not in text


@pytest.mark.parametrize("reason", list(Reason))
def test_every_reason_the_policy_gives_is_explained_in_words(reason: Reason) -> None:
    record = decide(target(), at=T0, reactive=8, prewarm=2, reason=reason)
    assert not explain.why(record).startswith("reason ")


def test_a_period_report_gives_totals_then_each_change_in_time_order() -> None:
    state = target(costPerReplicaHour="3")
    plan = [(8, 0, Reason.REACTIVE)] * 4 + [(8, 4, Reason.FORECAST)] * 2 + [(6, 0, Reason.REACTIVE)]
    records = [
        decide(state, at=T0 + i * HOUR, reactive=r, prewarm=p, reason=why)
        for i, (r, p, why) in enumerate(plan)
    ]
    for r in records:  # as the log stamps them: one line per hour is due
        r["next_by"] = r["at"] + HOUR
    records.append(decisionrecord.stop(records[-1], at=T0 + 7 * HOUR - STEP))
    key = str(records[0]["target"])
    text = explain.report(records, key=key, since=T0, until=T0 + 7 * HOUR)
    body = "\n".join(text)
    gpu = 8 * 4 + 12 * 2 + 6 * 1
    assert f"GPU-hours (replica-hours served): {gpu:.2f} = {3 * gpu:.2f} USD" in body
    assert f"prewarm replica-hours: {4 * 2:.2f} = {3 * 4 * 2:.2f} USD" in body
    assert "reactive 5h (71%), forecast 2h (29%)" in body
    changes = [line for line in text if "asked" in line]
    assert [c.split()[2] for c in changes] == ["00:00:00Z", "04:00:00Z", "06:00:00Z"]
    later = explain.report(records, key=key, since=T0 + 4.5 * HOUR, until=T0 + 7 * HOUR)
    assert "04:30:00Z (in force since 2026-11-28 Sat 04:00:00Z) asked 12" in "\n".join(later)
    at = explain.report(records, key=key, since=T0 + 4.5 * HOUR, until=T0 + 4.5 * HOUR)
    assert "asked 12 (reactive 8 + prewarm 4)" in at[-1]
    empty = explain.report(records, key=key, since=T0 + 30 * HOUR, until=T0 + 31 * HOUR)
    assert "no decision of" in empty[-1] and "last record before" in empty[-1]


def test_times_are_iso_durations_or_epochs_and_anything_else_names_the_fix() -> None:
    now = T0 + 10 * HOUR
    assert explain_args.parse_time("2026-11-28T09:30", now=now) == T0 + 9.5 * HOUR
    assert explain_args.parse_time("2026-11-28T10:30+01:00", now=now) == T0 + 9.5 * HOUR
    assert explain_args.parse_time("6h", now=now) == now - 6 * HOUR
    assert explain_args.parse_time(f"@{T0}", now=now) == T0
    assert explain_args.parse_time("now", now=now) == now
    with pytest.raises(explain_args.ExplainError, match=r"ISO time .* duration"):
        explain_args.parse_time("last saturday", now=now)
    for absurd in ("1" + "0" * 320 + "s", "9999999999d", "@1e308", "2099-01-01"):
        with pytest.raises(explain_args.ExplainError, match="out of range; give one from 1970"):
            explain_args.parse_time(absurd, now=now)


def test_namespace_name_matches_every_trigger_and_a_fingerprint_only_its_own() -> None:
    keys = ["team-a/llm#aaaa1111", "team-a/llm#bbbb2222", "team-a/llm-2#cccc3333"]
    assert explain_args.matching(keys, "team-a/llm") == keys[:2]
    assert explain_args.matching(keys, "team-a/llm#bbbb2222") == [keys[1]]
    assert explain_args.matching(keys, "team-b/llm") == []
    with pytest.raises(explain_args.ExplainError, match="NAMESPACE/NAME"):
        explain_args.check_target("llm")


def test_a_log_path_that_is_a_directory_or_missing_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"a directory; give the file .*decisions.jsonl"):
        explain_cli.read_log(tmp_path)
    with pytest.raises(ConfigError, match="no such file"):
        explain_cli.read_log(tmp_path / "decisions.jsonl")


class _EndlessGarbage:
    """A pipe of something that is not a decision log, and never ends."""

    def __init__(self) -> None:
        self.lines_read = 0

    def readline(self, size: int, /) -> str:
        self.lines_read += 1
        return "\x8f\x02 binary \x00\n"


def test_a_file_that_is_not_a_decision_log_is_left_after_its_first_lines_not_read_forever(
    capsys: pytest.CaptureFixture[str],
) -> None:
    garbage = _EndlessGarbage()
    assert list(explain_cli._records_of(garbage.readline, name="/dev/urandom")) == []
    assert garbage.lines_read == explain_cli.NOT_A_LOG
    err = capsys.readouterr().err.splitlines()
    assert len(err) == explain_cli.REPORTED + 2  # the named lines, the verdict, the count
    assert err[0].startswith("/dev/urandom:1: not JSON")
    assert "none of its first 1000 lines is a decision record" in err[-2]
    assert (
        err[-1]
        == f"/dev/urandom: {explain_cli.NOT_A_LOG - explain_cli.REPORTED} more bad lines skipped"
    )


def test_bad_lines_among_records_are_named_up_to_a_count_and_every_record_is_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, records = written_log(tmp_path, 3000, seed=3)
    text = "".join(json.dumps(r) + "\nnot json\n" for r in records)
    text += "x" * (explain_cli.MAX_LINE + 10) + "\n" + json.dumps(records[0]) + "\n"
    path.write_text(text)
    assert len(explain_cli.read_log(path)) == len(records) + 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (
        f"{path}:2: not JSON (Expecting value at column 1); skipped (a line cut short by a crash "
        "or an edit; the rest is read)"
    )
    assert len(err) == explain_cli.REPORTED + 1
    assert err[-1] == f"{path}: {len(records) + 1 - explain_cli.REPORTED} more bad lines skipped"


def test_a_line_longer_than_the_bound_is_named_and_the_next_one_read(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = "y" * (3 * explain_cli.MAX_LINE) + "\n\n"
    lines_ = list(explain_cli._bounded_lines(io.StringIO(text + "{}\n").readline))
    assert lines_ == [None, "\n", "{}\n"]
    assert list(explain_cli._records_of(io.StringIO(text).readline, name="f")) == []
    assert capsys.readouterr().err.startswith(f"f:1: longer than {explain_cli.MAX_LINE} characters")


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("at", "2026-12-03T05:00:00Z", "at is '2026-12-03T05:00:00Z', not a number from 0 up"),
        ("at", float("nan"), "at is nan, not a number from 0 up"),
        ("next_by", "x", "next_by is 'x', not a number from 0 up"),
        ("desired", -3, "desired is -3, not a number from 0 up"),
        ("desired", "5", "desired is '5', not a number from 0 up"),
        ("prewarm", True, "prewarm is True, not a number from 0 up"),
        ("target", 5, "target is 5, not a string"),
    ],
)
def test_a_record_with_a_field_of_the_wrong_kind_is_named_and_skipped_not_summed(
    field: str, value: object, problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, records = written_log(tmp_path, 600, seed=5)
    records[3][field] = value
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert len(explain_cli.read_log(path)) == len(records) - 1
    assert f"{path}:4: {problem}; skipped" in capsys.readouterr().err


def test_a_log_saved_with_a_byte_order_mark_keeps_its_first_record(tmp_path: Path) -> None:
    path, records = written_log(tmp_path, 600, seed=5)
    count = len(records)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert len(explain_cli.read_log(path)) == count


@pytest.mark.parametrize(
    ("since", "until", "message"),
    [
        ("2100-01-01", "now", "time '2100-01-01' is out of range; give one from 1970 to 2099"),
        ("@9999999999", "now", "out of range"),
        ("0s", "now", "--since 0s is not in the past"),
        ("2h", "6h", "--until 6h is not after --since 2h; swap them"),
    ],
)
def test_a_period_that_cannot_hold_a_decision_names_the_fix(
    since: str, until: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "decisions.jsonl"
    path.write_text("")
    argv = ["explain", "a/b", "--log", str(path), "--since", since, "--until", until]
    assert exit_code(argv) == 2
    assert message in capsys.readouterr().err


BACKTEST_CSV = (
    "timestamp,load,required,reactive,desired,ready,reason,prewarm_replica_hours\n"
    "2024-01-01 00:00:00,809.7617,7,0,0,0,no_data,0.0\n"
    "2024-01-01 00:10:00,789.8667,7,7,7,0,no_model,0.0\n"
) * 600


def test_a_backtest_s_decisions_csv_is_named_at_once_with_the_file_to_give_instead(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: 20 lines of "not JSON ... (a line cut short by a crash or an edit)", then "none
    # of its first 1000 lines is a decision record" and "targets there: none".
    csv = tmp_path / "decisions.csv"
    csv.write_text(BACKTEST_CSV)
    assert exit_code(["explain", "team-a/llm", "--log", str(csv)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"scaler: error: --log {csv}: a backtest's decisions.csv (CSV, a row per trace step), "
        "not a decision log; scaler explain reads JSON lines, which `scaler backtest` writes "
        "beside decisions.csv as decisions.jsonl: run the backtest again (an older scaler "
        "wrote none)"
    ]
    path, records = written_log(tmp_path, 50, seed=4)  # the backtest's log beside it
    assert exit_code(["explain", "team-a/llm", "--log", str(csv)]) == 2
    err = capsys.readouterr().err.splitlines()
    # No summary.json beside it to say the scored span: the whole log's, --until too (before,
    # --since alone: a period up to now).
    until = decisionrecord.iso(records[-1]["at"] + records[-1]["step"])
    command = f"scaler explain team-a/llm --log {path} --since {records[0]['time']} --until {until}"
    assert len(err) == 1 and err[0].endswith(f"the ones the backtest wrote beside it: {command}")


def test_a_csv_of_load_is_named_at_once_as_not_a_decision_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    export = tmp_path / "load.csv"
    export.write_text("\ufefftimestamp,value\n" + "2024-01-01 00:00:00,3\n" * 2000)
    assert exit_code(["explain", "team-a/llm", "--log", str(export)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"scaler: error: --log {export}: a CSV file (its first line: 'timestamp,value'), not a "
        "decision log; scaler explain reads the JSON lines `scaler serve --decision-log FILE` "
        "writes (or a backtest's DIR/decisions.jsonl)"
    ]


def test_a_backtest_s_summary_json_is_named_at_once_with_the_log_beside_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: 20 lines of "not JSON ... (a line cut short by a crash or an edit)", a count of
    # hundreds more, then "no decisions of team-a/llm in summary.json; targets there: none".
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"models": {"seasonal": {"coverage": 0.95}}}, indent=2))
    assert exit_code(["explain", "team-a/llm", "--log", str(summary)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"scaler: error: --log {summary}: one JSON document (its first line is '{{' alone, as "
        "in a backtest's summary.json), not a decision log (a JSON record a line); scaler "
        "explain reads the JSON lines `scaler serve --decision-log FILE` writes (or a "
        "backtest's DIR/decisions.jsonl)"
    ]
    path, records = written_log(tmp_path, 50, seed=6)  # the backtest's log beside it
    until = decisionrecord.iso(records[-1]["at"] + records[-1]["step"])
    command = f"scaler explain team-a/llm --log {path} --since {records[0]['time']} --until {until}"
    for other in (summary, tmp_path / "forecasts.csv"):
        if other.suffix == ".csv":
            other.write_text("timestamp,actual,forecast_p50,forecast_p95\n")
        assert exit_code(["explain", "team-a/llm", "--log", str(other)]) == 2
        [err] = capsys.readouterr().err.splitlines()
        assert err.endswith(f"the ones the backtest wrote beside it: {command}")


def test_a_log_whose_first_line_lost_its_start_is_still_read_after_naming_that_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, records = written_log(tmp_path, 50, seed=5)
    text = path.read_text()
    path.write_text(text[40:])  # a copy cut mid-line, as `tail -c` makes
    assert len(explain_cli.read_log(path)) == len(records) - 1
    assert capsys.readouterr().err.startswith(f"{path}:1: not JSON")


def test_the_help_states_the_defaults_the_exit_statuses_and_a_backtest_example(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before, --until's default and the exit statuses (1: nothing in the period, which a
    script must tell from an error) were in no help, nor how to ask about a backtest."""
    assert exit_code(["explain", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "(default 24h)" in text and "(default now)" in text
    assert "--since and --until are then not used" in text
    assert "Exit status: 0 explained, 1 no decision in the period" in text
    assert (
        "scaler explain backtest/nasa_http_5min --log backtest-nasa_http_5min/decisions.jsonl"
        in text
    )


def test_a_backtest_log_dated_ahead_is_explained_with_the_command_the_backtest_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A synthetic trace of next year's load: its backtest printed `--since 2030-... --until
    2030-...`, which explain refused before ("--since ... is not in the past"; a year past
    now, "out of range")."""
    path = tmp_path / "decisions.jsonl"
    log = DecisionLog(path)
    start = datetime(2030, 3, 1, tzinfo=UTC).timestamp()
    write(log, schedule(200, seed=8), start=start)
    log.close()
    since, until = decisionrecord.iso(start), decisionrecord.iso(start + 200 * STEP)
    argv = ["explain", "team-a/llm", "--log", str(path), "--since", since, "--until", until]
    assert exit_code(argv) == 0
    assert "GPU-hours (replica-hours served)" in capsys.readouterr().out
    assert exit_code(["explain", "team-a/llm", "--log", str(path), "--at", since]) == 0
    assert f"the decision in force since {since[:10]}" in capsys.readouterr().out
    assert exit_code(["explain", "team-a/llm", "--log", str(path), "--since", since]) == 2
    assert "a backtest's log dated ahead needs an --until after it" in capsys.readouterr().err
