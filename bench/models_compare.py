"""Forecast-only backtest of several models on one trace, the median of the candidates
(`ensemble`) included, which `scaler backtest --compare` does not offer: how each would have done
on the same walk (weekly refit on the last 4 weeks, graded lead-time ahead), against the
seasonal-naive reference. No policy replay, so it takes a fraction of a backtest's time.

    .venv/bin/python bench/models_compare.py TRACE.csv auto,seasonal,ets,prophet,ensemble
"""

from __future__ import annotations

import argparse
from pathlib import Path

from models import fitcache
from scaler.decision.spec import parse_duration
from scaler.offline import backtest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("models", help="comma-separated: auto and catalog models, e.g. ensemble")
    parser.add_argument("--limit", type=parse_duration, default=None, help="graded span, e.g. 56d")
    args = parser.parse_args()
    names = tuple(filter(None, args.models.split(",")))
    series = backtest.load_trace(args.trace, 300.0)
    config = backtest.BacktestConfig(model=names[0], compare=names[1:], limit=args.limit)
    with fitcache.sharing():  # a kind `auto` fitted is not fitted again beside it
        result = backtest.run(series, config, trace=str(args.trace))
    print(f"{'model':10s} {'coverage':>8s} {'pinball':>9s} {'vs naive':>8s}  used")
    for name, graded in result.summary["models"].items():
        ratio = 1 - graded["pinball_vs_reference"]
        print(
            f"{name:10s} {graded['coverage']:8.1%} {graded['pinball']:9.4g} {ratio:7.3f}x "
            f" {graded['models_used']}"
        )


if __name__ == "__main__":
    main()
