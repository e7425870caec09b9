"""GetMetrics latency and throughput of the real scaler with many targets, next to a trivial
gRPC server on the same machine, in the same run, with the same client and the same messages.

A benchmark, not a test: it prints what it measures and judges it against the goals of issue 2
(item 9), but never fails a build (exit 1 only when the benchmark itself cannot run). In order:

1. writes a folder of traces (the bundled LLM trace, ../shared/traces/*.csv when present, and two
   synthetic ones with daily cycles and Poisson noise) and 1,000 distinct targets over them
   (workload.py);
2. starts bench/trivial_server.py (answers a constant) as a subprocess and drives it with N
   concurrent grpc.aio callers for each caller count (loadgen.py), then stops it;
3. starts `scaler serve --source file:<folder>` as a subprocess (its own GIL, its memory readable
   in /proc), registers every target with GetMetricSpec as KEDA does, waits until every target
   answers GetMetrics, every model is fitted and the engine has refreshed once more, probing
   GetMetrics latency meanwhile (scaler_startup.py); then drives it exactly as the trivial one,
   each window placed to hold one of the engine's 30-second refreshes;
4. reports p50/p99 latency, calls/s, server CPU per call, the ratios, the scaler's memory, and
   one PASS / FALL SHORT line per goal; `--json PATH` writes it all, per-second timelines too.

With two CPUs or more, each server runs on one CPU and the client on the others (procs.py):
unpinned, the scheduler's placement swings the trivial server between ~2,000 and ~3,600 calls/s
from one run to the next. Loopback only, bounded in time, stops both servers itself.

    cd /work/main && .venv/bin/python bench/getmetrics.py --targets 1000 --callers 4 --duration 10
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import platform
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import grpc
import loadgen
import numpy as np
import procs
import scaler_startup
import workload

from scaler._pb import externalscaler_pb2 as pb
from scaler.decision import spec as specs

TRIVIAL_SERVER = Path(__file__).resolve().parent / "trivial_server.py"

GOAL_THROUGHPUT = 0.70
"""The scaler's calls/s over the trivial server's, at the headline caller count."""
GOAL_P99 = 1.5
"""The scaler's p99 over the trivial server's, at the headline caller count."""
GOAL_RSS_MIB = 512.0
"""The scaler's resident memory with all targets registered and fitted."""


# ---- the two runs ---------------------------------------------------------------------------
@dataclass
class Run:
    machine: dict[str, Any]
    settings: dict[str, Any]
    phases: list[loadgen.Phase] = field(default_factory=list)
    startup: dict[str, Any] = field(default_factory=dict)
    memory: dict[str, Any] = field(default_factory=dict)
    goals: list[dict[str, Any]] = field(default_factory=list)


async def run_trivial(
    args: argparse.Namespace, requests: list[pb.GetMetricsRequest], workdir: Path, run: Run
) -> None:
    port = procs.free_port()
    argv = [sys.executable, str(TRIVIAL_SERVER), "--port", str(port)]
    server = procs.Server("trivial", argv, workdir / "trivial.log", port=port)
    try:
        await procs.wait_channel(server, 30)
        server.pin(args.server_cpus)
        for callers in args.caller_counts:
            run.phases.append(await loadgen.drive(server, requests, **_load_args(args, callers)))
            _print_phase(run.phases[-1])
        run.memory["trivial"] = server.memory()
    finally:
        server.stop()


async def run_scaler(
    args: argparse.Namespace,
    refs: list[pb.ScaledObjectRef],
    requests: list[pb.GetMetricsRequest],
    workdir: Path,
    run: Run,
) -> None:
    port, http_port = procs.free_port(), procs.free_port()
    argv = [
        *(sys.executable, "-m", "scaler", "--log-level", args.log_level, "serve"),
        *("--host", "127.0.0.1", "--grpc-port", str(port), "--http-port", str(http_port)),
        *("--source", f"file:{workdir / 'traces'}", "--fit-workers", str(args.fit_workers)),
        *("--step", args.step, "--max-targets", str(max(args.targets, 1000))),
    ]
    server = procs.Server("scaler", argv, workdir / "scaler.log", port=port)
    try:
        await scaler_startup.start_scaler(args, server, http_port, refs, requests, run.startup)
        run.memory["scaler_fitted"] = server.memory()
        server.pin(args.server_cpus)  # fitting ran on every CPU; serving gets one, like the trivial
        for callers in args.caller_counts:
            before = scaler_startup.scrape(http_port)
            window_at = loadgen.next_window(args.step_seconds, args.warmup)
            phase = await loadgen.drive(
                server, requests, window_at=window_at, **_load_args(args, callers)
            )
            t = time.perf_counter()
            after = scaler_startup.scrape(http_port)
            run.startup.setdefault("metrics_scrape_ms", []).append((time.perf_counter() - t) * 1e3)
            key = "scaler_decisions_total"
            phase.engine_decisions = int(after.get(key, 0) - before.get(key, 0))
            run.phases.append(phase)
            _print_phase(phase)
        run.memory["scaler"] = server.memory()
        run.startup["refresh_errors"] = after.get("scaler_refresh_errors_total", 0)
    finally:
        code = server.stop()
        run.startup["exit_code"] = code
        if code not in (0, None):
            print(f"  scaler exited with {code}; log tail:\n{server.tail()}")


def _load_args(args: argparse.Namespace, callers: int) -> dict[str, Any]:
    return {
        "callers": callers,
        "warmup": args.warmup,
        "duration": args.duration,
        "step": args.step_seconds,
    }


def _print_phase(p: loadgen.Phase) -> None:
    worst = max(p.timeline, key=lambda row: row[2], default=[0.0, 0.0, math.nan])
    extra = "" if p.engine_decisions is None else f", {p.engine_decisions} engine decisions"
    errors = f", ERRORS {p.errors}" if p.errors else ""
    print(
        f"  {p.server:7} {p.callers:2d} callers: {p.calls_per_s:5.0f} calls/s, "
        f"p50 {p.p50_ms:5.2f} ms, p99 {p.p99_ms:5.2f} ms "
        f"(between refreshes {p.p99_between_refreshes_ms:5.2f}; worst second at "
        f"+{worst[0]:.0f}s: p99 {worst[2]:5.1f} ms over {worst[1]:.0f} calls), "
        f"server {p.server_cpu_per_call_us:3.0f} us CPU/call at {p.server_cpu_share:.0%} "
        f"of a CPU, client {p.client_cpu_share:.0%}{extra}{errors}"
    )


# ---- the report -----------------------------------------------------------------------------
def machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "nproc": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)),
        "cpu": model,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "grpcio": grpc.__version__,
        "load_avg_1m": os.getloadavg()[0],
    }


def judge(run: Run, callers: int) -> None:
    by = {(p.server, p.callers): p for p in run.phases}
    trivial, scaler = by.get(("trivial", callers)), by.get(("scaler", callers))
    if trivial is None or scaler is None:
        return
    mem = run.memory["scaler"]
    rss, peak = mem["rss_mib"], mem["hwm_mib"]
    tree = mem["pss_mib"] + mem["children_pss_mib"]
    throughput = scaler.calls_per_s / trivial.calls_per_s
    p99 = scaler.p99_ms / trivial.p99_ms
    run.goals = [
        _goal(
            f"throughput at {callers} callers",
            throughput,
            f">= {GOAL_THROUGHPUT:.0%}",
            throughput >= GOAL_THROUGHPUT,
            f"{throughput:.0%} of trivial",
        ),
        _goal(
            f"p99 at {callers} callers",
            p99,
            f"<= {GOAL_P99}x",
            p99 <= GOAL_P99,
            f"{p99:.2f}x trivial",
        ),
        _goal(
            "scaler resident memory (peak, VmHWM)",
            peak,
            f"< {GOAL_RSS_MIB:.0f} MiB",
            peak < GOAL_RSS_MIB,
            f"{peak:.0f} MiB (VmRSS now {rss:.0f} MiB)",
        ),
        _goal(
            "stricter reading: server + fit pool processes (PSS; what a pod's limit sees)",
            tree,
            f"< {GOAL_RSS_MIB:.0f} MiB",
            tree < GOAL_RSS_MIB,
            f"{tree:.0f} MiB (server {mem['pss_mib']:.0f} + {mem['children']} children "
            f"{mem['children_pss_mib']:.0f})",
        ),
    ]


def _goal(name: str, value: float, goal: str, ok: bool, shown: str) -> dict[str, Any]:
    return {"goal": name, "value": value, "target": goal, "pass": ok, "shown": shown}


def report(run: Run) -> None:
    m = run.machine
    print()
    print(
        f"machine: {m['nproc']} CPUs ({m['cpu']}), Linux {m['kernel']}, "
        f"Python {m['python']}, grpcio {m['grpcio']}"
    )
    st = run.settings
    print(
        f"load: {st['targets']} targets round-robin, {st['warmup']:.0f}s warm-up + "
        f"{st['duration']:.0f}s per phase, one grpc.aio channel, loopback"
    )
    if st["server_cpus"]:
        print(f"CPUs: servers on {st['server_cpus']}, client on {st['client_cpus']}")
    else:
        print("CPUs: not pinned; expect the ratios to swing from run to run (docs/benchmark.md)")
    print()
    head = f"{'calls/s':>7} {'p50':>5} {'p99':>5} {'p99*':>5} {'us/call':>7}"
    print(f"{'':7} | {'trivial':^33} | {'scaler':^33} | scaler / trivial")
    print(f"{'callers':>7} | {head} | {head} | {'calls/s':>7} {'p99':>5} {'p99*':>5}")
    by = {(p.server, p.callers): p for p in run.phases}
    for callers in st["caller_counts"]:
        t, s = by.get(("trivial", callers)), by.get(("scaler", callers))
        if t is None or s is None:
            continue
        cells = [
            f"{x.calls_per_s:7.0f} {x.p50_ms:5.2f} {x.p99_ms:5.2f} "
            f"{x.p99_between_refreshes_ms:5.2f} {x.server_cpu_per_call_us:7.0f}"
            for x in (t, s)
        ]
        ratios = (
            f"{s.calls_per_s / t.calls_per_s:7.0%} {s.p99_ms / t.p99_ms:4.2f}x "
            f"{s.p99_between_refreshes_ms / t.p99_between_refreshes_ms:4.2f}x"
        )
        print(f"{callers:7d} | {cells[0]} | {cells[1]} | {ratios}")
    print(
        "(ms; p99* leaves out the calls started in the 2 s after the engine's refresh; "
        "us/call = server CPU per call)"
    )
    su = run.startup
    if "fits_done_s" in su:
        print()
        print(
            f"scaler start-up: process up {su['process_up_s']:.1f}s, {st['targets']} targets "
            f"registered in {su['register_s']:.1f}s, all answering after "
            f"{su['all_answering_s']:.1f}s, fits done after {su['fits_done_s']:.1f}s "
            f"({su['fits_ok']:.0f} ok, {su['fits_error']:.0f} failed), engine settled after "
            f"{su['settled_s']:.1f}s"
        )
        w = su["while_fitting"]
        print(
            f"GetMetrics during start-up (fitting, 100 calls/s): p99 {w['p99_ms']:.1f} ms, "
            f"max {w['max_ms']:.0f} ms, {w['over_100ms']} of {w['calls']} calls over 100 ms"
        )
    if su.get("metrics_scrape_ms"):
        print(
            f"a /metrics scrape of the scaler took {max(su['metrics_scrape_ms']):.0f} ms "
            f"(its exposition is rendered in the server process, under the GIL)"
        )
    mem = run.memory.get("scaler")
    if mem:
        fitted = run.memory["scaler_fitted"]
        print(
            f"scaler memory: VmRSS {mem['rss_mib']:.0f} MiB after the load "
            f"({fitted['rss_mib']:.0f} MiB once fitted), VmHWM {mem['hwm_mib']:.0f} MiB; "
            f"{mem['children']} child processes (fit pool) VmRSS "
            f"{mem['children_rss_mib']:.0f} MiB, PSS {mem['children_pss_mib']:.0f} MiB; "
            f"trivial server {run.memory['trivial']['rss_mib']:.0f} MiB"
        )
    if run.goals:
        print()
        for g in run.goals:
            verdict = "PASS       " if g["pass"] else "FALL SHORT "
            print(f"{verdict} {g['goal']}: {g['shown']} (goal {g['target']})")


# ---- main -----------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="GetMetrics latency/throughput of the scaler vs a trivial gRPC server."
    )
    p.add_argument("--targets", type=int, default=1000, help="distinct targets (default 1000)")
    p.add_argument("--callers", type=int, default=4, help="headline concurrency (default 4)")
    p.add_argument(
        "--also", default="1,16", help="more caller counts, comma-separated (default 1,16)"
    )
    p.add_argument("--duration", type=float, default=10.0, help="seconds measured per phase")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds of warm-up per phase")
    p.add_argument("--fit-workers", type=int, default=2, help="scaler --fit-workers (default 2)")
    p.add_argument(
        "--models",
        default="seasonal=96,ets=2,prophet=2",
        help="share of targets per model kind (default seasonal=96,ets=2,prophet=2; "
        "auto fits all three per target, about 3 s each)",
    )
    p.add_argument("--step", default="30s", help="scaler --step (default 30s, its default)")
    p.add_argument(
        "--startup-timeout", type=float, default=600.0, help="seconds allowed for fitting"
    )
    p.add_argument("--log-level", default="INFO", help="the scaler's --log-level")
    p.add_argument("--json", type=Path, help="write the results here")
    p.add_argument("--keep", type=Path, help="keep traces and server logs in this folder")
    p.add_argument(
        "--no-pin",
        dest="pin",
        action="store_false",
        help="let the OS place servers and client (default: server on one CPU, client on the "
        "others, which makes runs repeatable)",
    )
    args = p.parse_args(argv)
    extra = [int(c) for c in args.also.split(",") if c.strip()]
    args.caller_counts = sorted({args.callers, *extra})
    args.step_seconds = specs.parse_duration(args.step)
    args.model_shares = {
        kind.strip(): float(share)
        for kind, _, share in (item.partition("=") for item in args.models.split(","))
    }
    cpus = sorted(os.sched_getaffinity(0))
    args.server_cpus = {cpus[-1]} if args.pin and len(cpus) >= 2 else None
    args.client_cpus = set(cpus[:-1]) if args.server_cpus else None
    return args


async def bench(args: argparse.Namespace, workdir: Path) -> Run:
    (workdir / "traces").mkdir(parents=True, exist_ok=True)
    thresholds = workload.write_traces(workdir / "traces")
    refs = workload.target_refs(args.targets, thresholds, args.model_shares)
    requests = workload.metrics_requests(refs)
    run = Run(
        machine=machine(),
        settings={
            "targets": args.targets,
            "caller_counts": args.caller_counts,
            "headline_callers": args.callers,
            "duration": args.duration,
            "warmup": args.warmup,
            "fit_workers": args.fit_workers,
            "step": args.step,
            "models": args.model_shares,
            "traces": sorted(thresholds),
            "request_bytes": int(np.mean([r.ByteSize() for r in requests])),
            "server_cpus": sorted(args.server_cpus or []),
            "client_cpus": sorted(args.client_cpus or []),
        },
    )
    print(f"trivial server ({args.targets} distinct requests, callers {args.caller_counts}):")
    await run_trivial(args, requests, workdir, run)
    print(f"scaler serve --source file: ({len(thresholds)} traces, {args.targets} targets):")
    await run_scaler(args, refs, requests, workdir, run)
    judge(run, args.callers)
    return run


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.client_cpus:
        procs.pin_this_process(args.client_cpus)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        workdir_cm: Any = contextlib.nullcontext(str(args.keep))
    else:
        workdir_cm = tempfile.TemporaryDirectory(prefix="bench-getmetrics-")
    try:
        with workdir_cm as workdir:
            run = asyncio.run(bench(args, Path(workdir)))
    except RuntimeError as exc:  # a server that would not start, targets that never answered
        print(f"bench: error: {exc}", file=sys.stderr)
        return 1
    report(run)
    if args.json:
        args.json.write_text(json.dumps(asdict(run), indent=2) + "\n")
        print(f"\nresults written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
