"""On/off flags that a SCALER_* variable may also turn on: `--kube-events`, or
SCALER_KUBE_EVENTS=true.

argparse's store_true takes its default as it is, so a misspelt value (`ture`) read as false and
left the feature silently off (mTLS not required, no Events). Here the variable's value goes
through a `type=`, as every other flag's SCALER_* default does: a value that is not a boolean
is a usage error (exit 2) naming the variable, the value and the accepted words. argparse
converts a default only for the subcommand that runs, so a bad variable of another command is
never read.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

TRUE = ("true", "1", "yes", "on")
FALSE = ("false", "0", "no", "off")


def boolean(variable: str) -> Callable[[str], bool]:
    """argparse `type=` for the value of `variable`: TRUE or FALSE in any case; empty is false."""

    def parse(text: str) -> bool:
        word = text.strip().lower()
        if word in TRUE:
            return True
        if word in FALSE or not word:
            return False
        raise argparse.ArgumentTypeError(
            f"{variable}={text!r} is not a boolean: use true or false (or 1/0, yes/no, on/off, "
            "in any case), or leave it empty for false"
        )

    return parse


class _Switch(argparse.Action):
    """store_true whose default is the variable's text, converted by `boolean` when the flag is
    not given."""

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str,
        *,
        variable: str,
        value: str | None,
        help: str | None = None,
    ) -> None:
        super().__init__(
            option_strings,
            dest,
            nargs=0,
            default=value or "",
            type=boolean(variable),
            help=help,
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, True)


def add(group: Any, flag: str, *, env: Callable[[str], str | None], name: str, help: str) -> None:
    """Add `flag`, also turned on by SCALER_`name` (read through cli's `env`)."""
    group.add_argument(flag, action=_Switch, variable=f"SCALER_{name}", value=env(name), help=help)
