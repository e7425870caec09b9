"""What each decision saw, for the under-provisioned steps of a replay on a fine trace.

    .venv/bin/python bench/minute_misses.py TRACE.csv [--model auto] [--no-drift] [--out CSV]

Replays TRACE with `scaler backtest`'s defaults (threshold p99/20, lead 10m, horizon 15m, budget
30 %) and records, per decision, the inputs `policy.decide` got: the affordable quantile, the
peak at it and at the calibrated P95, the reactive floor's and the hold's loads, the allowance,
the forecast's age within its model step. For each under-provisioned scored step t it names the
decision that made it short (the earliest of t-k..t with the lowest request, as
bench/shortfall.py), what that decision asked against what t required, and whether t-k..t
had asked for enough at some point and dropped it (`dropped`). A diagnosis, not a test.
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

from models.calibrate import Calibration
from scaler.decision import budget, policy
from scaler.offline import replay, traces

QUANTILE = 0.95


@contextlib.contextmanager
def spying(rows: list[dict[str, Any]]) -> Iterator[None]:
    """Record each decide call's inputs in `rows`, with what the spies saw since the last one."""
    seen: dict[str, Any] = {}
    real_decide, real_quantile = policy.decide, policy.affordable_quantile
    real_upper, real_allowance = Calibration.upper, budget.Ledger.allowance

    def quantile(*args: Any, **kw: Any) -> float:
        q = real_quantile(*args, **kw)
        seen.setdefault("quantile", q)
        return q

    def upper(self: Calibration, p50: Any, q: float) -> Any:
        out = real_upper(self, p50, q)
        if "upper" not in seen:
            seen["upper"] = float(np.nanmax(out)) if out.size else math.nan
            p95 = real_upper(self, p50, QUANTILE)
            seen["p95"] = float(np.nanmax(p95)) if p95.size else math.nan
            seen["p50"] = float(np.nanmax(p50)) if p50.size else math.nan
            seen["points"] = int(out.size)
            seen["upper_path"] = out.copy()
            seen["p95_path"] = p95.copy()
        return out

    def allowance(self: budget.Ledger, now: float, step: float) -> int:
        seen.setdefault("now", now)
        return int(real_allowance(self, now, step))

    def decide(**kw: Any) -> policy.Decision:
        d = real_decide(**kw)
        rows.append(
            {
                "now": seen.get("now", math.nan),
                "quantile": seen.get("quantile", math.nan),
                "peak": kw["forecast_peak"] if kw["forecast_peak"] is not None else math.nan,
                "p95": seen.get("p95", math.nan),
                "p50": seen.get("p50", math.nan),
                "points": seen.get("points", 0),
                "floor_load": kw["load"],
                "held_load": kw.get("held_load") or math.nan,
                "allowance": kw["allowance"],
                "desired_d": d.desired,
                "reason_d": d.reason.value,
                "upper_path": seen.get("upper_path"),
                "p95_path": seen.get("p95_path"),
            }
        )
        seen.clear()
        return d

    with (
        mock.patch.object(policy, "decide", decide),
        mock.patch.object(policy, "affordable_quantile", quantile),
        mock.patch.object(Calibration, "upper", upper),
        mock.patch.object(budget.Ledger, "allowance", allowance),
    ):
        yield


def diagnose(frame: pd.DataFrame, inputs: pd.DataFrame, *, k: int, warmup: int, c: float) -> Any:
    """One row per under-provisioned scored step: its cause and what the causing decision saw."""
    desired = frame["desired"].to_numpy()
    need = frame["required"].to_numpy()
    load = frame["load"].to_numpy()
    under = np.flatnonzero(
        (np.arange(len(frame)) >= warmup) & np.isfinite(load) & (frame["ready"] < need)
    )
    out = []
    for t in (int(i) for i in under):
        lag = max(range(min(k, t) + 1), key=lambda j: (-desired[t - j], j))
        s = t - lag
        window = desired[t - k : t + 1]
        if desired[t] < need[t]:
            cause = "short_now"
        elif s > 0 and desired[s] < desired[s - 1]:
            cause = "scaled_down"
        else:
            cause = "cold_start"
        row = inputs.loc[s] if s in inputs.index else pd.Series(dtype=float)
        prior = desired[max(0, s - k) : s]
        out.append(
            {
                "t": frame["timestamp"].iloc[t],
                "need": int(need[t]),
                "ready": int(frame["ready"].iloc[t]),
                "cause": cause,
                "lag": lag,
                "by": frame["reason"].iloc[s],
                "asked": int(desired[s]),
                # someone in t-k..t asked enough (a later request came too late) or before s
                "enough_in_window": bool((window >= need[t]).any()),
                "enough_before": bool((prior >= need[t]).any()),
                "q": round(float(row.get("quantile", math.nan)), 3),
                "peak_r": round(float(row.get("peak", math.nan)) / c, 2),
                "p95_r": round(float(row.get("p95", math.nan)) / c, 2),
                "p50_r": round(float(row.get("p50", math.nan)) / c, 2),
                "floor_r": round(float(row.get("floor_load", math.nan)) / c, 2),
                "held_r": round(float(row.get("held_load", math.nan)) / c, 2),
                "load_r": round(float(load[t]) / c, 2),
                "minute": int((pd.Timestamp(frame["timestamp"].iloc[s]).minute) % 5),
                "allow": row.get("allowance", math.nan),
                "isolated": bool(need[t] > max(need[t - 1], need[min(t + 1, len(need) - 1)])),
            }
        )
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace")
    p.add_argument("--model", default="auto")
    p.add_argument("--no-drift", action="store_true")
    p.add_argument("--out", default="")
    p.add_argument("--set", default="", help="ReplayConfig options, e.g. keep_promises=1")
    args = p.parse_args(argv)
    series = traces.read_trace(Path(args.trace))
    amount, share = budget.parse_budget(budget.DEFAULT_BUDGET)
    config = replay.ReplayConfig(
        threshold=replay.threshold_from("p99/20", series),
        budget=amount,
        budget_share=share,
        drift=not args.no_drift,
    )
    for item in filter(None, args.set.split(",")):
        key, _, value = item.partition("=")
        kind = type(getattr(config, key))
        config = replace(config, **{key: kind(int(value)) if kind is bool else kind(value)})
    rows: list[dict[str, Any]] = []
    with spying(rows):
        result = replay.replay(series, config, make=args.model)
    frame = result.decisions
    inputs = pd.DataFrame(rows)
    inputs.index = ((inputs["now"] - series.start) / series.step).round().astype(int)
    # in drift fallback margin.decide calls decide again: its call is the step's answer
    inputs = inputs[~inputs.index.duplicated(keep="last")]
    k = int(result.summary["config"]["cold_start_steps"])
    warmup = int(result.summary["trace"]["warmup_steps"])
    print(f"frontier {result.summary['policy']['frontier_ratio']:.3f}", file=sys.stderr)
    table = diagnose(frame, inputs, k=k, warmup=warmup, c=config.threshold)
    pd.set_option("display.width", 250)
    pd.set_option("display.max_rows", 500)
    print(table.to_string())
    gap = table["need"] - table["ready"]
    print(
        Counter(f"{c}:{b}:gap{g}" for c, b, g in zip(table["cause"], table["by"], gap, strict=True))
    )
    if args.out:
        joined = frame.join(inputs)
        joined.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
