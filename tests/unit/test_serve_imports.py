"""`scaler serve` starts without the offline subcommands' libraries: every replica pays its
imports at each start, and pandas alone was about a second of CPU of the warm start."""

from __future__ import annotations

import subprocess
import sys

PROBE = (
    "import sys\n"
    "from scaler import cli\n"
    "cli.build_parser(serve_only={only})\n"
    "print('pandas' in sys.modules)\n"
)


def pandas_imported(serve_only: bool) -> bool:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(only=serve_only)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return out.stdout.strip() == "True"


def test_the_serve_parser_imports_no_pandas_and_the_full_one_does() -> None:
    assert not pandas_imported(True)
    assert pandas_imported(False)  # the ablation: what every start paid before


def test_a_serve_command_line_parses_the_same_with_the_serve_only_parser() -> None:
    from scaler import cli

    argv = ["serve", "--step", "30s", "--warm-nice", "3", "--targets", "t.yaml"]
    full = vars(cli.build_parser().parse_args(argv))
    only = vars(cli.build_parser(serve_only=True).parse_args(argv))
    assert full == only and only["warm_nice"] == 3
