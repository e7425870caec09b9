"""Issue 8's retrain figure: `scaler retrain` over N targets (default 200), each with 28 days of
5-minute history, from a real Prometheus (backfilled with promtool), measured as wall time and
peak memory (PSS of the whole process tree: the CLI and its fit workers).

Phases, one after another, each printed as a JSON line as soon as it ends:
- first: `--shard 1/1 --workers 2` into an empty store (every target's first model);
- weekly: the same again on the store `first` filled (every target also backtests its
  champion: the steady state of the weekly CronJob);
- two-shards: `--shard 1/2` and `--shard 2/2` side by side (`--workers 1` each, so the same two
  cores), on a copy of that store.

    .venv/bin/python bench/retrain.py                       # 200 targets, model seasonal
    .venv/bin/python bench/retrain.py --count 20 --model auto
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml
from procs import _pss, descendants

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.contract import synthetic  # noqa: E402
from tests.integration.prometheus_server import (  # noqa: E402
    MAX_BLOCK_DURATION,
    MINIMAL_CONFIG,
    RETENTION,
    PrometheusServer,
    free_loopback_port,
    require_binaries,
)

STEP = 300.0
DAYS = 28
METRIC = "bench_load"


def write_openmetrics(path: Path, count: int, end: float) -> None:
    """`count` series of synthetic load (each its own seed and scale) ending at `end`."""
    n = round(DAYS * 86400 / STEP) + 12
    start = end - (n - 1) * STEP
    with path.open("w") as out:
        out.write(f"# TYPE {METRIC} gauge\n")
        for i in range(count):
            series = synthetic.load(n * STEP / 86400, seed=i, scale=50.0 + 10.0 * (i % 40))
            times = (start + STEP * np.arange(len(series))).astype(np.int64)
            out.writelines(
                f'{METRIC}{{target="t{i:04d}"}} {v!r} {t}\n'
                for t, v in zip(times, series.values.tolist(), strict=True)
            )
        out.write("# EOF\n")


class Prebuilt(PrometheusServer):
    """The test Prometheus, started on blocks already backfilled under workdir/data (its own
    start() backfills with a 60 s bound, too short for 1.6 million samples)."""

    def start(self, *, ready_timeout: float = 120.0) -> None:
        prometheus, _ = require_binaries()
        self.port = free_loopback_port()
        with self._stderr_path.open("wb") as stderr:
            self._process = subprocess.Popen(
                [prometheus, f"--config.file={self.workdir / 'prometheus.yml'}",
                 f"--storage.tsdb.path={self.workdir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}",
                 f"--storage.tsdb.retention.time={RETENTION}", "--log.level=warn"],
                stdout=subprocess.DEVNULL, stderr=stderr, cwd=self.workdir,
            )  # fmt: skip
        self._wait_ready(ready_timeout)


def backfilled(workdir: Path, count: int) -> PrometheusServer:
    _, promtool = require_binaries()
    om = workdir / "bench.om"
    write_openmetrics(om, count, end=time.time() - 60)
    data = workdir / "data"
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", "--quiet",
         f"--max-block-duration={MAX_BLOCK_DURATION}", str(om), str(data)],
        check=True, timeout=1800,
    )  # fmt: skip
    om.unlink()
    server = Prebuilt(workdir, [])
    (workdir / "prometheus.yml").write_text(MINIMAL_CONFIG)
    return server


def targets_file(path: Path, count: int, model: str) -> None:
    items = [
        {
            "apiVersion": "keda.sh/v1alpha1",
            "kind": "ScaledObject",
            "metadata": {"namespace": "bench", "name": f"svc-{i:04d}"},
            "spec": {
                "scaleTargetRef": {"name": f"svc-{i:04d}"},
                "triggers": [
                    {
                        "type": "external",
                        "metadata": {
                            "scalerAddress": "scaler:9000",
                            "query": f'{METRIC}{{target="t{i:04d}"}}',
                            "threshold": "40",
                            "model": model,
                        },
                    }
                ],
            },
        }
        for i in range(count)
    ]
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))


def run(commands: list[list[str]]) -> dict[str, float | int]:
    """Start every command at once; wall time until the last ends, peak summed PSS, and the CPU
    seconds they and their fit workers used (what the run costs whatever else the machine runs:
    on two idle cores, wall time is about CPU / 2)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    procs = [subprocess.Popen(c, cwd=REPO, stdout=subprocess.DEVNULL) for c in commands]
    peak = 0
    while any(p.poll() is None for p in procs):
        pids = {pid for p in procs for pid in {p.pid, *descendants(p.pid)}}
        total = 0
        for pid in pids:
            with contextlib.suppress(OSError):  # ended between listing and reading
                total += _pss(pid)
        peak = max(peak, total)
        time.sleep(0.5)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {
        "wall_seconds": round(time.monotonic() - started, 1),
        "cpu_seconds": round(cpu, 1),
        "load_average": round(os.getloadavg()[0], 1),
        "peak_pss_mib": round(peak / 2**20),
        "exit_codes": [p.returncode for p in procs],  # type: ignore[dict-item]
    }


def retrain(prom: str, targets: Path, store: Path, summary: Path, *extra: str) -> list[str]:
    return [
        str(REPO / ".venv/bin/scaler"), "--log-level", "WARNING", "retrain",
        "--targets", str(targets), "--store", str(store), "--prometheus-url", prom,
        "--json", str(summary), *extra,
    ]  # fmt: skip


def promoted(*summaries: Path) -> dict[str, int]:
    rows = [r for s in summaries for r in json.loads(s.read_text())["outcomes"]]
    return {
        "targets": len(rows),
        "promoted": sum(r["promoted"] for r in rows),
        "failed": sum(r["failed"] for r in rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--model", default="seasonal")
    parser.add_argument("--phases", default="first,weekly,two-shards")
    parser.add_argument(
        "--peaks-every",
        default="30s",
        help="scaler retrain --peaks-every (30s, its default: 8 range queries of up to 11,000 "
        "points per target, what a metric scraped every 30 s costs; 5m reads the 5-minute "
        "samples as they are, one query)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-retrain-") as tmp:
        work = Path(tmp)
        t0 = time.monotonic()
        server = backfilled(work, args.count)
        with server:
            print(json.dumps({"phase": "backfill", "seconds": round(time.monotonic() - t0)}))
            targets = work / "so.yaml"
            targets_file(targets, args.count, args.model)
            common = {"count": args.count, "model": args.model, "days": DAYS, "step": STEP}
            common |= {"peaks_every": args.peaks_every}
            peaks = ("--peaks-every", args.peaks_every)
            store = work / "store"
            for phase in args.phases.split(","):
                if phase in ("first", "weekly"):
                    out = work / f"{phase}.json"
                    cmd = retrain(server.url, targets, store, out, "--shard", "1/1", *peaks)
                    figures = run([[*cmd, "--workers", "2"]]) | promoted(out)
                elif phase == "two-shards":
                    copy = work / "store-copy"
                    if store.exists():
                        shutil.copytree(store, copy)
                    outs = [work / f"shard{i}.json" for i in (1, 2)]
                    one = ["--workers", "1", *peaks]
                    figures = run(
                        [
                            [*retrain(server.url, targets, copy, o, "--shard", f"{i}/2"), *one]
                            for i, o in zip((1, 2), outs, strict=True)
                        ]
                    ) | promoted(*outs)
                else:
                    raise SystemExit(f"unknown phase {phase!r}")
                print(json.dumps({"phase": phase} | common | figures), flush=True)


if __name__ == "__main__":
    main()
