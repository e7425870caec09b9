"""Flags and SCALER_* variables on input a stranger types: every bad value is an exit 2 naming
the flag, the bound and why, before any work starts (a minute of demo replay, a server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaler import cli, logsetup


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--log-level", "LOUD", "demo"], "--log-level: 'LOUD' is not a log level"),
        (["demo", "--steps", "0"], "--steps: '0': must be from 1 to 100000"),
        (["demo", "--steps", "-3"], "--steps: '-3'"),
        (["demo", "--seconds-per-step", "0"], "--seconds-per-step: '0': must be from 0.01"),
        (["demo", "--threshold", "0"], "(as the trigger's `threshold`)"),
        (["demo", "--lead-time", "0s"], "--lead-time: '0s': must be from 1s to 2h"),
        (["demo", "--horizon", "30d"], "--horizon: '30d': must be from 0s to 4h"),
        (["demo", "--out", "{tmp}"], "--out: {tmp} is a directory; name a file"),
        (["demo", "--out", "{tmp}/missing/demo.png"], "there is no directory {tmp}/missing"),
    ],
)
def test_a_bad_demo_flag_is_a_usage_error_naming_it(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main([a.format(tmp=tmp_path) for a in argv])
    assert exit_.value.code == 2
    assert message.format(tmp=tmp_path) in capsys.readouterr().err


def test_a_log_level_is_read_in_any_case() -> None:
    assert logsetup.log_level(" debug ") == "DEBUG"
    assert logsetup.log_level("Warning") == "WARNING"


@pytest.mark.parametrize(
    ("variable", "message"),
    [
        ("SCALER_LOG_FORMAT", "--log-format: 'garbage': use one of text, json"),
        ("SCALER_CHECKPOINTS", "--checkpoints: 'garbage': use one of on, off"),
        ("SCALER_PROMETHEUS_RETRIES", "--prometheus-retries: 'garbage': not a plain decimal"),
    ],
)
def test_a_bad_value_in_the_environment_is_refused_as_the_flag_would_be(
    variable: str, message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(variable, "garbage")
    with pytest.raises(SystemExit) as exit_:
        cli.build_parser().parse_args(["serve"])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        (
            "--decision-log-keep",
            "-1",
            "--decision-log-keep: -1 is outside [0, 1000]: it must be at least 0",
        ),
        ("--decision-log-keep", "1001", "it must be at most 1000"),
        ("--max-targets", "0", "--max-targets: 0 is outside [1, 100000]: it must be at least 1"),
    ],
)
def test_a_count_out_of_range_is_told_its_bound_even_when_negative(
    flag: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.build_parser().parse_args(["serve", flag, value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "not a whole number" not in err


SWITCHES = {
    "SCALER_KUBE_EVENTS": "kube_events",
    "SCALER_KUBE_POD_SELECTORS": "kube_pod_selectors",
    "SCALER_TLS_REQUIRE_CLIENT_CERT": "tls_require_client_cert",
    "SCALER_PROMETHEUS_INSECURE_SKIP_VERIFY": "prometheus_insecure_skip_verify",
}


@pytest.mark.parametrize("variable", sorted(SWITCHES))
def test_a_misspelt_boolean_variable_is_refused_not_read_as_false(
    variable: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # SCALER_TLS_REQUIRE_CLIENT_CERT=ture once served without mTLS, and said nothing.
    monkeypatch.setenv(variable, "ture")
    with pytest.raises(SystemExit) as exit_:
        cli.build_parser().parse_args(["serve"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"{variable}='ture' is not a boolean: use true or false (or 1/0, yes/no, on/off" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        *[("true", True), ("ON", True), (" Yes ", True), ("1", True)],
        *[("false", False), ("Off", False), ("no", False), ("0", False), ("", False)],
    ],
)
def test_a_boolean_variable_reads_the_usual_words_in_any_case(
    value: str, expected: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in SWITCHES:
        monkeypatch.setenv(variable, value)
    args = cli.build_parser().parse_args(["serve"])
    assert {getattr(args, dest) for dest in SWITCHES.values()} == {expected}
    flags = ["--kube-events", "--tls-require-client-cert", "--prometheus-insecure-skip-verify"]
    given = cli.build_parser().parse_args(["serve", *flags])
    assert given.kube_events and given.tls_require_client_cert
    assert given.prometheus_insecure_skip_verify


def test_a_bad_boolean_variable_of_serve_does_not_stop_another_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SCALER_KUBE_EVENTS", "ture")
    args = cli.build_parser().parse_args(["explain", "ns/name", "--log", "decisions.jsonl"])
    assert args.target == "ns/name"
