"""The forecast model's switches that offline runs measure with and without: their flags, once
for `scaler backtest` and the bench scripts alike, and setting them for the process (one
process, one run: they are the models' module and class settings)."""

from __future__ import annotations

import argparse

from models import seasonal, select


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The switches' flags, each defaulting to the models' own setting."""
    p.add_argument(
        "--pool-phases",
        action=argparse.BooleanOptionalAction,
        default=select.POOLED_CANDIDATE,
        help="model auto also grades the seasonal profile that pools neighbouring phases, kept "
        "only where it wins (models/select.py POOLED_CANDIDATE); on by default, "
        "--no-pool-phases is the ablation",
    )
    p.add_argument(
        "--level-regression",
        action=argparse.BooleanOptionalAction,
        default=seasonal.SeasonalBaseline.regress_level,
        help="each seasonal fit learns, per step ahead, how much of the load's deviation from "
        "the profile over the last 5 minutes to 4 hours is still there, by a median regression "
        "on its cycles out of sample (models/deviation.py), and combines its forecast with the "
        "last hour's level (their geometric mean); on by default, --no-level-regression is the "
        "ablation: the last hour's level carried to every step alike",
    )


def apply(args: argparse.Namespace) -> None:
    """Set the switches as `args` (from `add_arguments`) say."""
    select.POOLED_CANDIDATE = args.pool_phases
    seasonal.SeasonalBaseline.regress_level = args.level_regression
