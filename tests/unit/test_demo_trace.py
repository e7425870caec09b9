"""`scaler demo --trace`: a user's trace that gives no default threshold is refused, exit 2,
before the server starts, naming the file and the fix."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.unit.exits import exit_code


@pytest.mark.parametrize(
    ("value", "message"),
    [
        # Before: a traceback of the server's INVALID_ARGUMENT for threshold '0', exit 1.
        (lambda i: "5" if i % 200 == 0 else "0", "its 99th percentile is 0 (its load is mostly"),
        # Before: an IndexError from the percentile of no value, exit 1.
        (lambda i: "", "every value is empty, so there is no load to replay"),
    ],
)
def test_a_trace_with_no_load_per_replica_to_derive_exits_2_naming_it(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    value: Callable[[int], str],
    message: str,
) -> None:
    trace = tmp_path / "idle.csv"
    rows = (f"{1_700_000_000 + 300 * i},{value(i)}\n" for i in range(3 * 288))
    trace.write_text("timestamp,value\n" + "".join(rows))
    out = tmp_path / "demo.png"
    assert exit_code(["demo", "--trace", str(trace), "--short", "--out", str(out)]) == 2
    assert f"scaler: error: {trace}: {message}" in capsys.readouterr().err
    assert not out.exists()


def test_the_help_says_which_traces_are_read_and_that_half_is_history(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before: "timestamp,value CSV to replay", and not a word that the replay starts half way
    through the trace, which a user's 2-hour export never leaves for a forecast."""
    assert exit_code(["demo", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "any export `scaler backtest` reads (docs/traces.md)" in text
    assert "its first half, at most 14 days, is history before the first step played" in text
    assert "14 days of 10m steps" in text


def test_a_trace_coarser_than_an_hour_exits_2_as_the_backtest_refuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: daily rows played at 720,000x, one answered step among 23 'waiting' ones at
    times off the grid, and a yardstick 'over 1 steps', exit 0."""
    trace = tmp_path / "daily.csv"
    trace.write_text("timestamp,value\n" + "".join(f"{1_700_006_400 + 86400 * i},{100 + i}\n"
                                                   for i in range(60)))  # fmt: skip
    out = tmp_path / "demo.png"
    assert exit_code(["demo", "--trace", str(trace), "--short", "--out", str(out)]) == 2
    assert f"{trace}: its rows are 1d apart" in capsys.readouterr().err
    assert not out.exists()
