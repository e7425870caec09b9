"""Where a fresh replica's warm-up spends its CPU, per target: each phase of warming one target
(scaler/serving/warmup.py) run one target at a time on a real Prometheus and a warm store, with
the CPU time of each phase (time.process_time, this process only; Prometheus' own work is not
in it). The same Prometheus, targets and champions as bench/replicas.py.

    .venv/bin/python bench/warm_phases.py --targets 100                      # champions 10 min old
    .venv/bin/python bench/warm_phases.py --targets 100 --model-age 604800   # a week old
    .venv/bin/python bench/warm_phases.py --targets 100 --whole-window       # ablation
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

import replicas

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from models import artefact  # noqa: E402
from scaler.serving import driftstate  # noqa: E402
from scaler.sources.prometheus import PrometheusSource  # noqa: E402
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
    print(f"{args.targets} targets, champions {args.model_age:.0f} s old: CPU ms per target")
    for phase, seconds in spent.items():
        print(f"  {phase:32s} {seconds / args.targets * 1000:8.2f}")
    print(f"  {'total':32s} {sum(spent.values()) / args.targets * 1000:8.2f}")
    return 0


def phases(
    args: argparse.Namespace, work: Path, prom: promtest.PrometheusServer, now: float
) -> dict[str, float]:
    objects = replicas.target_objects(args.targets, prom.traces)
    until = now - args.model_age
    replicas.warm_store(
        work / "store", objects, prom.traces, until=until, null=True, kind="seasonal"
    )
    source, store = PrometheusSource(prom.url), DirectoryStore(work / "store")
    step = replicas.MODEL_STEP
    end = math.floor(now / step) * step
    spent: dict[str, float] = {}
    for obj in objects:
        spec = replicas.spec_of(obj)
        t = time.process_time()

        def lap(phase: str) -> None:
            nonlocal t
            spent[phase] = spent.get(phase, 0.0) + time.process_time() - t
            t = time.process_time()

        stored = store.champion(StoreKey.of(spec))
        assert stored is not None
        lap("champion read (directory store)")
        model = artefact.load(stored.artefact)
        null = driftstate.null_from_json(stored.artefact.get(driftstate.NULL_KEY), spec, step)
        lap("artefact load")
        first = driftstate.start if args.whole_window else driftstate.replay_start
        begin = max(first(model, window=WINDOW), end - 2 * WINDOW + step)
        history = source.history(spec, start=begin, end=end, step=step)
        lap(f"range query ({len(history)} points)")
        driftstate.rebuild(spec, model, history, window=WINDOW, null=null)
        lap("drift replay since the fit")
        source.latest(spec, at=end)
        lap("instant query")
    return spent


if __name__ == "__main__":
    sys.exit(main())
