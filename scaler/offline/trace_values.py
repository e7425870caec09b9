"""The value column of a trace file -> floats, NaN where data is missing. Used by
offline/traces.py only (which owns the file, its rows and columns; trace_times.py the times).

Values are plain numbers; empty, `NaN`, `null` and `None` are missing data. A comma is read as a
thousands separator only in 3-digit groups (`1,721,992.5`). A file with no `.` in any value and
a comma that is not such a group (`809,76`: a spreadsheet in a German or French locale) is read
with every comma as the decimal point, and one warning says so. Any other comma is refused. A
negative that is float noise (scaler/offline/negatives.py) is read as 0. Refused with a
TraceError naming the file, the line and the fix: text, units, infinite values, values above
load_bound.MAX_LOAD, negatives beyond float noise.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from models.base import FloatArray
from scaler.errors import TraceError
from scaler.offline import negatives
from scaler.sources import load_bound

Lines = npt.NDArray[np.int64]

MISSING = frozenset({"", "nan", "null", "none"})
GROUPED = re.compile(r"^[+-]?\d{1,3}(?:,\d{3})+(?:\.\d*)?$")
"""A number in 3-digit thousands groups (`1,721,992.5`)."""
_DECIMAL_COMMA = re.compile(r"^[+-]?\d*,\d+$")
logger = logging.getLogger(__name__)


def parse(path: Path, cells: pd.Series, lines: Lines) -> FloatArray:
    """Values as floats (NaN = missing); TraceError naming the first cell that is not a load."""
    values = pd.to_numeric(cells, errors="coerce").to_numpy(np.float64)
    unread = np.flatnonzero(np.isnan(values))  # missing, grouped or garbage: usually few
    if unread.size and (decimal := _decimal_commas(path, cells, lines, unread)) is not cells:
        cells = decimal
        values = pd.to_numeric(cells, errors="coerce").to_numpy(np.float64)
        unread = np.flatnonzero(np.isnan(values))
    if unread.size:
        values[unread] = _unusual(path, cells, lines, unread)
    _refuse(
        path,
        cells,
        lines,
        np.flatnonzero(np.isinf(values)),
        "is not a load (must be finite); leave it empty where there is no data",
    )
    _refuse(
        path,
        cells,
        lines,
        load_bound.too_large(values),
        f"is not a plausible load (above {load_bound.MAX_LOAD:g}, more than any fleet serves); "
        "export the load itself (a rate, not a counter's total) and leave a value empty where "
        "there is no data",
    )
    _refuse(
        path,
        cells,
        lines,
        negatives.real(values),
        f"is not a load (must be >= 0; a negative under {negatives.NOISE:g} of the trace's "
        "largest value is float noise, read as 0); a trace holds loads: export the load "
        "itself, e.g. clamp its query with clamp_min(..., 0) or fix the subtraction in it",
    )
    return negatives.zeroed(values)


def _decimal_commas(
    path: Path, cells: pd.Series, lines: Lines, unread: npt.NDArray[np.intp]
) -> pd.Series:
    """`cells` with every comma read as the decimal point, when one of the cells that did not
    read as a number (`unread`) has a comma that is not a thousands group and no value in the
    file has a point (a decimal-comma spreadsheet export); otherwise `cells` itself."""
    text = cells.iloc[unread].astype(str)
    decimal = (text.str.match(_DECIMAL_COMMA) & ~text.str.match(GROUPED)).to_numpy()
    if not decimal.any() or cells.astype(str).str.contains(".", regex=False).any():
        return cells
    row = int(unread[np.flatnonzero(decimal)[0]])
    logger.warning(
        "%s: read ',' as the decimal point: no value has a '.', and %r on line %d is not a "
        "thousands group",
        path,
        cells.iloc[row],
        int(lines[row]),
    )
    return cells.str.replace(",", ".", regex=False)


def _unusual(path: Path, cells: pd.Series, lines: Lines, rows: npt.NDArray[np.intp]) -> FloatArray:
    """The values of cells that are not plain numbers: missing, or in thousands groups."""
    text = cells.iloc[rows].astype(str)
    missing = text.str.lower().isin(MISSING).to_numpy()
    grouped = text.str.match(GROUPED).to_numpy()
    text = text.where(~grouped, text.str.replace(",", "", regex=False))
    _refuse(
        path,
        cells,
        lines,
        rows[text.str.contains(",", regex=False).to_numpy()],
        "has a comma that is not a thousands separator; write decimals with a point (1.5)",
    )
    values = pd.to_numeric(text.where(~missing, "nan"), errors="coerce").to_numpy(np.float64)
    _refuse(
        path,
        cells,
        lines,
        rows[np.isnan(values) & ~missing],
        "is not a number; export raw numbers (no units: turn off Grafana's Formatted data) "
        "and leave a value empty where there is no data",
    )
    return values


def _refuse(
    path: Path, cells: pd.Series, lines: Lines, rows: npt.NDArray[np.intp], why: str
) -> None:
    if rows.size:
        row = int(rows[0])
        raise TraceError(f"{path}:{lines[row]}: value {cells.iloc[row]!r} {why}")
