"""Where a replay's under-provisioned steps come from: `scaler backtest` output, by cause.

    .venv/bin/python bench/shortfall.py OUT/TRACE [OUT/OTHER ...]

A scored step t is under-provisioned when ready[t] = min(desired[t-k..t]) < required[t]. The
decision responsible is the earliest of those k + 1 with the lowest request, and the step is put
in one of three classes, each split by that decision's reason:
- `short_now`: desired[t] itself was below required[t] (the forecast peak and the reactive floor
  both missed the load of the very step being decided);
- `scaled_down`: the responsible decision asked for less than the one before it (replicas
  released, or booting ones cancelled, before the load came back);
- `cold_start`: the request came in time for the step but too late for the cold start.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd


def causes(directory: Path) -> tuple[int, int, Counter[str]]:
    """(under-provisioned steps, scored steps, count per cause) of one backtest output."""
    frame = pd.read_csv(directory / "decisions.csv")
    summary = json.loads((directory / "summary.json").read_text())["decisions"]
    k = int(summary["config"]["cold_start_steps"])
    desired = frame["desired"].to_numpy()
    need = frame["required"].to_numpy()
    reason = frame["reason"].to_numpy()
    scored = np.zeros(len(frame), dtype=bool)
    scored[int(summary["trace"]["warmup_steps"]) :] = True
    scored &= np.isfinite(frame["load"].to_numpy())
    under = scored & (frame["ready"].to_numpy() < need)
    found: Counter[str] = Counter()
    for t in (int(i) for i in np.flatnonzero(under)):
        lag = max(range(min(k, t) + 1), key=lambda j: (-desired[t - j], j))
        source = t - lag
        if desired[t] < need[t]:
            found[f"short_now:{reason[t]}"] += 1
        elif source > 0 and desired[source] < desired[source - 1]:
            found[f"scaled_down:{reason[source]}"] += 1
        else:
            found[f"cold_start:{reason[source]}"] += 1
    return int(under.sum()), int(scored.sum()), found


def main(argv: list[str]) -> int:
    for name in argv:
        under, scored, found = causes(Path(name))
        print(f"{name}: {under} of {scored} scored steps under-provisioned")
        for cause, n in found.most_common():
            print(f"  {cause:32} {n:6d} {100 * n / max(under, 1):5.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
