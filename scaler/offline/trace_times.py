"""The time column of a trace file -> sorted, distinct epoch seconds, with daylight-saving repeats
of local-time exports folded in. Used by scaler/offline/traces.py only.

Times are read as:
- epoch numbers, the unit decided by the file's median magnitude: below 1e11 seconds (1e11 s is
  the year 5138), below 1e14 milliseconds (Grafana's raw export), below 1e17 microseconds, else
  nanoseconds. Every time must then fall in 1973-2100 (1e8 to 4.1e9 s): a column of row numbers
  or of mixed units is refused rather than read as 1970.
- ISO 8601 with an offset, `Z` or a ` UTC` suffix (`2024-03-01T10:00:00+01:00`, BigQuery's
  `2024-03-01 09:00:00 UTC`): converted to UTC. Every row must then carry an offset.
- naive ISO 8601 (`2024-03-01 10:00:00`): local wall-clock time, kept as it reads (as if UTC).
  The zone is unknown, and wall-clock time is what a daily load cycle follows, so keeping it
  keeps the cycle in place across a clock change.

A newest-first file is reversed. Times that repeat or go back are refused (rows that start
over at the first two rows' times are named as several series one after another), except in naive
times the one pattern a clock change makes: the wall clock going back by less than an hour and
replaying at most an hour, starting at night (21:00-04:59), at most once in MIN_CHANGE_GAP. That
is how 5,687 of the 5,721 fall-backs in tzdata 2000-2025 look (Python's zoneinfo); the 34 that
repeat 2-3 hours (Antarctic stations; Chita and Magadan in 2014) are refused. The load at a
repeated wall-clock time comes from two different real hours; it is read as their MEAN, the
load level at that time of day (a sum would double the hour), and ONE warning names the lines.
The hour a clock change skips forward is just missing data.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from models.base import DAY, HOUR, FloatArray
from scaler.errors import TraceError

logger = logging.getLogger(__name__)

Lines = npt.NDArray[np.int64]

EPOCH_UNITS = ((1e11, 1.0), (1e14, 1e-3), (1e17, 1e-6), (np.inf, 1e-9))
"""(median magnitude below, factor to seconds): seconds, milliseconds, micro-, nanoseconds."""
EARLIEST, LATEST = 1e8, 4.1e9
"""Plausible epoch seconds: 1973-03-03 to 2099-12-02."""
MIN_CHANGE_GAP = 30 * DAY
"""Wall-clock repeats closer than this are not clock changes (tzdata's closest pair of
fall-backs in one zone since 2000 is 48 days apart: America/Argentina/San_Luis, 2008)."""
NIGHT_HOURS = frozenset({21, 22, 23, 0, 1, 2, 3, 4})
"""Local hours at which the repeated interval of every tzdata fall-back since 2000 starts."""

_OFFSET = r"(?:Z|[+-]\d\d(?::?\d\d)?)$"
_UTC_WORD = r"\s+(?:UTC|GMT)$"
_DATE = r"^\d{4}-\d\d-\d\d"


def looks_like_date(cell: str) -> bool:
    """An ISO 8601 date (what a header row never holds)."""
    return bool(pd.Series([cell]).str.match(_DATE).iloc[0])


NAIVE = "times without a UTC offset, kept as written (the local wall clock)"
"""How naive ISO times are read (parse's `how`)."""


def parse(
    path: Path, cells: pd.Series, values: FloatArray, lines: Lines
) -> tuple[FloatArray, FloatArray, Lines, str]:
    """(seconds, values, lines) sorted by time, one row per time (see the module docstring),
    and how the times were read, in words (`epoch milliseconds`, NAIVE, ...)."""
    seconds, how = _seconds(path, cells.astype(str), lines)
    naive = how == NAIVE
    steps = np.diff(seconds)
    if np.count_nonzero(steps < 0) > np.count_nonzero(steps > 0):  # newest first
        seconds, values, lines, cells = seconds[::-1], values[::-1], lines[::-1], cells[::-1]
    cells = cells.reset_index(drop=True)
    back = np.zeros(seconds.size, dtype=bool)
    back[1:] = seconds[1:] <= np.maximum.accumulate(seconds)[:-1]
    if not back.any():
        return seconds, values, lines, how
    runs = _repeat_runs(path, seconds, back, lines, cells, naive=naive)
    spans = ", ".join(f"{lines[i]}-{lines[j - 1]}" if j - i > 1 else f"{lines[i]}" for i, j in runs)
    one = len(runs) == 1 and runs[0][1] - runs[0][0] == 1
    logger.warning(
        "%s: %s %s %s wall-clock times (a daylight-saving change in a local-time export); "
        "the load at each repeated time is read as the mean of its rows",
        path,
        "line" if one else "lines",
        spans,
        "repeats" if one else "repeat",
    )
    frame = pd.DataFrame({"t": seconds, "v": values, "line": lines})
    folded = frame.groupby("t", sort=True).agg(v=("v", "mean"), line=("line", "min"))
    return (
        folded.index.to_numpy(np.float64),
        folded["v"].to_numpy(np.float64),
        folded["line"].to_numpy(np.int64),
        how,
    )


def _seconds(path: Path, text: pd.Series, lines: Lines) -> tuple[FloatArray, str]:
    """Epoch seconds of every cell, and how they were read (NAIVE for wall-clock times)."""
    if _is_float(text.iloc[0]):
        numbers = pd.to_numeric(text, errors="coerce")
        if numbers.notna().all():
            return _epoch(path, numbers.to_numpy(np.float64), text, lines)
    text = text.str.replace(_UTC_WORD, "Z", regex=True)  # BigQuery's `2024-03-01 10:00:00 UTC`
    aware = text.str.contains(_OFFSET, regex=True).to_numpy()
    mixed = np.flatnonzero(aware != aware[0])
    if mixed.size:
        row = int(mixed[0])
        has, other = ("no UTC offset", "has one") if aware[0] else ("a UTC offset", "has none")
        raise TraceError(
            f"{path}:{lines[row]}: timestamp {text.iloc[row]!r} has {has} but line "
            f"{lines[0]}'s {other}; give every time a UTC offset, or none"
        )
    parsed = pd.to_datetime(text, format="ISO8601", utc=bool(aware[0]), errors="coerce")
    bad = np.flatnonzero(parsed.isna().to_numpy())
    if bad.size:
        row = int(bad[0])
        raise TraceError(
            f"{path}:{lines[row]}: timestamp {text.iloc[row]!r} is not a date-time; write "
            "times as ISO 8601 (2024-03-01T10:00:00+01:00) or epoch seconds"
        )
    if aware[0]:
        parsed = parsed.dt.tz_localize(None)
    whole, nanos = np.divmod(parsed.to_numpy(dtype="datetime64[ns]").astype(np.int64), 10**9)
    how = "times with UTC offsets, converted to UTC" if aware[0] else NAIVE
    return whole.astype(np.float64) + nanos / 1e9, how  # exact whole seconds


def _is_float(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _epoch(
    path: Path, numbers: FloatArray, text: pd.Series, lines: Lines
) -> tuple[FloatArray, str]:
    magnitude = float(np.median(np.abs(numbers)))
    factor = next(f for below, f in EPOCH_UNITS if magnitude < below)
    seconds = numbers * factor
    bad = np.flatnonzero((seconds < EARLIEST) | (seconds > LATEST))
    if bad.size:
        row = int(bad[0])
        raise TraceError(
            f"{path}:{lines[row]}: timestamp {text.iloc[row]!r} is not a time in 1973-2100 as "
            f"epoch {_unit(factor)} (the unit the file's other times have); write every time "
            "in one unit, epoch seconds or milliseconds, or as ISO 8601"
        )
    return seconds, f"epoch {_unit(factor)}"


def _unit(factor: float) -> str:
    return {1.0: "seconds", 1e-3: "milliseconds", 1e-6: "microseconds"}.get(factor, "nanoseconds")


def _repeat_runs(
    path: Path,
    seconds: FloatArray,
    back: npt.NDArray[np.bool_],
    lines: Lines,
    cells: pd.Series,
    *,
    naive: bool,
) -> list[tuple[int, int]]:
    """[start, end) of each run of rows that replay earlier times; TraceError unless each is a
    daylight-saving repeat (see the module docstring)."""
    starts = np.flatnonzero(back & ~np.concatenate(([False], back[:-1])))
    ends = np.flatnonzero(back & ~np.concatenate((back[1:], [False]))) + 1
    runs: list[tuple[int, int]] = []
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        before = float(np.max(seconds[:start]))
        what = "repeats" if seconds[start] == before else "goes back from"
        where = f"{path}:{lines[start]}: timestamp {cells.iloc[start]!r} {what} an earlier row"
        fix = "sort the trace by time and keep one row per timestamp"
        if end - start > 1 and np.array_equal(seconds[start : start + 2], seconds[:2]):
            fix = (  # not an overlap: the rows start over, as the next series of a query does
                f"it starts over at line {lines[0]}'s time, as several series one after another "
                "do (`jq '.data.result[].values[]'`): export one series, wrap the query in "
                "sum() or max()"
            )
        if not naive:
            raise TraceError(
                f"{where}; times with a UTC offset or epoch times never repeat at a clock "
                f"change: {fix}"
            )
        replay = seconds[start:end]
        if before - replay[0] >= HOUR or replay[-1] - replay[0] >= HOUR:
            raise TraceError(
                f"{where}, by more than the hour a daylight-saving change repeats; {fix}"
            )
        if int(replay[0] // HOUR) % 24 not in NIGHT_HOURS:
            raise TraceError(
                f"{where}, in daytime, when no clock change happens; "
                "sort the trace by time and keep one row per timestamp"
            )
        if np.any(np.diff(replay) <= 0):
            row = start + int(np.flatnonzero(np.diff(replay) <= 0)[0]) + 1
            raise TraceError(
                f"{path}:{lines[row]}: timestamp {cells.iloc[row]!r} repeats inside the "
                "repeated hour; keep one row per timestamp and wall-clock hour"
            )
        if runs and replay[0] - seconds[runs[-1][0]] < MIN_CHANGE_GAP:
            raise TraceError(
                f"{where} again {(replay[0] - seconds[runs[-1][0]]) / DAY:.1f} days after "
                f"line {lines[runs[-1][0]]}; clocks change at most twice a year: sort the trace "
                "by time and keep one row per timestamp"
            )
        runs.append((start, end))
    return runs
