"""A checkpoint's data (scaler/serving/checkpoints.py): the history round-trips bit for bit,
gaps included, and whatever does not fit the target or is malformed is refused, naming why."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import pytest

from models.base import Series
from scaler.decision import spec
from scaler.serving import checkpoints

STEP = 300.0
TARGET = spec.parse("gpu", "llm", {"query": "sum(rate(x[2m]))", "threshold": "10"})


def history() -> Series:
    values = np.random.default_rng(1).gamma(2.0, 7.3, 600)
    values[[3, 4, 500]] = np.nan
    return Series(3600.0 * 1000, STEP, values)


def written(**change: Any) -> dict[str, Any]:
    data = checkpoints.encode(TARGET, history(), at=history().end - STEP, peaks=30.0)
    return data | change


def test_the_history_round_trips_bit_for_bit_up_to_its_hour() -> None:
    got = checkpoints.decode(written(), TARGET, step=STEP, peaks=30.0)
    kept = history().until(history().end - STEP)
    assert (got.start, got.step, len(got)) == (kept.start, kept.step, len(kept))
    assert np.array_equal(got.values, kept.values, equal_nan=True)


def test_the_hour_a_checkpoint_is_due_at_is_settled_and_on_the_hour() -> None:
    series = Series(0.0, STEP, np.ones(40))  # up to 3h15m
    assert checkpoints.due_at(series) == 3 * checkpoints.EVERY
    assert checkpoints.due_at(Series(0.0, STEP, np.ones(38))) == 2 * checkpoints.EVERY  # 3h05
    assert checkpoints.due_at(Series(600.0, STEP, np.ones(4))) is None


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"format": 9}, "format 9"),
        ({"source": "0" * 16}, "another query"),
        ({"step": 60.0}, "serving at step 300.0s"),
        ({"peaks": None}, "peaks 30.0"),
        ({"start": "soon"}, "not a time"),
        ({"values": [1.0, 2.0]}, "no base64 string"),
        ({"values": "!!!!"}, "not base64"),
        ({"values": base64.b64encode(b"12345").decode()}, "not whole float64s"),
        ({"values": base64.b64encode(np.array([np.inf]).tobytes()).decode()}, "infinite"),
    ],
)
def test_a_checkpoint_that_does_not_fit_is_refused_naming_why(
    change: dict[str, Any], why: str
) -> None:
    with pytest.raises(checkpoints.Rejected, match=why):
        checkpoints.decode(written(**change), TARGET, step=STEP, peaks=30.0)


def test_another_prometheus_or_tenant_is_another_source() -> None:
    elsewhere = spec.parse(
        "gpu", "llm", {"query": TARGET.query, "threshold": "10", "namespace": "team-b"}
    )
    assert checkpoints.source_of(elsewhere) != checkpoints.source_of(TARGET)
    with pytest.raises(checkpoints.Rejected, match="another query"):
        checkpoints.decode(written(), elsewhere, step=STEP, peaks=30.0)
