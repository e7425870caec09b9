"""`scaler explain NAMESPACE/NAME`: the recent decisions of a target and why, in words and
figures, from a running scaler (`--server URL`, its GET /explain) or from a decision log
(`--log FILE`, with its rotated FILE.1, FILE.2, ...). The words are scaler/record/explain.py's;
a ScaledObject with several triggers or fingerprints gets its total (scaler/record/scaledobject.py)
above their sections.

A corrupt or unreadable line is reported as FILE:LINE with the fix (the first 20 of a file; the
rest are counted), and the rest is read; a file whose first 1000 lines hold no record is taken
for something else and left, and one whose first line is a CSV header (a backtest's
decisions.csv, a load export) or a JSON document's lone `{` (its summary.json) is refused at
once, naming the file to give instead (the backtest's decisions.jsonl when it is beside it).
Exit status: 0 explained, 1 nothing in the period, 2 an unknown target, bad arguments or no
readable source.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import re
import shlex
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scaler import helptext
from scaler.errors import ConfigError
from scaler.record import decisionrecord, explain, explain_args
from scaler.record.decisionrecord import Record

REQUIRED = ("target", "at", "step", "desired", "reactive", "prewarm", "reason")
NUMBERS = ("at", "step", "desired", "reactive", "prewarm")
"""Required fields the totals sum or order by: each a finite number from 0 up."""
OPTIONAL_NUMBERS = ("since", "next_by")
HTTP_TIMEOUT = 10.0
REPORTED = 20
"""Bad lines of one file named on stderr; the rest are counted."""
NOT_A_LOG = 1000
"""Bad lines, before any record, after which a file is taken for something else and left."""
MAX_LINE = 1 << 20
"""Characters of one line read at most (a record is a few hundred)."""
TAIL = 1 << 16
"""Bytes at the end of a backtest's decisions.jsonl its last record is looked for in."""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "explain",
        help="why a target got the replicas it got: totals and decisions in words",
        description="Print what a target was asked to run over a period, and why: GPU-hours, "
        "prewarm replica-hours, money (with costPerReplicaHour), time per reason, then "
        "every decision change in plain words, per trigger (target "
        "NAMESPACE/NAME#FINGERPRINT). A ScaledObject with more than one trigger, or an "
        "edited trigger (its new metadata is a new fingerprint), first gets one total: "
        "its HPA runs the max of its triggers' requests at each time, so its GPU-hours "
        "are that max's, its prewarm what prewarm added to the max (the sections' "
        "prewarm is each trigger's ledger's), and a stretch where one trigger has no "
        "record is not counted (with --at: what it ran then, set by which trigger). "
        "Reads the running scaler's GET /explain (--server) or a decision log written "
        "with `scaler serve --decision-log FILE` (--log; FILE.1, FILE.2, ... rotated "
        "from it are read too), or a backtest's DIR/decisions.jsonl (target "
        "backtest/NAME; the backtest's last line is the command over its scored span). "
        "Exit status: 0 explained, 1 no decision in the period (the last one before it "
        "is named), 2 an unknown target, bad arguments or no readable source.",
        epilog="examples:\n"
        "  scaler explain inference/llm --server http://scaler.keda.svc:8080 --since 6h\n"
        "  scaler explain inference/llm --log decisions.jsonl --since 2026-11-28 "
        "--until 2026-11-29\n"
        "  scaler explain inference/llm --log decisions.jsonl --at 2026-11-28T09:30\n"
        "  scaler explain backtest/nasa_http_5min --log backtest-nasa_http_5min/decisions.jsonl "
        "--at 1995-07-20T09:10",
        formatter_class=helptext.Paragraphs,
    )
    p.add_argument("target", help="NAMESPACE/NAME, or NAMESPACE/NAME#FINGERPRINT for one trigger")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--server", help="a running scaler's HTTP port, e.g. http://host:8080")
    where.add_argument("--log", type=Path, help="a decision log (its rotated files are read too)")
    p.add_argument("--since", default="24h", help="ISO time (UTC) or a duration ago (default 24h)")
    p.add_argument(
        "--until", default="now", help="ISO time (UTC), a duration ago, or now (default now)"
    )
    p.add_argument(
        "--at",
        help="explain only the decision in force at this time (ISO, UTC unless an offset is "
        "given); --since and --until are then not used",
    )
    p.set_defaults(func=cmd_explain)


def cmd_explain(args: argparse.Namespace) -> int:
    now = time.time()
    wanted = explain_args.check_target(args.target)
    # A log file may be a backtest's, dated as its trace: a synthetic one lies ahead of now.
    latest = explain_args.LOG_LATEST if args.log is not None else None
    if args.at is not None:
        since = until = explain_args.parse_time(args.at, now=now, latest=latest)
    else:
        since = explain_args.parse_time(args.since, now=now, latest=latest)
        until = explain_args.parse_time(args.until, now=now, latest=latest)
        if since >= now and (latest is None or until <= since):
            ahead = "; a backtest's log dated ahead needs an --until after it" if latest else ""
            raise explain_args.ExplainError(
                f"--since {args.since} is not in the past; give a time before now or a "
                f"duration ago, e.g. 6h{ahead}"
            )
        if until <= since:
            raise explain_args.ExplainError(
                f"--until {args.until} is not after --since {args.since}; swap them"
            )
    seen: dict[str, float] = {}
    if args.server is not None:
        records, seen, keys = _from_server(args.server, wanted, since, until)
    else:
        records = read_log(args.log)
        known = sorted({str(r["target"]) for r in records})
        keys = explain_args.matching(known, wanted)
        if not keys:
            raise explain_args.ExplainError(
                f"no decisions of {wanted} in {args.log}; targets there: "
                + (", ".join(known) or "none")
            )
    if len(keys) > 1:
        print(
            f"{wanted} has {len(keys)} triggers: {', '.join(keys)} (name one as "
            "NAMESPACE/NAME#FINGERPRINT to see only it; an edited trigger's old and new "
            "fingerprints are two)"
        )
        total = explain.object_report(records, keys=keys, since=since, until=until, seen_until=seen)
        if total:
            print("\n".join(total))
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
            with file.open(encoding="utf-8-sig", errors="replace") as fh:  # an editor's BOM
                records.extend(_records_of(fh.readline, name=str(file)))
        except OSError as exc:
            message = f"{file}: cannot read it ({exc.strerror}); check its permissions"
            print(message, file=sys.stderr)
    return records


def _records_of(readline: Callable[[int], str], *, name: str) -> Iterator[Record]:
    """The records of one open file, read by its `readline`. The first REPORTED bad lines are
    named on stderr, the rest counted; a file whose first NOT_A_LOG lines hold no record is
    left at that point (a binary file, a pipe of something else), and a line is read MAX_LINE
    characters at most, so nothing that is not a decision log is read forever or whole."""
    bad = good = 0
    for number, text in enumerate(_bounded_lines(readline), 1):
        if text is not None and good == bad == 0 and text.strip():
            what = not_a_log(text, name=name)
            if what is not None:
                raise ConfigError(what)
        if text is None:
            problem: str | None = f"longer than {MAX_LINE} characters"
            record = None
        else:
            record, problem = parse_line(text)
        if record is not None:
            good += 1
            yield record
            continue
        if problem is None:
            continue
        bad += 1
        if bad <= REPORTED:
            _bad(f"{name}:{number}", problem)
        if good == 0 and bad >= NOT_A_LOG:
            print(
                f"{name}: none of its first {NOT_A_LOG} lines is a decision record, so the "
                "rest is not read; give the file `scaler serve --decision-log` writes",
                file=sys.stderr,
            )
            break
    if bad > REPORTED:
        print(f"{name}: {bad - REPORTED} more bad lines skipped", file=sys.stderr)


BACKTEST_COLUMNS = frozenset({"timestamp", "load", "reactive", "desired", "reason"})
"""Columns of a backtest's decisions.csv (scaler/offline/replay.py COLUMNS) that say it is one."""


def not_a_log(first: str, *, name: str) -> str | None:
    """What a file whose first line is `first` is, when that line says it is a CSV and not a
    decision log (a backtest's decisions.csv, a load export), with what to give instead; None
    when it may be one (its bad lines are then named one by one)."""
    text = first.strip()
    if text in ("{", "["):  # a record is one line: this is one document (summary.json)
        return (
            f"--log {name}: one JSON document (its first line is {text!r} alone, as in a "
            "backtest's summary.json), not a decision log (a JSON record a line); scaler "
            f"explain reads {_log_beside(Path(name))}"
        )
    if text.startswith(("{", "[")) or text.endswith("}") or "," not in text:
        return None  # JSON, or a record whose start was cut off: its lines are named one by one
    columns = {c.strip().strip('"') for c in text.split(",")}
    if columns >= BACKTEST_COLUMNS:
        return (
            f"--log {name}: a backtest's decisions.csv (CSV, a row per trace step), not a "
            f"decision log; scaler explain reads JSON lines, {_beside(Path(name))}"
        )
    head = text if len(text) <= 60 else text[:57] + "..."
    return (
        f"--log {name}: a CSV file (its first line: {head!r}), not a decision log; scaler "
        f"explain reads {_log_beside(Path(name))}"
    )


def _log_beside(path: Path) -> str:
    """The command reading the backtest's log beside `path` (another file of its folder, such
    as forecasts.csv or summary.json), or else what file to give."""
    if _end_records(path.with_name("decisions.jsonl"))[0] is not None:
        return f"JSON lines, {_beside(path)}"
    return (
        "the JSON lines `scaler serve --decision-log FILE` writes (or a backtest's "
        "DIR/decisions.jsonl)"
    )


def command(target: str, log: Path, *, since: float, until: float) -> str:
    """The command line that explains `target` from the decision log `log` over [since,
    until]."""
    return (
        f"scaler explain {target} --log {shlex.quote(str(log))} "
        f"--since {decisionrecord.iso(since)} --until {decisionrecord.iso(until)}"
    )


def scored_span(trace: Mapping[str, Any]) -> tuple[float, float]:
    """The span a backtest scored, from its summary's `trace` (summary.json's
    `decisions.trace`, replay_summary.summarise): its `explain_steps`, where explain's totals
    are summary.json's (from the end of its warm-up to one step past its last step, moved to a
    gap's edge when one crosses either end); without them (an older summary), from the end of
    its warm-up to one step past its last step. KeyError, TypeError or ValueError when `trace`
    is not such a summary."""
    start, end = (datetime.fromisoformat(trace[k]).replace(tzinfo=UTC) for k in ("start", "end"))
    step = float(trace["step_seconds"])
    if "explain_steps" in trace:
        first, stop = (int(n) for n in trace["explain_steps"])
        return start.timestamp() + first * step, start.timestamp() + stop * step
    warmup = min(int(trace["warmup_steps"]), int(trace["steps"]) - 1)
    return start.timestamp() + warmup * step, end.timestamp() + step


def _beside(csv: Path) -> str:
    """Where the decision log of the backtest that wrote `csv` is, and the command that reads
    it over the span the backtest scored (summary.json beside it), as the backtest printed it;
    over the whole log (its first and last lines) when summary.json cannot say."""
    jsonl = csv.with_name("decisions.jsonl")
    first, last = _end_records(jsonl)
    if first is None or last is None:
        return (
            "which `scaler backtest` writes beside decisions.csv as decisions.jsonl: run the "
            "backtest again (an older scaler wrote none)"
        )
    try:
        summary = json.loads(csv.with_name("summary.json").read_text(encoding="utf-8"))
        since, until = scored_span(summary["decisions"]["trace"])
    except (OSError, UnicodeDecodeError, KeyError, TypeError, ValueError):
        since, until = float(first["at"]), float(last["at"]) + float(last["step"])
    hint = command(f"{first.get('namespace')}/{first.get('name')}", jsonl, since=since, until=until)
    return f"the ones the backtest wrote beside it: {hint}"


def _end_records(path: Path) -> tuple[Record | None, Record | None]:
    """The first record of the log `path` (its first line) and its last (of its last TAIL
    bytes); None for one that cannot be read."""
    try:
        with path.open("rb") as fh:
            first, _ = parse_line(fh.readline(MAX_LINE).decode("utf-8"))
            fh.seek(max(fh.tell(), fh.seek(0, io.SEEK_END) - TAIL))
            tail = fh.read().decode("utf-8", errors="replace").splitlines()
    except (OSError, UnicodeDecodeError):
        return None, None
    last = next(
        (record for record, _ in map(parse_line, reversed(tail)) if record is not None), first
    )
    return first, last


def _bounded_lines(readline: Callable[[int], str]) -> Iterator[str | None]:
    """The lines `readline` reads, each MAX_LINE characters at most; None for a longer one,
    whose rest is skipped."""
    while True:
        text = readline(MAX_LINE + 1)
        if not text:
            return
        if len(text) <= MAX_LINE or text.endswith("\n"):
            yield text
            continue
        while text and not text.endswith("\n"):
            text = readline(MAX_LINE + 1)
        yield None


def parse_line(text: str) -> tuple[Record | None, str | None]:
    """(the record, None), or (None, what is wrong with the line); (None, None) for a blank
    line."""
    if not text.strip():
        return None, None
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"not JSON ({exc.msg} at column {exc.colno})"
    if not isinstance(record, dict):
        return None, "not a JSON object"
    version = record.get("v")
    if version != decisionrecord.VERSION:
        return None, (
            f"record version {version!r}, this scaler reads version {decisionrecord.VERSION} "
            "(lines before the versioned format, or from a newer scaler: use the matching one)"
        )
    missing = [name for name in REQUIRED if record.get(name) is None]
    if missing:
        return None, f"missing {', '.join(missing)}"
    for name in ("target", "reason"):
        if not isinstance(record[name], str):
            return None, f"{name} is {record[name]!r}, not a string"
    for name in (*NUMBERS, *(n for n in OPTIONAL_NUMBERS if record.get(n) is not None)):
        value = record[name]
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not math.isfinite(value) or value < 0:
            return None, f"{name} is {value!r}, not a number from 0 up"
    return record, None


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
        raise explain_args.ExplainError(f"{url}: {problem}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ConfigError(
            f"--server {url}: cannot read /explain ({exc}); give the scaler's HTTP port, "
            "e.g. http://localhost:8080 after kubectl port-forward"
        ) from None
    return list(body["records"]), dict(body["seen_until"]), list(body["targets"])
