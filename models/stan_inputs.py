"""CmdStan's input files (the data and the inits Prophet hands it), written by orjson: the one
module that imports orjson.

Prophet's feature matrix is four weeks x 5 minutes x 32 Fourier columns, about 260,000 floats a
fit. The standard library's encoder spells each with Python's float repr, 0.4-0.5 CPU s a fit
and three fits a target under `model: auto`; orjson writes the same shortest round-trip digits
in C, 20 times faster. Only the spacing differs (no blank after the commas), so CmdStan reads
the very same numbers and the fit is the same bit for bit (tests/unit/test_stan_inputs.py).

Non-finite values are the exception: orjson writes them as null, which CmdStan rejects, where
the standard library writes NaN and Infinity, which CmdStan reads; such inputs are written as
before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import orjson


def write(path: Path, value: Any) -> None:
    """`value` (dicts, lists, numbers, numpy arrays and scalars) as JSON text at `path`."""
    if _finite(value):
        path.write_bytes(orjson.dumps(value, default=_plain, option=orjson.OPT_SERIALIZE_NUMPY))
    else:
        path.write_text(json.dumps(value, default=_plain))


def _plain(value: Any) -> Any:
    """numpy values orjson does not take natively (non-contiguous arrays, other dtypes) as
    JSON numbers and lists (what stanio makes of them)."""
    if isinstance(value, np.generic | np.ndarray):
        return value.tolist()
    raise TypeError(f"prophet: {type(value).__name__} is not JSON data for CmdStan")


def _finite(value: Any) -> bool:
    """No NaN or infinity anywhere in `value`."""
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list | tuple | np.ndarray | float | np.floating):
        try:
            numbers = np.asarray(value, dtype=np.float64)  # the feature matrix: one C pass
        except (TypeError, ValueError):  # ragged, or not numbers
            return isinstance(value, float | np.floating) or all(_finite(v) for v in value)
        return bool(np.isfinite(numbers).all())
    return True
