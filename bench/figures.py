"""The README's figures, rerunnable: `scaler backtest` on every trace, with and without drift.

For each trace in a folder (default ../shared/traces) it runs the same command anyone can type,

    scaler backtest TRACE --threshold p99/20 --lead-time 10m --horizon 15m --out OUT/NAME[-nodrift]

once as is and once with `--no-drift` (the ablation of drift fallback), each pinned to one core
(`taskset -c N` when there is one, so a run's time means the same on a busy machine), and prints
one Markdown table: frontier ratio, under-provisioned steps, GPU-hours vs reactive, drift episodes
per week, the costliest window's prewarm spend against the budget, P95 coverage, pinball loss
against the seasonal-naive reference, and each run's wall and CPU seconds. `--json PATH` writes
the rows too.

A benchmark, not a test: it never judges; it exits 1 only when a backtest itself fails.

    .venv/bin/python bench/figures.py --jobs 2 --out out/figures
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACES = ROOT.parent / "shared" / "traces"
WEEK = 7 * 86400.0


@dataclass(frozen=True)
class Row:
    trace: str
    drift: bool
    frontier_ratio: float
    under_provisioned_pct: float
    gpu_hours_x_reactive: float
    drift_episodes_per_week: float
    fallback_steps_pct: float
    max_window_spend: float
    """The costliest rolling window's prewarm: replica-hours, or its share of the window's
    reactive replica-hours when the budget is a share."""
    budget: float
    """The budget: replica-hours per window, or the share (0.1 for '10%')."""
    budget_is_share: bool
    budget_unit: str
    """replica-hours, or the currency of `-- --cost-per-replica-hour P --currency CODE`."""
    coverage_pct: float
    pinball_x_reference: float
    wall_seconds: float
    cpu_seconds: float
    floor_spend: float | None = None
    """The costliest prewarm of a window that answered to the share budget's wake-up floor,
    in replica-hours (None when no window did)."""
    wake_hours: float | None = None
    """That floor (budget.wake_floor)."""


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    traces = sorted(args.traces.glob("*.csv"))
    if args.only:
        traces = [t for t in traces if any(name in t.stem for name in args.only.split(","))]
    if not traces:
        print(f"no *.csv traces in {args.traces}", file=sys.stderr)
        return 1
    modes = {"both": (True, False), "on": (True,), "off": (False,)}[args.drift]
    runs = [(t, drift) for t in traces for drift in modes]
    if args.no_run:  # the table of an earlier run, from its summary.json files
        done = [_read(t, drift, args.out) for t, drift in runs if _folder(t, drift, args.out)]
        print(markdown(done))
        return 0
    cores = _cores(args.jobs)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [
            pool.submit(_run, t, drift, args=args, core=cores[i % len(cores)])
            for i, (t, drift) in enumerate(runs)
        ]
        rows = [f.result() for f in futures]
    if any(r is None for r in rows):
        return 1
    done = [r for r in rows if r is not None]
    print(markdown(done))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in done], indent=2) + "\n")
    return 0


def _run(trace: Path, drift: bool, *, args: argparse.Namespace, core: int | None) -> Row | None:
    out = args.out / (trace.stem + ("" if drift else "-nodrift"))
    command = [
        str(ROOT / ".venv" / "bin" / "scaler"),
        "backtest",
        str(trace),
        "--threshold",
        "p99/20",
        "--lead-time",
        "10m",
        "--horizon",
        "15m",
        "--compare",
        "none",
        "--out",
        str(out),
        *(() if drift else ("--no-drift",)),
        *args.extra,
    ]
    if core is not None and shutil.which("taskset"):
        command = ["taskset", "-c", str(core), *command]
    out.mkdir(parents=True, exist_ok=True)
    tick = time.perf_counter()
    with (out / "stdout.txt").open("w") as stdout, (out / "stderr.txt").open("w") as stderr:
        child = subprocess.Popen(command, stdout=stdout, stderr=stderr)
        # wait4 gives this child's own CPU time, even with other runs in flight on other threads
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - tick
    if child.returncode != 0:
        tail = (out / "stderr.txt").read_text()[-2000:]
        print(f"{trace.name}: {' '.join(command)} failed:\n{tail}", file=sys.stderr)
        return None
    summary = json.loads((out / "summary.json").read_text())
    cpu = usage.ru_utime + usage.ru_stime
    return _row(trace.stem, drift, summary, wall=wall, cpu=cpu)


def _folder(trace: Path, drift: bool, out: Path) -> Path | None:
    """The run's output folder, None (and a note) when that run has no summary.json yet."""
    folder = out / (trace.stem + ("" if drift else "-nodrift"))
    if not (folder / "summary.json").exists():
        print(f"{folder}: no summary.json, left out of the table", file=sys.stderr)
        return None
    return folder


def _read(trace: Path, drift: bool, out: Path) -> Row:
    folder = out / (trace.stem + ("" if drift else "-nodrift"))
    summary = json.loads((folder / "summary.json").read_text())
    return _row(trace.stem, drift, summary, wall=float("nan"), cpu=float("nan"))


def _row(name: str, drift: bool, s: dict[str, Any], *, wall: float, cpu: float) -> Row:
    d = s["decisions"]
    policy = d["policy"]
    step = float(d["trace"]["step_seconds"])
    scored = float(d["trace"]["scored_steps"])
    weeks = max(scored * step / WEEK, 1e-9)
    model = s["models"][s["config"]["model"]]
    prewarm = policy["prewarm"]
    share = prewarm.get("budget_share")
    reference = s["models"][s["reference"]]
    return Row(
        trace=name,
        drift=drift,
        frontier_ratio=float(policy["frontier_ratio"]),
        under_provisioned_pct=float(policy["under_provisioned_pct"]),
        gpu_hours_x_reactive=float(policy["gpu_hours_x_reactive"]),
        # episodes and fallback steps of the scored span, over the scored span's weeks
        drift_episodes_per_week=float(d["drift"].get("scored_episodes", d["drift"]["episodes"]))
        / weeks,
        fallback_steps_pct=100.0
        * float(d["drift"].get("scored_fallback_steps", d["drift"]["fallback_steps"]))
        / max(scored, 1.0),
        max_window_spend=float(
            prewarm["max_window_share"] if share else prewarm["max_window_spend"]
        ),
        budget=float(share if share else prewarm["budget"]),
        budget_is_share=bool(share),
        floor_spend=prewarm.get("max_floor_window_spend"),
        wake_hours=prewarm.get("wake_hours"),
        budget_unit=str(d.get("budget_unit", "replica-hours")),
        coverage_pct=100.0 * float(model["coverage"]),
        pinball_x_reference=float(model["pinball"]) / max(float(reference["pinball"]), 1e-12),
        wall_seconds=wall,
        cpu_seconds=cpu,
    )


def markdown(rows: list[Row]) -> str:
    head = (
        "| trace | drift | frontier | under-prov | GPU-h x reactive | drift episodes/week "
        "| fallback steps | max prewarm/window | P95 coverage | pinball x naive | wall s | CPU s |"
    )
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        lines.append(
            f"| {r.trace} | {'on' if r.drift else 'off'} | {r.frontier_ratio:.2f} "
            f"| {r.under_provisioned_pct:.1f}% | {r.gpu_hours_x_reactive:.2f}x "
            f"| {r.drift_episodes_per_week:.2f} | {r.fallback_steps_pct:.1f}% "
            f"| {_budget(r)} | {r.coverage_pct:.1f}% "
            f"| {r.pinball_x_reference:.2f} | {r.wall_seconds:.0f} | {r.cpu_seconds:.0f} |"
        )
    return "\n".join(lines)


def _budget(r: Row) -> str:
    if r.budget_is_share:
        floor = (
            f" ({r.floor_spend:.1f} / {r.wake_hours:.1f} rh at the floor)"
            if r.floor_spend is not None and r.wake_hours is not None
            else ""
        )
        return f"{r.max_window_spend * 100:.1f}% / {r.budget * 100:g}%{floor}"
    unit = "" if r.budget_unit == "replica-hours" else f" {r.budget_unit}"
    return f"{r.max_window_spend:.2f} / {r.budget:g}{unit}"


def _cores(jobs: int) -> list[int | None]:
    available = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(available) < jobs:
        return [None]
    return [available[i] for i in range(jobs)]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--traces", type=Path, default=DEFAULT_TRACES, help="folder of *.csv traces")
    p.add_argument("--only", default="", help="comma-separated substrings of trace names")
    p.add_argument("--out", type=Path, default=ROOT / "out" / "figures", help="output folder")
    p.add_argument(
        "--drift",
        choices=("both", "on", "off"),
        default="both",
        help="runs with drift fallback, with --no-drift, or both (default)",
    )
    p.add_argument("--jobs", type=int, default=1, help="backtests at once, one core each")
    p.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    p.add_argument(
        "--no-run", action="store_true", help="print the table of an earlier run in --out"
    )
    p.add_argument(
        "extra", nargs="*", help="more `scaler backtest` flags, after --, e.g. -- --budget 10%%"
    )
    return p


if __name__ == "__main__":
    sys.exit(main())
