"""`scaler serve --keep`: the versions the store keeps per target, as `scaler retrain --keep`.
Without it serve pruned to 5 on every model it stored, undoing a retrain job's `--keep 10`."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaler.errors import ConfigError
from scaler.store import location
from scaler.store.directory import DirectoryStore
from tests.unit.exits import exit_code
from tests.unit.test_checkpoint_flag import serve_settings
from tests.unit.test_retrain_parts import retrain_argv


def test_keep_reaches_the_store_serve_opens(tmp_path: Path) -> None:
    assert serve_settings().store_keep == 5
    settings = serve_settings("--store", str(tmp_path), "--keep", "10")
    assert settings.store is not None
    store = location.open_store(settings.store, keep=settings.store_keep)
    assert isinstance(store, DirectoryStore) and store.keep == 10


def test_keep_reads_scaler_keep_as_retrain_does(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCALER_KEEP", "8")
    assert serve_settings().store_keep == 8


def test_a_keep_of_no_version_is_refused() -> None:
    with pytest.raises(ConfigError, match="--keep 0"):
        serve_settings("--keep", "0")


def test_retrain_refuses_a_keep_of_no_version_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert exit_code(retrain_argv(tmp_path, "--keep", "0")) == 2
    assert "--keep 0 (env SCALER_KEEP)" in capsys.readouterr().err


def test_a_store_directory_that_cannot_be_created_is_refused_as_serve_opens_it(
    tmp_path: Path,
) -> None:
    """serve --store /proc/1/nope/models said SERVING and warned once per fit."""
    (tmp_path / "file").write_text("a file where a folder would be")
    with pytest.raises(ConfigError, match=r"--store .*/file/models: cannot create the directory"):
        location.open_store(str(tmp_path / "file" / "models"))
