"""A policy mechanism against its ablation, on synthetic load (bench/synthetic.py).

    .venv/bin/python bench/policy_ablation.py [--model seasonal] [--days 28] [--budget 10%]

For each synthetic kind it replays the policy (no drift: the policy's own figures) twice, with
the experiment `insure_lead_time_only` (insured_peak: the P95 over the lead time, the median
past it) and with the default (the P95 over the whole look-ahead), threshold = the trace's
p99 / 20 as
`scaler backtest` defaults, and prints frontier ratio / under-provisioned steps / GPU-hours x
reactive / prewarm replica-hours for both. A benchmark, not a test: it never judges.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import synthetic

from models import fitcache
from scaler.decision import budget
from scaler.offline import replay


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="seasonal")
    p.add_argument("--days", type=int, default=28)
    p.add_argument("--budget", default=budget.DEFAULT_BUDGET)
    p.add_argument("--kinds", default=",".join(synthetic.KINDS))
    args = p.parse_args(argv)
    amount, share = budget.parse_budget(args.budget)
    print("| load | insure_lead_time_only: ratio / under / GPU-h x / prewarm h | default: same |")
    print("|---|---|---|")
    for kind in args.kinds.split(","):
        series = synthetic.load(kind, days=args.days)
        config = replay.ReplayConfig(
            threshold=replay.threshold_from("p99/20", series),
            budget=amount,
            budget_share=share,
            drift=False,
        )
        cells = []
        with fitcache.sharing():
            for variant in (replace(config, insure_lead_time_only=True), config):
                m = replay.replay(series, variant, make=args.model).summary["policy"]
                cells.append(
                    f"{m['frontier_ratio']:.2f} / {m['under_provisioned_pct']:.1f}% / "
                    f"{m['gpu_hours_x_reactive']:.2f}x / {m['prewarm']['replica_hours']:.0f}"
                )
        print(f"| {kind} | {cells[0]} | {cells[1]} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
