"""`scaler serve --scaler-address`: the cluster's ScaledObjects whose external trigger points at
this scaler, listed at start-up and then followed with a watch, the way client-go's informers
do: list (which gives a resourceVersion), watch from it, resume from the last event's
resourceVersion when a watch ends or breaks, and list again when the server answers 410 Gone
(the resourceVersion was compacted away; events were missed, so only a full list is the truth).

Each change is handed to `on_change` as the targets that appeared and the target keys that
went away: a ScaledObject created, a trigger edited (its metadata hash is in the target key, so
an edit is the old key gone and a new one added), a ScaledObject deleted, or, after a relist,
whatever differs from what was known. A trigger that does not parse is logged once per change
and left to KEDA's first call, which answers it INVALID_ARGUMENT naming the key.

The watch runs in one daemon thread (the client blocks on HTTP). An unreachable API server or
a failed watch is retried with a bounded exponential backoff; the targets known stay served.

Must not: touch the engine (the caller's `on_change` does, on its own loop), or interpret
trigger metadata (targets.py does).
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from scaler.decision.spec import TargetSpec
from scaler.kube import targets as manifests
from scaler.kube.api import Forbidden, Gone, KubeError
from scaler.kube.scaledobjects import ScaledObjects

logger = logging.getLogger(__name__)

WATCH_SECONDS = 300.0
"""How long one watch request lasts before it is resumed (client-go picks 5-10 minutes)."""
BACKOFF = (1.0, 60.0)
"""First and longest wait, seconds, before retrying a failed list or watch."""


@dataclass(frozen=True)
class Change:
    added: list[TargetSpec] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    """Target keys (TargetSpec.key) that no longer exist in the cluster."""

    def __bool__(self) -> bool:
        return bool(self.added or self.removed)


ObjectKey = tuple[str, str]
"""(namespace, name) of a ScaledObject."""


class Discovery:
    """The targets of the ScaledObjects pointing at `scaler_address` (in `namespace`, or all)."""

    def __init__(
        self,
        objects: ScaledObjects,
        *,
        scaler_address: str,
        namespace: str | None = None,
        watch_seconds: float = WATCH_SECONDS,
        backoff: tuple[float, float] = BACKOFF,
    ) -> None:
        self._objects = objects
        self.scaler_address = scaler_address
        self.namespace = namespace
        self.watch_seconds = watch_seconds
        self.backoff = backoff
        self.resource_version: str | None = None
        """Where the next watch resumes; None: list first."""
        self._known: dict[ObjectKey, dict[str, TargetSpec]] = {}
        self._problems: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lists = 0
        """Full lists made (the first, and one after each 410 Gone or failed list)."""
        self.resumes = 0
        """Watches resumed from a resourceVersion."""

    # ---- what serve calls --------------------------------------------------------------------
    def initial(self) -> list[TargetSpec]:
        """The targets now in the cluster (one list). Forbidden propagates: without RBAC to
        list ScaledObjects the flag cannot work (deploy/README.md names the grant); an
        unreachable API server is logged and the watch thread keeps trying to list."""
        try:
            change = self._relist()
        except Forbidden:
            raise
        except KubeError as exc:
            logger.warning("cluster discovery: cannot list ScaledObjects yet, retrying: %s", exc)
            return []
        return change.added

    def targets(self) -> list[TargetSpec]:
        return [spec for specs in self._known.values() for spec in specs.values()]

    def start(self, on_change: Callable[[Change], None]) -> None:
        """Follow the cluster in a daemon thread, calling `on_change` (from that thread)."""
        self._thread = threading.Thread(
            target=self._follow, args=(on_change,), name="kube-discovery", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    close = stop

    # ---- the loop ----------------------------------------------------------------------------
    def _follow(self, on_change: Callable[[Change], None]) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                if self.resource_version is None:
                    change = self._relist()
                    if change:
                        on_change(change)
                else:
                    self.resumes += 1
                self._watch(on_change)
                failures = 0
            except Gone as exc:
                logger.info("cluster discovery: %s; listing again", exc)
                self.resource_version = None
            except KubeError as exc:
                failures += 1
                low, high = self.backoff
                wait = min(high, low * 2 ** min(failures - 1, 16)) * random.uniform(0.8, 1.2)
                logger.warning("cluster discovery: %s; retrying in %.0fs", exc, wait)
                self._stop.wait(wait)
            except Exception:  # never let the thread die silently: the log says why
                logger.exception("cluster discovery: unexpected failure; listing again")
                self.resource_version = None
                self._stop.wait(self.backoff[1])

    def _watch(self, on_change: Callable[[Change], None]) -> None:
        assert self.resource_version is not None
        stream = self._objects.watch(
            resource_version=self.resource_version,
            timeout=self.watch_seconds,
            namespace=self.namespace,
        )
        for kind, obj in stream:
            version = (obj.get("metadata") or {}).get("resourceVersion")
            if kind == "BOOKMARK":
                pass
            elif kind == "DELETED":
                change = self._apply(_key_of(obj), [])
                if change:
                    on_change(change)
            elif kind in ("ADDED", "MODIFIED"):
                change = self._apply(_key_of(obj), [obj])
                if change:
                    on_change(change)
            if version:
                self.resource_version = str(version)
            if self._stop.is_set():
                return

    def _relist(self) -> Change:
        listed, version = self._objects.list(self.namespace)
        self.lists += 1
        seen = {_key_of(obj): obj for obj in listed}
        added: list[TargetSpec] = []
        removed: list[str] = []
        for key in sorted(set(self._known) | set(seen)):
            change = self._apply(key, [seen[key]] if key in seen else [])
            added += change.added
            removed += change.removed
        self.resource_version = version
        logger.info(
            "cluster discovery: %d targets in %d ScaledObjects point at %s",
            len(self.targets()),
            len(self._known),
            self.scaler_address,
        )
        return Change(added, removed)

    def _apply(self, key: ObjectKey, objects: Iterable[dict[str, Any]]) -> Change:
        """Replace what ScaledObject `key` contributes by the targets of `objects` (none when
        it was deleted)."""
        found, problems = manifests.from_objects(objects, scaler_address=self.scaler_address)
        for problem in problems:
            if self._problems.get(problem.where) != problem.error:
                logger.warning("cluster discovery: %s: %s", problem.where, problem.error)
            self._problems[problem.where] = problem.error
        new = {t.spec.key: t.spec for t in found}
        old = self._known.pop(key, {})
        if new:
            self._known[key] = new
        return Change(
            added=[spec for k, spec in new.items() if k not in old],
            removed=[k for k in old if k not in new],
        )


def _key_of(obj: dict[str, Any]) -> ObjectKey:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")
