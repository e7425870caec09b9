"""Policy mechanisms against their ablations, on synthetic load and on trace files.

    .venv/bin/python bench/policy_ablation.py [--model seasonal] [--days 28] [--budget 10%]
        [--variants quantile,level,free_hold] [--kinds noise,...] [--traces A.csv,B.csv]
        [--drift] [--limit 56d] [--no-pool-phases]
        [--no-level-regression]

A variant may name its budget window after `@` (`quantile@3d`, `quantile@12h`: the
`prewarmBudgetWindow` it replays with; without one, `--budget-window`, default 24h), so windows
are compared on the very same forecasts too. `--limit` bounds each trace to the warm-up and that
span after it, as `scaler backtest --limit`.

Each load is replayed once per variant (inside one fit cache, so the variants see the very same
forecasts), threshold = the load's p99 / 20 as `scaler backtest` defaults, no drift unless
`--drift` (the policy's own figures). Variants:
- `quantile`: the default: the affordable quantile's peak (P95 sliding to the median as the
  budget empties);
- `level`: the same with the level insurance at the band (policy.level_ratio,
  `level_points=1`, `scaler backtest --level`, a trigger's `levelInsurance: "true"`; off by
  default);
- `lvl2`: the level insured at the widest band of the first two points instead of one;
- `free_hold`: the same with the lead time's hold free (`charge_hold=False`, the old rule);
Other variants (insuring the lead time only, marginal allocation, cost-ordered and linear
insurance, a median-lag gate for the level, insuring expected rises only, keeping what the last
cold start bought) were measured and refuted; they were removed after c20d6b8, where
`git checkout c20d6b8` reruns them, and the level's hit-rate gate after fcb7513 (docs/policy.md
keeps their figures).
Prints one Markdown row per load: frontier ratio / under-provisioned steps / GPU-hours x
reactive / prewarm replica-hours / the costliest window's spend as a share of its reactive
hours (the variant's own window) / the same over any rolling day, per variant. A benchmark, not
a test: it never judges.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import synthetic

from models import fitcache, walkforward
from models.base import DAY, Series
from scaler.decision import budget
from scaler.decision.spec import duration_arg
from scaler.offline import (
    model_switches,
    replay,
    replay_config,
    replay_summary,
    replay_walk,
    traces,
)

VARIANTS = {
    "quantile": {},
    "level": {"level_points": 1},
    "free_hold": {"charge_hold": False},
    "lvl2": {"level_points": 2},
}


@contextlib.contextmanager
def recorded_forecasts() -> Iterator[None]:
    """Within the block, every walk over the same series from the same origin replays the
    origins (forecasts and models) the first walk made, so variants cost one walk: the walk,
    and the drift tracker that restarts it, never depend on the policy."""
    real = walkforward.walk_forward
    seen: dict[tuple[Any, ...], tuple[list[Any], Iterator[Any]]] = {}

    def walk(make: Any, series: Series, *, start: int, **options: Any) -> Iterator[Any]:
        key = (str(make), series.start, len(series), start, tuple(sorted(options.items())))
        if key not in seen:
            seen[key] = ([], real(make, series, start=start, **options))
        made, source = seen[key]

        def origins() -> Iterator[Any]:
            i = 0
            while True:
                if i == len(made):
                    nxt = next(source, None)
                    if nxt is None:
                        return
                    made.append(nxt)
                yield made[i]
                i += 1

        return origins()

    with mock.patch.object(replay_walk, "walk_forward", walk):
        yield


def loads(args: argparse.Namespace) -> list[tuple[str, Series]]:
    found = [
        (k if seed == 0 else f"{k}#{seed}", synthetic.load(k, days=args.days, seed=seed))
        for k in args.kinds.split(",")
        if k
        for seed in range(args.seeds)
    ]
    for name in (n for n in args.traces.split(",") if n):
        found.append((Path(name).stem, limited(traces.read_trace(Path(name)), args.limit)))
    return found


def limited(series: Series, limit: float | None) -> Series:
    """The warm-up and `limit` seconds after it (all of `series` without a limit)."""
    if limit is None:
        return series
    steps = replay_summary.warmup_steps(series) + math.ceil(limit / series.step - 1e-9)
    return Series(series.start, series.step, series.values[:steps])


def variant(name: str, config: replay_config.ReplayConfig) -> replay_config.ReplayConfig:
    """`config` with the variant's options, and its budget window when it names one (`@3d`)."""
    base, _, window = name.partition("@")
    run = replace(config, **VARIANTS[base])  # type: ignore[arg-type]
    return replace(run, budget_window=duration_arg(window)) if window else run


def daily_share(series: Series, frame: Any, config: replay_config.ReplayConfig) -> float:
    """The largest share of a rolling day's reactive replica-hours spent on prewarm in a day
    that ends at a charge, whatever the budget's own window: how unevenly a longer window
    spends."""
    reactive = np.clip(frame["reactive"].to_numpy(), config.min_replicas, config.max_replicas)
    day = replace(config, budget_window=DAY)
    hours, every = frame["prewarm_replica_hours"].to_numpy(), np.ones(len(series), dtype=bool)
    spend = replay_summary._spend(series, hours, reactive * series.step / 3600.0, day, every)
    return float(spend["max_window_share"] or 0.0)


def config_for(
    series: Series, amount: float, share: float | None, drift: bool
) -> replay_config.ReplayConfig:
    """The replay every variant of a load starts from: the README's threshold, the budget."""
    return replay_config.ReplayConfig(
        threshold=replay_config.threshold_from("p99/20", series),
        budget=amount,
        budget_share=share,
        drift=drift,
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="seasonal")
    p.add_argument("--days", type=int, default=28)
    p.add_argument("--budget", default=budget.DEFAULT_BUDGET)
    p.add_argument("--kinds", default=",".join(synthetic.KINDS))
    p.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="realisations of each synthetic kind, seeds 0..N-1 (one seed is one draw of the "
        "spikes' times, the holidays' days and the noise; a row per seed, named kind#seed)",
    )
    p.add_argument("--traces", default="", help="comma-separated trace CSV files")
    p.add_argument("--variants", default="quantile,level")
    p.add_argument("--drift", action="store_true", help="replay with drift detection on")
    p.add_argument(
        "--budget-window",
        type=duration_arg,
        default=replay_config.ReplayConfig.budget_window,
        help="budget window of the variants that name none (default 24h)",
    )
    p.add_argument(
        "--limit",
        type=duration_arg,
        default=None,
        help="replay each trace's warm-up and this span after it (e.g. 56d)",
    )
    model_switches.add_arguments(p)
    args = p.parse_args(argv)
    model_switches.apply(args)
    amount, share = budget.parse_budget(args.budget)
    names = args.variants.split(",")
    print(f"budget {args.budget}, model {args.model}, drift {'on' if args.drift else 'off'}")
    print(
        "| load | "
        + " | ".join(f"{n}: ratio / under / GPU-h x / prewarm h / window / day" for n in names)
        + " |"
    )
    print("|---|" + "---|" * len(names))
    ratios: dict[str, list[list[float]]] = {}
    for name, series in loads(args):
        config = replace(
            config_for(series, amount, share, args.drift), budget_window=args.budget_window
        )
        cells = []
        with fitcache.sharing(), recorded_forecasts():
            for name_of in names:
                began = time.process_time()
                run = variant(name_of, config)
                result = replay.replay(series, run, make=args.model)
                m = result.summary["policy"]
                ratios.setdefault(name.partition("#")[0], [[] for _ in names])[
                    names.index(name_of)
                ].append(m["frontier_ratio"])
                cells.append(
                    f"{m['frontier_ratio']:.3f} / {m['under_provisioned_pct']:.1f}% / "
                    f"{m['gpu_hours_x_reactive']:.2f}x / {m['prewarm']['replica_hours']:.0f} / "
                    f"{m['prewarm']['max_window_share']:.1%} / "
                    f"{daily_share(series, result.decisions, run):.1%}"
                )
                print(
                    f"  {name} {name_of}: {time.process_time() - began:.0f} s CPU", file=sys.stderr
                )
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    if args.seeds > 1:
        print(f"\nmean frontier ratio over seeds 0..{args.seeds - 1} (min-max)")
        for kind, per in ratios.items():
            if len(per[0]) > 1:
                print(
                    f"| {kind} | "
                    + " | ".join(f"{np.mean(r):.3f} ({min(r):.3f}-{max(r):.3f})" for r in per)
                    + " |"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
