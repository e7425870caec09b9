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

from models.base import Series
from scaler import helptext
from scaler._pb import externalscaler_pb2 as pb
from scaler._pb import externalscaler_pb2_grpc as pb_grpc
from scaler.clock import ReplayClock
from scaler.decision import ranges
from scaler.decision.spec import format_duration
from scaler.offline import yardstick
from scaler.offline.traces import read_trace
from scaler.serving.engine import Engine
from scaler.settings import EngineSettings, ServerSettings, Settings
from scaler.sources.file import FileSource, bundled_trace, default_warmup, loop_length

MAX_STEPS = 100_000
"""--steps: a bound, not a plan (the bundled trace has 4,300 steps; 144 take about a minute)."""


@dataclass
class Row:
    at: float
    load: float
    peak: float
    reactive: int
    desired: int
    active: bool
    reason: str


COLUMNS = (
    ("load", "the trace's load at that step"),
    ("P95 peak", "the forecast's highest P95 over leadTime + horizon"),
    ("reactive", "ceil(load / threshold): what an HPA would run"),
    ("desired", "what the scaler answered KEDA's GetMetrics"),
    ("active", "IsActive's answer (wake a pool scaled to zero)"),
    ("reason", "why desired is what it is (the reasons seen are listed at the end)"),
)
REASONS = {
    "forecast": "prewarm bought from the forecast, within the budget and caps",
    "reactive": "the forecast needs no more than the load does: desired = reactive",
    "hold": "the last cold start's load kept past the HPA's 5 minutes (paid from the budget)",
    "level": "the load's own level insured at the forecast's band (paid from the budget)",
    "budget_capped": "the forecast wanted more prewarm than the budget has left",
    "prewarm_capped": "the forecast wanted more than maxPrewarmReplicas above reactive",
    "prewarm_off": "the forecast wanted prewarm, but the trigger turns it off (budget 0)",
    "max_replicas": "maxReplicas cut the request",
    "min_replicas": "minReplicas raised the request",
    "no_model": "no model fitted yet: reactive, plus any hold",
    "drift_fallback": "forecasts stopped being trustworthy: reactive, plus any hold",
    "drift_margin": "forecasts stopped being trustworthy: reactive plus a margin from recent "
    "growth",
    "budget_unknown": "the window's spend could not be read back yet: reactive, no prewarm",
    "no_data": "no current load sample: the last answer is held",
}
"""The demo's legend, one line per policy.Reason (docs/decision-log.md has the full story)."""


def preamble(
    *, trace: str, step: float, metadata: dict[str, str], wall: float, derived: bool
) -> str:
    """What the demo runs and what its columns mean, printed above the table."""
    origin = " (the trace's 99th percentile / 20)" if derived else ""
    lines = [
        f"Replaying {trace} through the real gRPC server ({format_duration(step)} steps, "
        f"{wall:g} s each),",
        "polled the way KEDA polls it (IsActive, then GetMetrics). The trigger's metadata:",
        f"  threshold {metadata['threshold']}{origin}, leadTime {metadata['leadTime']}, "
        f"horizon {metadata['horizon']},",
        f"  model {metadata['model']}, prewarmBudget {metadata['prewarmBudget']} (of the "
        f"reactive replica-hours per 24h), maxPrewarmReplicas {metadata['maxPrewarmReplicas']}",
        "The columns:",
        *(f"  {name:9} {meaning}" for name, meaning in COLUMNS),
        "",
    ]
    return "\n".join(lines)


def legend(reasons: list[str]) -> str:
    """One line for each reason the table showed, in the order first seen."""
    seen = list(dict.fromkeys(reasons))
    return "\n".join(f"  {r:15} {REASONS.get(r, '')}".rstrip() for r in seen)


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
        help="timestamp,value CSV to replay (default: the bundled LLM-serving trace)",
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
    p.add_argument("--short", action="store_true", help="a 24-step run for CI")
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
    observed = trace.values[~np.isnan(trace.values)]
    threshold = args.threshold or float(np.percentile(observed, 99)) / 20
    if note := unanswered_start(trace):
        print(note)
    rows = asyncio.run(_run(args, trace_path, trace.step, threshold))
    _report(rows, threshold=threshold, step=trace.step, lead=args.lead_time, out=args.out)
    return 0


def unanswered_start(trace: Series) -> str | None:
    """A note, said once before the table, when the replay starts in a stretch of the trace with
    no value (the file source plays it from default_warmup on, looping over loop_length): those
    steps go unanswered, and the note says how many and what --steps reaches the load."""
    begin = round(default_warmup(trace) / trace.step)
    end = min(len(trace), round(loop_length(trace) / trace.step))
    played = trace.values[begin:end]
    if begin >= end or not np.isnan(played[0]):
        return None
    found = np.flatnonzero(~np.isnan(played))
    empty = int(found[0]) if found.size else end - begin  # else the loop restarts at the start
    start, stop = trace.start + begin * trace.step, trace.start + (begin + empty) * trace.step
    return (
        f"note: the replay starts where the trace has no value ({_day(start)} to {_day(stop)}, "
        f"after the history before it, half the trace or 14 days): its first {empty} steps go "
        f"unanswered and count in --steps; give --steps over {empty} to see its load\n"
    )


def _day(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(at))


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
        preamble(
            trace=trace_path.name,
            step=step,
            metadata=metadata,
            wall=args.seconds_per_step,
            derived=args.threshold is None,
        )
    )
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
        waiting = Waiting()
        for _ in range(steps):  # a step without an answer is played too: the run stays bounded
            try:
                active = (await stub.IsActive(ref)).result
                value = await stub.GetMetrics(
                    pb.GetMetricsRequest(scaledObjectRef=ref, metricName=metric)
                )
            except grpc.aio.AioRpcError as exc:
                _say(waiting.saw(f"{exc.code().name} {exc.details()}", _trace_time(engine, clock)))
                await _next_step(clock, step)
                continue
            _say(waiting.end())
            row = _row(engine, clock.now(), active, int(value.metricValues[0].metricValue))
            rows.append(row)
            print(_format(row, engine))
            await _next_step(clock, step)
        _say(waiting.end())
    return rows


@dataclass
class Waiting:
    """A run of steps the server did not answer (a stretch of the trace with no value, a model
    not yet fitted): its first line printed, then one line saying how long it lasted, so a
    long gap is two lines, not one per step."""

    why: str = ""
    first: float = math.nan
    last: float = math.nan
    count: int = 0

    def saw(self, why: str, at: float) -> str | None:
        """The line to print for an unanswered step at trace time `at`, if any."""
        ended = self.end() if why != self.why else None
        self.last, self.count = at, self.count + 1
        if self.count > 1:
            return ended
        self.why, self.first = why, at
        shown = f"{'':16}  waiting: {why}"
        return shown if ended is None else f"{ended}\n{shown}"

    def end(self) -> str | None:
        """The line closing the run, when it was longer than one step; the run is reset."""
        count, first, last = self.count, self.first, self.last
        self.why, self.first, self.last, self.count = "", math.nan, math.nan, 0
        if count <= 1:
            return None
        return (
            f"{'':16}  ... the same for {count} steps, {_when(first)} to {_when(last)} "
            "(each counted in --steps)"
        )


def _say(line: str | None) -> None:
    if line is not None:
        print(line)


def _trace_time(engine: Engine, clock: ReplayClock) -> float:
    """The trace's time now (the time column of the table), or the clock's before a target."""
    now = clock.now()
    state = next(iter(engine.targets.values()), None)
    source = engine.source_for(state.spec) if state is not None else None
    if state is not None and isinstance(source, FileSource):
        return now - source.shift(source.trace_for(state.spec))
    return now


def _when(at: float) -> str:
    return time.strftime("%a %H:%M", time.gmtime(at))


async def _next_step(clock: ReplayClock, step: float) -> None:
    """Sleep to the middle of the next step: a fixed sleep after the RPCs drifts, and a
    decision would now and then go unseen (a step missing from the table)."""
    await clock.sleep(max(0.0, (math.floor(clock.now() / step) + 1.5) * step - clock.now()))


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
    when = _when(row.at)
    peak = "-" if math.isnan(row.peak) else f"{row.peak:9.1f}"
    return (
        f"{when:16}  {row.load:9.1f}  {peak:>9}  {row.reactive:8d}  {row.desired:7d}  "
        f"{'yes' if row.active else 'no':6}  {row.reason}"
    )


def _report(rows: list[Row], *, threshold: float, step: float, lead: float, out: Path) -> None:
    if not rows:
        print(
            "no decisions were made: the server answered none of the steps played; replay "
            "more --steps, or a --trace with load where its replay starts (half of it, at "
            "most 14 days, is history before the first step)"
        )
        return
    load = np.array([r.load for r in rows])
    k = yardstick.cold_start_steps(lead, step)
    desired = np.array([r.desired for r in rows], dtype=np.int64)
    reactive = np.array([r.reactive for r in rows], dtype=np.int64)
    ours = yardstick.outcome(load=load, desired=desired, threshold=threshold, k=k, step=step)
    base = yardstick.outcome(load=load, desired=reactive, threshold=threshold, k=k, step=step)
    print()
    print("reasons:")
    print(legend([r.reason for r in rows]))
    print()
    print(
        f"replay yardstick over {len(rows)} steps (cold start {format_duration(lead)} = {k} "
        f"step{'' if k == 1 else 's'}): a step is under-provisioned\n"
        "when fewer replicas are ready (asked at least a cold start earlier) than its load needs"
    )
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
