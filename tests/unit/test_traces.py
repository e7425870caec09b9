"""Reading timestamp,value traces: gaps tolerated, everything else refused with file:line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scaler.errors import TraceError
from scaler.sources.file import bundled_trace
from scaler.traces import read_trace


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(text)
    return path


def test_bundled_trace_reads_as_a_regular_series() -> None:
    series = read_trace(bundled_trace())
    assert len(series) == 2016
    assert series.step == 600.0
    assert series.observed == 2016


def test_empty_values_and_missing_rows_become_nan(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "timestamp,value\n2024-01-01 00:00:00,1\n2024-01-01 00:05:00,\n"
        "2024-01-01 00:10:00,3\n2024-01-01 00:20:00,5\n",
    )
    series = read_trace(path)
    assert series.step == 300.0
    np.testing.assert_array_equal(series.values, [1, np.nan, 3, np.nan, 5])


@pytest.mark.parametrize(
    ("body", "line", "why"),
    [
        ("2024-01-01 00:00:00,1\n2024-01-01 00:05:00,abc\n", 3, "not a number"),
        ("2024-01-01 00:00:00,1\nyesterday,2\n", 3, "not a date-time"),
        ("2024-01-01 00:05:00,1\n2024-01-01 00:00:00,2\n", 3, "goes back"),
        ("2024-01-01 00:00:00,1\n2024-01-01 00:00:00,2\n", 3, "repeats"),
        ("2024-01-01 00:00:00,1\n2024-01-01 00:05:00,inf\n", 3, "finite"),
        ("2024-01-01 00:00:00,1\n2024-01-01 00:05:00,-4\n", 3, ">= 0"),
        (
            "2024-01-01 00:00:00,1\n2024-01-01 00:05:00,2\n2024-01-01 00:10:00,2\n"
            "2024-01-01 00:12:00,2\n",
            5,
            "grid",
        ),
    ],
)
def test_bad_rows_are_refused_with_the_line_and_why(
    tmp_path: Path, body: str, line: int, why: str
) -> None:
    path = write(tmp_path, "timestamp,value\n" + body)
    with pytest.raises(TraceError) as err:
        read_trace(path)
    assert f"{path}:{line}:" in str(err.value)
    assert why in str(err.value)


def test_wrong_header_and_missing_file_are_explained(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="expected the columns timestamp,value"):
        read_trace(write(tmp_path, "time,load\n2024-01-01,1\n"))
    with pytest.raises(TraceError, match="no such file"):
        read_trace(tmp_path / "absent.csv")
    with pytest.raises(TraceError, match="no rows"):
        read_trace(write(tmp_path, "timestamp,value\n"))
