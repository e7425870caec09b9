"""`scaler serve --checkpoints` reaches the settings, defaults on, and refuses anything else."""

from __future__ import annotations

import pytest

from scaler import cli, serve_flags
from scaler.settings import Settings


def serve_settings(*flags: str) -> Settings:
    return serve_flags.settings_from(cli.build_parser().parse_args(["serve", *flags]))


def test_checkpoints_are_on_by_default_and_off_when_asked() -> None:
    assert serve_settings().checkpoints is True
    assert serve_settings("--checkpoints", "off").checkpoints is False


def test_a_checkpoints_value_other_than_on_or_off_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        serve_settings("--checkpoints", "hourly")
    assert "'hourly': use one of on, off" in capsys.readouterr().err
