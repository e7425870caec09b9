"""Lines a day the decision log writes for one target, measured on replayed decisions.

Feeds each step of a `scaler backtest` DIR/decisions.csv (one row per step of the trace) to the
real DecisionLog (change detection and 15-minute checkpoints) and counts what it writes, against
the one line per step it wrote before. The decision fields a replay does not have (mode, model
version, drift state) are held constant, so the count is a lower bound of changes.

    .venv/bin/python bench/decisionlog_lines.py /tmp/bt/*/decisions.csv
"""

from __future__ import annotations

import csv
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from scaler.record.decisionlog import DecisionLog

LINE_BYTES = 950
"""Bytes of one line (measured: a record of the bundled trace with a price set is 916-960)."""


def measure(path: Path) -> tuple[float, float, float]:
    with path.open() as fh:
        rows = list(csv.DictReader(fh))
    times = [datetime.fromisoformat(r["timestamp"]).replace(tzinfo=UTC).timestamp() for r in rows]
    step = times[1] - times[0]
    days = (times[-1] - times[0] + step) / 86400
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "d.jsonl"
        log = DecisionLog(out)
        for at, row in zip(times, rows, strict=True):
            reactive, desired = int(row["reactive"]), int(row["desired"])
            log.write(
                {
                    "target": "bench/t#0",
                    "at": at,
                    "step": step,
                    "reactive": reactive,
                    "desired": desired,
                    "prewarm": max(0, desired - reactive),
                    "predictive_desired": desired,
                    "reason": row["reason"],
                    "mode": "active",
                    "active": desired > 0,
                }
            )
        log.close()
        lines = out.read_text().splitlines()
    changes = sum(1 for line in lines if '"event":"change"' in line)
    return len(rows) / days, changes / days, len(lines) / days


def main(paths: list[str]) -> None:
    print(f"{'decisions.csv':60} {'steps/d':>8} {'changes/d':>9} {'lines/d':>8} {'KB/d':>6}")
    for name in paths:
        steps, changes, lines = measure(Path(name))
        print(f"{name:60} {steps:8.0f} {changes:9.1f} {lines:8.1f} {lines * LINE_BYTES / 1e3:6.0f}")


if __name__ == "__main__":
    main(sys.argv[1:])
