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

import base64
import binascii
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
    """`history` up to `at` as checkpoint data: the values as little-endian float64 in base64
    (NaN, a step with no sample, included), bit for bit, and decoded in microseconds where a
    JSON list of 8,064 numbers takes milliseconds (bench/warm_phases.py --checkpoint)."""
    kept = history.until(at)
    values = base64.b64encode(kept.values.astype("<f8").tobytes()).decode("ascii")
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
    if not isinstance(values, str) or not 0 < len(values) <= MAX_POINTS * 12:
        raise Rejected(f"holds no base64 string of 1-{MAX_POINTS} float64 values")
    try:
        raw = base64.b64decode(values, validate=True)
    except binascii.Error as exc:
        raise Rejected(f"values are not base64 ({exc})") from exc
    if len(raw) % 8:
        raise Rejected(f"values are {len(raw)} bytes, not whole float64s")
    array = np.frombuffer(raw, dtype="<f8").astype(float)
    if np.isinf(array).any():
        raise Rejected("holds an infinite value")
    return Series(float(start), step, array)
