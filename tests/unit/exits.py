"""How a command ended, for tests that feed it bad flags or files."""

from __future__ import annotations

from scaler import cli


def exit_code(argv: list[str]) -> int | str | None:
    """`cli.main`'s exit code, whether argparse refused a flag (SystemExit) or the run did."""
    try:
        return cli.main(argv)
    except SystemExit as exit_:
        return exit_.code
