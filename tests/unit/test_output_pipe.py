"""A command whose output is piped into a reader that stops early (`scaler explain ... | head`)
ends quietly, as `cat` or `grep` do: no BrokenPipeError traceback on the terminal."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from scaler.decision.policy import Reason
from scaler.record.decisionlog import DecisionLog
from tests.unit.decision_records import STEP, decide, target

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2024, 1, 6, tzinfo=UTC).timestamp()


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "decisions.jsonl"
    written = DecisionLog(path)
    state = target()
    for i in range(40):
        prewarm = i % 3
        reason = Reason.FORECAST if prewarm else Reason.REACTIVE
        written.write(
            decide(state, at=T0 + i * STEP, reactive=2 + i % 5, prewarm=prewarm, reason=reason)
        )
    written.close()
    return path


def test_a_reader_that_leaves_early_gets_no_traceback(log: Path) -> None:
    period = ["--since", "2024-01-06", "--until", "2024-01-07"]
    argv = [sys.executable, "-m", "scaler", "explain", "team-a/llm", "--log", str(log), *period]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # The reader is gone before the command writes a byte: every write meets a closed pipe.
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert child.stdout is not None
    child.stdout.close()
    _, err = child.communicate(timeout=60)
    assert err.decode() == ""
    assert child.returncode == 141  # 128 + SIGPIPE, as a shell reports `yes | head`
