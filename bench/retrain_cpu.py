"""CPU seconds of one `scaler retrain` target (scaler.offline.retrain_race.challenge: the fit
with its selection, the drift null and, weekly, the champion's score), model `auto`, 28 days of
5-minute synthetic load, with no Prometheus, pool or store around it: the job's per-target cost,
for an A/B against another checkout of the repository at the same machine load.

CPU is this process's and its children's (Prophet's CmdStan) rusage, after one warm-up target
(imports). BLAS runs on one thread, as in a `scaler retrain` fit worker (scaler/threads.py), for
either tree, unless OPENBLAS_NUM_THREADS, OMP_NUM_THREADS or MKL_NUM_THREADS is set (a
session-24 A/B: 2.2-2.3 CPU s per target with 1, 3.8-3.9 with 2, on the 2-core machine).
Prints one JSON line: per seed the first-run and weekly CPU seconds, the kind chosen and the
losses (equal across checkouts when a change only makes the same numbers faster).

    .venv/bin/python bench/retrain_cpu.py                     # this checkout
    git archive OLD | tar -x -C /tmp/old && .venv/bin/python bench/retrain_cpu.py --tree /tmp/old
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

REPO = Path(__file__).resolve().parents[1]
BLAS_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
"""scaler.threads.VARIABLES, spelled out: the --tree checkout may predate that module."""


def cpu() -> float:
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=REPO, help="checkout to import (this one)")
    parser.add_argument("--seeds", default="3,4")
    parser.add_argument(
        "--exact", action="store_true", help="Prophet fitted as before the quick fit (ablation)"
    )
    args = parser.parse_args()
    if not any(os.environ.get(name, "").strip() for name in BLAS_VARIABLES):
        threadpool_limits(limits=1, user_api="blas")
    sys.path.insert(0, str(args.tree.resolve()))
    if args.exact:
        from models import prophet

        prophet.exact()
    from models.base import Series
    from scaler.decision import spec as specs
    from scaler.serving.state import forecast_steps
    from tests.contract import synthetic

    def history(seed: int) -> Series:
        n = round(28 * 86400 / 300)
        load = synthetic.load(n * 300 / 86400, seed=seed, scale=80.0)
        return Series(1_800_000_000.0 - (n - 1) * 300.0, 300.0, np.asarray(load.values[:n]))

    try:
        from scaler.offline.retrain_race import challenge
    except ImportError:  # a --tree from before the race moved out of retrain.py
        from scaler.offline.retrain import challenge  # type: ignore[attr-defined,no-redef]

    spec = specs.parse("bench", "svc", {"query": "x", "threshold": "40", "model": "auto"})
    steps = forecast_steps(spec, 300.0)
    challenge(spec, history(99), steps, None)  # imports and caches, not measured
    rows = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        data = history(seed)
        began = cpu()
        first = challenge(spec, data, steps, None)
        middle = cpu()
        weekly = challenge(spec, data, steps, first["artefact"])
        rows.append(
            {
                "seed": seed,
                "first_cpu_seconds": round(middle - began, 2),
                "weekly_cpu_seconds": round(cpu() - middle, 2),
                "kind": first["artefact"]["kind"],
                "loss": first["loss"],
                "champion_loss": weekly["champion_loss"],
            }
        )
    print(json.dumps({"tree": str(args.tree), "exact": args.exact, "targets": rows}))


if __name__ == "__main__":
    main()
