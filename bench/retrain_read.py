"""The read part of `scaler retrain`, on its own: N targets' 28 days of 5-minute history from a
real Prometheus (the bench/retrain.py backfill), read as the job reads them for each fit input,
so the fit's CPU (bench/retrain_cpu.py) and the read's are judged apart.

Per fit input, one JSON line: wall seconds, CPU seconds of this process (the job's CLI does the
reads in its threads: the HTTP calls, the JSON decode, the bucket peaks) and of the Prometheus
server (answering the queries), each per target, and the queries sent.

    .venv/bin/python bench/retrain_read.py --count 20
    .venv/bin/python bench/retrain_read.py --count 20 --inputs points,30s
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

from procs import cpu_seconds
from retrain import DAYS, STEP, backfilled

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scaler.decision import spec as specs  # noqa: E402
from scaler.sources.prometheus import PrometheusSource  # noqa: E402


def resolution(name: str) -> float | None:
    """`points` (None) or a --peaks-every duration such as `30s` or `5m`."""
    return None if name == "points" else specs.duration_arg(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument(
        "--inputs",
        default="points,5m,30s",
        help="fit inputs to read with: points, or a --peaks-every (30s is the job's default)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-retrain-read-") as tmp:
        server = backfilled(Path(tmp), args.count)
        with server:
            assert server._process is not None
            prometheus = [server._process.pid]
            asked = [0]
            source = PrometheusSource(
                server.url, on_request=lambda *_a: asked.__setitem__(0, asked[0] + 1)
            )
            end = math.floor(time.time() / STEP) * STEP - STEP
            start = end - DAYS * 86400 + STEP
            for name in args.inputs.split(","):
                every = resolution(name)
                began, own, theirs, asked[0] = (
                    time.monotonic(),
                    time.process_time(),
                    cpu_seconds(prometheus),
                    0,
                )
                for i in range(args.count):
                    spec = specs.parse(
                        "bench",
                        f"svc-{i:04d}",
                        {"query": f'bench_load{{target="t{i:04d}"}}', "threshold": "40"},
                    )
                    source.history(spec, start=start, end=end, step=STEP, resolution=every)
                row = {
                    "input": name,
                    "targets": args.count,
                    "wall_seconds_per_target": (time.monotonic() - began) / args.count,
                    "client_cpu_seconds_per_target": (time.process_time() - own) / args.count,
                    "prometheus_cpu_seconds_per_target": (cpu_seconds(prometheus) - theirs)
                    / args.count,
                    "queries_per_target": asked[0] / args.count,
                }
                print(
                    json.dumps(
                        {k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}
                    ),
                    flush=True,
                )


if __name__ == "__main__":
    main()
