"""The written trace of decisions: one JSON object per line per target per decision change.

What was forecast, what was asked for, why, and what it cost, so a team can audit any replica
count after the fact (`scaler explain`, or `jq 'select(.reason=="budget_capped")' FILE`). The
record is built by scaler/record/decisionrecord.py and documented in docs/decision-log.md.

- A line is written when a target's decision changes (scaler/record/decisionrecord.py:
  DECISION_FIELDS), and a `checkpoint` line when one has held for `checkpoint` seconds; every
  line says by when the next one of its target is due (`next_by`), so a decision holds from
  its `at` until the next line, and a missing line means the scaler stopped deciding.
- A target's first line in a process is a `start` (a `change` that tells a reader an earlier
  process may have died after its last line). When a target's answers stop being served (its
  data went stale, or its query was refused), an `unanswered` line closes its decision.
- On close, a `stop` line per target closes its last decision.
- The file is bounded: past `max_bytes` it is renamed FILE.1 (FILE.1 to FILE.2, ...), and
  only `keep` renamed files are kept, so the log never exceeds (keep + 1) x max_bytes plus a
  line.
- The recent lines are also kept in memory (`recent`), for the /explain endpoint; bounded per
  target and in targets. Thread-safe: the HTTP thread reads while the engine writes.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from pathlib import Path
from typing import IO

from scaler.record import decisionrecord
from scaler.record.decisionrecord import Record

logger = logging.getLogger(__name__)

CHECKPOINT = 900.0
"""Seconds a decision may hold before a `checkpoint` line repeats it."""
MAX_BYTES = 64 * 2**20
KEEP = 5
MEMORY_LINES = 2000
"""Lines kept in memory per target (with 15-minute checkpoints, at least 20 days of a steady
target)."""
MEMORY_TARGETS = 4096
"""Targets kept in memory; the least recently decided is forgotten first."""


class DecisionLog:
    def __init__(
        self,
        path: Path | None,
        *,
        checkpoint: float = CHECKPOINT,
        max_bytes: int = MAX_BYTES,
        keep: int = KEEP,
        on_record: Callable[[Record], None] | None = None,
    ) -> None:
        """`on_record` sees every decision offered, written or not (Kubernetes Events)."""
        if not checkpoint > 0:
            raise ValueError(f"checkpoint must be > 0 seconds, got {checkpoint}")
        if max_bytes <= 0 or keep < 0:
            raise ValueError(f"max_bytes must be > 0 and keep >= 0, got {max_bytes}, {keep}")
        self.path = path
        self._on_record = on_record
        self.checkpoint, self.max_bytes, self.keep = checkpoint, max_bytes, keep
        self._file: IO[str] | None = None
        self._size = 0
        self._lock = threading.Lock()
        self._last: OrderedDict[str, Record] = OrderedDict()
        """The last line written per target."""
        self._seen: dict[str, float] = {}
        """The latest decision time per target, written or not."""
        self._recent: dict[str, deque[Record]] = {}
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._open()

    # ---- writing ------------------------------------------------------------------------------
    def write(self, record: Record) -> None:
        """Offer one decision (decisionrecord.build); written only if it is a change, or the
        previous line is due to be repeated."""
        key, at = str(record["target"]), float(record["at"])
        if self._on_record is not None:
            self._on_record(record)
        with self._lock:
            self._seen[key] = at
            last = self._last.get(key)
            changed = last is None or last["event"] in decisionrecord.ENDS
            if last is not None and not changed:
                changed = decisionrecord.decision_of(last) != decisionrecord.decision_of(record)
            if last is None:  # this process's first: an earlier process's line may precede it
                event, since = decisionrecord.START, at
            elif changed:
                event, since = decisionrecord.CHANGE, at
            elif at + float(record["step"]) > float(last["next_by"]):
                event, since = decisionrecord.CHECKPOINT, float(last["since"])
            else:
                return
            line = decisionrecord.restamp(
                record, event=event, since=since, next_by=at + self.checkpoint
            )
            self._keep(key, line)
            self._append(line)

    def unanswered(self, key: str, *, at: float, why: str) -> None:
        """Close target `key`'s decision at `at`: its answers stopped being served (`why`).
        Once: nothing more until its next decision."""
        with self._lock:
            last = self._last.get(key)
            if last is None or last["event"] in decisionrecord.ENDS:
                return
            line = decisionrecord.unanswered(last, at=max(at, float(last["at"])), why=why)
            self._keep(key, line)
            self._append(line)

    def stop(self, key: str) -> None:
        """Close target `key`'s decision: the scaler stopped deciding for it (it went idle, its
        ScaledObject left, an edit superseded it). Its last decision held until its last step;
        a target registered again under the same key starts with a `change`."""
        with self._lock:
            self._stop(key)

    def _stop(self, key: str) -> None:
        last = self._last.get(key)
        if last is not None and last["event"] not in decisionrecord.ENDS:
            line = decisionrecord.stop(last, at=self._seen.get(key, float(last["at"])))
            self._keep(key, line)
            self._append(line)

    def close(self) -> None:
        """Write a `stop` line per target (its last decision held until its last step), then
        close the file."""
        with self._lock:
            for key in list(self._last):
                self._stop(key)
            if self._file is not None:
                self._file.close()
                self._file = None

    def _keep(self, key: str, line: Record) -> None:
        self._last[key] = line
        self._last.move_to_end(key)
        self._recent.setdefault(key, deque(maxlen=MEMORY_LINES)).append(line)
        while len(self._last) > MEMORY_TARGETS:
            old, _ = self._last.popitem(last=False)
            self._recent.pop(old, None)
            self._seen.pop(old, None)

    def _append(self, line: Record) -> None:
        if self._file is None:
            return
        try:
            text = json.dumps(line, separators=(",", ":"), allow_nan=False) + "\n"
            if self._size > 0 and self._size + len(text) > self.max_bytes:
                self._rotate()
            assert self._file is not None
            self._file.write(text)
            self._size += len(text.encode("utf-8"))
        except (OSError, ValueError):
            logger.exception("could not append to the decision log %s", self.path)

    def _open(self) -> None:
        assert self.path is not None
        self._file = self.path.open("a", encoding="utf-8", buffering=1)
        self._size = self._file.tell()

    def _rotate(self) -> None:
        """FILE -> FILE.1 -> ... -> FILE.keep (the oldest dropped); a new FILE."""
        assert self.path is not None and self._file is not None
        self._file.close()
        self._file = None
        if self.keep == 0:
            self.path.unlink(missing_ok=True)
        else:
            self.path.with_name(f"{self.path.name}.{self.keep}").unlink(missing_ok=True)
            for n in range(self.keep - 1, 0, -1):
                older = self.path.with_name(f"{self.path.name}.{n}")
                if older.exists():
                    older.rename(self.path.with_name(f"{self.path.name}.{n + 1}"))
            self.path.rename(self.path.with_name(f"{self.path.name}.1"))
        self._open()

    # ---- reading (the /explain endpoint) ------------------------------------------------------
    def targets(self) -> list[str]:
        with self._lock:
            return sorted(self._recent)

    def recent(self, keys: list[str], *, since: float, until: float) -> list[Record]:
        """The kept lines of `keys` stamped in [since, until], plus the last one before
        `since` (the decision in force when the period starts) and the first one after `until`
        (where the period's last decision ended: without it, a silence up to it was read as
        that decision held), oldest first."""
        out: list[Record] = []
        with self._lock:
            for key in keys:
                lines = list(self._recent.get(key, ()))
                before = [r for r in lines if r["at"] < since]
                after = [r for r in lines if r["at"] > until]
                out += before[-1:] + [r for r in lines if since <= r["at"] <= until] + after[:1]
        return sorted(out, key=lambda r: (r["at"], r["target"]))

    def seen_until(self, keys: list[str]) -> dict[str, float]:
        """The latest decision time of each of `keys` (its decision is in force until then)."""
        with self._lock:
            return {k: self._seen[k] for k in keys if k in self._seen}
