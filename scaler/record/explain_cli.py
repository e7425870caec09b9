"""`scaler explain NAMESPACE/NAME`: the recent decisions of a target and why, in words and
figures, from a running scaler (`--server URL`, its GET /explain) or from a decision log
(`--log FILE`, with its rotated FILE.1, FILE.2, ...). The words are scaler/record/explain.py's.

A corrupt or unreadable line is reported as FILE:LINE with the fix, and the rest is read.
Exit status: 0 explained, 1 nothing in the period, 2 an unknown target, bad arguments or no
readable source.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from scaler import helptext
from scaler.errors import ConfigError
from scaler.record import decisionrecord, explain
from scaler.record.decisionrecord import Record

REQUIRED = ("target", "at", "step", "desired", "reactive", "prewarm", "reason")
HTTP_TIMEOUT = 10.0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "explain",
        help="why a target got the replicas it got: totals and decisions in words",
        description="Print what a target was asked to run over a period, and why: GPU-hours, "
        "prewarm replica-hours, money (with costPerReplicaHour), time per reason, then every "
        "decision change in plain words. Reads the running scaler's GET /explain (--server) or "
        "a decision log written with `scaler serve --decision-log FILE` (--log; FILE.1, "
        "FILE.2, ... rotated from it are read too).",
        epilog="examples:\n"
        "  scaler explain inference/llm --server http://scaler.keda.svc:8080 --since 6h\n"
        "  scaler explain inference/llm --log decisions.jsonl --since 2026-11-28 "
        "--until 2026-11-29\n"
        "  scaler explain inference/llm --log decisions.jsonl --at 2026-11-28T09:30",
        formatter_class=helptext.Paragraphs,
    )
    p.add_argument("target", help="NAMESPACE/NAME, or NAMESPACE/NAME#FINGERPRINT for one trigger")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--server", help="a running scaler's HTTP port, e.g. http://host:8080")
    where.add_argument("--log", type=Path, help="a decision log (its rotated files are read too)")
    p.add_argument("--since", default="24h", help="ISO time (UTC) or a duration ago (default 24h)")
    p.add_argument("--until", default="now", help="ISO time (UTC), a duration ago, or now")
    p.add_argument("--at", help="explain only the decision in force at this time")
    p.set_defaults(func=cmd_explain)


def cmd_explain(args: argparse.Namespace) -> int:
    now = time.time()
    wanted = explain.check_target(args.target)
    if args.at is not None:
        since = until = explain.parse_time(args.at, now=now)
    else:
        since = explain.parse_time(args.since, now=now)
        until = explain.parse_time(args.until, now=now)
        if until <= since:
            raise explain.ExplainError(
                f"--until {args.until} is not after --since {args.since}; swap them"
            )
    seen: dict[str, float] = {}
    if args.server is not None:
        records, seen, keys = _from_server(args.server, wanted, since, until)
    else:
        records = read_log(args.log)
        known = sorted({str(r["target"]) for r in records})
        keys = explain.matching(known, wanted)
        if not keys:
            raise explain.ExplainError(
                f"no decisions of {wanted} in {args.log}; targets there: "
                + (", ".join(known) or "none")
            )
    if len(keys) > 1:
        print(
            f"{wanted} has {len(keys)} triggers: {', '.join(keys)} (name one as "
            "NAMESPACE/NAME#FINGERPRINT to see only it)"
        )
    found = False
    for key in keys:
        lines = explain.report(records, key=key, since=since, until=until, seen_until=seen)
        found |= not any(line.startswith("no decision of") for line in lines)
        print("\n".join(lines))
    return 0 if found else 1


def read_log(path: Path) -> list[Record]:
    """Every readable record of `path` and its rotated files, oldest file first; bad lines
    are reported on stderr as FILE:LINE and skipped."""
    if path.is_dir():
        raise ConfigError(
            f"--log {path}: a directory; give the file `scaler serve --decision-log` writes, "
            f"e.g. {path / 'decisions.jsonl'}"
        )
    files = sorted(
        (p for p in path.parent.glob(f"{path.name}.*") if re.fullmatch(r"\d+", p.suffix[1:])),
        key=lambda p: -int(p.suffix[1:]),
    )
    if path.exists():
        files.append(path)
    if not files:
        raise ConfigError(
            f"--log {path}: no such file (nor rotated {path.name}.1, ...); give the file "
            "`scaler serve --decision-log` writes"
        )
    records: list[Record] = []
    for file in files:
        try:
            with file.open(encoding="utf-8", errors="replace") as fh:
                for number, text in enumerate(fh, 1):
                    record = parse_line(text, where=f"{file}:{number}")
                    if record is not None:
                        records.append(record)
        except OSError as exc:
            message = f"{file}: cannot read it ({exc.strerror}); check its permissions"
            print(message, file=sys.stderr)
    return records


def parse_line(text: str, *, where: str) -> Record | None:
    """One record, or None (and a message naming `where` and the fix) when it is not one."""
    if not text.strip():
        return None
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        _bad(where, f"not JSON ({exc.msg} at column {exc.colno})")
        return None
    if not isinstance(record, dict):
        _bad(where, "not a JSON object")
        return None
    version = record.get("v")
    if version != decisionrecord.VERSION:
        _bad(
            where,
            f"record version {version!r}, this scaler reads version {decisionrecord.VERSION} "
            "(lines before the versioned format, or from a newer scaler: use the matching one)",
        )
        return None
    missing = [name for name in REQUIRED if record.get(name) is None]
    if missing:
        _bad(where, f"missing {', '.join(missing)}")
        return None
    return record


def _bad(where: str, problem: str) -> None:
    print(
        f"{where}: {problem}; skipped (a line cut short by a crash or an edit; the rest is read)",
        file=sys.stderr,
    )


def _from_server(
    url: str, wanted: str, since: float, until: float
) -> tuple[list[Record], dict[str, float], list[str]]:
    query = urllib.parse.urlencode(
        {"target": wanted, "since": f"@{since!r}", "until": f"@{until!r}"}
    )
    address = f"{url.rstrip('/')}/explain?{query}"
    try:
        with urllib.request.urlopen(address, timeout=HTTP_TIMEOUT) as reply:
            body = json.load(reply)
    except urllib.error.HTTPError as exc:
        try:
            problem = json.load(exc).get("error", exc.reason)
        except ValueError:
            problem = exc.reason
        raise explain.ExplainError(f"{url}: {problem}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ConfigError(
            f"--server {url}: cannot read /explain ({exc}); give the scaler's HTTP port, "
            "e.g. http://localhost:8080 after kubectl port-forward"
        ) from None
    return list(body["records"]), dict(body["seen_until"]), list(body["targets"])
