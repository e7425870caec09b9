"""Drift alarms on synthetic load the detector was never tuned on, with each mechanism ablated.

Each trace is Poisson load around a daily and weekly cycle, with one ingredient a healthy service
has (a slow trend, a holiday dip, short spikes, an outage with missing data, or all of them),
generated from a seed; none is a regime change a forecast cannot follow. Every trace is replayed
with the seasonal model (walk-forward, weekly refit) and the drift monitor as it is, then with
one mechanism taken out by replacing one function of the scaler.decision.drift* modules:

- `gaussian`: limits from a Gaussian on the robust spread only (no exponential tail);
- `short-alone`: the short window trips alone after CONFIRM observations, gross or not;
- `no-hold`: fallback may end before a model trained a day after the alarm is in use;
- `no-miss`: no coverage-miss test (`Null.missed` never trips);
- `no-stale`: load back after a long gap is scored as any other (no restart of trust);
- `no-run`: no run test on actuals below the band (on by default: docs/policy.md "Drift");
- `raw-runs`: the run test's limit from the calibration's raw runs, not scaled to the band
  (the calibration errors' own spread: `drift_measure.null_from`).

It prints fallback episodes per week of scored replay (after the 14-day warm-up) and the share
of scored steps in fallback. A benchmark, not a test:

    .venv/bin/python bench/drift_synthetic.py --weeks 8 --seeds 2
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
from collections.abc import Callable, Iterator

import numpy as np

from models.base import DAY, HOUR, WEEK, Series
from models.seasonal import SeasonalBaseline
from scaler.decision import drift, drift_measure, drift_null, drift_tracker
from scaler.offline import replay, replay_config, replay_summary

STEP = 300.0
START = 1_700_006_400.0  # a midnight UTC
KINDS = ("plain", "trend", "holidays", "spikes", "outage", "all")


def load(kind: str, *, weeks: float, seed: int) -> Series:
    """Synthetic Poisson load of `kind` (KINDS), `weeks` long."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(weeks * WEEK / STEP)) * STEP
    day = 1 + 0.7 * np.sin(2 * np.pi * (t / DAY - 0.3))
    weekday = np.where((t // DAY) % 7 >= 5, 0.6, 1.0)
    mean = 300 * day * weekday
    values: np.ndarray
    if kind in ("trend", "all"):
        mean = mean * (1 + 0.05 * t / WEEK)  # +5% a week
    if kind in ("holidays", "all"):
        for d in rng.choice(np.arange(15, int(weeks * 7)), size=max(1, int(weeks // 3))):
            mean = np.where((t >= d * DAY) & (t < (d + 1) * DAY), 0.6 * mean, mean)
    if kind in ("spikes", "all"):
        for s in rng.uniform(0, t[-1], size=int(weeks * 2)):
            mean = np.where((t >= s) & (t < s + rng.uniform(0.5, 2) * HOUR), 2 * mean, mean)
    values = rng.poisson(mean).astype(float)
    if kind in ("outage", "all"):
        start = rng.uniform(15 * DAY, t[-1] - DAY)
        values[(t >= start) & (t < start + 6 * HOUR)] = math.nan
    return Series(START, STEP, values)


@contextlib.contextmanager
def ablated(name: str) -> Iterator[None]:
    """Take one mechanism out of the scaler.decision.drift* modules while the block runs."""
    saved: list[tuple[object, str, object]] = []

    def swap(owner: object, attr: str, value: object) -> None:
        saved.append((owner, attr, getattr(owner, attr)))
        setattr(owner, attr, value)

    if name == "gaussian":
        swap(drift_measure, "tail_limit", lambda deviation, alpha: -math.inf)
    elif name == "short-alone":
        swap(drift_null.Null, "gross", lambda self, short: True)
    elif name == "no-hold":
        use: Callable[..., None] = drift_tracker.DriftTracker.use

        def no_hold(self: drift_tracker.DriftTracker, model: object, null: drift_null.Null) -> None:
            use(self, model, null)
            self.monitor.fitted_until = math.inf

        swap(drift_tracker.DriftTracker, "use", no_hold)
    elif name == "no-miss":
        swap(drift_null.Null, "missed", lambda self, misses: False)
    elif name == "no-stale":
        swap(drift, "STALE_AFTER", math.inf)
    elif name == "raw-runs":
        swap(
            drift_measure,
            "null_from",
            functools.partial(drift_measure.null_from, scaled_runs=False),
        )
    try:
        yield
    finally:
        for owner, attr, value in reversed(saved):
            setattr(owner, attr, value)


def episodes(series: Series, *, run_test: bool = True) -> tuple[float, float]:
    """(episodes per scored week, share of scored steps in fallback) of one replay."""
    config = replay_config.ReplayConfig(threshold=40.0, drift_run_test=run_test)
    frame, _ = replay.simulate(series, config, make=SeasonalBaseline)
    first = replay_summary.warmup_steps(series)
    fallback = np.isin(np.asarray(frame["reason"])[first:], ("drift_fallback", "drift_margin"))
    starts = int((np.diff(fallback.astype(int), prepend=0) == 1).sum())
    weeks = (len(series) - first) * STEP / WEEK
    return starts / weeks, float(fallback.mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weeks", type=float, default=8.0)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument(
        "--variants", default="full,gaussian,short-alone,no-hold,no-miss,no-stale,no-run,raw-runs"
    )
    args = parser.parse_args()
    print("| load | " + " | ".join(args.variants.split(",")) + " |")
    print("|---" * (1 + len(args.variants.split(","))) + "|")
    for kind in KINDS:
        cells = []
        for variant in args.variants.split(","):
            run_test = variant != "no-run"
            with ablated(variant):
                runs = [
                    episodes(load(kind, weeks=args.weeks, seed=s), run_test=run_test)
                    for s in range(args.seeds)
                ]
            rate, share = np.mean([r[0] for r in runs]), np.mean([r[1] for r in runs])
            cells.append(f"{rate:.2f}/wk, {share:.1%}")
        print(f"| {kind} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
