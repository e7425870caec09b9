"""Reading `timestamp,value` CSV traces (the format of the shared traces) into a regular Series.

Timestamps are naive and read as UTC; the step is the most common spacing; rows missing from
the grid and empty values become NaN. Anything else that is wrong is refused with a TraceError
naming the file, the line and the fix: the backtest and the file source must never guess.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from models.base import Series
from scaler.errors import TraceError


def read_trace(path: Path) -> Series:
    """The trace at `path` as a regular Series; TraceError on anything unreadable."""
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, skip_blank_lines=True)
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file; pass a timestamp,value CSV") from None
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise TraceError(
            f"{path}: not a readable CSV ({exc}); expected a timestamp,value header"
        ) from exc
    if list(frame.columns[:2]) != ["timestamp", "value"]:
        raise TraceError(
            f"{path}: header is {','.join(frame.columns)}; expected the columns timestamp,value"
        )
    if frame.empty:
        raise TraceError(f"{path}: has a header but no rows")
    times = _parse_times(path, frame["timestamp"])
    values = _parse_values(path, frame["value"])
    return _on_grid(path, times, values)


def _line(row: int) -> int:
    return row + 2  # 1-based, after the header


def _parse_times(path: Path, column: pd.Series) -> np.ndarray:
    parsed = pd.to_datetime(column.str.strip(), errors="coerce", format="mixed")
    bad = np.flatnonzero(parsed.isna().to_numpy())
    if bad.size:
        row = int(bad[0])
        raise TraceError(
            f"{path}:{_line(row)}: timestamp {column.iloc[row]!r} is not a date-time; "
            "write it as YYYY-MM-DD HH:MM:SS"
        )
    if parsed.dt.tz is not None:
        parsed = parsed.dt.tz_convert("UTC").dt.tz_localize(None)
    seconds = (parsed - pd.Timestamp(0)).dt.total_seconds().to_numpy(dtype=np.float64)
    diffs = np.diff(seconds)
    bad = np.flatnonzero(diffs <= 0)
    if bad.size:
        row = int(bad[0]) + 1
        what = "repeats" if diffs[bad[0]] == 0 else "goes back from"
        raise TraceError(
            f"{path}:{_line(row)}: timestamp {column.iloc[row]!r} {what} the row before it; "
            "sort the trace by time and keep one row per timestamp"
        )
    return seconds


def _parse_values(path: Path, column: pd.Series) -> np.ndarray:
    text = column.str.strip()
    values = pd.to_numeric(text.replace("", np.nan), errors="coerce").to_numpy(dtype=np.float64)
    bad = np.flatnonzero(
        np.isnan(values) & (text != "").to_numpy() & (text.str.lower() != "nan").to_numpy()
    )
    if bad.size:
        row = int(bad[0])
        raise TraceError(
            f"{path}:{_line(row)}: value {column.iloc[row]!r} is not a number; "
            "leave it empty where there is no data"
        )
    bad = np.flatnonzero(np.isinf(values) | (values < 0))
    if bad.size:
        row = int(bad[0])
        raise TraceError(
            f"{path}:{_line(row)}: value {column.iloc[row]!r} is not a load "
            "(must be finite and >= 0); leave it empty where there is no data"
        )
    return values


def _on_grid(path: Path, seconds: np.ndarray, values: np.ndarray) -> Series:
    if seconds.size == 1:
        return Series(float(seconds[0]), 60.0, values)
    step = float(pd.Series(np.diff(seconds)).mode().iloc[0])
    offsets = (seconds - seconds[0]) / step
    index = np.rint(offsets).astype(np.int64)
    bad = np.flatnonzero(np.abs(offsets - index) > 1e-6)
    if bad.size:
        row = int(bad[0])
        raise TraceError(
            f"{path}:{_line(row)}: timestamp is off the trace's {step:.0f}s grid; "
            "resample the trace to a regular step"
        )
    grid = np.full(int(index[-1]) + 1, np.nan)
    grid[index] = values
    return Series(float(seconds[0]), step, grid)
