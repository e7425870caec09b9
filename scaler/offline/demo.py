"""`scaler demo`: the product working end to end with no Prometheus and no cluster.

The real server runs on the file source (the bundled LLM-serving trace by default) on an
accelerated clock; an in-process gRPC client polls it the way KEDA does (GetMetricSpec, IsActive,
GetMetrics each step) and prints a live table. At the end the requests are scored with the replay
yardstick against a reactive autoscaler, and a PNG of load, forecast and replicas is written.

This module owns the command: its flags, and the server it starts and stops around the run.
demo_keda.py polls the server, demo_text.py writes the words, demo_report.py scores the rows.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from models.base import Series
from scaler import helptext
from scaler.clock import ReplayClock
from scaler.decision import ranges
from scaler.decision.spec import format_duration
from scaler.errors import ConfigError
from scaler.offline import backtest_checks, demo_report, demo_text
from scaler.offline.demo_text import Row
from scaler.offline.traces import read_trace
from scaler.serving.engine import Engine
from scaler.settings import EngineSettings, ServerSettings, Settings
from scaler.sources.file import bundled_trace

MAX_STEPS = 100_000
"""--steps: a bound, not a plan (the bundled trace has 2,016 steps; 144 take about a minute)."""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="watch the scaler work on a bundled trace (no Prometheus, no cluster)",
        description="Replay a trace through the real gRPC server on an accelerated clock and poll "
        "it like KEDA. Prints what the trigger asks and what each column means, a row per step "
        "(load, the forecast's P95 peak, reactive and desired replicas, why), then the reasons "
        "seen and the replay yardstick against a reactive autoscaler. Finishes in about a "
        "minute; writes a PNG at the end.",
        epilog="examples:\n"
        "  scaler demo                    # the bundled LLM-serving trace, about a minute\n"
        "  scaler demo --short            # 24 steps, a few seconds\n"
        "  scaler demo --trace my.csv --threshold 50 --lead-time 8m --out /tmp/mine.png",
        formatter_class=helptext.Paragraphs,
    )
    p.add_argument(
        "--trace",
        type=Path,
        default=None,
        help="trace to replay, any export `scaler backtest` reads (docs/traces.md); its first "
        "half, at most 14 days, is history before the first step played, and a model needs a "
        "day of it (default: the bundled LLM-serving trace, 14 days of 10m steps)",
    )
    p.add_argument(
        "--threshold",
        type=ranges.flag(ranges.number_in(ranges.THRESHOLD), "as the trigger's `threshold`"),
        default=None,
        help="load one replica serves (default: the trace's 99th percentile / 20)",
    )
    p.add_argument(
        "--steps",
        type=ranges.flag(ranges.count_in(ranges.Range(1, MAX_STEPS)), "steps of the trace"),
        default=144,
        help=f"trace steps to play, 1-{MAX_STEPS} (default 144)",
    )
    p.add_argument(
        "--seconds-per-step",
        type=ranges.flag(ranges.number_in(ranges.Range(0.01, 60)), "wall seconds"),
        default=0.35,
        help="wall seconds per trace step, 0.01-60 (default 0.35)",
    )
    p.add_argument(
        "--lead-time",
        type=ranges.duration_flag(ranges.LEAD_TIME, "as the trigger's `leadTime`"),
        default="10m",
        help="replica cold start (default 10m)",
    )
    p.add_argument(
        "--horizon",
        type=ranges.duration_flag(ranges.HORIZON, "as the trigger's `horizon`"),
        default="15m",
        help="look-ahead past the lead time (default 15m)",
    )
    p.add_argument(
        "--out", type=_png_path, default=Path("demo.png"), help="PNG to write (default demo.png)"
    )
    p.add_argument(
        "--short", action="store_true", help="24 steps of 0.12 s at most, a few seconds (for CI)"
    )
    p.set_defaults(func=cmd_demo)


def _png_path(text: str) -> Path:
    """--out: a file to write in a directory that exists (checked before a minute of replay)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(
            f"{text} is a directory; name a file, e.g. {path / 'demo.png'}"
        )
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(
            f"{text}: there is no directory {path.parent}; create it or write elsewhere"
        )
    return path


def cmd_demo(args: argparse.Namespace) -> int:
    if args.short:
        args.steps, args.seconds_per_step = min(args.steps, 24), min(args.seconds_per_step, 0.12)
    trace_path = args.trace or bundled_trace()
    trace = read_trace(trace_path)
    # Rows a day apart played at 720,000x: one answered step, and a yardstick over it.
    backtest_checks.refuse_coarse(trace, str(trace_path), model_step=trace.step)
    threshold = args.threshold or default_threshold(trace, trace_path)
    for note in (demo_text.unanswered_start(trace), demo_text.no_forecast(trace, steps=args.steps)):
        if note:
            print(note)
    rows = asyncio.run(_run(args, trace_path, trace.step, threshold))
    demo_report.report(
        rows, threshold=threshold, step=trace.step, lead=args.lead_time, out=args.out
    )
    return 0


def default_threshold(trace: Series, path: Path) -> float:
    """The trace's 99th percentile / 20 (the peak needs about 20 replicas); ConfigError when
    that is no load, which the server would refuse as the trigger's threshold mid-run (before,
    a traceback, or an IndexError for a trace with no value)."""
    observed = trace.values[~np.isnan(trace.values)]
    if observed.size == 0:
        raise ConfigError(f"{path}: every value is empty, so there is no load to replay")
    threshold = float(np.percentile(observed, 99)) / 20
    if threshold <= 0:
        raise ConfigError(
            f"{path}: its 99th percentile is 0 (its load is mostly 0), so the default "
            "threshold, that percentile / 20, is no load per replica; give the load one "
            "replica serves, e.g. --threshold 40"
        )
    return threshold


async def _run(
    args: argparse.Namespace, trace_path: Path, step: float, threshold: float
) -> list[Row]:
    # Here, not at the top: the parser of every command imports this module, and gRPC's C core
    # (with its poller threads) has no business in `scaler check` or `scaler backtest`.
    from scaler.offline import demo_keda
    from scaler.wiring import run_server

    clock = ReplayClock(
        start=math.floor(time.time() / step) * step, speed=step / args.seconds_per_step
    )
    settings = Settings(
        server=ServerSettings(grpc_port=0, http_port=-1, host="127.0.0.1", grace_seconds=0.5),
        engine=EngineSettings(
            step=step, model_step=step, staleness=3 * step, fit_workers=0, history=7 * 86400.0
        ),
        source=f"file:{trace_path}",
    )
    metadata = {
        "query": trace_path.stem,
        "threshold": f"{threshold:.6g}",
        "leadTime": format_duration(args.lead_time),
        "horizon": format_duration(args.horizon),
        "maxReplicas": "60",
        "maxPrewarmReplicas": "8",
        "prewarmBudget": "30%",
        "model": "auto",
    }
    ready: asyncio.Future[tuple[int, Engine]] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()
    server_task = asyncio.create_task(
        run_server(
            settings,
            clock=clock,
            stop=stop,
            on_ready=lambda port, _http, engine: ready.set_result((port, engine)),
        )
    )
    port, engine = await ready
    print(
        demo_text.preamble(
            trace=trace_path.name,
            step=step,
            metadata=metadata,
            wall=args.seconds_per_step,
            derived=args.threshold is None,
        )
    )
    try:
        return await demo_keda.poll(port, engine, clock, metadata, steps=args.steps, step=step)
    finally:
        stop.set()
        await server_task
