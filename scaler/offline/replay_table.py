"""The replay's summary as `scaler backtest` prints it: the fixed-width table of the policy and
its baselines, and the legend under it. Text only: it reads a summary (replay_summary), computes
no figure.
"""

from __future__ import annotations

from typing import Any

from scaler.decision import budget
from scaler.decision.spec import format_duration


def table(summary: dict[str, Any]) -> str:
    """The yardstick figures as the fixed-width table `scaler backtest` prints."""
    share = summary["config"]["budget_share"]
    limit = budget.describe(summary["config"]["budget"], share)
    priced = summary["config"]["cost_per_replica_hour"] is not None
    unit = summary["config"]["currency"] if priced else ""
    lines = [
        f"{'decisions':14} {'frontier':>8} {'under-prov':>10} {'shortfall':>9} "
        f"{'GPU-h':>9} {'x reactive':>10}"
        + (f" {'cost ' + unit:>12}" if priced else "")
        + f" {'max prewarm/window':>18}"
        + (f" {unit}" if priced and share is None else "")
    ]
    for name in ("policy", "reactive", "reactive_20", "oracle"):
        m = summary[name]
        ratio = m["frontier_ratio"]
        spend = (
            f"{m['prewarm']['max_window_spend']:10.2f}"
            if share is None
            else f"{m['prewarm']['max_window_share']:10.1%}"
        )
        bound = f" / {limit}" if name == "policy" else ""  # the baselines answer to no budget
        cost = f" {m['cost']:12.2f}" if priced else ""
        lines.append(
            f"{name:14} {ratio:8.2f} {m['under_provisioned_pct']:9.1f}% "
            f"{m['shortfall_replica_steps']:9.0f} {m['gpu_hours']:9.1f} "
            f"{m['gpu_hours_x_reactive']:9.2f}x{cost} {spend}{bound}"
        )
    floor = summary["policy"]["prewarm"]
    if floor.get("floor_windows"):
        lines.append(
            f"policy prewarm in {floor['floor_windows']} windows without reactive hours, from "
            f"the wake-up floor ({floor['wake_hours']:.2f} replica-hours: maxPrewarmReplicas for "
            f"lead time + horizon): at most {floor['max_floor_window_spend']:.2f} replica-hours"
        )
    return "\n".join(lines)


def legend(summary: dict[str, Any]) -> str:
    """What each column and row of `table` means, with its unit, a line each (under 100
    characters): printed under it, as `scaler demo` prints its columns and reasons."""
    config, trace = summary["config"], summary["trace"]
    step, window = format_duration(trace["step_seconds"]), format_duration(config["budget_window"])
    share, price = config["budget_share"], config["cost_per_replica_hour"]
    limit = budget.describe(config["budget"], share)
    money = config["currency"] if price is not None else "replica-hours"
    spend = (
        f"most prewarm in a rolling {window} / its reactive replica-hours (budget {limit})"
        if share is not None
        else f"most prewarm in a rolling {window}, in {money} (budget {limit})"
    )
    rows = [
        ("frontier", "under-prov / static headroom's at equal GPU-h: below 1 beats headroom"),
        ("under-prov", f"% of the {trace['scored_steps']} scored steps with fewer replicas ready "
         "than needed"),
        ("shortfall", f"replicas short, summed over those steps (replica-steps of {step})"),
        ("GPU-h", "replica-hours asked for over the scored steps (GPU-hours at 1 GPU each)"),
        ("x reactive", "GPU-h / reactive's GPU-h"),
        *([(f"cost {money}", f"GPU-h x {price:g} {money} a replica-hour")] if price else []),
        ("max prewarm/window", spend),
        ("rows", "reactive: an HPA; reactive_20: with 20% headroom; oracle: perfect foresight"),
    ]  # fmt: skip
    return "\n".join(f"  {name:19} {meaning}" for name, meaning in rows)
