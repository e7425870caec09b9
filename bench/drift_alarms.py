"""What each drift alarm of a replay was: which window, which side, how far past its limit, and
what the load did before and after it (a regime change, or noise the forecast was right about).

It replays a trace as `scaler backtest` does (model `auto` unless told) with the monitor's
`observe` wrapped to record every scored observation, then prints one line per fallback episode:

- the window and side that engaged it (short window gross, short moderate, long), the short and
  long windows' shifts as multiples of their limits at that step;
- the coverage-miss test's (`drift.Misses`) figures at that step;
- load / forecast P50 over the 6 hours before the alarm and the day after it (a regime change
  stays off the old forecast; noise comes back to it), and how long the episode lasted.

    .venv/bin/python bench/drift_alarms.py ../shared/traces/mongodb_rps_1min.csv
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from models.base import DAY, HOUR
from scaler.decision import drift, drift_null
from scaler.offline import model_switches, replay, replay_config, replay_summary
from scaler.offline.traces import read_trace


@dataclass(frozen=True)
class Seen:
    at: float
    actual: float
    p50: float
    state: drift.DriftState
    short: float
    """Short window's shift over its limit on the side it leans to (signed: + above)."""
    long: float
    misses: str


def record(log: list[Seen]) -> Callable[..., None]:
    observe = drift.DriftMonitor.observe

    def wrapped(self: drift.DriftMonitor, at: float, actual: float, p50: float, up: float) -> None:
        if not math.isfinite(actual):
            observe(self, at, actual, p50, up)
            return
        null = self.current_null()
        u = drift_null.band_unit(actual, p50, up, self.level)
        short = ([*self.short, u])[-null.windows[0] :]
        long = ([*self.long, u])[-null.windows[1] :]
        (us, ul), (ls, ll) = null.sides()
        ds = sum(short) / len(short) - null.means[0] if len(short) == null.windows[0] else math.nan
        dl = sum(long) / len(long) - null.means[1] if len(long) == null.windows[1] else math.nan
        hi = sum(1 for x in long if x > drift_null.Z_P95) if len(long) == null.windows[1] else 0
        lo = sum(1 for x in long if x < -drift_null.Z_P95) if len(long) == null.windows[1] else 0
        misses = f"{hi}/{lo} of {null.misses}" if null.misses else "-"
        observe(self, at, actual, p50, up)
        log.append(
            Seen(
                at,
                actual,
                p50,
                self.state,
                ds / (us if ds >= 0 else ls),
                dl / (ul if dl >= 0 else ll),
                misses,
            )
        )

    return wrapped


def ratio(log: list[Seen], start: float, end: float) -> float:
    pts = [(s.actual, s.p50) for s in log if start <= s.at < end and math.isfinite(s.p50)]
    if not pts:
        return math.nan
    a, p = np.array(pts).T
    return float(a.sum() / max(p.sum(), 1e-9))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--threshold", default="p99/20")
    parser.add_argument("--model", default="auto")
    model_switches.add_arguments(parser)
    args = parser.parse_args()
    model_switches.apply(args)
    series = read_trace(args.trace)
    config = replay_config.ReplayConfig(
        threshold=replay_config.threshold_from(args.threshold, series)
    )
    log: list[Seen] = []
    saved = drift.DriftMonitor.observe
    drift.DriftMonitor.observe = record(log)  # type: ignore[method-assign]
    try:
        _, extra = replay.simulate(series, config, make=args.model)
    finally:
        drift.DriftMonitor.observe = saved  # type: ignore[method-assign]
    scored_from = series.start + replay_summary.warmup_steps(series) * series.step
    counts = {k: v for k, v in extra.items() if k != replay_summary.FALLBACK_AT}
    print(f"{args.trace.name}: {counts}")
    print(
        "| alarm at (UTC) | scored | short/limit | long/limit | misses | load/p50 6h before "
        "| day after | lasted h |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for i, seen in enumerate(log):
        if seen.state is not drift.DriftState.FALLBACK:
            continue
        if i > 0 and log[i - 1].state is drift.DriftState.FALLBACK:
            continue
        end = next((s.at for s in log[i:] if s.state is drift.DriftState.OK), log[-1].at)
        when = np.datetime64(int(seen.at), "s")
        print(
            f"| {when} | {'yes' if seen.at >= scored_from else 'warm-up'} | {seen.short:+.2f} "
            f"| {seen.long:+.2f} | {seen.misses} "
            f"| {ratio(log, seen.at - 6 * HOUR, seen.at):.2f} "
            f"| {ratio(log, seen.at, seen.at + DAY):.2f} | {(end - seen.at) / HOUR:.1f} |"
        )


if __name__ == "__main__":
    main()
