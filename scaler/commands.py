"""What every `scaler` command shares on its command line: the global flags (--log-level,
--log-format), taken before the command's name or after it.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any


class Commands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """The subcommands' action: every command's parser takes the `common` flags too (so that
    `scaler serve --log-level DEBUG` works, as `args: ["serve", "--log-level=DEBUG"]` in a
    Deployment is written)."""

    common: Sequence[argparse.ArgumentParser] = ()

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        kwargs["parents"] = [*kwargs.get("parents", ()), *self.common]
        parser: argparse.ArgumentParser = super().add_parser(name, **kwargs)
        return parser


def commands_with(*common: argparse.ArgumentParser) -> type[Commands]:
    """`add_subparsers(action=...)`: Commands whose parsers all take `common`'s flags."""
    return type("Commands", (Commands,), {"common": common})
