"""The summary `scaler retrain` prints when the run ends: one row per target (model, scores,
promoted or not, why) and a count line on stdout, or the same as JSON (--json FILE, or - for
stdout).

Must not: decide anything; it reports the outcomes retrain.py returned.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import TextIO

from scaler.errors import ConfigError
from scaler.offline.retrain import Outcome
from scaler.offline.retrain_targets import Shard


def write_summary(
    outcomes: list[Outcome],
    json_path: Path | None,
    shard: Shard,
    *,
    terminated: str = "",
    dry_run: bool = False,
) -> None:
    """`terminated`: the signal that stopped the run ("" when none did)."""
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
    text = json.dumps(report, indent=2, allow_nan=False)
    if json_path is not None and str(json_path) == "-":
        print(text)
        return
    if json_path is not None:
        try:
            json_path.write_text(text + "\n")
        except OSError as exc:
            raise ConfigError(f"--json {json_path}: cannot write the summary ({exc})") from exc
    print_table(outcomes, sys.stdout)
    promoted = f"{report['promoted']} promoted"
    if dry_run:
        promoted = f"{report['would_promote']} would be promoted (dry run: the store not written)"
    print(
        f"{report['targets']} targets, {promoted}, "
        f"{report['failed']} failed (shard {report['shard']})"
        + (f"; terminated by {terminated} before the others finished" if terminated else "")
    )


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
