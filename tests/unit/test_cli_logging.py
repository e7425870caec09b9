"""scaler.cli.setup_logging writes to the sys.stderr of each record, so `main` run in a process
that later swaps or closes its stderr (a notebook, pytest's capsys) never logs into a closed
stream: a later thread's record once printed "I/O operation on closed file" in `make test`."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from scaler import cli, logsetup


@pytest.fixture
def root_restored() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_records_follow_the_current_stderr(
    root_restored: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = io.StringIO(), io.StringIO()
    monkeypatch.setattr("sys.stderr", first)
    logsetup.setup_logging("info", "text")
    logging.getLogger("scaler.test").info("to the first")
    first.close()  # as capsys closes its stream when its test ends
    monkeypatch.setattr("sys.stderr", second)
    with monkeypatch.context() as m:
        m.setattr(logging, "raiseExceptions", True)
        logging.getLogger("scaler.test").warning("to the second")
    assert "to the second" in second.getvalue()
    assert "Logging error" not in second.getvalue() and "to the first" not in second.getvalue()


def test_json_format_too(root_restored: None, monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr("sys.stderr", io.StringIO())
    logsetup.setup_logging("info", "json")
    monkeypatch.setattr("sys.stderr", out)
    logging.getLogger("scaler.test").info("hello")
    assert '"msg": "hello"' in out.getvalue()


def test_json_format_keeps_the_traceback(
    root_restored: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`logger.exception` in JSON: the traceback is a field of the one line, not lost."""
    import json

    out = io.StringIO()
    monkeypatch.setattr("sys.stderr", out)
    logsetup.setup_logging("info", "json")
    try:
        raise ValueError("the fit's reason")
    except ValueError:
        logging.getLogger("scaler.test").exception("fit failed")
    forwarded = {"name": "scaler.w", "levelname": "ERROR", "levelno": 40, "msg": "from a worker"}
    logging.getLogger().handle(logging.makeLogRecord({**forwarded, "exc_text": "Traceback: w"}))
    logging.getLogger("scaler.test").info("here", stack_info=True)
    first, second, third = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["msg"] == "fit failed"
    assert "Traceback" in first["exc"] and "ValueError: the fit's reason" in first["exc"]
    assert second["exc"] == "Traceback: w"
    assert "exc" not in third and "test_json_format_keeps_the_traceback" in third["stack"]


@pytest.mark.parametrize(
    ("argv", "level", "fmt"),
    [
        (["serve", "--log-level=DEBUG"], "DEBUG", "text"),  # a Deployment's args: [serve, ...]
        (["serve", "--log-format", "json", "--log-level", "warning"], "WARNING", "json"),
        (["--log-level", "ERROR", "serve"], "ERROR", "text"),  # before the command, as ever
        (["--log-level", "ERROR", "serve", "--log-level", "DEBUG"], "DEBUG", "text"),
        (["explain", "ns/name", "--log", "d.jsonl", "--log-level", "debug"], "DEBUG", "text"),
        (["retrain", "--store", "/m", "--log-format=json"], "INFO", "json"),
    ],
)
def test_the_log_flags_are_taken_after_the_command_too(
    argv: list[str], level: str, fmt: str
) -> None:
    # `args: ["serve", "--log-level=DEBUG"]` crash-looped on "unrecognized arguments".
    args = cli.build_parser().parse_args(argv)
    assert (args.log_level, args.log_format) == (level, fmt)


def test_a_log_flag_after_the_command_does_not_hide_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SCALER_LOG_FORMAT", "json")
    args = cli.build_parser().parse_args(["serve", "--log-level", "DEBUG"])
    assert (args.log_level, args.log_format) == ("DEBUG", "json")
