"""CmdStan's input files written by orjson (models/stan_inputs.py) hold the numbers the
standard library's encoder wrote, so a Prophet fit is the same bit for bit, only cheaper."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from models import prophet, stan_inputs
from models.base import Series
from tests.contract import synthetic


def standard_library(path: Path, value: Any) -> None:
    """What models/prophet.py wrote before: json.dumps, numpy as lists."""
    path.write_text(json.dumps(value, default=lambda v: v.tolist()))


def test_every_number_reads_back_as_the_standard_library_wrote_it(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    matrix = rng.normal(size=(50, 7)) * 10.0 ** rng.integers(-12, 12, size=(50, 7))
    value = {
        "T": np.int64(50),
        "tau": 0.05,
        "y": list(rng.random(50) * 1e-5),
        "X": matrix.tolist(),
        "columns": matrix[:, ::2],  # not contiguous: through the fallback
        "s_a": [1, 0, 1],
        "tiny": [5e-324, 1e16, -0.0, 1.0],
    }
    stan_inputs.write(tmp_path / "fast.json", value)
    standard_library(tmp_path / "slow.json", value)
    fast = json.loads((tmp_path / "fast.json").read_text())
    slow = json.loads((tmp_path / "slow.json").read_text())
    assert fast == slow
    assert (tmp_path / "fast.json").stat().st_size < (tmp_path / "slow.json").stat().st_size


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_numbers_are_written_as_cmdstan_reads_them_not_as_null(
    tmp_path: Path, bad: float
) -> None:
    stan_inputs.write(tmp_path / "data.json", {"y": [1.0, bad], "X": np.array([[bad, 2.0]])})
    text = (tmp_path / "data.json").read_text()
    assert "null" not in text
    assert text == json.dumps({"y": [1.0, bad], "X": [[bad, 2.0]]})


def test_a_prophet_fit_is_the_same_bit_for_bit_as_with_the_standard_library_encoder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = synthetic.load(15, seed=5)
    history = Series(data.start, data.step, data.values)
    fast = prophet.ProphetModel()
    fast.fit(history)
    monkeypatch.setattr(stan_inputs, "write", standard_library)
    slow = prophet.ProphetModel()
    slow.fit(history)
    assert fast.to_dict() == slow.to_dict()
    assert np.array_equal(fast.predict(history, 6), slow.predict(history, 6))
