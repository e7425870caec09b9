"""`python -m models.bench`: fit and predict times at the scale of the Figures.

14 days of 1-minute samples (20,160 points, Poisson noise around a daily and weekly cycle, a
raw-counter reset and a few lost scrapes) go through `resample` to the 5-minute model step and
are fitted with every model and with `auto`, calibrated for the engine's default path (10 min
lead + 15 min horizon = 6 points). The prediction time is the median of repeated
`CalibratedModel.forecast` calls from a loaded artefact: what the engine pays every 30 s.
Pin it to one core for the Figures: `taskset -c 0 python -m models.bench`.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from models import artefact, catalog
from models.base import DAY, MINUTE, Series
from models.resample import resample

STEPS = 6


def one_minute_counter(days: float = 14.0, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Raw scrapes of a request counter: (times, cumulative count), 1 minute apart."""
    rng = np.random.default_rng(seed)
    t = 1_700_438_400.0 + MINUTE * np.arange(round(days * DAY / MINUTE))
    hour = (t % DAY) / 3600
    weekday = ((t // DAY) + 3) % 7  # 1970-01-01 was a Thursday
    rate = 300 * (0.25 + np.exp(-((hour - 14) ** 2) / 18)) * np.where(weekday >= 5, 0.5, 1.0)
    counts = np.cumsum(rng.poisson(rate)).astype(np.float64)
    counts[len(counts) // 2 :] -= counts[len(counts) // 2 - 1]  # the process restarted
    t = t + rng.uniform(-5, 5, t.size)  # scrapes are never exactly on the minute
    counts[rng.choice(t.size, 50, replace=False)] = np.nan  # lost scrapes
    return t, counts


def timed_fit(kind: str, history: Series) -> tuple[float, dict[str, object]]:
    tick = time.perf_counter()
    data = artefact.fit(kind, history, STEPS)
    return time.perf_counter() - tick, data


def predict_ms(data: dict[str, object], history: Series, repeat: int = 200) -> float:
    model = artefact.load(data)
    model.forecast(history, steps=STEPS, quantile=0.95)  # warm the recalibration cache
    times = []
    for _ in range(repeat):
        tick = time.perf_counter()
        model.forecast(history, steps=STEPS, quantile=0.95)
        times.append(time.perf_counter() - tick)
    return float(np.median(times) * 1e3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=float, default=14.0, help="days of 1-minute data")
    args = parser.parse_args()
    times, counts = one_minute_counter(args.days)
    tick = time.perf_counter()
    history = resample(times, counts, step=5 * MINUTE, counter=True)
    rows: dict[str, dict[str, float | str | int]] = {
        "resample": {"seconds": time.perf_counter() - tick, "points_in": int(times.size),
                     "points_out": len(history)},
    }  # fmt: skip
    for kind in ("auto", *catalog.CANDIDATES):
        seconds, data = timed_fit(kind, history)
        rows[kind] = {
            "model": str(data["kind"]),
            "fit_seconds": seconds,
            "predict_ms": predict_ms(data, history),
            "artefact_bytes": len(json.dumps(data)),
        }
    print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
