"""Serving checkpoints: a target's fit input (the history the engine holds, bucket peaks or
points at the model step) up to an hour T, written to the model store per (target, model
version, T), so that a fresh replica reads from Prometheus only what came after T.

A replica writes one per target each EVERY seconds of the clock, once its history is whole
(the warm-up's older part read, scaler/serving/warmup.py `backfill`) and reaches SETTLE model
steps past T (the bucket peaks at T are complete then). T is on the hour for every replica, so
replicas checkpointing the same target write the same (key, version, T) and the store keeps the
first (an exclusive create). A replica warming up (scaler/serving/champions.py `load`) starts
the target's history from its champion's newest checkpoint; the warm-up then reads only the
part it lacks (warmup._fetch) and replays the drift state from the fit as before, so with
Prometheus holding the same data the tracker is the full replay's, bit for bit
(tests/integration/test_checkpoints.py).

A checkpoint written for another query, Prometheus, tenant, model step or fit input, or one
that is corrupt, is ignored with a warning and the whole history is read. Must not: read
Prometheus, or decide.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import numpy as np

from models.base import Series
from scaler.decision.spec import TargetSpec

FORMAT = 1
EVERY = 3600.0
"""Seconds between two checkpoints of a target: a fresh replica reads at most this much (and
SETTLE) from Prometheus per target; 1,000 targets write about 150 kB each an hour."""
SETTLE = 2
"""Model steps the history must reach past T before T is written: the newest bucket peaks a
refresh read may still have been filling; two steps later they are complete."""
MAX_POINTS = 100_000
"""Most points a checkpoint is read with (a 28-day window at 1 minute is 40,320)."""


class Rejected(ValueError):
    """A checkpoint that does not fit this target and these settings: what is wrong."""


def source_of(spec: TargetSpec) -> str:
    """What the history was read from: the query, the Prometheus, its tenant and headers."""
    identity = [spec.query, spec.server_address, spec.query_namespace, list(spec.custom_headers)]
    return hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:16]


def due_at(history: Series) -> float | None:
    """The T a checkpoint of `history` is due at: the newest EVERY boundary SETTLE model steps
    or more before its end; None when the history begins after it."""
    at = math.floor((history.end - SETTLE * history.step) / EVERY) * EVERY
    return at if at >= history.start else None


def encode(spec: TargetSpec, history: Series, *, at: float, peaks: float | None) -> dict[str, Any]:
    """`history` up to `at` as checkpoint data (NaN, a step with no sample, as null)."""
    kept = history.until(at)
    values = [None if math.isnan(v) else float(v) for v in kept.values.tolist()]
    return {
        "format": FORMAT,
        "source": source_of(spec),
        "step": kept.step,
        "peaks": peaks,
        "start": kept.start,
        "values": values,
    }


def decode(data: Any, spec: TargetSpec, *, step: float, peaks: float | None) -> Series:
    """The history a checkpoint holds; Rejected naming what does not match or is malformed."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise Rejected(f"format {str(data.get('format') if isinstance(data, dict) else data)[:20]}")
    if data.get("source") != source_of(spec):
        raise Rejected("written for another query, Prometheus or tenant")
    if data.get("step") != step or data.get("peaks") != peaks:
        raise Rejected(
            f"written at step {data.get('step')}s, peaks {data.get('peaks')}; serving at "
            f"step {step}s, peaks {peaks}"
        )
    start, values = data.get("start"), data.get("values")
    if not isinstance(start, int | float) or not math.isfinite(start):
        raise Rejected(f"start {str(start)[:20]} is not a time")
    if not isinstance(values, list) or not 1 <= len(values) <= MAX_POINTS:
        raise Rejected(f"holds no list of 1-{MAX_POINTS} values")
    if not all(v is None or (isinstance(v, int | float) and math.isfinite(v)) for v in values):
        raise Rejected("holds a value that is neither a number nor null")
    array = np.array([np.nan if v is None else v for v in values], dtype=float)
    return Series(float(start), step, array)
