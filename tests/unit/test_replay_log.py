"""A backtest's decisions as decision-log records (DIR/decisions.jsonl): built and written by the
serving log's own code, read back by `scaler explain` with the same totals as summary.json."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from scaler import cli
from scaler.offline import replay, replay_log
from scaler.record import decisionrecord, explain, explain_cli
from tests.contract.synthetic import load
from tests.unit.test_backtest import write_trace
from tests.unit.test_replay import trace

CONFIG = replay.ReplayConfig(threshold=40.0, budget_share=0.3)


TARGET = replay_log.target_spec(name="trace", query="trace.csv", config=CONFIG, model="seasonal")


def logged(path: Path) -> replay.Replay:
    series = trace()
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
    series, frame = trace(), result.decisions
    warmup = replay.warmup_steps(series)
    scored_from = series.start + warmup * series.step
    spans, gaps = explain.spans(records)
    assert gaps == []
    inside = explain.totals(explain.clip(spans, scored_from, series.end + series.step))
    policy = result.summary["policy"]
    assert inside.replica_hours == pytest.approx(policy["gpu_hours"])
    assert inside.prewarm_replica_hours == pytest.approx(policy["prewarm"]["replica_hours"])
    # Every step's request, the steps with no load (held, reason no_data) included.
    for t in (0, 400, 405, warmup + 100, len(series) - 1):
        at = series.start + t * series.step
        held = next(s for s in spans if s.start <= at < s.end)
        assert held.record["desired"] == frame["desired"].iloc[t]
        assert held.record["reason"] == frame["reason"].iloc[t]


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
