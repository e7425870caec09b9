"""Issue 10 item 2, measured: `scaler serve` with 40 targets whose serverAddress accepts TCP and
never answers, beside a healthy target on a real Prometheus (backfilled with a real trace).

Prints, as JSON: how many of the healthy target's GetMetrics polls were refused (goal 0) and
with what, and each new target's time to first answer (goal under 30 s) for targets registered
while the silent ones are in flight. Defaults are the scaler's own (30 s step, 10 s Prometheus
timeout) with a 60 s staleness, so a loop held up for more than two steps shows as UNAVAILABLE.

    .venv/bin/python bench/silent_endpoints.py                    # this checkout
    .venv/bin/python bench/silent_endpoints.py --repo /work/main  # another one (the ablation)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import grpc
from procs import free_port

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scaler._pb import externalscaler_pb2 as pb  # noqa: E402
from scaler._pb import externalscaler_pb2_grpc as pb_grpc  # noqa: E402
from tests.integration import sick_endpoints  # noqa: E402
from tests.integration.prometheus_server import backfilled_server  # noqa: E402


def ref(name: str, query: str, **meta: str) -> pb.ScaledObjectRef:
    metadata = {"query": query, "threshold": "60", "model": "seasonal", **meta}
    return pb.ScaledObjectRef(name=name, namespace="bench", scalerMetadata=metadata)


def get(ref_: pb.ScaledObjectRef) -> pb.GetMetricsRequest:
    return pb.GetMetricsRequest(scaledObjectRef=ref_, metricName="m")


async def first_answer(stub: pb_grpc.ExternalScalerStub, target: pb.ScaledObjectRef) -> float:
    """Seconds from GetMetricSpec (KEDA's first call) to the first GetMetrics answer."""
    began = time.monotonic()
    await stub.GetMetricSpec(target)
    while True:
        try:
            await stub.GetMetrics(get(target), timeout=5)
            return time.monotonic() - began
        except grpc.aio.AioRpcError:
            await asyncio.sleep(0.2)
        if time.monotonic() - began > 600:
            return float("inf")


async def measure(
    address: str, query: str, silent: list[str], args: argparse.Namespace
) -> dict[str, object]:
    async with grpc.aio.insecure_channel(address) as channel:
        await asyncio.wait_for(channel.channel_ready(), 120)  # the scaler starting up
        stub = pb_grpc.ExternalScalerStub(channel)  # type: ignore[no-untyped-call]
        healthy = ref("healthy", query)
        warm = await first_answer(stub, healthy)
        for i, url in enumerate(silent):
            await stub.GetMetricSpec(ref(f"silent-{i}", "sum(up)", serverAddress=url))
        refusals: Counter[str] = Counter()
        polls = 0
        newcomers: list[asyncio.Task[float]] = []
        began = time.monotonic()
        next_newcomer = began + 2.0
        while time.monotonic() - began < args.seconds:
            if time.monotonic() >= next_newcomer:
                target = ref(f"new-{len(newcomers)}", query)
                newcomers.append(asyncio.create_task(first_answer(stub, target)))
                next_newcomer += args.newcomer_every
            try:
                await stub.GetMetrics(get(healthy), timeout=5)
            except grpc.aio.AioRpcError as exc:
                refusals[f"{exc.code().name}: {str(exc.details())[:160]}"] += 1
            polls += 1
            await asyncio.sleep(args.poll)
        waits = sorted(await asyncio.gather(*newcomers))
    return {
        "silent_endpoints": len(silent),
        "seconds_watched": args.seconds,
        "healthy_first_answer_s": round(warm, 2),
        "healthy_polls": polls,
        "healthy_unavailable": sum(refusals.values()),
        "healthy_refusals": dict(refusals.most_common(3)),
        "newcomers": len(waits),
        "newcomer_first_answer_s": {
            "median": round(waits[len(waits) // 2], 2),
            "max": round(waits[-1], 2),
            "all": [round(w, 2) for w in waits],
        },
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--repo", type=Path, default=REPO, help="checkout whose scaler runs")
    p.add_argument("--silent", type=int, default=40, help="silent endpoints (default 40)")
    p.add_argument("--seconds", type=float, default=180.0, help="watch this long (default 180)")
    p.add_argument("--staleness", default="60s", help="scaler --staleness (default 60s)")
    p.add_argument("--poll", type=float, default=1.0, help="seconds between healthy polls")
    p.add_argument("--newcomer-every", type=float, default=20.0, help="seconds between newcomers")
    args = p.parse_args()
    python = args.repo / ".venv" / "bin" / "python"
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "prometheus").mkdir()
        prometheus = backfilled_server(Path(tmp) / "prometheus", ["llm_serving_10min"])
        prometheus.start()
        stack.callback(prometheus.stop)
        query = f"sum({prometheus.traces['llm_serving_10min'].selector})"
        silent = [stack.enter_context(sick_endpoints.silent()).url for _ in range(args.silent)]
        port = free_port()
        argv = [str(python), "-m", "scaler", "serve", "--grpc-port", str(port)]
        argv += ["--http-port", "-1", "--host", "127.0.0.1", "--fit-workers", "0"]
        argv += ["--prometheus-url", prometheus.url, "--staleness", args.staleness]
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCALER_")}
        log = Path(tmp) / "scaler.log"
        with log.open("wb") as fh:
            proc = subprocess.Popen(argv, cwd=args.repo, env=env, stdout=fh, stderr=fh)
        stack.callback(proc.wait, 15)
        stack.callback(proc.terminate)
        result = asyncio.run(measure(f"127.0.0.1:{port}", query, silent, args))
        result["repo"] = str(args.repo)
        if proc.poll() is not None:
            result["scaler_log_tail"] = log.read_text(errors="replace")[-2000:]
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
