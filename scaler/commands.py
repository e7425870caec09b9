"""What every `scaler` command shares on its command line: the global flags (--log-level,
--log-format), taken before the command's name or after it, and the SCALER_* variables its
flags read, so that a variable no flag of the running command reads is told at start-up.

The rule: flag `--tls-cert` reads SCALER_TLS_CERT (`variable`). cli.py's `env` reports each
name it is asked for to `READS.asked` while the parser is built; `Commands.add_parser` says
whose flags are being added, so the names are known per command, whichever module adds them.
Must not: read os.environ (cli.py hands the environment in).
"""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Mapping, Sequence
from typing import Any

PREFIX = "SCALER_"
GLOBAL = ""
"""The flags of no one command: --log-level and --log-format."""

ALIASES = {
    "SCALER_KUBECONFIG_FILE": "SCALER_KUBECONFIG",
    "SCALER_PROMETHEUS_HEADERS": "SCALER_PROMETHEUS_HEADER",
    "SCALER_PROMETHEUS_TRUSTED_URLS": "SCALER_PROMETHEUS_TRUSTED_URL",
}
"""Former names, read only when the rule's name (the value) is unset or empty: deployments
written before the flags followed the rule keep working."""

SERVICE_LINKS = re.compile(
    r"SCALER_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_[0-9]+_(TCP|UDP|SCTP)(_[A-Z]+)?)?)"
)
"""What Kubernetes puts in every pod's environment for a Service named `scaler` (service links):
no flag's, and no typo of the user's."""


def variable(flag: str) -> str:
    """The variable of `flag` by the rule: --tls-cert -> SCALER_TLS_CERT."""
    return PREFIX + flag.lstrip("-").upper().replace("-", "_")


class Reads:
    """The SCALER_* names asked for while a parser is built, by the command whose flags asked."""

    def __init__(self) -> None:
        self.by_command: dict[str, set[str]] = {}
        self.building = GLOBAL

    def reset(self) -> None:
        self.by_command.clear()
        self.building = GLOBAL

    def asked(self, name: str) -> None:
        self.by_command.setdefault(self.building, set()).add(PREFIX + name)

    def known(self, command: str) -> set[str]:
        """The names the flags of `command` (and the global ones) read."""
        return self.by_command.get(GLOBAL, set()) | self.by_command.get(command, set())

    def unread(self, command: str, environ: Mapping[str, str]) -> list[str]:
        """A warning for each SCALER_* variable of `environ` that no flag of `command` reads:
        a misspelt name (SCALER_PROMETHEUS_HEADRE) is otherwise silently without effect, and
        on Mimir or Cortex a tenant header not sent is every query failing."""
        known = self.known(command)
        return [
            self._warning(name, command, known, environ)
            for name in sorted(environ)
            if name.startswith(PREFIX) and name not in known and not SERVICE_LINKS.fullmatch(name)
        ]

    def _warning(self, name: str, command: str, known: set[str], environ: Mapping[str, str]) -> str:
        said = f"environment variable {name} is set, but no flag of `scaler {command}` reads it"
        rule = ALIASES.get(name, "")
        if rule in known and environ.get(rule):
            return f"{said}: {rule} is set too, and wins; unset one of them"
        others = [c for c, names in sorted(self.by_command.items()) if c and name in names]
        if others:
            readers = " and ".join(f"`scaler {c}`" for c in others)
            return f"{said} ({readers} {'does' if len(others) == 1 else 'do'})"
        by_suffix = {k.removeprefix(PREFIX): k for k in known}
        close = difflib.get_close_matches(name.removeprefix(PREFIX), by_suffix, n=1, cutoff=0.75)
        if close:
            return f"{said}; did you mean {by_suffix[close[0]]}?"
        return (
            f"{said}; a flag's variable is SCALER_ and the flag in capitals, - as _ "
            f"(--tls-cert: SCALER_TLS_CERT); `scaler {command} --help` lists them"
        )


READS = Reads()


class Commands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """The subcommands' action: every command's parser takes the `common` flags too (so that
    `scaler serve --log-level DEBUG` works, as `args: ["serve", "--log-level=DEBUG"]` in a
    Deployment is written), and the variables its flags read are recorded as its own."""

    common: Sequence[argparse.ArgumentParser] = ()

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        READS.building = name
        kwargs["parents"] = [*kwargs.get("parents", ()), *self.common]
        parser: argparse.ArgumentParser = super().add_parser(name, **kwargs)
        return parser


def commands_with(*common: argparse.ArgumentParser) -> type[Commands]:
    """`add_subparsers(action=...)`: Commands whose parsers all take `common`'s flags."""
    return type("Commands", (Commands,), {"common": common})
