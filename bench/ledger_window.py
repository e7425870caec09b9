"""What a longer prewarm budget window costs the live scaler: the ledger a fresh replica rebuilds
from Prometheus, and the ledger's own CPU per decision.

    .venv/bin/python bench/ledger_window.py [--targets 50] [--pods 2] [--windows 24h,3d,7d]
        [--batches 20]

Backfills `scaler_prewarm_replica_hours_total` and `scaler_reactive_replica_hours_total` for
`--targets` share-budget targets (`--pods` scaler pods each, one sample a minute, over the
longest window and an hour more) into a real Prometheus (Debian's `prometheus`, as the
integration tests), then, per window, reads every target's two counters the way a fresh
replica's first refresh does (serving/ledgerreads.py: one `spent_samples_of` range query per
counter for a batch of up to BATCH targets, at ledgerrebuild's LEDGER_STEP) and seeds a ledger
from them (budget.spent_per_step, reactive_per_step, seed, seed_reactive). Prints the samples read,
the wall and CPU seconds of the reader and of Prometheus per batch, and scales them to 1,000
targets. With `--batches N`, N batches are read in a row and every ledger kept, as a fresh
replica keeps them: the reader's CPU then includes the garbage collector's walks over the heap
the earlier batches left (its seconds printed apart), which one batch alone does not show.

The second table is the pure ledger alone: a target charging 1 replica and recording 10
reactive every 30 s step (the engine's default) for two windows, then the CPU of one
decision's allowance, charge and record: the engine's refresh per target and step.
A benchmark, not a test: it never judges.
"""

from __future__ import annotations

import argparse
import gc
import re
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ledger_history

from scaler.decision import budget, spec
from scaler.decision.spec import duration_arg
from scaler.serving.ledgerreads import BATCH
from scaler.serving.ledgerrebuild import LEDGER_STEP
from scaler.sources.prometheus import PrometheusSource
from tests.integration.prometheus_server import CounterSeries, PrometheusServer

NAMESPACE = "gpu"
SCRAPE = 60.0
STEP = 30.0
"""The engine's default decision step (`scaler serve --step`)."""


def metadata(window: str) -> dict[str, str]:
    return {
        "query": "sum(up)",
        "threshold": "60",
        "model": "seasonal",
        "prewarmBudget": budget.DEFAULT_BUDGET,
        "prewarmBudgetWindow": window,
    }


def counters(targets: int, pods: int, *, end: float, span: float) -> list[CounterSeries]:
    """Both counters of every target and pod: reactive 10 replicas, prewarm 1, every minute."""
    keys = [spec.parse(NAMESPACE, f"t{i}", metadata("24h")).key for i in range(targets)]
    return ledger_history.counters(keys, pods=pods, end=end, span=span, scrape=SCRAPE)


def prometheus_cpu(url: str) -> float:
    text = requests.get(f"{url}/metrics", timeout=10).text
    found = re.search(r"^process_cpu_seconds_total ([0-9.e+]+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else float("nan")


class Collections:
    """CPU seconds spent in the cyclic garbage collector since `start`."""

    def __init__(self) -> None:
        self.seconds, self._began = 0.0, 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.process_time()
        else:
            self.seconds += time.process_time() - self._began


COLLECTIONS = Collections()


def read_once(
    source: PrometheusSource,
    url: str,
    window: float,
    targets: int,
    kept: list[budget.Ledger] | None = None,
) -> dict[str, float]:
    """One batch's reads and ledger seeding at `window`, as a fresh replica's first refresh;
    the ledgers go to `kept`."""
    text = f"{window:g}s"
    specs = [spec.parse(NAMESPACE, f"t{i}", metadata(text)) for i in range(targets)]
    now = time.time()
    start = now - window
    wall, cpu, server = time.perf_counter(), time.process_time(), prometheus_cpu(url)
    collected = COLLECTIONS.seconds
    spent = source.spent_samples_of(specs, start=start, end=now, step=LEDGER_STEP)
    used = source.spent_samples_of(specs, start=start, end=now, step=LEDGER_STEP, reactive=True)
    read_wall, read_cpu = time.perf_counter() - wall, time.process_time() - cpu
    server_cpu = prometheus_cpu(url) - server
    began = time.process_time()
    for s in specs:
        ledger = budget.Ledger(budget=0.0, window=window, share=s.prewarm_budget_share)
        budget.seed(ledger, budget.spent_per_step(spent[s.key], start=start))
        budget.seed_reactive(ledger, budget.reactive_per_step(used[s.key], start=start))
        ledger.allowance(now, STEP)
        if kept is not None:
            kept.append(ledger)
    seed_cpu = time.process_time() - began
    samples = sum(len(x) for d in (spent, used) for series in d.values() for x in series)
    return {
        "samples": samples,
        "read_wall": read_wall,
        "read_cpu": read_cpu,
        "server_cpu": server_cpu,
        "seed_cpu": seed_cpu,
        "gc_cpu": COLLECTIONS.seconds - collected,
    }


def read_batches(
    source: PrometheusSource, url: str, window: float, targets: int, batches: int
) -> dict[str, float]:
    """`batches` batches read one after another, every ledger kept: the sums."""
    kept: list[budget.Ledger] = []
    runs = [read_once(source, url, window, targets, kept) for _ in range(batches)]
    return {k: sum(run[k] for run in runs) for k in runs[0]}


def decision_cpu(window: float) -> tuple[int, float]:
    """Charges kept and CPU seconds of one decision's ledger work, after two windows of charges
    (1 replica a step, filled directly: stepping through them costs the window squared)."""
    ledger = budget.Ledger(budget=0.0, window=window, share=budget.DEFAULT[1])

    def step(t: float) -> None:
        if ledger.allowance(t, STEP):
            ledger.charge(t, 1, STEP)
        ledger.record_reactive(t, 10, STEP)

    times = [i * STEP for i in range(int(2 * window / STEP))]  # two windows of history
    for t in times:
        ledger.record_reactive(t, 10, STEP)
    for at in times:
        ledger.charges.add(at, STEP / budget.HOUR)
    t = times[-1] + STEP
    n, began = 200, time.process_time()
    for i in range(n):
        step(t + i * STEP)
    return len(ledger.charges), (time.process_time() - began) / n


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--targets", type=int, default=BATCH)
    p.add_argument("--pods", type=int, default=2)
    p.add_argument("--windows", default="24h,3d,7d")
    p.add_argument(
        "--batches", type=int, default=1, help="batches read in a row, their ledgers kept"
    )
    args = p.parse_args(argv)
    windows = [(w, duration_arg(w)) for w in args.windows.split(",")]
    span = max(w for _, w in windows) + 3600.0
    batches = 1000 / args.targets
    with tempfile.TemporaryDirectory() as tmp:
        end = time.time() - 30.0
        server = PrometheusServer(
            Path(tmp), [], counters(args.targets, args.pods, end=end, span=span)
        )
        began = time.perf_counter()
        server.start(ready_timeout=300.0)
        print(f"backfilled and started in {time.perf_counter() - began:.0f} s")
        try:
            source = PrometheusSource(server.url, timeout=60.0)
            print(
                f"| window | samples read ({args.targets} targets, {args.pods} pods, "
                f"{args.batches} batch(es)) | read wall s | reader CPU s | Prometheus CPU s | "
                "seed CPU s | of which GC CPU s | "
                "x1,000 targets: samples / reader + seed CPU s / Prometheus CPU s |"
            )
            print("|---|---|---|---|---|---|---|---|")
            for text, window in windows:
                read_once(source, server.url, window, args.targets)  # warm caches
                m = read_batches(source, server.url, window, args.targets, args.batches)
                scale = batches / args.batches
                print(
                    f"| {text} | {m['samples']:,.0f} | {m['read_wall']:.2f} | "
                    f"{m['read_cpu']:.2f} | {m['server_cpu']:.2f} | {m['seed_cpu']:.2f} | "
                    f"{m['gc_cpu']:.2f} | {m['samples'] * scale:,.0f} / "
                    f"{(m['read_cpu'] + m['seed_cpu']) * scale:.1f} / "
                    f"{m['server_cpu'] * scale:.1f} |",
                    flush=True,
                )
        finally:
            server.stop()
    print()
    print(
        "| window | charges kept | ledger CPU ms per decision | x1,000 targets at 30 s, of a core |"
    )
    print("|---|---|---|---|")
    for text, window in windows:
        kept, cpu = decision_cpu(window)
        print(f"| {text} | {kept:,} | {cpu * 1e3:.2f} | {cpu * 1000 / STEP:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
