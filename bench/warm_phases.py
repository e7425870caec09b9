"""Where a fresh replica's warm-up spends its CPU, per target: each phase of warming one target
(scaler/serving/warmup.py) run one target at a time on a real Prometheus and a warm store, with
the CPU time of each phase (time.process_time, this process only; Prometheus' own work is not
in it). The same Prometheus, targets and champions as bench/replicas.py.

    .venv/bin/python bench/warm_phases.py --targets 100                      # champions 10 min old
    .venv/bin/python bench/warm_phases.py --targets 100 --model-age 604800   # a week old
    .venv/bin/python bench/warm_phases.py --targets 100 --whole-window       # ablation
    .venv/bin/python bench/warm_phases.py --targets 100 --fit-input points   # value at each point
    .venv/bin/python bench/warm_phases.py --targets 100 --peak-read raw      # peaks read raw
    .venv/bin/python bench/warm_phases.py --targets 100 --checkpoint         # from a checkpoint

With `--fit-input peaks` (serve's default) the range query reads each 5-minute bucket's peak of
the query sampled every 30 s. The CPU seconds Prometheus spent in each phase are read from
/proc and printed beside this process's.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import procs
import replicas

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from models import artefact  # noqa: E402
from models.base import Series  # noqa: E402
from scaler.serving import checkpoints, driftstate  # noqa: E402
from scaler.sources import prometheus  # noqa: E402
from scaler.store.base import StoreKey  # noqa: E402
from scaler.store.directory import DirectoryStore  # noqa: E402
from tests.integration import prometheus_server as promtest  # noqa: E402

WINDOW = 28 * 86400.0
"""The engine's history window (EngineSettings.history)."""


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--targets", type=int, default=100)
    p.add_argument("--model-age", type=float, default=600.0)
    p.add_argument(
        "--whole-window",
        action="store_true",
        help="ablation: read the whole 28-day window before SERVING, as before the replay span",
    )
    p.add_argument("--fit-input", choices=("peaks", "points"), default="peaks")
    p.add_argument("--peaks-every", type=float, default=30.0, help="seconds")
    p.add_argument(
        "--peak-read",
        choices=("subquery", "raw"),
        default="subquery",
        help="how the peaks are read: the max_over_time subquery (Prometheus takes them, the "
        "default) or raw samples with the peaks taken here (PrometheusSource peaks_raw)",
    )
    p.add_argument(
        "--checkpoint",
        action="store_true",
        help="each target's checkpoint is in the store (written first, at the newest due hour, "
        "from the whole window): read it, then only the history after it",
    )
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "prom").mkdir()
        now = time.time()
        prom = promtest.backfilled_server(work / "prom", now=now + replicas.AHEAD)
        prom.traces = {n: replicas.scraped(t, now=now) for n, t in prom.traces.items()}
        prom.start()
        try:
            spent = phases(args, work, prom, now)
        finally:
            prom.stop()
    print(
        f"{args.targets} targets, champions {args.model_age:.0f} s old, fit input "
        f"{args.fit_input}, peak read {args.peak_read}: CPU ms per target (this process, "
        "Prometheus)"
    )
    for phase, (mine, theirs) in spent.items():
        print(
            f"  {phase:40s} {mine / args.targets * 1000:8.2f} {theirs / args.targets * 1000:8.2f}"
        )
    total = [sum(v[i] for v in spent.values()) / args.targets * 1000 for i in (0, 1)]
    print(f"  {'total':40s} {total[0]:8.2f} {total[1]:8.2f}")
    return 0


def phases(
    args: argparse.Namespace, work: Path, prom: promtest.PrometheusServer, now: float
) -> dict[str, tuple[float, float]]:
    objects = replicas.target_objects(args.targets, prom.traces)
    until = now - args.model_age
    replicas.warm_store(
        work / "store", objects, prom.traces, until=until, null=True, kind="seasonal"
    )
    source = prometheus.PrometheusSource(prom.url, peaks_raw=args.peak_read == "raw")
    store = DirectoryStore(work / "store")
    resolution = args.peaks_every if args.fit_input == "peaks" else None
    prom_pid = prom._process.pid if prom._process is not None else os.getpid()
    step = replicas.MODEL_STEP
    end = math.floor(now / step) * step
    spent: dict[str, tuple[float, float]] = {}
    if args.checkpoint:
        checkpointed(objects, source, store, end=end, resolution=resolution)
    for obj in objects:
        spec = replicas.spec_of(obj)
        t, theirs = time.process_time(), procs.cpu_seconds([prom_pid])

        def lap(phase: str) -> None:
            nonlocal t, theirs
            mine, before = spent.get(phase, (0.0, 0.0))
            now_theirs = procs.cpu_seconds([prom_pid])
            spent[phase] = (mine + time.process_time() - t, before + now_theirs - theirs)
            t, theirs = time.process_time(), now_theirs

        stored = store.champion(StoreKey.of(spec))
        assert stored is not None
        lap("champion read (directory store)")
        model = artefact.load(stored.artefact)
        null = driftstate.null_from_json(stored.artefact.get(driftstate.NULL_KEY), spec, step)
        lap("artefact load")
        if args.whole_window:
            first = driftstate.start(model, window=WINDOW)
        else:
            first = driftstate.replay_start(model, window=WINDOW, null_stored=null is not None)
        begin = max(first, end - 2 * WINDOW + step)
        if args.checkpoint:  # as champions.restore and warmup._fetch
            data = store.checkpoint(StoreKey.of(spec), stored.version)
            kept = checkpoints.decode(data, spec, step=step, peaks=resolution)
            lap(f"checkpoint read and decode ({len(kept)} points)")
            newer = source.history(
                spec, start=kept.end + step, end=end, step=step, resolution=resolution
            )
            lap(f"range query after the checkpoint ({len(newer)} points)")
            history = Series(kept.start, step, np.concatenate([kept.values, newer.values]))
        else:
            history = source.history(spec, start=begin, end=end, step=step, resolution=resolution)
            lap(f"range query ({len(history)} points)")
        driftstate.rebuild(spec, model, history, window=WINDOW, null=null)
        lap("drift replay since the fit")
        source.latest(spec, at=end)
        lap("instant query")
        source.spent_samples(spec, start=end - spec.prewarm_budget_window, end=end, step=60.0)
        lap("ledger range query (spend counter)")
    return spent


def checkpointed(
    objects: list[dict[str, Any]],
    source: prometheus.PrometheusSource,
    store: DirectoryStore,
    *,
    end: float,
    resolution: float | None,
) -> None:
    """Every target's checkpoint at the newest hour due at `end`, from the whole window read
    once per query, as a serving replica writes it (champions.checkpoint)."""
    step = replicas.MODEL_STEP
    at = math.floor((end - checkpoints.SETTLE * step) / checkpoints.EVERY) * checkpoints.EVERY
    read: dict[str, Series] = {}
    for obj in objects:
        spec = replicas.spec_of(obj)
        if spec.query not in read:
            read[spec.query] = source.history(
                spec, start=at - WINDOW + step, end=at, step=step, resolution=resolution
            )
        key = StoreKey.of(spec)
        version = store.champion_version(key)
        assert version is not None
        data = checkpoints.encode(spec, read[spec.query], at=at, peaks=resolution)
        store.put_checkpoint(key, version, int(at), data)


if __name__ == "__main__":
    sys.exit(main())
