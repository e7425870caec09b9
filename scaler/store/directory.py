"""The directory backend: the default model store, a PVC in a cluster.

Layout: ROOT/<key slug>/key.json (the key, for `keys()`), v000001.json, v000002.json, ... (one
version each: {"version", "key", "meta", "artefact"}), champion.json ({"version": n}),
promoted.json (the versions promotions made champion: what the fallbacks choose from) and
retrain.json (the retrain job's last success and failure, for serve's gauges), and serving
checkpoints c000002-001764633600.json (version, epoch seconds: scaler/serving/checkpoints.py).
Every file is written to a temporary file in the same directory, fsynced, moved into place with
os.replace, and the directory is fsynced: after a crash (SIGKILL, power loss) a reader finds the
old file or the new one, never half of one. Writers of one key (replicas, the retrain job)
serialise on an flock of ROOT/<slug>/.lock, so version numbers never collide and `promote` is a
true compare-and-set; readers take no lock. flock needs a filesystem that honours it across the
writers (a local disk or a ReadWriteOnce PVC; NFS only with working lock support).

Must not: judge models (the retrain job does), or read anything outside ROOT.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scaler.store import base
from scaler.store.base import ArtefactRejected, Stored, StoreError, StoreKey

logger = logging.getLogger(__name__)

_VERSION = re.compile(r"v(\d{6,})\.json")
_CHECKPOINT = re.compile(r"c(\d{6,})-(\d{12,})\.json")
PROMOTED = "promoted.json"
"""The versions promotions made champion ({"versions": [...]}): what the fallbacks choose from."""
RETRAIN = "retrain.json"
"""The retrain job's last outcome for the key: {"success_at", "failure_at", "reason", "key"}."""
STALE_TEMP_SECONDS = 3600.0
"""A temporary file this old was left by a killed writer (a write takes well under a second)."""


class DirectoryStore:
    """base.ModelStore over one directory."""

    def __init__(self, root: Path, *, keep: int = base.DEFAULT_KEEP) -> None:
        self.root = root
        self.keep = base.check_keep(keep)

    def __repr__(self) -> str:
        return f"DirectoryStore({str(self.root)!r})"

    def put(self, key: StoreKey, data: dict[str, Any], meta: dict[str, Any] | None = None) -> int:
        data = base.validated(key, None, data)
        folder = self._folder(key)
        with self._locked(key):
            if not (folder / "key.json").exists():
                _write_json(folder / "key.json", key.to_dict(), key)
            version = base.next_version(self.versions(key), self.champion_version(key))
            record = {
                "version": version,
                "key": key.to_dict(),
                "meta": meta or {},
                "artefact": data,
            }
            _write_json(folder / f"v{version:06d}.json", record, key)
            self._prune(key)
        logger.info("%s: stored v%d in %s", key, version, self.root)
        return version

    def get(self, key: StoreKey, version: int) -> Stored:
        path = self._folder(key) / f"v{version:06d}.json"
        try:
            record = json.loads(path.read_text())
        except FileNotFoundError:
            raise StoreError(f"{key} v{version}: no such version in {self.root}") from None
        except (OSError, ValueError) as exc:
            raise ArtefactRejected(key, version, f"{path} is not readable JSON ({exc})") from exc
        if not isinstance(record, dict) or record.get("version") != version:
            raise ArtefactRejected(key, version, f"{path} is not a stored version record")
        meta = record.get("meta")
        return Stored(
            key=key,
            version=version,
            artefact=base.validated(key, version, record.get("artefact")),
            meta=dict(meta) if isinstance(meta, dict) else {},
        )

    def versions(self, key: StoreKey) -> list[int]:
        try:
            names = os.listdir(self._folder(key))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StoreError(f"{key}: cannot list {self._folder(key)} ({exc})") from exc
        return sorted(int(m.group(1)) for m in map(_VERSION.fullmatch, names) if m)

    def champion_version(self, key: StoreKey) -> int | None:
        return self._champion_below(key, None)

    def _champion_below(self, key: StoreKey, below: int | None) -> int | None:
        """The pointer's version; when it is damaged, the newest version older than `below`."""
        path = self._folder(key) / "champion.json"
        try:
            return int(json.loads(path.read_text())["version"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            return base.damaged_pointer(self, key, str(path), repr(exc), below=below)

    def champion(self, key: StoreKey) -> Stored | None:
        # A file that cannot be read is as bad as a rejected one: fall back to an older version.
        return base.last_good(self, key, skip=StoreError)

    def promote(self, key: StoreKey, version: int, *, expected: int | None) -> bool:
        self.get(key, version)  # ArtefactRejected before the pointer moves
        with self._locked(key):
            current = self._champion_below(key, version)
            if current != expected:
                logger.info(
                    "%s: v%d not promoted, %s", key, version, base.champion_words(current, now=True)
                )
                return False
            pointer = {"version": version, "previous": current, "promoted_at": time.time()}
            _write_json(self._folder(key) / "champion.json", pointer, key)
            # After the pointer: a writer killed in between leaves its champion out of the
            # record, so a fallback takes an older champion, never a version nobody promoted.
            history = base.promotion_history(self.promoted(key), current, version)
            _write_json(self._folder(key) / PROMOTED, {"versions": history}, key)
            self._prune(key)
        logger.info("%s: v%d is champion (%s)", key, version, base.champion_words(current))
        return True

    def discard(self, key: StoreKey, version: int) -> bool:
        path = self._folder(key) / f"v{version:06d}.json"
        with self._locked(key):
            if self.champion_version(key) == version:
                return False
            try:
                path.unlink(missing_ok=True)
                _fsync_dir(path.parent)
            except OSError as exc:
                raise StoreError(f"{key} v{version}: cannot remove {path} ({exc})") from exc
        logger.info("%s: v%d removed: its promotion lost", key, version)
        return True

    def promoted(self, key: StoreKey) -> list[int] | None:
        record = _read_json(self._folder(key) / PROMOTED)
        return base.parse_promoted(record.get("versions")) if record is not None else None

    def keys(self) -> list[StoreKey]:
        found = []
        for path in sorted(self.root.glob("*/key.json")):
            try:
                found.append(StoreKey.from_dict(json.loads(path.read_text())))
            except (OSError, ValueError, StoreError) as exc:
                logger.warning("%s: unreadable store key (%s)", path, exc)
        return found

    def statuses(self) -> dict[StoreKey, base.Status]:
        found: dict[StoreKey, base.Status] = {}
        try:
            folders = sorted(p for p in self.root.iterdir() if p.is_dir())
        except FileNotFoundError:
            return found
        except OSError as exc:
            raise StoreError(f"model store {self.root}: cannot list it ({exc})") from exc
        for folder in folders:
            record = _read_json(folder / RETRAIN)
            key_data = _read_json(folder / "key.json") or (record or {}).get("key")
            try:
                key = StoreKey.from_dict(key_data)
            except StoreError:
                continue  # not a key's folder (or its key.json is being written)
            found[key] = base.status_from(self.champion_version(key), record)
        return found

    def record_retrain(self, key: StoreKey, *, ok: bool, at: float, reason: str) -> None:
        with self._locked(key):
            old = base.status_from(None, _read_json(self._folder(key) / RETRAIN))
            record = base.Status.retrain_record(old, ok=ok, at=at, reason=reason)
            _write_json(self._folder(key) / RETRAIN, record | {"key": key.to_dict()}, key)

    def put_checkpoint(self, key: StoreKey, version: int, at: int, data: dict[str, Any]) -> bool:
        path = self._folder(key) / _checkpoint_name(version, at)
        record = {"key": key.to_dict(), "version": version, "at": at, "checkpoint": data}
        with self._locked(key):  # exclusive: the name is checked and written under the lock
            if path.exists():
                return False
            _write_json(path, record, key)
            kept = self._checkpoints(key)
            for old in kept[: -base.CHECKPOINTS_KEPT]:
                (self._folder(key) / _checkpoint_name(*old)).unlink(missing_ok=True)
        return True

    def checkpoint(self, key: StoreKey, version: int) -> dict[str, Any] | None:
        mine = [c for c in self._checkpoints(key) if c[0] == version]
        if not mine:
            return None
        path = self._folder(key) / _checkpoint_name(*mine[-1])
        try:
            record = json.loads(path.read_text())
        except FileNotFoundError:  # pruned by a newer one just now: read that next time
            return None
        except (OSError, ValueError) as exc:
            raise StoreError(f"{key} v{version}: checkpoint {path} unreadable ({exc})") from exc
        data = record.get("checkpoint") if isinstance(record, dict) else None
        if not isinstance(data, dict) or record.get("version") != version:
            raise StoreError(f"{key} v{version}: {path} is not a checkpoint record")
        return data

    def _checkpoints(self, key: StoreKey) -> list[tuple[int, int]]:
        """(version, at) of every checkpoint kept, oldest first."""
        try:
            names = os.listdir(self._folder(key))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StoreError(f"{key}: cannot list {self._folder(key)} ({exc})") from exc
        found = (m for m in map(_CHECKPOINT.fullmatch, names) if m)
        return sorted(((int(m.group(1)), int(m.group(2))) for m in found), key=lambda c: c[1])

    def _folder(self, key: StoreKey) -> Path:
        return self.root / key.slug

    def _prune(self, key: StoreKey) -> None:
        """Called under the lock: drop versions past the newest `keep`, never the champion."""
        champion = self.champion_version(key)
        for version in base.to_prune(self.versions(key), keep=self.keep, champion=champion):
            (self._folder(key) / f"v{version:06d}.json").unlink(missing_ok=True)
        for temp in self._folder(key).glob(".*.tmp"):
            with contextlib.suppress(OSError):
                if time.time() - temp.stat().st_mtime > STALE_TEMP_SECONDS:
                    temp.unlink()

    @contextlib.contextmanager
    def _locked(self, key: StoreKey) -> Iterator[None]:
        folder = self._folder(key)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            handle = open(folder / ".lock", "a+")  # noqa: SIM115 - held for the block
        except OSError as exc:
            raise StoreError(
                f"{key}: cannot write under {folder} ({exc}); check the volume"
            ) from exc
        with handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _checkpoint_name(version: int, at: int) -> str:
    return f"c{version:06d}-{at:012d}.json"


def _read_json(path: Path) -> dict[str, Any] | None:
    """A small JSON object, or None when missing or unreadable."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_json(path: Path, data: dict[str, Any], key: StoreKey) -> None:
    """Atomically: temporary file in the same directory, fsync, os.replace, fsync the directory."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as handle:
                json.dump(data, handle, allow_nan=False, separators=(",", ":"))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        _fsync_dir(path.parent)
    except (OSError, ValueError) as exc:
        raise StoreError(
            f"{key}: could not write {path} ({exc}); the last good model stays"
        ) from exc


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
