"""The model store's interface: what the retrain job writes and every `scaler serve` replica
reads, whatever holds the bytes (a directory on a PVC, Kubernetes ConfigMaps).

Per target (`StoreKey`: namespace/name/metric) a store keeps the last N versions of a model
artefact (models/artefact.py JSON, never pickle) and a pointer to the champion. The rules every
backend keeps:
- `put` validates before it stores: an artefact `models.artefact.load` refuses is never written
  (`ArtefactRejected`), and a write is atomic, so a reader sees a whole version or none.
- `promote` is a compare-and-set on the pointer: it moves only if the champion is still
  `expected`, so when several replicas race to store the first model of a target, the first
  writer wins and the others adopt its artefact.
- `champion` returns the newest version at or below the pointer that still loads: a version
  damaged after it was written is skipped with a warning, and the last good one stays in use.
- Only a version some writer promoted is ever taken as champion: every backend keeps the
  versions it promoted (`promoted`), and the fallbacks (a damaged champion, a damaged pointer)
  choose among them, never a version stored by a writer that lost the race or died before its
  `promote`. A writer that lost removes its version (`discard`).
- `put_checkpoint` is an exclusive create per (key, version, time): replicas checkpointing the
  same hour write it once; `checkpoint` reads the newest of a version.

Must not: fit, score or decide which model is better (the retrain job does); talk to Kubernetes
(scaler/kube/ does, for the ConfigMap backend).
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from models import artefact
from models.base import ArtefactError
from scaler.decision.spec import TargetSpec
from scaler.errors import ConfigError, ScalerError, Unreachable

logger = logging.getLogger(__name__)

DEFAULT_KEEP = 5
"""Versions kept per target (the champion is kept as well, however old)."""
MAX_KEEP = 100
MAX_PART_CHARS = 253
"""Longest namespace, name or metric: Kubernetes' own limit for object names."""
SLUG_CHARS = 180
"""Longest slug: leaves room for a prefix and a version suffix within a 253-character name."""

RETRAIN_WRITER = "scaler retrain"
"""The `writer` in the meta of a version the retrain job stored (with `at`, when it ran, epoch
seconds): serve leaves the weekly refit of such a champion to the job (serving/refit_due.py)."""

_UNSAFE = re.compile(r"[^a-z0-9.-]+")


class StoreError(ScalerError):
    """The store could not read or write: names the key, the version when there is one, and the
    fix. The caller keeps whatever model it already has."""


def unreachable(exc: BaseException) -> bool:
    """True when `exc` is the store being out of reach (a StoreError caused by Unreachable: the
    API server down, timing out, answering 5xx or 429), which a later try may get past; false
    for any other failure (a damaged artefact, RBAC, a full disk), which it will not. The one
    test of it, at start-up (retrain_cli.check_store) and mid-run (retrain.Retrainer)."""
    return isinstance(exc, StoreError) and isinstance(exc.__cause__, Unreachable)


class ArtefactRejected(StoreError):
    """An artefact that does not load (corrupt, truncated, another format): never stored, never
    served."""

    def __init__(self, key: StoreKey, version: int | None, problem: str) -> None:
        self.key = key
        self.version = version
        self.problem = problem
        where = f"{key} v{version}" if version is not None else f"{key} (new version)"
        super().__init__(f"{where}: artefact rejected: {problem}; refit it with `scaler retrain`")


@dataclass(frozen=True, order=True)
class StoreKey:
    """One target's model: the ScaledObject's namespace and name and the trigger's metric."""

    namespace: str
    name: str
    metric: str

    def __post_init__(self) -> None:
        for part, value in (("namespace", self.namespace), ("name", self.name)):
            _check_part(part, value)
        _check_part("metric", self.metric)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}/{self.metric}"

    @classmethod
    def of(cls, spec: TargetSpec) -> StoreKey:
        """The key of a trigger: the same for `scaler serve` and `scaler retrain`."""
        return cls(spec.namespace, spec.name, spec.metric_name)

    @property
    def slug(self) -> str:
        """A safe file and Kubernetes object name (lower-case DNS subdomain characters), unique
        per key: the readable part may collide after folding, the hash of the exact key cannot."""
        digest = hashlib.sha256(str(self).encode()).hexdigest()[:10]
        readable = _UNSAFE.sub("-", f"{self.namespace}.{self.name}.{self.metric}".lower())
        readable = readable.strip(".-")[: SLUG_CHARS - len(digest) - 1].strip(".-")
        return f"{readable}-{digest}" if readable else digest

    @property
    def digest(self) -> str:
        """16 hex digits of the exact key: a label value that finds the key's objects."""
        return hashlib.sha256(str(self).encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, str]:
        return {"namespace": self.namespace, "name": self.name, "metric": self.metric}

    @classmethod
    def from_dict(cls, data: Any) -> StoreKey:
        try:
            return cls(str(data["namespace"]), str(data["name"]), str(data["metric"]))
        except (KeyError, TypeError) as exc:
            raise StoreError(f"stored key {data!r} lacks namespace/name/metric") from exc


def _check_part(part: str, value: str) -> None:
    if not value or len(value) > MAX_PART_CHARS or not value.isprintable() or "/" in value:
        raise ConfigError(
            f"model store key {part} {value[:40]!r} must be 1-{MAX_PART_CHARS} printable "
            "characters without '/'"
        )


@dataclass(frozen=True)
class Stored:
    """One stored version: the artefact as models.artefact.dump wrote it, and what the writer
    said about it (scores, reason, writer, time)."""

    key: StoreKey
    version: int
    artefact: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Status:
    """What `scaler serve` polls per key: the champion pointer, and the retrain job's last
    outcome (epoch seconds of its last success and last failure, and why)."""

    champion: int | None = None
    retrain_success: float | None = None
    retrain_failure: float | None = None
    retrain_reason: str = ""

    @staticmethod
    def retrain_record(old: Status | None, *, ok: bool, at: float, reason: str) -> dict[str, Any]:
        """The retrain record to store: `old`'s, with this outcome's time and reason."""
        success = old.retrain_success if old else None
        failure = old.retrain_failure if old else None
        return {
            "success_at": at if ok else success,
            "failure_at": failure if ok else at,
            "reason": reason[:MAX_REASON],
        }


CHECKPOINTS_KEPT = 2
"""Serving checkpoints kept per key: the newest and the one before, which a replica may be
reading while the next is written."""

MAX_REASON = 1000
"""Characters of a retrain outcome's reason kept in the store."""


def status_from(champion: int | None, record: Any) -> Status:
    """A Status from a champion pointer and a stored retrain record (ignored when malformed)."""
    if not isinstance(record, dict):
        return Status(champion)

    def at(name: str) -> float | None:
        value = record.get(name)
        return float(value) if isinstance(value, int | float) and value >= 0 else None

    return Status(champion, at("success_at"), at("failure_at"), str(record.get("reason", "")))


class ModelStore(Protocol):
    """What every backend offers (module docstring for the rules)."""

    def put(self, key: StoreKey, data: dict[str, Any], meta: dict[str, Any] | None = None) -> int:
        """Store `data` as the key's next version and return it (not yet champion). Raises
        ArtefactRejected when it does not load, StoreError when it cannot be written."""
        ...

    def get(self, key: StoreKey, version: int) -> Stored:
        """One version; ArtefactRejected when damaged, StoreError when missing."""
        ...

    def versions(self, key: StoreKey) -> list[int]:
        """The versions kept, oldest first."""
        ...

    def champion_version(self, key: StoreKey) -> int | None:
        """The champion pointer alone: cheap, for hot-reload polling."""
        ...

    def champion(self, key: StoreKey) -> Stored | None:
        """The champion, or the newest version below it that still loads (last good)."""
        ...

    def promote(self, key: StoreKey, version: int, *, expected: int | None) -> bool:
        """Point the champion at `version` if it is still `expected` (None: no champion yet).
        False when another writer moved it first. ArtefactRejected when `version` does not load."""
        ...

    def discard(self, key: StoreKey, version: int) -> bool:
        """Remove `version`, stored by a writer whose `promote` lost: no fallback may take it as
        champion, and it holds none of the kept slots. True when removed (or already gone),
        False when it is the champion. StoreError when it cannot be removed."""
        ...

    def promoted(self, key: StoreKey) -> list[int] | None:
        """Every version a `promote` made champion (oldest first, the recent PROMOTED_KEPT),
        kept apart from the pointer so that it survives damage to it; None when the store has
        no record (written before it kept one): the fallbacks then take any version."""
        ...

    def keys(self) -> list[StoreKey]:
        """Every key with a stored version."""
        ...

    def statuses(self) -> dict[StoreKey, Status]:
        """Every key's champion pointer and retrain outcome in one read (one LIST for the
        ConfigMap backend): what serve polls, however many targets it serves."""
        ...

    def record_retrain(self, key: StoreKey, *, ok: bool, at: float, reason: str) -> None:
        """Keep the retrain job's outcome for `key` (its last success and last failure)."""
        ...

    def put_checkpoint(self, key: StoreKey, version: int, at: int, data: dict[str, Any]) -> bool:
        """Store a serving checkpoint of `version` at time `at` (scaler/serving/checkpoints.py),
        atomically and only if none exists for (key, version, at): the first writer wins and
        False means another one did. Older checkpoints past CHECKPOINTS_KEPT are dropped.
        StoreError when it cannot be written (too large, the store down)."""
        ...

    def checkpoint(self, key: StoreKey, version: int) -> dict[str, Any] | None:
        """The newest checkpoint of `version` (None: none), as written; StoreError when it
        cannot be read whole (the caller then replays from the fit)."""
        ...


def last_good(
    store: ModelStore, key: StoreKey, *, skip: type[StoreError] = ArtefactRejected
) -> Stored | None:
    """The champion, or when it fails with `skip` the newest older version that loads (each
    skipped one logged): a damaged champion never leaves a target without its last good model."""
    top = store.champion_version(key)
    if top is None:
        return None
    versions = store.versions(key)
    if top not in versions:
        logger.warning(
            "%s: the champion pointer names v%d, which is not in the store; the newest older "
            "version serves until a promotion rewrites the pointer",
            key,
            top,
        )
    # Below the pointer, only versions once champion: never one a writer stored and then lost
    # (or died before promoting), which nobody chose to serve.
    older = once_champion(store, key, [v for v in versions if v < top])
    for version in reversed([*older, *(v for v in versions if v == top)]):
        try:
            return store.get(key, version)
        except skip as exc:
            logger.warning("%s: skipping v%d for an older version: %s", key, version, exc)
    return None


def next_version(versions: list[int], champion: int | None) -> int:
    """The version a new artefact gets: past every stored one and past the champion pointer's,
    so a number is never reused even when the file it named was deleted by hand (replicas
    reload a champion by its number, and checkpoints are keyed by it)."""
    return max([*versions, champion or 0]) + 1


PROMOTED_KEPT = MAX_KEEP + 1
"""Promotions remembered per key: at least every promoted version a store can still hold."""


def once_champion(store: ModelStore, key: StoreKey, versions: list[int]) -> list[int]:
    """Those of `versions` a promotion made champion once; all of them when the store has no
    record of its promotions (one written before it kept them)."""
    history = store.promoted(key)
    if history is None:
        return versions
    return [v for v in versions if v in set(history)]


def promotion_history(history: list[int] | None, current: int | None, version: int) -> list[int]:
    """The record after `version` is promoted over `current`: a store without a record starts
    it from the champion it replaces, the one version it knows was promoted."""
    known = list(history) if history is not None else ([] if current is None else [current])
    return [*known, version][-PROMOTED_KEPT:]


def parse_promoted(data: Any) -> list[int] | None:
    """A stored record of promotions (a JSON list of versions); None when it is not one."""
    if not isinstance(data, list) or not all(type(v) is int for v in data):
        return None
    return list(data)


def damaged_pointer(
    store: ModelStore, key: StoreKey, where: str, problem: str, *, below: int | None = None
) -> int | None:
    """The champion when its pointer cannot be read: the newest stored version a promotion once
    made champion (older than `below`, the version a promotion is about to name; None without
    one), logged with the fix. Only an outside hand damages a pointer (every write is atomic);
    taking the last champion still stored keeps a retrain from judging its challenger against
    no champion at all, never a version nobody promoted, and the next promotion rewrites the
    pointer."""
    versions = [v for v in store.versions(key) if below is None or v < below]
    versions = once_champion(store, key, versions)
    newest = versions[-1] if versions else None
    taken = f"v{newest}, the newest version once promoted, is taken as champion"
    if newest is None:
        taken = "no promoted version is stored, so there is no champion"
    logger.warning(
        "%s: champion pointer %s is damaged (%s); %s until a promotion rewrites the pointer "
        "(`scaler retrain` does when its challenger wins)",
        key,
        where,
        problem,
        taken,
    )
    return newest


def champion_words(version: int | None, *, now: bool = False) -> str:
    """The champion in a log line: "was v3" / "champion is v3 now", or that there was none
    (not "vNone")."""
    if now:
        return "there is no champion now" if version is None else f"champion is v{version} now"
    return "there was no champion" if version is None else f"was v{version}"


def validated(key: StoreKey, version: int | None, data: Any) -> dict[str, Any]:
    """`data` if models.artefact.load accepts it; ArtefactRejected naming what is wrong."""
    try:
        artefact.load(data)
    except ArtefactError as exc:
        raise ArtefactRejected(key, version, str(exc)) from exc
    return dict(data)


def check_keep(keep: int) -> int:
    if not 1 <= keep <= MAX_KEEP:
        raise ConfigError(
            f"--keep {keep} (env SCALER_KEEP): the model store keeps 1 to {MAX_KEEP} versions "
            f"per target; give --keep from 1 to {MAX_KEEP} ({DEFAULT_KEEP} by default)"
        )
    return keep


def to_prune(versions: list[int], *, keep: int, champion: int | None) -> list[int]:
    """Versions past the newest `keep`, never the champion."""
    return [v for v in versions[:-keep] if v != champion]
