"""Every `scaler` subcommand's --help says what each flag does and shows examples."""

from __future__ import annotations

import argparse

import pytest

from scaler import cli


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.mark.parametrize("name", sorted(subcommands()))
def test_every_flag_has_help(name: str) -> None:
    bare = [
        "/".join(a.option_strings) or a.dest
        for a in subcommands()[name]._actions
        if not a.help and a.help != argparse.SUPPRESS
    ]
    assert bare == [], f"scaler {name}: flags without help"


@pytest.mark.parametrize("name", sorted(subcommands()))
def test_every_subcommand_shows_examples_of_itself(name: str) -> None:
    epilog = subcommands()[name].epilog or ""
    assert "examples:\n" in epilog
    assert f"scaler {name}" in epilog


def test_the_help_points_only_at_docs_that_exist() -> None:
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for name, parser in subcommands().items():
        text = parser.format_help()
        for path in re.findall(r"\b(?:docs|deploy|scaler|models)/[\w./-]*\w", text):
            assert (root / path).exists(), f"scaler {name} --help names {path}"


@pytest.mark.parametrize("command", ["serve", "retrain"])
def test_kubeconfig_comes_from_scaler_kubeconfig_like_every_other_flag(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCALER_KUBECONFIG", "/etc/kube/config")
    needed = ["--store", "/models"] if command == "retrain" else []
    args = cli.build_parser().parse_args([command, *needed])
    assert str(args.kubeconfig) == "/etc/kube/config"


def test_serve_still_reads_the_former_scaler_kubeconfig_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SCALER_KUBECONFIG_FILE", "/old/config")
    assert str(cli.build_parser().parse_args(["serve"]).kubeconfig) == "/old/config"


def test_every_serve_flag_names_its_scaler_variable() -> None:
    unnamed = [
        a.option_strings[0]
        for a in subcommands()["serve"]._actions
        if a.option_strings and a.option_strings[0] != "-h" and "SCALER_" not in (a.help or "")
    ]
    assert unnamed == []


def test_the_top_level_help_shows_an_example_of_each_everyday_command() -> None:
    epilog = cli.build_parser().epilog or ""
    for command in ("demo", "backtest", "serve", "explain"):
        assert f"scaler {command}" in epilog


def test_every_retrain_flag_can_be_set_as_its_scaler_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in {
        "KEEP": "7",
        "HISTORY": "14d",
        "MODEL_STEP": "10m",
        "FIT_TIMEOUT": "5m",
        "JSON": "/tmp/summary.json",
    }.items():
        monkeypatch.setenv(f"SCALER_{name}", value)
    args = cli.build_parser().parse_args(["retrain", "--store", "/models"])
    assert (args.keep, args.history, args.model_step, args.fit_timeout) == (
        7,
        14 * 86400.0,
        600.0,
        300.0,
    )
    assert str(args.json) == "/tmp/summary.json"
    flagged = cli.build_parser().parse_args(["retrain", "--store", "/m", "--keep", "3"])
    assert flagged.keep == 3  # the flag wins over the variable
