"""A backtest's decisions as decision-log records (DIR/decisions.jsonl): built and written by the
serving log's own code, read back by `scaler explain` with the same totals as summary.json."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import numpy as np
import pytest

from models.base import Series
from scaler import cli
from scaler.offline import replay, replay_config, replay_log, replay_summary
from scaler.record import decisionrecord, explain_cli, timeline
from scaler.sources import file
from tests.contract.synthetic import load
from tests.unit.test_backtest import write_trace
from tests.unit.test_replay import trace

CONFIG = replay_config.ReplayConfig(threshold=40.0, budget_share=0.3)


TARGET = replay_log.target_spec(name="trace", query="trace.csv", config=CONFIG, model="seasonal")
GAPS = ((400, 409), (900, 971), (1100, 1100))
"""Steps without load (first, last): one in the warm-up (trace's), half a day in the scored
span, as nasa's outage, and a single step."""


def gapped() -> Series:
    series = trace()
    values = series.values.copy()
    for first, last in GAPS:
        values[first : last + 1] = np.nan
    return Series(series.start, series.step, values)


def logged(path: Path) -> replay.Replay:
    series = gapped()
    with replay_log.ReplayLog(path, target=TARGET, step=series.step) as log:
        return replay.replay(series, CONFIG, on_step=log.step)


def test_explain_reads_every_line_and_totals_what_the_replay_scored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "decisions.jsonl"
    result = logged(path)
    records = explain_cli.read_log(path)
    assert str(path) not in capsys.readouterr().err  # every line is a record explain reads
    assert len(records) == len(path.read_text().splitlines())
    assert {r["target"] for r in records} == {TARGET.key}
    assert TARGET.key.startswith("backtest/trace#")
    assert records[0]["event"] == decisionrecord.START
    assert records[-1]["event"] == decisionrecord.STOP
    assert set(records[1]) >= {"reason", "budget_remaining", "model_version", "drift"}
    series, frame = gapped(), result.decisions
    warmup = replay_summary.warmup_steps(series)
    assert GAPS[0][1] < warmup < GAPS[1][0]
    scored_from = series.start + warmup * series.step
    spans, _ = timeline.spans(records)
    inside = timeline.totals(timeline.clip(spans, scored_from, series.end + series.step))
    policy = result.summary["policy"]
    assert inside.replica_hours == pytest.approx(policy["gpu_hours"])
    assert inside.prewarm_replica_hours == pytest.approx(policy["prewarm"]["replica_hours"])
    # Every step decided from load: its request and why.
    for t in (1, 399, 400, 420, warmup + 100, 1101 + 1, len(series) - 1):
        at = series.start + t * series.step
        held = next(s for s in spans if s.start <= at < s.end)
        assert held.record["desired"] == frame["desired"].iloc[t]
        assert held.record["reason"] == frame["reason"].iloc[t]


def test_a_gap_in_the_trace_is_logged_as_a_live_scaler_logs_its_source_without_data(
    tmp_path: Path,
) -> None:
    # Before, each step decided without load was a `no_data` line holding the last request,
    # which explain billed and summary.json does not score: nasa's outage put 1,367 GPU-hours
    # more in explain than in summary.json.
    path = tmp_path / "decisions.jsonl"
    result = logged(path)
    records = explain_cli.read_log(path)
    series, frame = gapped(), result.decisions
    assert "no_data" in set(frame["reason"])  # the replay holds the last request, as before
    assert "no_data" not in {r["reason"] for r in records}

    def at(t: int) -> float:
        return series.start + t * series.step

    # The step after a gap's first is the first decided without load: answers stop there (a
    # live scaler's `unanswered`), and the first decided from load again is a `change`.
    ended = [r for r in records if r["event"] == decisionrecord.UNANSWERED]
    assert [r["at"] for r in ended] == [at(first + 1) for first, _ in GAPS]
    assert {r["error"] for r in ended} == {replay_log.NO_LOAD}
    after = [next(r for r in records if r["at"] > end["at"]) for end in ended]
    assert [(r["event"], r["at"]) for r in after] == [("change", at(last + 2)) for _, last in GAPS]
    _, gaps = timeline.spans(records)
    assert [(g.start, g.end) for g in gaps] == [(at(f + 1), at(last + 2)) for f, last in GAPS]
    assert all(f"KEDA was not answered ({replay_log.NO_LOAD})" in g.why for g in gaps)


def test_a_step_not_built_is_one_the_log_would_not_have_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logged(tmp_path / "filtered.jsonl")
    monkeypatch.setattr(replay_log.ReplayLog, "_due", lambda _self, _at: True)
    logged(tmp_path / "every.jsonl")
    every = (tmp_path / "every.jsonl").read_bytes()
    assert (tmp_path / "filtered.jsonl").read_bytes() == every


def test_a_backtest_writes_a_decision_log_and_prints_the_explain_command_that_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before, a backtest's decisions could only be read in decisions.csv: `scaler explain`
    # reads the serving decision log, and a backtest wrote none.
    trace_file = write_trace(tmp_path / "my load.csv", load(4))
    out = tmp_path / "out"
    flags = ["--model", "seasonal", "--compare", "none", "--warmup", "3d", "--threshold", "20"]
    assert cli.main(["backtest", str(trace_file), *flags, "--out", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    hint = next(line for line in printed if line.startswith("explain its decisions: "))
    command = shlex.split(hint.removeprefix("explain its decisions: "))
    assert command[:3] == ["scaler", "explain", "backtest/my-load"]
    assert command[command.index("--log") + 1] == str(out / "decisions.jsonl")
    assert cli.main(command[1:]) == 0
    text = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())["decisions"]["policy"]
    assert f"GPU-hours (replica-hours served): {summary['gpu_hours']:.2f}" in text
    assert "changes:" in text


def test_a_run_without_decisions_leaves_no_earlier_decision_log(tmp_path: Path) -> None:
    trace_file = write_trace(tmp_path / "trace.csv", load(4))
    out = tmp_path / "out"
    out.mkdir()
    (out / "decisions.jsonl").write_text('{"v": 1}\n')
    flags = ["--compare", "none", "--model", "seasonal", "--no-decisions", "--out", str(out)]
    assert cli.main(["backtest", str(trace_file), *flags]) == 0
    assert not (out / "decisions.jsonl").exists()


def total(text: str, label: str) -> float:
    """The figure on explain's line `label: FIGURE`."""
    line = next(line for line in text.splitlines() if line.strip().startswith(f"{label}: "))
    return float(line.split(": ", 1)[1].split()[0])


@pytest.mark.parametrize("gapped_trace", [False, True], ids=["llm_serving", "with a gap"])
def test_explain_over_the_backtest_s_span_totals_summary_json_and_a_csv_names_that_command(
    gapped_trace: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The shipped llm trace has no gap; the other misses load for 2.5 hours of its scored day.
    if gapped_trace:
        trace_file = write_trace(tmp_path / "gapped.csv", load(4), blank=tuple(range(900, 930)))
        flags = ["--warmup", "3d", "--threshold", "20"]
    else:
        trace_file, flags = file.bundled_trace(), []
    out = tmp_path / "out"
    argv = ["backtest", str(trace_file), "--model", "seasonal", "--compare", "none", *flags]
    assert cli.main([*argv, "--out", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    hint = next(line for line in printed if line.startswith("explain its decisions: "))
    command = hint.removeprefix("explain its decisions: ")
    assert cli.main(shlex.split(command)[1:]) == 0
    text = capsys.readouterr().out
    decisions = json.loads((out / "summary.json").read_text())["decisions"]
    assert ("no_data" in decisions["drift"]["reasons"]) is gapped_trace
    policy = decisions["policy"]
    assert total(text, "GPU-hours (replica-hours served)") == pytest.approx(
        policy["gpu_hours"], abs=0.005
    )
    assert total(text, "prewarm replica-hours") == pytest.approx(
        policy["prewarm"]["replica_hours"], abs=0.005
    )
    assert ("KEDA was not answered" in text) is gapped_trace
    # Given decisions.csv, explain names the same command: over the same span, --until too
    # (before, --since alone: a period up to now).
    assert cli.main(["explain", "backtest/x", "--log", str(out / "decisions.csv")]) == 2
    assert (
        capsys.readouterr()
        .err.rstrip()
        .endswith(f"the ones the backtest wrote beside it: {command}")
    )


EDGES = ((640, 660), (1280, 1295))
"""Steps without load (first, last) across the start of the scored span (step 648) and to the
trace's end."""


def test_explain_over_the_printed_span_totals_summary_json_with_a_gap_at_either_edge(
    tmp_path: Path,
) -> None:
    # Before, the printed span began at the scored span's first step: inside a gap, explain
    # billed nothing of the request held through it while the yardstick scored the step after
    # the gap; and it ended at the trace's end, past a last gap's first missing value, which
    # explain billed (decided from load) and the yardstick did not (no load): a step each.
    series = trace()
    values = series.values.copy()
    for first, last in EDGES:
        values[first : last + 1] = np.nan
    gapped_edges = Series(series.start, series.step, values)
    assert len(values) == EDGES[1][1] + 1
    assert EDGES[0][0] < replay_summary.warmup_steps(gapped_edges) <= EDGES[0][1]
    path = tmp_path / "decisions.jsonl"
    with replay_log.ReplayLog(path, target=TARGET, step=series.step) as log:
        result = replay.replay(gapped_edges, CONFIG, on_step=log.step)
    since, until = explain_cli.scored_span(result.summary["trace"])
    spans, _ = timeline.spans(explain_cli.read_log(path))
    inside = timeline.totals(timeline.clip(spans, since, until))
    policy = result.summary["policy"]
    frame = result.decisions
    assert frame["desired"].iloc[EDGES[0][0]] > 0  # the request the first gap holds
    assert inside.replica_hours == pytest.approx(policy["gpu_hours"])
    assert inside.prewarm_replica_hours == pytest.approx(policy["prewarm"]["replica_hours"])
