"""Why each under-provisioned step of a replay was short, from what every decision read.

    .venv/bin/python bench/minute_misses.py TRACE.csv [--model auto] [--no-drift]
        [--set level_points=1] [--out CSV]

Replays TRACE with `scaler backtest`'s defaults (threshold p99/20, lead 10m, horizon 15m, budget
30 %, drift on) and records what `policy.decide` got at every step: the affordable quantile and
the forecast band at it and at the calibrated P95, per forecast point, the reactive floor's and
the hold's loads. The yardstick serves step t with min(D[t-k..t]), so each under-provisioned
scored step t is put in one class by the requests of its window t-k..t against what t required:
- `released`: a request of the window had enough and a later one of it asked less (a replica
  that was there, dropped before t);
- `late`: requests had enough only after t-k (the rise was bought within the cold start);
- `never`: no request of the window had enough;
and by what the short requests of its window read:
- `capped`: maxPrewarmReplicas or the budget's allowance cut one of them;
- `p95_bucket`: the P95 band of t's own forecast point (with the hold) asked enough at each;
- `p95_peak`: only the P95 over the whole look-ahead (a later point) did;
- `band_miss`: not even that: the calibrated band missed the load.
`p95_*` is where the budget's slide (the quantile read below the P95) made the difference.
Also prints the per-(decision, step ahead) miss rate of the band read at t's own point, by how
old the forecast was (minutes since its refresh) and how far ahead the step was: where a band
refreshed at the model step would age. A diagnosis, not a test: it never judges.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from models.conformal import Calibration
from scaler.decision import budget, policy, resolution
from scaler.offline import replay, replay_config, traces

QUANTILE = 0.95
CAPPED = (policy.Reason.PREWARM_CAPPED.value, policy.Reason.BUDGET_CAPPED.value)


@contextlib.contextmanager
def spying(rows: dict[float, dict[str, Any]]) -> Iterator[None]:
    """Record, per decision time, the inputs decide got and the band the policy read."""
    seen: dict[str, Any] = {}
    real_decide, real_quantile = policy.decide, policy.affordable_quantile
    real_upper, real_allowance = Calibration.upper, budget.Ledger.allowance

    def quantile(*args: Any, **kw: Any) -> float:
        q = real_quantile(*args, **kw)
        seen.setdefault("quantile", q)
        return q

    def upper(self: Calibration, p50: Any, q: float) -> Any:
        out = real_upper(self, p50, q)
        if "quantile" in seen and "upper" not in seen:  # the policy's read, not the tracker's
            seen["upper"], seen["p95"] = out.copy(), real_upper(self, p50, QUANTILE)
        return out

    def allowance(self: budget.Ledger, now: float, step: float) -> int:
        seen.setdefault("now", now)
        return int(real_allowance(self, now, step))

    def decide(**kw: Any) -> policy.Decision:
        d = real_decide(**kw)
        if "now" in seen:  # in drift fallback margin.decide calls again: the step's answer
            rows[seen["now"]] = {**seen, "held": kw.get("held_load"), "floor": kw["load"]}
        seen.clear()
        return d

    with (
        mock.patch.object(policy, "decide", decide),
        mock.patch.object(policy, "affordable_quantile", quantile),
        mock.patch.object(Calibration, "upper", upper),
        mock.patch.object(budget.Ledger, "allowance", allowance),
    ):
        yield


def ceil(load: float | None, c: float) -> int:
    return policy.replicas_for(load if load is not None else math.nan, c)


def own_point(row: dict[str, Any], when: float, made_at: float, model_step: float) -> int:
    """Index of the forecast point whose bucket holds the sample at `when`."""
    return min(math.ceil((when - made_at) / model_step - 1e-9) - 1, len(row["upper"]) - 1)


def classify(
    t: int, frame: pd.DataFrame, rows: list[dict[str, Any] | None], *, k: int, c: float
) -> tuple[str, str]:
    desired, need = frame["desired"].to_numpy(), int(frame["required"].iloc[t])
    window = desired[t - k : t + 1]
    enough = window >= need
    if enough.any() and (~enough[int(np.argmax(enough)) :]).any():
        when = "released"
    else:
        when = "late" if enough.any() else "never"
    short = [s for s in range(t - k, t + 1) if desired[s] < need]
    if any(frame["reason"].iloc[s] in CAPPED for s in short):
        return when, "capped"
    bucket = peak = True
    for s in short:
        row = rows[s]
        if row is None or "p95" not in row:
            return when, "band_miss"
        held = max(ceil(row["held"], c), ceil(row["floor"], c))
        j = own_point(row, row["now"] + (t - s) * row["step"], row["made_at"], row["model_step"])
        bucket &= max(ceil(float(row["p95"][j]), c), held) >= need
        peak &= max(ceil(float(np.nanmax(row["p95"])), c), held) >= need
    return when, "p95_bucket" if bucket else "p95_peak" if peak else "band_miss"


def ageing(
    frame: pd.DataFrame, rows: list[dict[str, Any] | None], *, first: int, k: int
) -> pd.DataFrame:
    """Share of (decision, step ahead) pairs whose band at the step's own point was below its
    load, at the quantile read and at the P95, by forecast age (minutes) and step ahead."""
    load = frame["load"].to_numpy()
    counts: dict[tuple[int, int], list[int]] = {}
    for s in range(first - k, len(frame) - k):
        row = rows[s]
        if row is None or "upper" not in row:
            continue
        age = round((row["now"] - row["made_at"]) / row["step"])
        for d in range(k + 1):
            u = s + d
            if u < first or not math.isfinite(load[u]):
                continue
            j = own_point(row, row["now"] + d * row["step"], row["made_at"], row["model_step"])
            n = counts.setdefault((age, d), [0, 0, 0])
            n[0] += 1
            n[1] += int(load[u] > row["upper"][j])
            n[2] += int(load[u] > row["p95"][j])
    table = pd.DataFrame(
        [(a, d, *n) for (a, d), n in counts.items()], columns=["age", "ahead", "n", "q", "p95"]
    )
    return (
        table.groupby("age")[["n", "q", "p95"]]
        .sum()
        .assign(
            miss_q=lambda x: (100 * x.q / x.n).round(2),
            miss_p95=lambda x: (100 * x.p95 / x.n).round(2),
        )
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace")
    p.add_argument("--model", default="auto")
    p.add_argument("--no-drift", action="store_true")
    p.add_argument("--set", default="", help="ReplayConfig options, e.g. level_points=1")
    p.add_argument("--out", default="", help="write every decision's inputs to this CSV")
    args = p.parse_args(argv)
    series = traces.read_trace(Path(args.trace))
    amount, share = budget.parse_budget(budget.DEFAULT_BUDGET)
    config = replay_config.ReplayConfig(
        threshold=replay_config.threshold_from("p99/20", series),
        budget=amount,
        budget_share=share,
        drift=not args.no_drift,
    )
    for item in filter(None, args.set.split(",")):
        key, _, value = item.partition("=")
        kind = type(getattr(config, key))
        config = replace(config, **{key: kind(int(value)) if kind is bool else kind(value)})
    seen: dict[float, dict[str, Any]] = {}
    with spying(seen):
        result = replay.replay(series, config, make=args.model)
    coarse = resolution.model_series(series, config.model_step)
    rows: list[dict[str, Any] | None] = []
    for t in range(len(series)):
        now = series.start + t * series.step
        row = seen.get(now)
        if row is not None:
            made = coarse.start + resolution.newest_complete(coarse, now) * coarse.step
            row.update(made_at=made, step=series.step, model_step=coarse.step)
        rows.append(row)
    frame, c = result.decisions, config.threshold
    k = int(result.summary["config"]["cold_start_steps"])
    first = int(result.summary["trace"]["warmup_steps"])
    need, ready = frame["required"].to_numpy(), frame["ready"].to_numpy()
    under = [t for t in range(first, len(frame)) if ready[t] < need[t]]
    m = result.summary["policy"]
    print(
        f"{Path(args.trace).stem}: frontier {m['frontier_ratio']:.3f}, {len(under)} of "
        f"{result.summary['trace']['scored_steps']} scored steps short"
    )
    found: Counter[tuple[str, str, str]] = Counter()
    for t in under:
        gap = "one" if need[t] - ready[t] == 1 else "more"
        found[(gap, *classify(t, frame, rows, k=k, c=c))] += 1
    for (gap, when, what), n in sorted(found.items()):
        print(f"  short by {gap:4} {when:9} {what:11} {n:4d}")
    isolated = sum(need[t] > max(need[t - 1], need[min(t + 1, len(need) - 1)]) for t in under)
    print(f"  above both neighbours' need: {isolated}")
    print(ageing(frame, rows, first=first, k=k).to_string())
    if args.out:
        keep = ("quantile", "floor", "held", "made_at")
        inputs = [{key: (r or {}).get(key, math.nan) for key in keep} for r in rows]
        frame.join(pd.DataFrame(inputs)).to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
