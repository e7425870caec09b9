"""The fitter's flags are bounded, and a bad value is refused naming the flag and the range."""

from __future__ import annotations

import pytest

from scaler import cli, serve_flags
from scaler.settings import Settings


def serve_settings(*flags: str) -> Settings:
    return serve_flags.settings_from(cli.build_parser().parse_args(["serve", *flags]))


def test_fit_memory_and_timeout_reach_the_engine_settings() -> None:
    engine = serve_settings("--fit-memory", "512Mi", "--fit-timeout", "2m").engine
    assert (engine.fit_memory, engine.fit_timeout) == (512 * 2**20, 120.0)
    assert serve_settings("--fit-memory", "0").engine.fit_memory == 0


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--fit-memory", "2GB", "is not a size; use e.g. 2Gi"),
        ("--fit-memory", "1Mi", "outside [256Mi, 1Ti]"),
        ("--fit-timeout", "999999d", "outside [10s, 1d]"),
        ("--fit-workers", "1000", "outside [0, 64]"),
        ("--fit-workers", "４", "is not a whole number"),
        ("--ledger-scrape-interval", "0s", "outside [1s, 10m]"),
    ],
)
def test_an_out_of_range_fitter_flag_is_refused_by_name(
    flag: str, value: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        serve_settings(flag, value)
    err = capsys.readouterr().err
    assert flag in err and says in err
