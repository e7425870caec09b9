"""The directory model store: versions, the champion pointer as a compare-and-set, pruning, and
damaged artefacts rejected while the last good one stays in use."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest

from scaler.errors import ConfigError
from scaler.store.base import ArtefactRejected, Status, StoreError, StoreKey
from scaler.store.directory import DirectoryStore
from tests.store_artefacts import fitted, promoted_twice

KEY = StoreKey("gpu", "llm-serve", "s0-llm")


def test_a_stored_version_reads_back_as_written_with_its_meta(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    version = store.put(KEY, fitted(), {"reason": "first fit"})
    got = store.get(KEY, version)
    assert (got.version, got.artefact, got.meta) == (version, fitted(), {"reason": "first fit"})
    assert store.keys() == [KEY]


def test_a_new_version_is_not_champion_until_promoted(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    version = store.put(KEY, fitted())
    assert store.champion(KEY) is None
    assert store.promote(KEY, version, expected=None)
    champion = store.champion(KEY)
    assert champion is not None and champion.version == version
    assert store.champion_version(KEY) == version


def test_promote_is_compare_and_set_so_the_first_writer_wins(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    first, second = store.put(KEY, fitted(0)), store.put(KEY, fitted(1))
    assert store.promote(KEY, first, expected=None)
    assert not store.promote(KEY, second, expected=None)
    assert store.champion_version(KEY) == first
    assert store.promote(KEY, second, expected=first)


def test_the_log_of_a_first_promotion_says_there_was_no_champion(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = DirectoryStore(tmp_path)
    caplog.set_level("INFO", logger="scaler.store")
    first = store.put(KEY, fitted(0))
    assert store.promote(KEY, first, expected=None)
    assert not store.promote(KEY, store.put(KEY, fitted(1)), expected=7)
    assert "v1 is champion (there was no champion)" in caplog.text
    assert "v2 not promoted, champion is v1 now" in caplog.text
    assert "vNone" not in caplog.text


def test_a_keep_of_no_version_names_the_flag(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--keep 0 \(env SCALER_KEEP\)"):
        DirectoryStore(tmp_path, keep=0)


def test_racing_writers_get_distinct_versions_and_one_champion(tmp_path: Path) -> None:
    stores = [DirectoryStore(tmp_path) for _ in range(4)]
    won: list[bool] = []

    def race(store: DirectoryStore, seed: int) -> None:
        won.append(store.promote(KEY, store.put(KEY, fitted(seed % 2)), expected=None))

    threads = [threading.Thread(target=race, args=(s, i)) for i, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(won) == [False, False, False, True]
    assert stores[0].versions(KEY) == [1, 2, 3, 4]


def test_only_the_last_versions_are_kept_and_never_the_champion_is_dropped(
    tmp_path: Path,
) -> None:
    store = DirectoryStore(tmp_path, keep=2)
    store.promote(KEY, store.put(KEY, fitted()), expected=None)
    for _ in range(4):
        store.put(KEY, fitted())
    assert store.versions(KEY) == [1, 4, 5]


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text[: len(text) // 2],
        lambda text: text.replace('"format":', '"formot":'),
        lambda text: "",
    ],
    ids=["truncated", "incompatible", "empty"],
)
def test_a_damaged_champion_is_skipped_and_the_last_good_version_serves(
    tmp_path: Path, damage: object
) -> None:
    store = DirectoryStore(tmp_path)
    good, bad = promoted_twice(store, KEY)
    path = tmp_path / KEY.slug / f"v{bad:06d}.json"
    path.write_text(damage(path.read_text()))  # type: ignore[operator]
    with pytest.raises(ArtefactRejected, match=f"{KEY} v{bad}: artefact rejected"):
        store.get(KEY, bad)
    champion = store.champion(KEY)
    assert champion is not None and champion.version == good


def test_an_artefact_that_does_not_load_is_never_stored(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    broken = fitted() | {"format": "something-else"}
    with pytest.raises(ArtefactRejected, match="refit"):
        store.put(KEY, broken)
    assert store.versions(KEY) == []


def test_promoting_a_damaged_version_leaves_the_champion_alone(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    good, bad = store.put(KEY, fitted(0)), store.put(KEY, fitted(1))
    store.promote(KEY, good, expected=None)
    (tmp_path / KEY.slug / f"v{bad:06d}.json").write_text("{")
    with pytest.raises(ArtefactRejected):
        store.promote(KEY, bad, expected=good)
    assert store.champion_version(KEY) == good


def test_keys_with_unsafe_characters_get_distinct_safe_names() -> None:
    a, b = StoreKey("gpu", "LLM serve", "m"), StoreKey("gpu", "llm-serve", "m")
    assert a.slug != b.slug
    assert re.fullmatch(r"[a-z0-9.-]+", a.slug)
    assert len(StoreKey("n" * 253, "x" * 253, "m" * 253).slug) <= 180


@pytest.mark.parametrize("part", ["", "a/b", "x" * 254, "tab\there"])
def test_a_key_part_that_cannot_name_a_model_is_refused(part: str) -> None:
    with pytest.raises(ConfigError, match="model store key namespace"):
        StoreKey(part, "name", "metric")


def test_the_champion_pointer_file_holds_the_version(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    store.promote(KEY, store.put(KEY, fitted()), expected=None)
    assert json.loads((tmp_path / KEY.slug / "champion.json").read_text())["version"] == 1


def test_statuses_give_every_champion_and_the_last_retrain_success_and_failure(
    tmp_path: Path,
) -> None:
    store = DirectoryStore(tmp_path / "models")
    assert store.statuses() == {}
    other = StoreKey("gpu", "never-fitted", "s0-x")
    store.promote(KEY, store.put(KEY, fitted()), expected=None)
    store.record_retrain(KEY, ok=True, at=100.0, reason="kept v1")
    store.record_retrain(KEY, ok=False, at=200.0, reason="Prometheus unreachable")
    store.record_retrain(other, ok=False, at=300.0, reason="no data")
    statuses = store.statuses()
    assert statuses[KEY] == Status(1, 100.0, 200.0, "Prometheus unreachable")
    assert statuses[other] == Status(None, None, 300.0, "no data")
    assert store.keys() == [KEY]  # a failed target has no version
    store.record_retrain(KEY, ok=True, at=400.0, reason="promoted v2")
    assert store.statuses()[KEY].retrain_success == 400.0
    assert store.statuses()[KEY].retrain_failure == 200.0  # kept: the alert compares the two
    (tmp_path / "models" / KEY.slug / "retrain.json").write_text("{not json")
    assert store.statuses()[KEY] == Status(1)  # a damaged record costs the gauges only


def test_a_failed_write_is_a_store_error_and_the_champion_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = DirectoryStore(tmp_path)
    good = store.put(KEY, fitted(0))
    store.promote(KEY, good, expected=None)

    def disk_full(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("scaler.store.directory.os.replace", disk_full)
    with pytest.raises(StoreError, match="No space left"):
        store.put(KEY, fitted(1))
    monkeypatch.undo()
    assert store.champion_version(KEY) == good and store.versions(KEY) == [good]
    assert not list((tmp_path / KEY.slug).glob(".*.tmp"))  # nothing half-written left


def test_an_artefact_with_a_nan_is_never_stored(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    data = fitted(0) | {"scores": {**fitted(0)["scores"], "pinball": float("nan")}}
    with pytest.raises(StoreError):
        store.put(KEY, data)
    assert store.versions(KEY) == []


@pytest.mark.parametrize("pointer", ['{"vers', "", '{"version": "x"}', "[1]"])
def test_a_damaged_pointer_names_the_newest_version_and_the_next_promotion_repairs_it(
    tmp_path: Path, pointer: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = DirectoryStore(tmp_path)
    _, second = promoted_twice(store, KEY)
    path = tmp_path / KEY.slug / "champion.json"
    path.write_text(pointer)
    assert store.champion_version(KEY) == second
    champion = store.champion(KEY)
    assert champion is not None and champion.version == second
    assert f"champion pointer {path} is damaged" in caplog.text
    assert "until a promotion rewrites the pointer" in caplog.text
    # what `scaler retrain` does: read the pointer, store the challenger, promote against it
    held = store.champion_version(KEY)
    third = store.put(KEY, fitted(0))
    assert store.promote(KEY, third, expected=held)
    assert json.loads(path.read_text())["previous"] == second
    assert store.champion_version(KEY) == third


def test_a_version_number_is_never_reused_when_the_champion_file_was_deleted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = DirectoryStore(tmp_path)
    first = store.put(KEY, fitted(0))
    store.promote(KEY, first, expected=None)
    (tmp_path / KEY.slug / f"v{first:06d}.json").unlink()
    assert store.champion(KEY) is None
    assert f"names v{first}, which is not in the store" in caplog.text
    assert store.put(KEY, fitted(1)) == first + 1


def test_a_version_whose_promotion_lost_is_discarded_but_never_the_champion(
    tmp_path: Path,
) -> None:
    store = DirectoryStore(tmp_path)
    winner, loser = store.put(KEY, fitted(0)), store.put(KEY, fitted(1))
    assert store.promote(KEY, winner, expected=None)
    assert not store.promote(KEY, loser, expected=None)
    assert store.discard(KEY, loser) and store.versions(KEY) == [winner]
    assert not store.discard(KEY, winner) and store.versions(KEY) == [winner]


def test_a_fallback_takes_a_version_once_promoted_never_one_a_writer_left_unpromoted(
    tmp_path: Path,
) -> None:
    """A writer killed between put and promote leaves a version nobody chose: neither a damaged
    pointer nor a damaged champion may make it the one served."""
    store = DirectoryStore(tmp_path)
    _, second = promoted_twice(store, KEY)
    abandoned = store.put(KEY, fitted(0))  # killed before its promote
    folder = tmp_path / KEY.slug
    (folder / "champion.json").write_text("{damaged")
    assert store.champion_version(KEY) == second != abandoned
    fourth = store.put(KEY, fitted(1))
    assert store.promote(KEY, fourth, expected=second)  # the pointer is repaired
    (folder / f"v{fourth:06d}.json").write_text("{truncated")
    champion = store.champion(KEY)
    assert champion is not None and champion.version == second
