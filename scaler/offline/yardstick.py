"""The replay yardstick of DESIGN.md: how a series of replica requests serves a load trace. Pure.

A replica asked for at step t is ready at step t + k (k = ceil(cold start / step)); scale-down is
immediate, so ready[t] = min(D[t-k..t]); every asked-for replica is billed (booting ones too).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def cold_start_steps(cold_start: float, step: float) -> int:
    return max(0, math.ceil(cold_start / step - 1e-9))


def required(load: FloatArray, threshold: float) -> IntArray:
    """ceil(L / c) per step; missing load needs nothing."""
    safe = np.where(np.isfinite(load) & (load > 0), load, 0.0)
    return np.ceil(safe / threshold - 1e-9).astype(np.int64)


def ready(desired: IntArray, k: int) -> IntArray:
    """min(D[t-k..t]): what is serving at t when replicas take k steps to become ready."""
    out = desired.astype(np.int64).copy()
    n = out.size
    for lag in range(1, k + 1):  # a lag past the end leaves nothing ready yet
        late = min(lag, n)
        shifted = np.concatenate([np.zeros(late, dtype=np.int64), desired[: n - late]])
        out = np.minimum(out, shifted)
    return out


@dataclass(frozen=True)
class Outcome:
    under_provisioned_pct: float
    """Share of scored steps with ready < required."""
    shortfall_replica_steps: int
    unserved_load_pct: float
    gpu_hours: float

    def as_dict(self) -> dict[str, float]:
        return {k: float(v) for k, v in asdict(self).items()}


def outcome(
    *,
    load: FloatArray,
    desired: IntArray,
    threshold: float,
    k: int,
    step: float,
    scored: npt.NDArray[np.bool_] | None = None,
) -> Outcome:
    """Score `desired` against `load` over the scored steps (default: every step with a value)."""
    need = required(load, threshold)
    have = ready(desired, k)
    mask = np.isfinite(load) if scored is None else (scored & np.isfinite(load))
    n = max(1, int(mask.sum()))
    gap = np.maximum(need - have, 0)[mask]
    served_cap = have[mask] * threshold
    demand = np.where(np.isfinite(load), load, 0.0)[mask]
    unserved = np.maximum(demand - served_cap, 0.0).sum()
    return Outcome(
        under_provisioned_pct=100.0 * float((gap > 0).sum()) / n,
        shortfall_replica_steps=int(gap.sum()),
        unserved_load_pct=100.0 * float(unserved) / max(float(demand.sum()), 1e-12),
        gpu_hours=float(desired[mask].sum()) * step / 3600.0,
    )


FRONTIER_FLOOR_PCT = 0.5
"""The frontier ratio's denominator is never below 0.5% of steps, so a policy is not scored
against a near-zero frontier where a single step would swing the ratio."""


@dataclass(frozen=True)
class Frontier:
    """Under-provisioned steps of the reactive autoscaler as a function of its GPU-hours, one
    point per static headroom (sorted by GPU-hours)."""

    headrooms: tuple[float, ...]
    gpu_hours: tuple[float, ...]
    under_provisioned_pct: tuple[float, ...]

    def under_at(self, gpu_hours: float) -> float:
        """The frontier's under-provisioned % at `gpu_hours` (linear, clamped at both ends)."""
        order = np.argsort(np.asarray(self.gpu_hours), kind="stable")
        xs = np.asarray(self.gpu_hours)[order]
        ys = np.asarray(self.under_provisioned_pct)[order]
        return float(np.interp(gpu_hours, xs, ys))

    def ratio(self, result: Outcome) -> float:
        """The frontier ratio of DESIGN.md: below 1 beats static headroom at equal cost."""
        denominator = max(self.under_at(result.gpu_hours), FRONTIER_FLOOR_PCT)
        return result.under_provisioned_pct / denominator


def frontier(points: dict[float, Outcome]) -> Frontier:
    """The frontier from the outcome of the reactive autoscaler at each static headroom."""
    ordered = sorted(points.items(), key=lambda kv: (kv[1].gpu_hours, kv[0]))
    return Frontier(
        headrooms=tuple(h for h, _ in ordered),
        gpu_hours=tuple(o.gpu_hours for _, o in ordered),
        under_provisioned_pct=tuple(o.under_provisioned_pct for _, o in ordered),
    )
