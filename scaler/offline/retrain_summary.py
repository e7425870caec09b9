"""The summary `scaler retrain` prints when the run ends: one row per target (model, scores,
promoted or not, why) and a count line on stdout, or the same as JSON (--json FILE, or - for
stdout). With JSON logs, one JSON record on stdout instead of the table.

Must not: decide anything; it reports the outcomes retrain.py returned (`Outcome`, one row).
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

from scaler.errors import ConfigError
from scaler.offline.retrain_targets import Shard


@dataclass(frozen=True)
class Outcome:
    """What happened to one target (one row of the summary)."""

    target: str
    """`namespace/name`, or where a trigger that did not parse sits."""
    key: str
    model: str = ""
    challenger_loss: float | None = None
    champion: int | None = None
    """The champion version before this run."""
    champion_loss: float | None = None
    promoted: bool = False
    version: int | None = None
    """Version the challenger was stored as (only when promoted)."""
    reason: str = ""
    failed: bool = False
    seconds: float = 0.0
    observed_points: int | None = None
    """Points of the latest week (the calibration window where challenger and champion are
    graded) with an observed value: what the losses were computed on."""
    window_points: int | None = None
    """Points in that window at the model step."""
    would_promote: bool = False
    """A dry run's challenger that won: it would have been promoted, and was not stored."""
    unreachable: bool = False
    """Failed because its Prometheus could not be reached or answered an error
    (SourceUnavailable; not one that refused it, SourceRefused: HTTP 401, 403, 404, which a
    retry would meet again), another service was unreachable (errors.Unreachable), or the model
    store went out of reach mid-run (store.base.unreachable: its champion read): a retry may
    succeed."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def write_summary(
    outcomes: list[Outcome],
    json_path: Path | None,
    shard: Shard,
    *,
    terminated: str = "",
    dry_run: bool = False,
    json_logs: bool = False,
) -> None:
    """`terminated`: the signal that stopped the run ("" when none did). `json_logs`: the
    logs are JSON lines (--log-format json, the CronJob's), so stdout holds JSON lines too:
    the summary as one record (`log_record`) instead of the table, and `--json -` on one line,
    so that a log pipeline parses every line of the pod's log."""
    report = {
        "shard": f"{shard.index}/{shard.count}",
        "targets": len(outcomes),
        "promoted": sum(o.promoted for o in outcomes),
        "failed": sum(o.failed for o in outcomes),
        "terminated": bool(terminated),
        "signal": terminated or None,
        "dry_run": dry_run,
        "would_promote": sum(o.would_promote for o in outcomes),
        "outcomes": [o.to_dict() for o in outcomes],
    }
    if json_path is not None and str(json_path) == "-":
        print(json.dumps(report, indent=None if json_logs else 2, allow_nan=False))
        return
    if json_path is not None:
        try:
            json_path.write_text(json.dumps(report, indent=2, allow_nan=False) + "\n")
        except OSError as exc:
            raise ConfigError(f"--json {json_path}: cannot write the summary ({exc})") from exc
    promoted = f"{report['promoted']} promoted"
    if dry_run:
        promoted = f"{report['would_promote']} would be promoted (dry run: the store not written)"
    line = (
        f"{report['targets']} targets, {promoted}, "
        f"{report['failed']} failed (shard {report['shard']})"
        + (f"; terminated by {terminated} before the others finished" if terminated else "")
    )
    if json_logs:
        print(json.dumps(log_record(line, report), allow_nan=False))
        return
    print_table(outcomes, sys.stdout)
    print(line)


def log_record(line: str, report: dict[str, Any]) -> dict[str, Any]:
    """The summary as one record with the keys of the JSON log lines (scaler/cli.py's
    formatter: ts, level, logger, msg), the count line as its message and the whole report
    under `summary`: WARNING when a target failed, as each failure was logged."""
    level = "WARNING" if report["failed"] else "INFO"
    return {"ts": time.time(), "level": level, "logger": __name__, "msg": line, "summary": report}


def print_table(outcomes: list[Outcome], out: TextIO) -> None:
    rows = [("TARGET", "MODEL", "CHALLENGER", "CHAMPION", "PROMOTED", "WHY")]
    for o in outcomes:
        champion = "-" if o.champion is None else f"v{o.champion} {_score(o.champion_loss)}"
        promoted = "FAILED" if o.failed else (f"yes v{o.version}" if o.promoted else "no")
        promoted = "would" if o.would_promote else promoted
        rows.append(
            (o.key or o.target, o.model, _score(o.challenger_loss), champion, promoted, o.reason)
        )
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for row in rows:
        cells = [c.ljust(w) for c, w in zip(row[:5], widths, strict=True)]
        print("  ".join([*cells, row[5][:200]]), file=out)


def _score(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.4g}"
