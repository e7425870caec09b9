"""`scaler demo`: the product working end to end with no Prometheus and no cluster.

The real server runs on the file source (the bundled LLM-serving trace by default) on an
accelerated clock; an in-process gRPC client polls it the way KEDA does (GetMetricSpec, IsActive,
GetMetrics each step) and prints a live table. At the end the requests are scored with the replay
yardstick against a reactive autoscaler, and a PNG of load, forecast and replicas is written.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import numpy as np

from scaler._pb import externalscaler_pb2 as pb
from scaler._pb import externalscaler_pb2_grpc as pb_grpc
from scaler.clock import ReplayClock
from scaler.offline import yardstick
from scaler.offline.traces import read_trace
from scaler.serving.engine import Engine
from scaler.settings import EngineSettings, ServerSettings, Settings
from scaler.sources.file import FileSource, bundled_trace


@dataclass
class Row:
    at: float
    load: float
    peak: float
    reactive: int
    desired: int
    active: bool
    reason: str


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="watch the scaler work on a bundled trace (no Prometheus, no cluster)",
        description="Replay a trace through the real gRPC server on an accelerated clock and poll "
        "it like KEDA. Finishes in about a minute; writes a PNG at the end.",
    )
    p.add_argument(
        "--trace",
        type=Path,
        default=None,
        help="timestamp,value CSV to replay (default: the bundled LLM-serving trace)",
    )
    p.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="load one replica serves (default: the trace's 99th percentile / 20)",
    )
    p.add_argument("--steps", type=int, default=144, help="trace steps to play (default 144)")
    p.add_argument(
        "--seconds-per-step",
        type=float,
        default=0.35,
        help="wall seconds per trace step (default 0.35)",
    )
    p.add_argument("--lead-time", default="10m", help="replica cold start (default 10m)")
    p.add_argument("--horizon", default="15m", help="look-ahead past the lead time (default 15m)")
    p.add_argument(
        "--out", type=Path, default=Path("demo.png"), help="PNG to write (default demo.png)"
    )
    p.add_argument("--short", action="store_true", help="a 24-step run for CI")
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    if args.short:
        args.steps, args.seconds_per_step = min(args.steps, 24), min(args.seconds_per_step, 0.12)
    trace_path = args.trace or bundled_trace()
    trace = read_trace(trace_path)
    observed = trace.values[~np.isnan(trace.values)]
    threshold = args.threshold or float(np.percentile(observed, 99)) / 20
    rows = asyncio.run(_run(args, trace_path, trace.step, threshold))
    _report(rows, threshold=threshold, step=trace.step, lead=args.lead_time, out=args.out)
    return 0


async def _run(
    args: argparse.Namespace, trace_path: Path, step: float, threshold: float
) -> list[Row]:
    from scaler.cli import run_server

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
        "leadTime": args.lead_time,
        "horizon": args.horizon,
        "maxReplicas": "60",
        "maxPrewarmReplicas": "8",
        "prewarmBudget": "48",
        "model": "seasonal",
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
    try:
        return await _poll(port, engine, clock, metadata, steps=args.steps, step=step)
    finally:
        stop.set()
        await server_task


async def _poll(
    port: int,
    engine: Engine,
    clock: ReplayClock,
    metadata: dict[str, str],
    *,
    steps: int,
    step: float,
) -> list[Row]:
    ref = pb.ScaledObjectRef(name="llm-serve", namespace="demo", scalerMetadata=metadata)
    rows: list[Row] = []
    print(
        f"{'time':16}  {'load':>9}  {'P95 peak':>9}  {'reactive':>8}  {'desired':>7}  "
        f"{'active':6}  reason"
    )
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.ExternalScalerStub(channel)  # type: ignore[no-untyped-call]
        spec = await stub.GetMetricSpec(ref)
        metric = spec.metricSpecs[0].metricName
        await clock.sleep(step * 0.5)
        while len(rows) < steps:
            try:
                active = (await stub.IsActive(ref)).result
                value = await stub.GetMetrics(
                    pb.GetMetricsRequest(scaledObjectRef=ref, metricName=metric)
                )
            except grpc.aio.AioRpcError as exc:
                print(f"{'':16}  waiting: {exc.code().name} {exc.details()}")
                await clock.sleep(step)
                continue
            row = _row(engine, clock.now(), active, int(value.metricValues[0].metricValue))
            rows.append(row)
            print(_format(row, engine))
            await clock.sleep(step)
    return rows


def _row(engine: Engine, now: float, active: bool, desired: int) -> Row:
    state = next(iter(engine.targets.values()))
    decision = state.predictive
    assert decision is not None
    source = engine.source_for(state.spec)
    at = state.decided_at
    if isinstance(source, FileSource):
        at -= source.shift(source.trace_for(state.spec))
    return Row(
        at=at,
        load=decision.load,
        peak=decision.forecast_peak,
        reactive=decision.reactive,
        desired=desired,
        active=active,
        reason=decision.reason.value,
    )


def _format(row: Row, _engine: Engine) -> str:
    when = time.strftime("%a %H:%M", time.gmtime(row.at))
    peak = "-" if math.isnan(row.peak) else f"{row.peak:9.1f}"
    return (
        f"{when:16}  {row.load:9.1f}  {peak:>9}  {row.reactive:8d}  {row.desired:7d}  "
        f"{'yes' if row.active else 'no':6}  {row.reason}"
    )


def _report(rows: list[Row], *, threshold: float, step: float, lead: str, out: Path) -> None:
    from scaler.decision.spec import parse_duration

    if not rows:
        print("no decisions were made")
        return
    load = np.array([r.load for r in rows])
    k = yardstick.cold_start_steps(parse_duration(lead), step)
    desired = np.array([r.desired for r in rows], dtype=np.int64)
    reactive = np.array([r.reactive for r in rows], dtype=np.int64)
    ours = yardstick.outcome(load=load, desired=desired, threshold=threshold, k=k, step=step)
    base = yardstick.outcome(load=load, desired=reactive, threshold=threshold, k=k, step=step)
    print()
    print(f"replay yardstick over {len(rows)} steps (cold start {lead} = {k} steps):")
    print(
        f"  reactive : under-provisioned {base.under_provisioned_pct:5.1f}% of steps, "
        f"{base.gpu_hours:7.1f} GPU-hours"
    )
    print(
        f"  predictive: under-provisioned {ours.under_provisioned_pct:5.1f}% of steps, "
        f"{ours.gpu_hours:7.1f} GPU-hours"
    )
    _plot(rows, threshold=threshold, out=out)
    print(f"plot written to {out.resolve()}")


def _plot(rows: list[Row], *, threshold: float, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    times = np.array([r.at for r in rows]).astype("datetime64[s]")
    fig, ax = plt.subplots(figsize=(11, 5))
    ax.plot(times, [r.load for r in rows], label="load", color="black")
    ax.plot(
        times,
        [r.peak for r in rows],
        label="forecast P95 peak (lead + horizon)",
        color="tab:orange",
        linestyle="--",
    )
    ax.set_ylabel("load")
    twin = ax.twinx()
    twin.step(
        times,
        [r.reactive for r in rows],
        where="post",
        label="reactive replicas",
        color="tab:blue",
        alpha=0.7,
    )
    twin.step(
        times, [r.desired for r in rows], where="post", label="desired replicas", color="tab:green"
    )
    twin.set_ylabel(f"replicas (1 replica = {threshold:.4g} load)")
    lines = ax.get_legend_handles_labels()
    more = twin.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], loc="upper left")
    ax.set_title("scaler demo: forecast-driven prewarming vs reactive")
    fig.autofmt_xdate()
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
