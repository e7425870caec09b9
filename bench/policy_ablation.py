"""Policy mechanisms against their ablations, on synthetic load and on trace files.

    .venv/bin/python bench/policy_ablation.py [--model seasonal] [--days 28] [--budget 10%]
        [--variants quantile,marginal,insured] [--kinds noise,...] [--traces A.csv,B.csv]
        [--drift]

Each load is replayed once per variant (inside one fit cache, so the variants see the very same
forecasts), threshold = the load's p99 / 20 as `scaler backtest` defaults, no drift unless
`--drift` (the policy's own figures). Variants:
- `quantile`: the default: the affordable quantile's peak (P95 sliding to the median as the
  budget empties);
- `level`: the same with the level insurance at the band (policy.level_ratio,
  `level_points=1`, `scaler backtest --level`; off by default);
- `lvl2`: the level insured at the widest band of the first two points instead of one;
- `free_hold`: the same with the lead time's hold free (`charge_hold=False`, the old rule);
- `insured`: the same, the P95 only over the lead time (`insure_lead_time_only`);
- `marginal`: decision.allocation (the replicas that cover the most steps per replica-hour);
- `full`: the P95 whatever the budget left, the allowance alone stopping it (cost-ordered,
  `insurance="full"`, `scaler backtest --insurance full`); `full_level`: with the level too;
- `gated_level`: the level only while the median lags the load (decision.levelgate);
- `linear`: the quantile sliding over the whole budget instead of its last half.
Prints one Markdown row per load: frontier ratio / under-provisioned steps / GPU-hours x
reactive / prewarm replica-hours per variant. A benchmark, not a test: it never judges.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import synthetic

from models import fitcache, walkforward
from models.base import Series
from scaler.decision import budget
from scaler.offline import replay, traces

VARIANTS = {
    "quantile": {"allocation": "quantile"},
    "level": {"level_points": 1},
    "free_hold": {"allocation": "quantile", "charge_hold": False},
    "insured": {"allocation": "quantile", "insure_lead_time_only": True},
    "marginal": {"allocation": "marginal"},
    "lvl2": {"level_points": 2},
    "marginal_lookahead": {"allocation": "marginal_lookahead"},
    "marginal_every": {"allocation": "marginal_every"},
    "full": {"insurance": "full"},
    "full_level": {"insurance": "full", "level_points": 1},
    "gated_level": {"level_points": 1, "level_gate": True},
    "linear": {"insurance": "linear"},
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

    with mock.patch.object(replay, "walk_forward", walk):
        yield


def loads(args: argparse.Namespace) -> list[tuple[str, Series]]:
    found = [(k, synthetic.load(k, days=args.days)) for k in args.kinds.split(",") if k]
    for name in (n for n in args.traces.split(",") if n):
        found.append((Path(name).stem, traces.read_trace(Path(name))))
    return found


def config_for(
    series: Series, amount: float, share: float | None, drift: bool
) -> replay.ReplayConfig:
    """The replay every variant of a load starts from: the README's threshold, the budget."""
    return replay.ReplayConfig(
        threshold=replay.threshold_from("p99/20", series),
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
    p.add_argument("--traces", default="", help="comma-separated trace CSV files")
    p.add_argument("--variants", default="quantile,marginal")
    p.add_argument("--drift", action="store_true", help="replay with drift detection on")
    args = p.parse_args(argv)
    amount, share = budget.parse_budget(args.budget)
    names = args.variants.split(",")
    print(f"budget {args.budget}, model {args.model}, drift {'on' if args.drift else 'off'}")
    print(
        "| load | " + " | ".join(f"{n}: ratio / under / GPU-h x / prewarm h" for n in names) + " |"
    )
    print("|---|" + "---|" * len(names))
    for name, series in loads(args):
        config = config_for(series, amount, share, args.drift)
        cells = []
        with fitcache.sharing(), recorded_forecasts():
            for variant in names:
                began = time.process_time()
                options = VARIANTS[variant]
                run = replace(config, **options)  # type: ignore[arg-type]
                m = replay.replay(series, run, make=args.model).summary["policy"]
                cells.append(
                    f"{m['frontier_ratio']:.2f} / {m['under_provisioned_pct']:.1f}% / "
                    f"{m['gpu_hours_x_reactive']:.2f}x / {m['prewarm']['replica_hours']:.0f}"
                )
                print(
                    f"  {name} {variant}: {time.process_time() - began:.0f} s CPU", file=sys.stderr
                )
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
