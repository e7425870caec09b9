"""Logging for every command: text or JSON lines on stderr, the level by name. Must not: read
os.environ (the flags are cli.py's)."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from scaler import quiet


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is when a record is emitted, not when the handler was made
    (as logging's own last-resort handler does): `main` run in a process that later swaps or
    closes its stderr (a notebook, a test's capture) must not log into a closed stream."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass  # StreamHandler.__init__ and setStream assign it; the current stderr wins


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def log_level(text: str) -> str:
    """argparse `type=` for --log-level: a level name, in any case."""
    level = text.strip().upper()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a log level; use {', '.join(LOG_LEVELS)}"
        )
    return level


def setup_logging(level: str, fmt: str) -> None:
    handler = _Stderr()
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    quiet.silence_third_party()


class _JsonFormatter(logging.Formatter):
    """One JSON object a line. A record's traceback (`logger.exception`, or the text a fit
    worker formatted before sending it: workers._Kept) goes under "exc", its stack under
    "stack": a log pipeline must not lose why a target failed."""

    def format(self, record: logging.LogRecord) -> str:
        import json

        line: dict[str, object] = {
            "ts": record.created,
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exc"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line)
