"""A saved Prometheus HTTP API answer (`curl .../api/v1/query_range?... > trace.json`) -> the
time and value cells of its one series, each with the line it is on. Used by offline/traces.py.

The answer must be a successful range query (`resultType` matrix) holding exactly one series;
anything else (an error answer, named with Prometheus's words; none: a query that matched
nothing; several) is refused naming the file and the fix. Grafana's DataFrame JSON is refused
by name: the CSV download of the same panel is read, while its frames keep NaN and Inf apart
from the values (`entities`) and no line per sample.
Samples keep Prometheus's text (`"NaN"`, `"+Inf"`), so traces.py judges them like CSV cells.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from scaler.errors import TraceError

_SAMPLE = re.compile(r'\[\s*([-+0-9.eE]+)\s*,\s*"([^"]*)"\s*\]')
"""One `[ <epoch seconds>, "<value>" ]` pair: the only arrays of this shape in an answer."""
_JSON_START = re.compile(r"\s*(?:\{|\[\s*[\[{])")
"""An object, or an array of arrays or objects: what no CSV starts with (`[Time],[Value]`,
a SQL export's header, does not match)."""


def looks_like_json(text: str) -> bool:
    return bool(_JSON_START.match(text))


def _grafana_frames(answer: object) -> bool:
    """Grafana's DataFrame JSON (Inspect > JSON: a list of `{"schema", "data"}` frames, or
    the panel data holding them under `series`)."""
    frames = answer.get("series") if isinstance(answer, dict) else answer
    frames = frames if isinstance(frames, list) else [answer]
    return any(isinstance(f, dict) and "schema" in f and "data" in f for f in frames)


def cells(path: Path, text: str) -> tuple[npt.NDArray[np.int64], pd.Series, pd.Series]:
    """(line of each sample's value, its time, its value) of the answer's one series."""
    try:
        answer = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceError(
            f"{path}:{exc.lineno}: not valid JSON ({exc.msg}); save the Prometheus answer "
            "as it came, or a CSV of time,value rows"
        ) from exc
    if _grafana_frames(answer):
        raise TraceError(
            f"{path}: is Grafana's DataFrame JSON (Inspect > JSON), not a Prometheus answer; "
            "export the panel as CSV instead (Inspect > Data > Download CSV)"
        )
    if isinstance(answer, dict) and answer.get("status") == "error":
        raise TraceError(
            f"{path}: is Prometheus's error answer ({answer.get('errorType')}: "
            f"{answer.get('error')}), not a load; fix the request (past 11,000 points per "
            "series, a coarser step= or a shorter range) and save its answer again"
        )
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, dict) or data.get("resultType") != "matrix":
        kind = data.get("resultType") if isinstance(data, dict) else None
        raise TraceError(
            f"{path}: is not a Prometheus range-query answer (resultType {kind!r}); save the "
            "answer of /api/v1/query_range, not /api/v1/query"
        )
    result = data.get("result")
    if not isinstance(result, list):
        raise TraceError(
            f"{path}: its result is not a list of series; save the answer as Prometheus sent it"
        )
    if not result:
        raise TraceError(
            f"{path}: the query matched no series (its result is empty); check the metric and "
            "label names in it, and that the time range exported holds data"
        )
    if len(result) != 1:
        raise TraceError(
            f"{path}: holds {len(result)} series; export one (wrap the query in sum() or max())"
        )
    found = list(_SAMPLE.finditer(text))
    if not found:
        raise TraceError(f"{path}: its series has no samples; query a range that has data")
    if len(found) != len(result[0].get("values", [])):
        raise TraceError(
            f'{path}: its samples are not [time, "value"] pairs; save the answer as Prometheus '
            "sent it"
        )
    breaks = np.array([m.start() for m in re.finditer("\n", text)], dtype=np.int64)
    starts = np.array([m.start(2) for m in found], dtype=np.int64)  # the value's line
    lines = np.searchsorted(breaks, starts).astype(np.int64) + 1
    times = pd.Series([m.group(1) for m in found], dtype=object)
    values = pd.Series([m.group(2) for m in found], dtype=object)
    return lines, times, values
