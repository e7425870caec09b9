"""The model registry: versioned JSON artefacts, atomic writes, champion/challenger promotion
only on a better latest backtest, and the last good model kept on any failure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from models import artefact
from models.base import DAY, Series
from models.registry import Registry, RegistryError
from tests.contract.synthetic import load

TARGET = "gpu/llm-serve"
HISTORY = load(15, seed=7)


def fitted(kind: str, history: Series = HISTORY) -> dict[str, Any]:
    return artefact.fit(kind, history, 4)


def offer(registry: Registry, data: dict[str, Any], history: Series = HISTORY) -> Any:
    return registry.offer(TARGET, data, history=history, steps=4)


def test_the_first_good_artefact_becomes_champion(tmp_path: Path) -> None:
    registry = Registry(tmp_path)
    result = offer(registry, fitted("seasonal"))
    assert result.promoted and result.version == 1
    found = registry.champion(TARGET)
    assert found is not None and found[0] == 1 and found[1].kind == "seasonal"
    assert (tmp_path / "gpu__llm-serve" / "v000001.json").is_file()


def test_a_challenger_that_does_worse_is_stored_but_not_promoted(tmp_path: Path) -> None:
    registry = Registry(tmp_path)
    offer(registry, fitted("seasonal"))
    worse = fitted("seasonal")
    worse["scores"]["pinball"] = 1e9
    result = offer(registry, worse)
    assert not result.promoted and result.version == 2
    assert result.champion_loss < result.challenger_loss
    assert registry.champion_version(TARGET) == 1
    assert registry.versions(TARGET) == [1, 2]


def test_a_challenger_that_beats_the_champion_on_the_latest_week_is_promoted(
    tmp_path: Path,
) -> None:
    registry = Registry(tmp_path)
    offer(registry, fitted("seasonal", HISTORY.until(HISTORY.start + 8 * DAY)))
    values = HISTORY.values.copy()
    values[-3 * 288 :] *= 3  # the load tripled: the old champion is now badly off
    history = Series(HISTORY.start, HISTORY.step, values)
    result = offer(registry, fitted("seasonal", history), history)
    assert result.promoted, result.reason
    assert registry.champion_version(TARGET) == 2


def test_a_corrupt_challenger_is_refused_and_the_champion_stays(tmp_path: Path) -> None:
    registry = Registry(tmp_path)
    offer(registry, fitted("seasonal"))
    broken = fitted("seasonal")
    broken["params"]["profile"] = "not numbers"
    result = offer(registry, broken)
    assert not result.promoted and result.version is None
    assert "challenger refused" in result.reason
    assert registry.champion_version(TARGET) == 1 and registry.versions(TARGET) == [1]


def test_a_champion_file_corrupted_on_disk_falls_back_to_the_last_good_version(
    tmp_path: Path,
) -> None:
    registry = Registry(tmp_path)
    offer(registry, fitted("seasonal"))
    better = fitted("seasonal")
    better["scores"]["pinball"] = 0.0
    offer(registry, better)
    assert registry.champion_version(TARGET) == 2
    (registry.folder(TARGET) / "v000002.json").write_text('{"format": 2, "kind": "seas')
    found = registry.champion(TARGET)
    assert found is not None and found[0] == 1


def test_writes_are_atomic_and_leave_no_temporary_files(tmp_path: Path) -> None:
    registry = Registry(tmp_path)
    offer(registry, fitted("naive"))
    names = sorted(p.name for p in registry.folder(TARGET).iterdir())
    assert names == ["champion.json", "v000001.json"]
    assert json.loads((registry.folder(TARGET) / "champion.json").read_text())["version"] == 1


def test_a_failed_write_is_a_registry_error_and_the_champion_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = Registry(tmp_path)
    offer(registry, fitted("naive"))
    better = fitted("naive")
    better["scores"]["pinball"] = 0.0

    def disk_full(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("models.registry.os.replace", disk_full)
    with pytest.raises(RegistryError, match="last good model stays"):
        offer(registry, better)
    monkeypatch.undo()
    assert registry.champion_version(TARGET) == 1
    assert sorted(p.name for p in registry.folder(TARGET).iterdir()) == [
        "champion.json",
        "v000001.json",
    ]


def test_an_artefact_with_nan_cannot_be_written(tmp_path: Path) -> None:
    registry = Registry(tmp_path)
    data = fitted("naive")
    data["params"]["sigma"] = float(np.nan)
    with pytest.raises(RegistryError):
        registry.save(TARGET, data)
    assert registry.versions(TARGET) == []
