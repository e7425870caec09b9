"""Where a replay's GPU-hours go, against the yardstick's reactive baseline: `scaler backtest`
output, split by what asked for each replica.

    .venv/bin/python bench/gpu_split.py OUT/TRACE [OUT/OTHER ...]

Over the scored steps, the policy's billed replicas D[t] are split into
- `reactive`: the yardstick's reactive baseline (ceil(L[t-1] / c), 5-minute stabilisation);
- `hold`: the policy's reactive floor above that, held for free (before issue 7 the floor was
  the highest load of the last lead time; `scaler backtest --free-hold` still does that);
- `paid_hold`: replicas charged to the ledger on decisions whose reason is hold (the lead
  time's peak held past the HPA's window, paid);
- `prewarm`: the other replicas charged to the ledger (forecast, budget_capped...);
- `drift_margin`: those charged by the drift fallback's margin;
- `clamp`: the rest (minReplicas, maxReplicas, a held request on a step without data).
Each part is printed as a multiple of the reactive baseline's replica-hours, so the parts add up
to the policy's GPU-hours x reactive. A benchmark, not a test: it never judges.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scaler.offline import baselines


def split(directory: Path) -> dict[str, float]:
    """The parts of the policy's replica-steps, each over the reactive baseline's."""
    frame = pd.read_csv(directory / "decisions.csv")
    summary = json.loads((directory / "summary.json").read_text())["decisions"]
    step = float(summary["trace"]["step_seconds"])
    load = frame["load"].to_numpy(dtype=np.float64)
    base = baselines.reactive(load, threshold=float(summary["config"]["threshold"]), step=step)
    scored = np.zeros(len(frame), dtype=bool)
    scored[int(summary["trace"]["warmup_steps"]) :] = True
    scored &= np.isfinite(load)
    desired = frame["desired"].to_numpy(dtype=np.int64)
    floor = frame["reactive"].to_numpy(dtype=np.int64)
    prewarm = np.rint(frame["prewarm_replica_hours"].to_numpy() * 3600.0 / step).astype(np.int64)
    reasons = frame["reason"].to_numpy()
    margin = np.where(reasons == "drift_margin", prewarm, 0)
    paid_hold = np.where(reasons == "hold", prewarm, 0)
    total = max(float(base[scored].sum()), 1e-12)
    parts = {
        "reactive": base,
        "hold": floor - base,
        "paid_hold": paid_hold,
        "prewarm": prewarm - margin - paid_hold,
        "drift_margin": margin,
        "clamp": desired - floor - prewarm,
    }
    out = {name: float(values[scored].sum()) / total for name, values in parts.items()}
    out["policy"] = float(desired[scored].sum()) / total
    out["hold_negative"] = float(np.minimum(floor - base, 0)[scored].sum()) / total
    return out


def main(argv: list[str]) -> int:
    names = ["reactive", "hold", "paid_hold", "prewarm", "drift_margin", "clamp", "policy"]
    print("| output | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for name in argv:
        parts = split(Path(name))
        print(f"| {name} | " + " | ".join(f"{parts[n]:.3f}x" for n in names) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
