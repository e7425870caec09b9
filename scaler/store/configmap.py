"""The ConfigMap backend (`--store configmap:NAMESPACE`): models in Kubernetes ConfigMaps, for
clusters where the scaler has no shared volume.

Per key: one immutable ConfigMap per version, `scaler-model-<slug>-v000003`, holding the
artefact gzip-compressed in binaryData (artefacts compress about 5x; the API server refuses an
object past 1 MiB, so a version larger than MAX_BYTES is refused here with its size and the fix),
one pointer ConfigMap, `scaler-model-<slug>`, whose data names the champion, and, once the
retrain job has run for the key, `scaler-model-<slug>-retrain` with its last outcome. All carry
the labels below, so a version list is one label-selected LIST, and `statuses` (every pointer
and outcome, what serve polls) is one LIST for the whole store. Serving checkpoints
(scaler/serving/checkpoints.py) are immutable `scaler-model-<slug>-c000003-1764633600`, gzip in
binaryData like the versions, created once: a 409 means another replica wrote that hour first.
- put: the next version number is claimed by *creating* its ConfigMap; AlreadyExists (409) means
  another writer took it, so re-list and try the next, a bounded number of times.
- promote: compare-and-set on the pointer's resourceVersion; a 409 means another writer moved
  it, so re-read: still `expected`, try again; anything else, the other writer won. The pointer
  also lists the versions promotions made champion (`promoted`), what the fallbacks choose from.

Must not: import `kubernetes` (scaler/kube/configmaps.py is the adapter).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import time
from collections.abc import Iterator
from typing import Any

from scaler.kube.api import Conflict, KubeError
from scaler.kube.configmaps import ConfigMap, ConfigMaps
from scaler.store import base
from scaler.store.base import ArtefactRejected, Stored, StoreError, StoreKey

logger = logging.getLogger(__name__)

PREFIX = "scaler-model"
MAX_BYTES = 1_000_000
"""Largest compressed artefact plus metadata: under the API server's 1 MiB (1,048,576 bytes)
object limit with room for names, labels and annotations."""
ATTEMPTS = 8
"""Conflicts tolerated in one put or promote before giving up (each means another writer
succeeded, so the loop ends quickly unless dozens write the same key at once)."""
MANAGED_LABEL = "app.kubernetes.io/managed-by"
MANAGED = {MANAGED_LABEL: "predictive-gpu-scaler"}
ROLE, KEY = "scaler.store/role", "scaler.store/key"
RETRAIN_ROLE = "retrain"
"""Role of `scaler-model-<slug>-retrain`: the retrain job's last outcome for the key."""
ARTEFACT = "artefact.json.gz"
CHECKPOINT_ROLE, CHECKPOINT = "checkpoint", "checkpoint.json.gz"


class ConfigMapStore:
    """base.ModelStore over the ConfigMaps of one namespace."""

    def __init__(self, maps: ConfigMaps, *, keep: int = base.DEFAULT_KEEP) -> None:
        self.maps = maps
        self.keep = base.check_keep(keep)

    def __repr__(self) -> str:
        return f"ConfigMapStore(namespace={self.maps.namespace!r})"

    def put(self, key: StoreKey, data: dict[str, Any], meta: dict[str, Any] | None = None) -> int:
        data = base.validated(key, None, data)
        blob = gzip.compress(json.dumps(data, allow_nan=False).encode(), mtime=0)
        meta_text = json.dumps(meta or {}, allow_nan=False)
        size = len(blob) + len(meta_text)
        if size > MAX_BYTES:
            raise StoreError(
                f"{key}: artefact is {size} bytes compressed, past the {MAX_BYTES}-byte ConfigMap "
                "limit; use the directory store (--store DIR on a volume)"
            )
        for _ in range(ATTEMPTS):
            version = base.next_version(self.versions(key), self.champion_version(key))
            labels = self._labels(key, "version")
            record = {"version": str(version), "key": json.dumps(key.to_dict()), "meta": meta_text}
            cm = ConfigMap(
                _version_name(key, version),
                data=record,
                binary_data={ARTEFACT: blob},
                labels=labels,
                immutable=True,
            )
            try:
                with _as_store_error(key, version):
                    self.maps.create(cm)
            except _Taken:
                continue
            logger.info("%s: stored v%d in %r (%d bytes)", key, version, self, size)
            self._prune(key)
            return version
        raise StoreError(f"{key}: {ATTEMPTS} writers raced for the next version; retry later")

    def get(self, key: StoreKey, version: int) -> Stored:
        with _as_store_error(key, version):
            cm = self.maps.get(_version_name(key, version))
        if cm is None:
            raise StoreError(f"{key} v{version}: no such version in {self.maps.namespace}")
        try:
            data = json.loads(gzip.decompress(cm.binary_data[ARTEFACT]))
            meta = json.loads(cm.data.get("meta", "{}"))
        except (KeyError, OSError, EOFError, ValueError) as exc:
            raise ArtefactRejected(key, version, f"ConfigMap {cm.name} is damaged ({exc})") from exc
        return Stored(
            key=key,
            version=version,
            artefact=base.validated(key, version, data),
            meta=meta if isinstance(meta, dict) else {},
        )

    def versions(self, key: StoreKey) -> list[int]:
        with _as_store_error(key, None):
            found = self.maps.list(_selector(key, "version"))
        return sorted(int(v) for cm in found if (v := cm.data.get("version", "")).isdigit())

    def champion_version(self, key: StoreKey) -> int | None:
        with _as_store_error(key, None):
            pointer = self.maps.get(_pointer_name(key))
        return self._champion_in(key, pointer)

    def champion(self, key: StoreKey) -> Stored | None:
        # An API outage is not a bad artefact: only a rejected one falls back to an older version.
        return base.last_good(self, key, skip=ArtefactRejected)

    def promote(self, key: StoreKey, version: int, *, expected: int | None) -> bool:
        self.get(key, version)  # ArtefactRejected before the pointer moves
        for _ in range(ATTEMPTS):
            with _as_store_error(key, version):
                pointer = self.maps.get(_pointer_name(key))
            current = self._champion_in(key, pointer, below=version)
            if current != expected:
                logger.info(
                    "%s: v%d not promoted, %s", key, version, base.champion_words(current, now=True)
                )
                return False
            history = base.promotion_history(_promoted_in(pointer), current, version)
            data = {
                "champion": str(version),
                "promoted": json.dumps(history),
                "previous": "" if current is None else str(current),
                "promotedAt": f"{time.time():.3f}",
                "key": json.dumps(key.to_dict()),
            }
            cm = ConfigMap(
                _pointer_name(key),
                data=data,
                labels=self._labels(key, "pointer"),
                resource_version=pointer.resource_version if pointer else None,
            )
            try:
                with _as_store_error(key, version):
                    (self.maps.replace if pointer else self.maps.create)(cm)
            except _Taken:
                continue  # someone wrote the pointer since we read it: read again
            logger.info("%s: v%d is champion (%s)", key, version, base.champion_words(current))
            self._prune(key)
            return True
        raise StoreError(f"{key}: the champion pointer kept changing under {ATTEMPTS} tries")

    def discard(self, key: StoreKey, version: int) -> bool:
        if self.champion_version(key) == version:
            return False
        with _as_store_error(key, version):
            self.maps.delete(_version_name(key, version))  # gone already counts as done
        logger.info("%s: v%d removed: its promotion lost", key, version)
        return True

    def promoted(self, key: StoreKey) -> list[int] | None:
        with _as_store_error(key, None):
            return _promoted_in(self.maps.get(_pointer_name(key)))

    def keys(self) -> list[StoreKey]:
        with _as_store_error(None, None):
            found = self.maps.list(f"{ROLE}=version")
        keys = set()
        for cm in found:
            try:
                keys.add(StoreKey.from_dict(json.loads(cm.data.get("key", ""))))
            except (ValueError, StoreError) as exc:
                logger.warning("ConfigMap %s: unreadable store key (%s)", cm.name, exc)
        return sorted(keys)

    def statuses(self) -> dict[StoreKey, base.Status]:
        # One LIST for the whole store: the pointers and the retrain records, not the versions.
        with _as_store_error(None, None):
            found = self.maps.list(
                f"{MANAGED_LABEL}={MANAGED[MANAGED_LABEL]},{ROLE}!=version,{ROLE}!={CHECKPOINT_ROLE}"
            )
        pointers: dict[StoreKey, int | None] = {}
        records: dict[StoreKey, Any] = {}
        for cm in found:
            try:
                key = StoreKey.from_dict(json.loads(cm.data.get("key", "")))
            except (ValueError, StoreError) as exc:
                logger.warning("ConfigMap %s: unreadable store key (%s)", cm.name, exc)
                continue
            role = cm.labels.get(ROLE)
            if role == "pointer":
                pointers[key] = self._champion_in(key, cm)
            elif role == RETRAIN_ROLE:
                try:
                    records[key] = json.loads(cm.data.get("outcome", ""))
                except ValueError:
                    logger.warning("ConfigMap %s: unreadable retrain outcome", cm.name)
        return {
            key: base.status_from(pointers.get(key), records.get(key))
            for key in sorted(set(pointers) | set(records))
        }

    def record_retrain(self, key: StoreKey, *, ok: bool, at: float, reason: str) -> None:
        name = f"{PREFIX}-{key.slug}-{RETRAIN_ROLE}"
        for _ in range(ATTEMPTS):
            with _as_store_error(key, None):
                old = self.maps.get(name)
            previous = None
            if old is not None:
                with contextlib.suppress(ValueError):
                    previous = base.status_from(None, json.loads(old.data.get("outcome", "")))
            record = base.Status.retrain_record(previous, ok=ok, at=at, reason=reason)
            cm = ConfigMap(
                name,
                data={"key": json.dumps(key.to_dict()), "outcome": json.dumps(record)},
                labels=self._labels(key, RETRAIN_ROLE),
                resource_version=old.resource_version if old else None,
            )
            try:
                with _as_store_error(key, None):
                    (self.maps.replace if old else self.maps.create)(cm)
            except _Taken:
                continue
            return
        raise StoreError(f"{key}: the retrain record kept changing under {ATTEMPTS} tries")

    def put_checkpoint(self, key: StoreKey, version: int, at: int, data: dict[str, Any]) -> bool:
        blob = gzip.compress(json.dumps(data, allow_nan=False).encode(), mtime=0)
        if len(blob) > MAX_BYTES:
            raise StoreError(
                f"{key} v{version}: checkpoint is {len(blob)} bytes compressed, past the "
                f"{MAX_BYTES}-byte ConfigMap limit; use the directory store (--store DIR)"
            )
        cm = ConfigMap(
            _checkpoint_name(key, version, at),
            data={"version": str(version), "at": str(at), "key": json.dumps(key.to_dict())},
            binary_data={CHECKPOINT: blob},
            labels=self._labels(key, CHECKPOINT_ROLE),
            immutable=True,
        )
        try:
            with _as_store_error(key, version):
                self.maps.create(cm)
        except _Taken:
            return False
        try:
            with _as_store_error(key, version):
                found = self._checkpoints(key)
                for old in found[: -base.CHECKPOINTS_KEPT]:
                    self.maps.delete(old.name)
        except StoreError as exc:  # written; pruning waits for the next one
            logger.warning("%s: old checkpoints not pruned yet: %s", key, exc)
        return True

    def checkpoint(self, key: StoreKey, version: int) -> dict[str, Any] | None:
        with _as_store_error(key, version):
            mine = [cm for cm in self._checkpoints(key) if cm.data.get("version") == str(version)]
        if not mine:
            return None
        newest = mine[-1].name
        try:
            data = json.loads(gzip.decompress(mine[-1].binary_data[CHECKPOINT]))
        except (KeyError, OSError, EOFError, ValueError) as exc:
            raise StoreError(f"{key} v{version}: ConfigMap {newest} damaged ({exc})") from exc
        if not isinstance(data, dict):
            raise StoreError(f"{key} v{version}: ConfigMap {newest} is not a checkpoint")
        return data

    def _checkpoints(self, key: StoreKey) -> list[ConfigMap]:
        """The key's checkpoints, oldest first (KubeError as the API raised it)."""
        found = self.maps.list(_selector(key, CHECKPOINT_ROLE))
        timed = [cm for cm in found if cm.data.get("at", "").isdigit()]
        return sorted(timed, key=lambda cm: int(cm.data["at"]))

    def _champion_in(
        self, key: StoreKey, pointer: ConfigMap | None, *, below: int | None = None
    ) -> int | None:
        """The pointer's version; when it is damaged, the newest version older than `below`."""
        if pointer is None:
            return None
        text = pointer.data.get("champion", "")
        if not text.isdigit():
            where = f"ConfigMap {pointer.name}"
            return base.damaged_pointer(self, key, where, f"it holds {text[:20]!r}", below=below)
        return int(text)

    def _labels(self, key: StoreKey, role: str) -> dict[str, str]:
        return MANAGED | {ROLE: role, KEY: key.digest}

    def _prune(self, key: StoreKey) -> None:
        try:
            champion = self.champion_version(key)
            for version in base.to_prune(self.versions(key), keep=self.keep, champion=champion):
                with _as_store_error(key, version):
                    self.maps.delete(_version_name(key, version))
        except StoreError as exc:  # the write itself succeeded; pruning waits for the next one
            logger.warning("%s: old versions not pruned yet: %s", key, exc)


class _Taken(StoreError):
    """409 from a create or replace: another writer got there first."""


@contextlib.contextmanager
def _as_store_error(key: StoreKey | None, version: int | None) -> Iterator[None]:
    """KubeError -> StoreError naming key and version; a Conflict -> _Taken for the loops."""
    where = f"{key} v{version}" if version is not None else str(key or "model store")
    try:
        yield
    except Conflict as exc:
        raise _Taken(f"{where}: {exc}") from exc
    except KubeError as exc:
        raise StoreError(f"{where}: {exc}") from exc


def _promoted_in(pointer: ConfigMap | None) -> list[int] | None:
    """The pointer's record of promotions (its `promoted` field, written with the pointer in
    one compare-and-set); None for a pointer written before it kept one, or a damaged one."""
    if pointer is None:
        return None
    try:
        return base.parse_promoted(json.loads(pointer.data.get("promoted", "")))
    except ValueError:
        return None


def _pointer_name(key: StoreKey) -> str:
    return f"{PREFIX}-{key.slug}"


def _version_name(key: StoreKey, version: int) -> str:
    return f"{PREFIX}-{key.slug}-v{version:06d}"


def _checkpoint_name(key: StoreKey, version: int, at: int) -> str:
    return f"{PREFIX}-{key.slug}-c{version:06d}-{at}"


def _selector(key: StoreKey, role: str) -> str:
    return f"{ROLE}={role},{KEY}={key.digest}"
