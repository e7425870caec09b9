"""Figures of the supervised fitter (issue 10, items 1 and 6), rerunnable:

python bench/fitter.py memory      peak memory of a fit worker under absurd input (a leadTime
                                   of 999999d passed straight to the fitter), with the memory
                                   bound and without it (killed at --kill-at, as the OOM
                                   killer would, to show the growth the bound prevents)
python bench/fitter.py shutdown    seconds from SIGTERM to exit of `scaler serve` with a full
                                   fit queue (--targets auto targets, one worker), with and
                                   without a StreamIsActive holding the grace period;
                                   --repo runs another checkout (e.g. main, for the before)
python bench/fitter.py sigkill     what of `scaler serve` (worker, resource tracker) is
                                   still alive --wait seconds after a SIGKILL of it, mid-fit
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import signal
import subprocess
import threading
import time
import urllib.request
from dataclasses import replace
from pathlib import Path

import grpc
from procs import MIB, alive, descendants, free_port
from prometheus_client import CollectorRegistry

from scaler._pb import externalscaler_pb2 as pb
from scaler._pb import externalscaler_pb2_grpc as pb_grpc
from scaler.decision import budget, spec
from scaler.offline.traces import read_trace
from scaler.serving import fitting
from scaler.serving.state import TargetState
from scaler.serving.telemetry import Telemetry
from scaler.settings import EngineSettings
from scaler.sources.file import bundled_trace

ABSURD_LEAD_TIME = 999_999 * 86400.0


def _status(pid: int, key: str) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def absurd_fit(memory: int, kill_at: int) -> dict[str, float]:
    """One absurd fit in a real worker; the worker's peak resident memory, sampled every 5 ms."""
    telemetry = Telemetry(CollectorRegistry())
    fitter = fitting.Fitter(EngineSettings(fit_workers=1, fit_memory=memory), telemetry)
    parsed = spec.parse("bench", "absurd", {"query": "q", "threshold": "60", "model": "seasonal"})
    state = TargetState(
        spec=replace(parsed, lead_time=ABSURD_LEAD_TIME),
        ledger=budget.Ledger(budget=0.0, window=86400.0),
        last_asked=0.0,
        history=read_trace(bundled_trace()),
    )
    peak, done = 0, threading.Event()
    crossed: dict[str, float] = {}  # when the RSS first passed 256 MiB, and the kill

    def watch() -> None:
        nonlocal peak
        while not done.is_set():
            for pid in fitter.pool.pids if fitter.pool else []:
                peak = max(peak, _status(pid, "VmHWM"))
                if peak > 256 * MIB:
                    crossed.setdefault("256", time.monotonic())
                if kill_at and peak > kill_at:
                    crossed.setdefault("kill", time.monotonic())
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)

    async def main() -> None:
        fitter.start()
        fitter.maybe_fit(state, 0.0)
        await fitter.wait()
        fitter.close()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    began = time.monotonic()
    asyncio.run(main())
    done.set()
    watcher.join()
    print(f"  fit_memory={memory / MIB:.0f} MiB: {state.model_note}")
    growth = crossed.get("kill", 0.0) - crossed.get("256", 0.0)
    return {
        "peak_rss_mib": peak / MIB,
        "seconds": time.monotonic() - began,
        "rate": (kill_at - 256 * MIB) / MIB / growth if growth > 0 else 0.0,
    }


def cmd_memory(args: argparse.Namespace) -> None:
    bound = EngineSettings().fit_memory
    print(f"absurd input: leadTime {ABSURD_LEAD_TIME / 86400:.0f}d, straight to the fitter")
    with_bound = absurd_fit(bound, 0)
    print(f"  with the bound:    peak RSS {with_bound['peak_rss_mib']:.0f} MiB")
    without = absurd_fit(0, args.kill_at * MIB)
    rate = without["rate"]
    print(
        f"  without the bound: peak RSS {without['peak_rss_mib']:.0f} MiB when killed at "
        f"{args.kill_at} MiB, growing {rate:.0f} MiB/s past 256 MiB (unbounded)"
    )


def _metrics(http_port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=5) as reply:
        return str(reply.read().decode())


def _fits(text: str, model: str) -> float:
    found = re.search(rf'scaler_model_fits_total{{model="{model}",result="ok"}} (\S+)', text)
    return float(found[1]) if found else 0.0


def _serve(repo: Path) -> tuple[subprocess.Popen[bytes], int, int]:
    """`scaler serve` of `repo` replaying the bundled trace with one fit worker."""
    grpc_port, http_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCALER_")}
    env.update(SCALER_STEP="1s", SCALER_HTTP_PORT=str(http_port), PYTHONPATH=str(repo))
    python = repo / ".venv" / "bin" / "python"
    argv = [str(python), "-m", "scaler", "serve", "--source", "file:", "--host", "127.0.0.1"]
    argv += ["--grpc-port", str(grpc_port), "--fit-workers", "1"]
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, env=env, cwd=repo
    )
    return proc, grpc_port, http_port


def cmd_sigkill(args: argparse.Namespace) -> None:
    repo = args.repo.resolve()
    proc, grpc_port, http_port = _serve(repo)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            grpc.channel_ready_future(channel).result(timeout=60)
            stub = pb_grpc.ExternalScalerStub(channel)  # type: ignore[no-untyped-call]
            stub.GetMetricSpec(
                pb.ScaledObjectRef(
                    name="t",
                    namespace="bench",
                    scalerMetadata={"query": "llm_serving_10min", "threshold": "60"},
                )
            )
            deadline = time.monotonic() + 120
            while _fits(_metrics(http_port), "seasonal") < 1:
                assert time.monotonic() < deadline, "the first fit never finished"
                time.sleep(0.2)
        children = descendants(proc.pid)
        proc.kill()  # SIGKILL, during the `auto` selection that follows the quick fit
        proc.wait()
        time.sleep(args.wait)
        left = [pid for pid in children if alive(pid)]
        rss = sum(_status(pid, "VmRSS") for pid in left) / MIB
        print(
            f"{repo}: {len(children)} child processes before the SIGKILL, {len(left)} still "
            f"alive {args.wait:g}s after it ({rss:.0f} MiB resident)"
        )
        for pid in left:
            os.kill(pid, signal.SIGKILL)  # clean up the orphans this run made
    finally:
        if proc.poll() is None:
            proc.kill()


def sigterm_to_exit(repo: Path, targets: int, *, stream: bool) -> tuple[float, int, float]:
    """(seconds from SIGTERM to exit, exit code, auto fits still queued) of one serve run."""
    proc, grpc_port, http_port = _serve(repo)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            grpc.channel_ready_future(channel).result(timeout=60)
            stub = pb_grpc.ExternalScalerStub(channel)  # type: ignore[no-untyped-call]
            refs = [
                pb.ScaledObjectRef(
                    name=f"t{i}",
                    namespace="bench",
                    scalerMetadata={"query": "llm_serving_10min", "threshold": "60"},
                )
                for i in range(targets)
            ]
            for ref in refs:
                stub.GetMetricSpec(ref)
            deadline = time.monotonic() + 120
            while _fits(_metrics(http_port), "seasonal") < targets:
                assert time.monotonic() < deadline, "the quick fits never finished"
                time.sleep(0.2)
            queued = targets - _fits(_metrics(http_port), "auto")
            if stream:
                call = stub.StreamIsActive(refs[0])

                def read() -> None:
                    with contextlib.suppress(grpc.RpcError):
                        list(call)

                threading.Thread(target=read, daemon=True).start()
                time.sleep(0.5)
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(60)
            return time.monotonic() - started, code, queued
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def cmd_shutdown(args: argparse.Namespace) -> None:
    repo = args.repo.resolve()
    print(f"{repo}: SIGTERM with {args.targets} auto targets, one fit worker, grace 5s")
    for stream in (False, True):
        for run in range(args.runs):
            took, code, queued = sigterm_to_exit(repo, args.targets, stream=stream)
            what = "a StreamIsActive open" if stream else "no RPC in flight"
            print(
                f"  {what}, run {run + 1}: {took:.2f}s to exit "
                f"(code {code}, {queued:.0f} fits queued)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    sub = parser.add_subparsers(dest="command", required=True)
    memory = sub.add_parser("memory")
    memory.add_argument("--kill-at", type=int, default=1024, help="MiB (default 1024)")
    memory.set_defaults(func=cmd_memory)
    shutdown = sub.add_parser("shutdown")
    shutdown.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    shutdown.add_argument("--targets", type=int, default=8)
    shutdown.add_argument("--runs", type=int, default=2)
    shutdown.set_defaults(func=cmd_shutdown)
    sigkill = sub.add_parser("sigkill")
    sigkill.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    sigkill.add_argument("--wait", type=float, default=3.0, help="seconds (default 3)")
    sigkill.set_defaults(func=cmd_sigkill)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
