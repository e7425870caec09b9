"""The written trace of every decision: one JSON object per line, appended to a file.

What was forecast, what was asked for, why, and what it cost, so a team can audit any replica
count after the fact (`jq 'select(.reason=="budget_capped")' decisions.jsonl`).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import IO, Any

logger = logging.getLogger(__name__)


class DecisionLog:
    def __init__(self, path: Path | None) -> None:
        self._file: IO[str] | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("a", encoding="utf-8", buffering=1)

    def write(self, record: dict[str, Any]) -> None:
        if self._file is None:
            return
        try:
            self._file.write(json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n")
        except (OSError, ValueError):
            logger.exception("could not append to the decision log")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
