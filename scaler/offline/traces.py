"""Reading the load traces people export (Grafana, Prometheus, spreadsheets) into a regular Series.

What is read (each is what a real export looks like; scaler/offline/trace_times.py has the times):
- text: UTF-8 (a BOM is skipped) or UTF-16 with a BOM, gzipped or not; separator `,`, `;` or
  tab, taken from an Excel `sep=` first line or else the one that splits every line alike;
  quotes as in RFC 4180; blank lines, lines of empty cells (`,`: rows a spreadsheet once
  held) and lines starting with `#` are skipped, and so is a repeat of the header line (two
  exports joined with `cat`), with one warning naming its lines.
- columns: a time column and a value column, with any header or none: `timestamp,value`,
  Grafana's `"Time","<series name>"` (a name that is a number too: `"Time","200"`), a
  header-less `jq @csv` of a Prometheus query_range. A header naming `time`/`timestamp`/
  `date`/`_time` and `value`/`_value` picks those two out of more columns (InfluxDB's annotated
  CSV, whose `#` lines are skipped); columns of series names (Grafana's legacy
  `"Series";"Time";"Value"`, InfluxDB's `table`) are dropped when they name one series. A
  saved Prometheus answer (`curl .../api/v1/query_range > trace.json`) is read too
  (scaler/offline/trace_json.py).
- values: plain numbers, thousands groups (`1,721,992.5`) and a decimal-comma file's commas;
  empty, `NaN`, `null` and `None` are missing data (scaler/offline/trace_values.py). A
  decimal-comma file whose every value has exactly three decimals cannot be told from
  grouping and would be misread: export with decimal points.
- step: the most common spacing, at the trace's own resolution (never resampled here: a finer
  trace is scored at its own step, a coarser one is used as is); rows missing from that grid
  (gaps, a daylight-saving gap) and missing values become NaN.
What was assumed (how the times were read, the step, the span, the steps without a value) is
logged once per file at INFO.

Refused with a TraceError naming the file, the line and the fix: a binary file, one column,
more columns with no clear value column, several series, dates that are not ISO 8601, numbers
that are not loads (text, units, infinite, above load_bound.MAX_LOAD, negative beyond float
noise), times going backwards
(see trace_times), rows off the grid, and a grid of more than MAX_POINTS steps. Never guesses
beyond that.
"""

from __future__ import annotations

import csv
import gzip
import io
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from models.base import FloatArray, Series
from scaler.decision.spec import format_duration
from scaler.errors import TraceError
from scaler.offline import trace_json, trace_times, trace_values

MAX_POINTS = 20_000_000
"""Longest grid read (160 MB of float64): 38 years at one minute, 231 days at one second."""
MAX_BYTES = 1 << 30
"""Largest file read (1 GiB, about 30 M rows of `2024-03-01T10:00:00Z,1234.5`)."""

SEPARATORS = ("\t", ";", ",")
"""Tried in this order: a `;` file may hold commas in its numbers (Grafana 5's `1,721.5`)."""

TIME_NAMES = frozenset({"time", "timestamp", "date", "datetime", "ds", "ts", "_time"})
VALUE_NAMES = frozenset({"value", "values", "y", "load", "_value"})
SERIES_NAMES = frozenset({"series", "metric", "name", "table", "_field", "_measurement"})
"""Columns that name the series a row belongs to (Grafana's Series, InfluxDB's table/_field)."""
logger = logging.getLogger(__name__)
_FORMAT_HELP = "expected two columns, time and value, e.g. `2024-03-01T10:00:00Z,12.5`"


@dataclass(frozen=True)
class Table:
    """The data rows of a trace file: one time and one value cell per row, with its line."""

    lines: npt.NDArray[np.int64]
    """1-based line number in the file of each row."""
    times: pd.Series
    values: pd.Series


def read_trace(path: Path | str) -> Series:
    """The trace at `path` as a regular Series at its own step; TraceError on garbage. A str
    is read as a path: a notebook's `read_trace("export.csv")` used to fail with
    "'str' object has no attribute 'stat'"."""
    path = Path(path)
    table = read_table(path)
    values = trace_values.parse(path, table.values, table.lines)
    seconds, values, lines, how = trace_times.parse(path, table.times, values, table.lines)
    series = on_grid(path, seconds, values, lines)
    zone = "" if how == trace_times.NAIVE else " UTC"
    logger.info(  # what was assumed, once per file: the unit, the zone, the step, the gaps
        "%s: %d rows read as %s: %s steps from %s to %s%s, %d without a value",
        path,
        len(table.lines),
        how,
        format_duration(series.step),
        *(time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)) for t in (series.start, series.end)),
        zone,
        int(np.count_nonzero(np.isnan(series.values))),
    )
    return series


def read_table(path: Path) -> Table:
    """The time and value columns of the CSV (or Prometheus JSON) at `path`."""
    text = _text(path)
    if trace_json.looks_like_json(text):
        json_lines, times, values = trace_json.cells(path, text)
        return Table(lines=json_lines, times=times, values=values)
    rows, lines = _rows(path, text)
    names: list[str] = []
    if _is_header(rows):
        names = [n.strip().lower() for n in rows[0]]
        rows, lines = _without_repeats(path, rows, lines)
        if not rows:
            raise TraceError(f"{path}: has a header but no rows")
    time_col, value_col = _columns(path, names, rows, lines)
    return Table(
        lines=np.asarray(lines, dtype=np.int64),
        times=pd.Series([r[time_col] for r in rows], dtype=object).str.strip(),
        values=pd.Series([r[value_col] for r in rows], dtype=object).str.strip(),
    )


def _text(path: Path) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise TraceError(
                f"{path}: is {size / (1 << 20):.0f} MiB, more than {MAX_BYTES >> 20} MiB; "
                "export a coarser step or a shorter range"
            )
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":  # gzip: `curl ... | gzip`, a rotated export
            raw = _gunzip(path, raw)
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file; pass a CSV of time,value rows") from None
    except OSError as exc:
        raise TraceError(f"{path}: cannot be read ({exc.strerror}); pass a CSV file") from exc
    encoding = "utf-16" if raw[:2] in (b"\xff\xfe", b"\xfe\xff") else "utf-8-sig"
    if encoding == "utf-8-sig" and b"\x00" in raw[:65536]:
        raise TraceError(f"{path}: is a binary file, not a CSV; {_FORMAT_HELP}")
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise TraceError(
            f"{path}:{line}: byte {raw[exc.start]:#04x} is not {encoding[:5].upper()} text; "
            "save the file as UTF-8 CSV"
        ) from exc


def _gunzip(path: Path, raw: bytes) -> bytes:
    """The content of a gzip file, refused past MAX_BYTES or when it is not whole."""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as stream:
            content = stream.read(MAX_BYTES + 1)
    except (OSError, EOFError) as exc:
        raise TraceError(f"{path}: is a damaged gzip file ({exc}); compress it again") from exc
    if len(content) > MAX_BYTES:
        raise TraceError(
            f"{path}: holds more than {MAX_BYTES >> 20} MiB uncompressed; "
            "export a coarser step or a shorter range"
        )
    return content


def _rows(path: Path, text: str) -> tuple[list[list[str]], list[int]]:
    """The rows of `text` (cells not yet stripped of trailing spaces) and their line numbers."""
    numbered = [
        (number, line)
        for number, line in enumerate(text.splitlines(), start=1)
        if (start := line.lstrip()) and start[0] != "#"
    ]
    separator = None
    if numbered and numbered[0][1].strip().lower().startswith("sep="):
        separator = numbered[0][1].strip()[4:5] or None
        numbered = numbered[1:]
    if not numbered:
        raise TraceError(f"{path}: is empty; {_FORMAT_HELP}")
    separator = separator or _sniff([line for _, line in numbered[:50]])
    lines = [number for number, _ in numbered]
    reader = csv.reader((line for _, line in numbered), delimiter=separator, skipinitialspace=True)
    rows, lines = _filled(list(reader), lines)
    if not rows:
        raise TraceError(f"{path}: holds no values; {_FORMAT_HELP}")
    width = len(rows[0])
    if width < 2:
        raise TraceError(
            f"{path}:{lines[0]}: has one column; {_FORMAT_HELP}, separated by , ; or tab"
        )
    ragged = np.flatnonzero(np.fromiter(map(len, rows), np.int64, len(rows)) != width)
    if ragged.size:
        row = int(ragged[0])
        raise TraceError(
            f"{path}:{lines[row]}: has {len(rows[row])} columns where line {lines[0]} has "
            f"{width}; {_ragged_fix(rows, lines, row, separator)}"
        )
    return rows, lines


def _without_repeats(
    path: Path, rows: list[list[str]], lines: list[int]
) -> tuple[list[list[str]], list[int]]:
    """The rows below the header `rows[0]`, less the lines that repeat it (`cat a.csv b.csv`:
    before, refused as "value 'value' is not a number", the fix it named was about units)."""
    header = [c.strip() for c in rows[0]]
    again = {i for i in range(1, len(rows)) if [c.strip() for c in rows[i]] == header}
    if again:
        named = ", ".join(str(lines[i]) for i in sorted(again))
        which = f"line {named} repeats" if len(again) == 1 else f"lines {named} repeat"
        logger.warning("%s: %s the header line (exports joined?); skipped", path, which)
    kept = [i for i in range(1, len(rows)) if i not in again]
    return [rows[i] for i in kept], [lines[i] for i in kept]


def _ragged_fix(rows: list[list[str]], lines: list[int], row: int, separator: str) -> str:
    """How to even out `row` and the first row: quote the number whose unquoted thousands
    separators (`101,727.9`) split it into cells, or else give every row the same columns."""
    longer, shorter = (row, 0) if len(rows[row]) > len(rows[0]) else (0, row)
    number = ",".join(cell.strip() for cell in rows[longer][len(rows[shorter]) - 1 :])
    if separator != "," or not trace_values.GROUPED.match(number):
        return "give every row the same columns"
    return (
        f"line {lines[longer]}'s {number!r} is one number split at its thousands separator: "
        f'quote it ("{number}") or drop the separator'
    )


def _filled(rows: list[list[str]], lines: list[int]) -> tuple[list[list[str]], list[int]]:
    """The rows with a cell that is not empty: Excel saves a row whose cells were emptied as `,`
    (`;;`), which was refused as "timestamp '' is not a date-time"."""
    kept = [i for i, row in enumerate(rows) if any(c.strip() for c in row)]
    return [rows[i] for i in kept], [lines[i] for i in kept]


def _sniff(sample: list[str]) -> str:
    """The separator that splits every sampled line into the same number (>= 2) of cells."""
    for separator in SEPARATORS:
        widths = {len(row) for row in csv.reader(sample, delimiter=separator)}
        if len(widths) == 1 and widths.pop() >= 2:
            return separator
    return ","  # then _rows names the first line that does not fit


def _is_number(cell: str) -> bool:
    try:
        float(cell.replace(",", ""))
    except ValueError:
        return False
    return True


def _is_time(cell: str) -> bool:
    return _is_number(cell) or trace_times.looks_like_date(cell.strip())


def _is_header(rows: list[list[str]]) -> bool:
    """A first row with no number and no date in it names the columns. So does one whose first
    cell is a word (no digit: a mistyped time has some, and is refused rather than dropped)
    above rows whose first cells are times, whatever its other cells say: Grafana's
    `"Time","200"` for a series its legend names by a status code."""
    first = rows[0]
    if not any(_is_time(c) for c in first):
        return True
    word = first[0].strip()
    below = [row[0] for row in rows[1:51]]
    return bool(word and below) and not any(map(str.isdigit, word)) and all(map(_is_time, below))


def _columns(
    path: Path, names: list[str], rows: list[list[str]], lines: list[int]
) -> tuple[int, int]:
    """Indices of the time and value columns (see the module docstring); `names` = header."""
    width = len(rows[0])
    if width == 2:
        swapped = bool(names) and names[1] in TIME_NAMES and names[0] not in TIME_NAMES
        return (1, 0) if swapped else (0, 1)
    times = [i for i, n in enumerate(names) if n in TIME_NAMES]
    picked = [i for i, n in enumerate(names) if n in VALUE_NAMES]
    if len(times) == 1 and len(picked) == 1:
        _check_one_series(path, names, rows, lines, skip={times[0], picked[0]})
        return times[0], picked[0]
    what = f"columns {', '.join(names)}" if names else "no header"
    raise TraceError(
        f"{path}:{lines[0]}: has {width} columns ({what}) and no clear value column; "
        "keep two columns, time and value, or name them timestamp and value"
    )


def _check_one_series(
    path: Path, names: list[str], rows: list[list[str]], lines: list[int], *, skip: set[int]
) -> None:
    """Extra columns may only be labels (Grafana's Series column) naming a single series."""
    for col, name in enumerate(names):
        if col in skip or name not in SERIES_NAMES:
            continue
        labels = list(dict.fromkeys(r[col].strip() for r in rows))
        if len(labels) > 1:
            row = next(i for i, r in enumerate(rows) if r[col].strip() != labels[0])
            raise TraceError(
                f"{path}:{lines[row]}: column {name} names a second series {labels[1]!r} after "
                f"{labels[0]!r}; export one series (wrap the query in sum() or max())"
            )


def on_grid(
    path: Path, seconds: FloatArray, values: FloatArray, lines: npt.NDArray[np.int64]
) -> Series:
    """Sorted, distinct times on the most common spacing -> a regular Series (NaN in the gaps)."""
    if seconds.size == 1:
        return Series(float(seconds[0]), 60.0, values)
    step = float(pd.Series(np.diff(seconds)).mode().iloc[0])
    offsets = (seconds - seconds[0]) / step
    index = np.rint(offsets).astype(np.int64)
    bad = np.flatnonzero(np.abs(offsets - index) > 1e-6)
    if bad.size:
        raise TraceError(
            f"{path}:{lines[int(bad[0])]}: timestamp is off the trace's {step:g}s grid; "
            "resample the trace to a regular step"
        )
    if index[-1] >= MAX_POINTS:
        raise TraceError(
            f"{path}: spans {index[-1] + 1} steps of {step:g}s, more than {MAX_POINTS}; "
            "export a coarser step or a shorter range"
        )
    grid = np.full(int(index[-1]) + 1, np.nan)
    grid[index] = values
    return Series(float(seconds[0]), step, grid)
