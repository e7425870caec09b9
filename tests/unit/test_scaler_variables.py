"""Every flag's SCALER_* variable follows the one rule (`--tls-cert`: SCALER_TLS_CERT), and a
SCALER_* variable no flag of the running command reads is told at start-up, naming the closest
known one: a misspelt or rule-breaking name used to be silently without effect (on Mimir, the
tenant header of SCALER_PROMETHEUS_HEADER was never sent)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from scaler import cli, commands
from scaler.sources import prometheus_flags

ROOT = Path(__file__).resolve().parents[2]


def parsers() -> dict[str, argparse.ArgumentParser]:
    """The top-level parser ("") and every command's."""
    parser = cli.build_parser()
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {"": parser, **sub.choices}


def test_every_flag_reads_the_variable_its_name_makes(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: set[str] = set()

    def sentinel(name: str, default: str | None = None) -> str:
        asked.add(name)
        return f"<{name}>"  # truthy: a former name behind `or` is never reached

    monkeypatch.setattr(cli, "env", sentinel)
    found: set[str] = set()
    wrong = []
    for command, parser in parsers().items():
        for action in parser._actions:
            if not action.option_strings or action.dest == "help":
                continue
            flag = action.option_strings[-1]
            rule = commands.variable(flag)
            read = {f"SCALER_{n}" for n in re.findall(r"<([A-Z0-9_]+)>", repr(action.default))}
            named = set(re.findall(r"SCALER_[A-Z0-9_]*[A-Z0-9]", action.help or ""))
            found |= read
            if read - {rule} or named - {rule}:
                wrong.append(f"scaler {command} {flag}: reads {read}, help names {named}")
    assert wrong == []
    assert {f"SCALER_{n}" for n in asked} <= found, "a variable read for no flag"


def test_every_variable_the_manifests_set_is_read_by_their_command() -> None:
    unread = []
    for path in sorted((ROOT / "deploy").rglob("*.yaml")):
        command = "retrain" if "retrain" in path.parts else "serve"
        set_here = re.findall(r"name: (SCALER_[A-Z0-9_]+)", path.read_text())
        cli.build_parser()
        environ = dict.fromkeys(set_here, "x")
        unread += [
            f"{path.relative_to(ROOT)}: {w}" for w in commands.READS.unread(command, environ)
        ]
    assert unread == []


@pytest.mark.parametrize("suffix", ["", "S"])
def test_the_tenant_header_and_trusted_urls_come_from_their_variables(
    suffix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rule's names, and the plural ones they had before, still read for compatibility.
    monkeypatch.setenv(f"SCALER_PROMETHEUS_HEADER{suffix}", "X-Scope-OrgID=team-a")
    monkeypatch.setenv(
        f"SCALER_PROMETHEUS_TRUSTED_URL{suffix}", "http://mimir:8080, http://thanos:9090"
    )
    for command in (["serve"], ["retrain", "--store", "/m"]):
        auth = prometheus_flags.auth_from(cli.build_parser().parse_args(command))
        assert auth.headers == (("X-Scope-OrgID", "team-a"),)
        assert auth.trusted == ("http://mimir:8080", "http://thanos:9090")


def test_the_rule_name_wins_over_the_former_one_and_the_former_is_told(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SCALER_PROMETHEUS_HEADER", "X-Scope-OrgID=new")
    monkeypatch.setenv("SCALER_PROMETHEUS_HEADERS", "X-Scope-OrgID=old")
    args = cli.build_parser(serve_only=True).parse_args(["serve"])
    assert prometheus_flags.auth_from(args).headers == (("X-Scope-OrgID", "new"),)
    (warning,) = commands.READS.unread("serve", {"SCALER_PROMETHEUS_HEADERS": "x"} | _env())
    assert "SCALER_PROMETHEUS_HEADER is set too, and wins" in warning


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k.startswith("SCALER_")}


@pytest.mark.parametrize(
    ("variable", "closest"),
    [
        ("SCALER_PROMETHEUS_HEADRE", "SCALER_PROMETHEUS_HEADER"),
        ("SCALER_LOGLEVEL", "SCALER_LOG_LEVEL"),
        ("SCALER_TLS_REQUIRE_CLIENT_CERTS", "SCALER_TLS_REQUIRE_CLIENT_CERT"),
    ],
)
def test_a_variable_no_flag_reads_is_warned_naming_the_closest_known_one(
    variable: str, closest: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in _env():
        monkeypatch.delenv(name)
    monkeypatch.setenv(variable, "x")
    cli.build_parser(serve_only=True)
    (warning,) = commands.READS.unread("serve", _env())
    assert warning == (
        f"environment variable {variable} is set, but no flag of `scaler serve` reads it; "
        f"did you mean {closest}?"
    )


def test_the_warning_is_logged_at_start_up(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for name in _env():
        monkeypatch.delenv(name)
    monkeypatch.setenv("SCALER_LOG_LEVL", "DEBUG")
    monkeypatch.setenv("SCALER_TARGETS", "so.yaml")  # serve's, not explain's
    monkeypatch.setenv("SCALER_SERVICE_HOST", "10.0.0.1")  # Kubernetes' for a Service `scaler`
    cli.main(["explain", "ns/name", "--log", str(tmp_path / "none.jsonl")])
    err = capsys.readouterr().err
    assert "SCALER_LOG_LEVL is set, but no flag of `scaler explain` reads it; did you mean " in err
    assert (
        "SCALER_TARGETS is set, but no flag of `scaler explain` reads it (`scaler retrain` and "
        "`scaler serve` do)" in err
    )
    assert "SCALER_SERVICE_HOST" not in err


def test_variables_the_command_reads_are_not_warned(monkeypatch: pytest.MonkeyPatch) -> None:
    environ = {
        "SCALER_LOG_FORMAT": "json",
        "SCALER_TLS_CERT": "/tls/tls.crt",
        "SCALER_PROMETHEUS_HEADER": "X-Scope-OrgID=a",
        "SCALER_KUBECONFIG": "/k",
    }
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    cli.build_parser(serve_only=True)
    assert commands.READS.unread("serve", environ) == []


def test_retrain_reads_its_targets_and_namespace_from_the_environment_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The help says every flag can be set as SCALER_<FLAG>; --targets and --namespace read none.
    monkeypatch.setenv("SCALER_TARGETS", "/so.yaml")
    monkeypatch.setenv("SCALER_NAMESPACE", "inference")
    args = cli.build_parser().parse_args(["retrain", "--store", "/m"])
    assert args.targets == Path("/so.yaml") and args.namespace == "inference"
