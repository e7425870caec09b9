"""`--fit-input peaks|points` and `--peaks-every`: serve and retrain fit on the same bucket peaks
by default, sampled every 30 s whatever serve's decision step, and a bad value is refused
naming the flag."""

from __future__ import annotations

import argparse

import pytest

from scaler import cli, serve_flags
from scaler.errors import ConfigError
from scaler.sources import fit_input


def serve_peaks(*flags: str) -> float | None:
    args = cli.build_parser().parse_args(["serve", *flags])
    return serve_flags.settings_from(args).engine.history_peaks


def retrain_args(*flags: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(
        ["retrain", "--targets", "so.yaml", "--store", "store", *flags]
    )


def test_serve_fits_on_bucket_peaks_sampled_every_30s_by_default() -> None:
    assert serve_peaks() == 30.0
    assert serve_peaks("--step", "2s") == 30.0  # not 1.2 million points per 4 weeks
    assert serve_peaks("--step", "15s", "--peaks-every", "1m") == 60.0
    assert serve_peaks("--fit-input", "points") is None


def test_retrain_fits_on_the_same_peaks_as_serve_by_default() -> None:
    assert fit_input.resolution(retrain_args()) == 30.0
    assert fit_input.resolution(retrain_args("--peaks-every", "5m")) == 300.0
    assert fit_input.resolution(retrain_args("--fit-input", "points")) is None


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--fit-input", "mean"), "invalid choice: 'mean'"),
        (("--peaks-every", "0s"), "--peaks-every 0s is outside [1s, 1h]"),
        (("--peaks-every", "2h"), "outside [1s, 1h]"),
    ],
)
def test_a_bad_fit_input_flag_is_refused_by_name(
    flags: tuple[str, ...], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        serve_peaks(*flags)
    assert says in capsys.readouterr().err


def test_a_bad_fit_input_from_the_environment_names_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SCALER_FIT_INPUT", "mean")
    with pytest.raises(ConfigError, match="SCALER_FIT_INPUT"):
        serve_peaks()
