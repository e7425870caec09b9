"""Prometheus' range answer (`resultType: matrix`) decoded with each series' samples as one float
array, instead of a Python list per sample: what sources/prometheus_ledger.py reads the ledger's
spend record with.

A fresh replica with a day of ledger history reads 1,000 targets' two counters, 5.8 million
`[time, "value"]` samples, at start. As the standard JSON parse gives them, each is a list the
cyclic garbage collector tracks, and the replica then spent about a third of its reading CPU in
full collections (docs/benchmark.md). Here each series' samples are cut out of the body, read by
a strict pattern and parsed by float() as sources/prometheus_answers.py converts them; the rest
of the body (labels, status, the series list) is still parsed by `json.loads`.

Must not: make any answer mean something else than the standard parse and per-sample conversion
do. A series whose samples are not in the pattern below keeps its list (and is converted sample
by sample, errors included, by the caller); a body this cannot place exactly (not ASCII, not
valid JSON, a cut-out anywhere but a series' "values") gives None, for the standard parse.
"""

from __future__ import annotations

import codecs
import json
import re
import secrets
from typing import Any

import numpy as np

from models.base import FloatArray

_TIME = rb"(?:0|[1-9][0-9]{0,15}+)(?:\.[0-9]{1,9}+)?+"
"""A sample time as Prometheus writes it (seconds, at most 9 decimals): a JSON number, unsigned
(JSON's `-0` is the integer 0, float()'s is -0.0), no exponent; float() reads it as json does."""
_VALUE = rb"(?:-?[0-9]++(?:\.[0-9]++)?+(?:e[-+]?[0-9]++)?+|NaN|[-+]Inf)"
"""A sample value as Prometheus writes it, inside its quotes: no escape, no quote, nothing
float() reads differently from bytes and from str."""
_SAMPLE = rb"\[" + _TIME + rb',"' + _VALUE + rb'"\]'
_VALUES = re.compile(rb'(?<!\\)"values":\[((?:' + _SAMPLE + rb",)*+" + _SAMPLE + rb")?+\]")
"""A series' "values" key and its samples. Preceded by no backslash: the quote opens the key
(in valid JSON an unescaped quote is never inside a string). Every quantifier is possessive
(never gives back): the grammar never needs to, and the scan takes 2/3 of the time."""
_ASCII_COMPATIBLE = frozenset({"utf-8", "ascii", "iso8859-1", "cp1252"})
"""Encodings in which an ASCII body is the same text (requests decodes the body with the answer's
charset before parsing it)."""


def decode(body: bytes, encoding: str | None) -> Any | None:
    """`json.loads` of `body` with each series' "values" in `data.result` an (n, 2) float64 array
    of (time, value) rows, a value NaN where not finite; None when the body is not one this reads
    exactly as the standard parse (the caller parses it as before)."""
    if not body.isascii() or not _same_text(encoding):
        return None
    placeholder = f"values:{secrets.token_hex(8)}:"  # no answer can guess it
    arrays: list[FloatArray] = []

    def cut(match: re.Match[bytes]) -> bytes:
        arrays.append(_samples(match.group(1) or b""))
        return b'"values":"%s%d"' % (placeholder.encode(), len(arrays) - 1)

    try:
        document = json.loads(_VALUES.sub(cut, body).decode("ascii"))
        result = document["data"]["result"]
    except (ValueError, KeyError, TypeError, IndexError, RecursionError):
        return None  # the standard parse says what is wrong
    placed = 0
    if isinstance(result, list):
        for series in result:
            values = series.get("values") if isinstance(series, dict) else None
            if isinstance(values, str) and values.startswith(placeholder):
                series["values"] = arrays[int(values.removeprefix(placeholder))]
                placed += 1
    return document if placed == len(arrays) else None  # a cut-out anywhere else: not a series'


def _samples(text: bytes) -> FloatArray:
    """`[t,"v"],[t,"v"],...` (matched by _VALUES) as (float(t), float(v)) rows, v NaN where
    not finite, as sources/prometheus_answers.py converts each sample."""
    fields = text.translate(None, b'[]"').split(b",") if text else []
    rows = np.array(list(map(float, fields)), dtype=np.float64).reshape(-1, 2)
    values = rows[:, 1]
    values[~np.isfinite(values)] = np.nan
    return rows


def _same_text(encoding: str | None) -> bool:
    """Whether requests reads an ASCII body as the same text with this charset (None: it guesses
    UTF-8 for JSON)."""
    if encoding is None:
        return True
    try:
        return codecs.lookup(encoding).name in _ASCII_COMPATIBLE
    except LookupError:
        return False
