"""Kubernetes Events on a target's ScaledObject (`kubectl describe scaledobject` shows them):
drift fallback entered or left, prewarm budget exhausted, a new model promoted
(scaler/record/notable.py finds them in the decision records).

Rate-limited per ScaledObject and reason: at most one Event per `min_interval`; the ones held
back are counted into the next message. Posted by one background thread from a bounded queue,
so a slow or unreachable API server never holds up a decision; when the queue is full a notice
is dropped and counted (`dropped`).

Aggregated across replicas and restarts, as Kubernetes' own event correlator does: an Event's
name is deterministic (`<object>.<hash of namespace, name, reason and the min_interval window>`),
so a second replica (or this one after a restart) saying the same thing in the same window gets
`409 AlreadyExists` and skips it: replicas agree on their decisions, and each holds back its own
repeats within the window, so the Event that exists already says what this one would (its
repeats reach the next window's message). A target's first known state (`Notice.initial`: a
replica starting into fallback) is posted only when the newest Event of its family on the object
(DriftFallback/DriftRecovered) is not already that reason, so a restart past the window does not
repeat it either, while the API server keeps Events (`--event-ttl`, 1 h by default).

Must not: raise into the caller (a failed post is logged once per change of error), or post
for a target whose ScaledObject it does not know the namespace and name of.
"""

from __future__ import annotations

import hashlib
import logging
import math
import queue
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from kubernetes import client

from scaler.kube import api
from scaler.record.notable import (
    BUDGET_EXHAUSTED,
    DRIFT_FALLBACK,
    DRIFT_RECOVERED,
    MODEL_PROMOTED,
    Notice,
)

logger = logging.getLogger(__name__)

COMPONENT = "predictive-autoscaler"
MIN_INTERVAL = 600.0
"""Seconds between two Events of one reason on one ScaledObject, and the window their names
are bucketed by: a drift detector that flaps every step must not flood the namespace's events."""
QUEUE = 1000
MAX_MESSAGE = 1024
"""Event messages are capped by the API server; ours stay well under."""
NAME_LIMIT = 253
"""An Event name is a DNS subdomain."""
FAMILY = {
    DRIFT_FALLBACK: (DRIFT_FALLBACK, DRIFT_RECOVERED),
    DRIFT_RECOVERED: (DRIFT_FALLBACK, DRIFT_RECOVERED),
    BUDGET_EXHAUSTED: (BUDGET_EXHAUSTED,),
    MODEL_PROMOTED: (MODEL_PROMOTED,),
}
"""The reasons whose newest Event tells the object's current state for a reason."""


def event_name(notice: Notice, window: float) -> str:
    """The one name every replica gives this object's `reason` Event in `window`'s bucket."""
    bucket = math.floor(notice.at / window) if window > 0 else math.floor(notice.at)
    said = f"{notice.namespace}/{notice.name}/{notice.reason}/{bucket}"
    digest = hashlib.sha256(said.encode()).hexdigest()[:16]
    return f"{notice.name[: NAME_LIMIT - len(digest) - 1]}.{digest}"


class EventRecorder:
    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        min_interval: float = MIN_INTERVAL,
        instance: str = "",
        now: Callable[[], float] = time.time,
    ) -> None:
        self._core = client.CoreV1Api(api_client)
        self.min_interval = min_interval
        self.instance = instance
        self._now = now
        self._last: dict[tuple[str, str, str], float] = {}
        self._held: dict[tuple[str, str, str], int] = {}
        self._queue: queue.Queue[tuple[Notice, int] | None] = queue.Queue(QUEUE)
        self._problem = ""
        self._can_list = True
        """False once `list events` was refused (403): not asked again."""
        self.posted = 0
        self.skipped = 0
        """Notices an existing Event already said."""
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="kube-events", daemon=True)
        self._thread.start()

    def emit(self, notice: Notice) -> bool:
        """Queue `notice` unless its object and reason had an Event within min_interval;
        True when queued."""
        key = (notice.namespace, notice.name, notice.reason)
        now = self._now()
        if now - self._last.get(key, -float("inf")) < self.min_interval:
            self._held[key] = self._held.get(key, 0) + 1
            return False
        self._last[key] = now
        try:
            self._queue.put_nowait((notice, self._held.pop(key, 0)))
        except queue.Full:
            self.dropped += 1
            return False
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Post what is queued (within `timeout`), then stop the thread."""
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            return
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            self._post(*item)

    def _post(self, notice: Notice, held: int) -> None:
        body = self._body(notice, held)
        what = f"event {notice.reason} on scaledobject {notice.namespace}/{notice.name}"
        try:
            if notice.initial and self._can_list and self._already_said(notice):
                self.skipped += 1
                return
            with api.translated(f"create {what}"):
                self._core.create_namespaced_event(
                    notice.namespace, body, _request_timeout=api.REQUEST_TIMEOUT
                )
            self.posted += 1
        except api.Conflict:  # AlreadyExists: another replica, or this one before a restart
            self.skipped += 1
        except api.KubeError as exc:
            if str(exc) != self._problem:
                logger.warning("%s", exc)
            self._problem = str(exc)
            return
        self._problem = ""

    def _already_said(self, notice: Notice) -> bool:
        """Whether the newest Event of the notice's family on its object has its reason."""
        selector = (
            f"involvedObject.kind=ScaledObject,involvedObject.name={notice.name},"
            f"involvedObject.namespace={notice.namespace}"
        )
        what = f"list events on scaledobject {notice.namespace}/{notice.name}"
        try:
            with api.translated(what):
                found = self._core.list_namespaced_event(
                    notice.namespace, field_selector=selector, _request_timeout=api.REQUEST_TIMEOUT
                )
        except api.Forbidden as exc:  # granted `create` only: the window's name still dedups
            logger.warning("%s; posting start-up states unchecked: a restart may repeat one", exc)
            self._can_list = False
            return False
        family = FAMILY.get(notice.reason, (notice.reason,))
        kin = [e for e in found.items if e.reason in family]
        if not kin:
            return False
        epoch = datetime.fromtimestamp(0, UTC)
        newest = max(kin, key=lambda e: e.last_timestamp or e.first_timestamp or epoch)
        return bool(newest.reason == notice.reason)

    def _body(self, notice: Notice, held: int) -> client.CoreV1Event:
        # Whole seconds, as the API server keeps them.
        stamp = datetime.fromtimestamp(math.floor(notice.at), UTC)
        message = notice.message
        if held:
            message += f" ({held} more held back in the last {self.min_interval / 60:.0f} min)"
        return client.CoreV1Event(
            metadata=client.V1ObjectMeta(
                name=event_name(notice, self.min_interval), namespace=notice.namespace
            ),
            involved_object=client.V1ObjectReference(
                api_version="keda.sh/v1alpha1",
                kind="ScaledObject",
                name=notice.name,
                namespace=notice.namespace,
            ),
            reason=notice.reason,
            message=message[:MAX_MESSAGE],
            type="Warning" if notice.warning else "Normal",
            first_timestamp=stamp,
            last_timestamp=stamp,
            count=1,
            source=client.V1EventSource(component=COMPONENT),
            reporting_component=COMPONENT,
            reporting_instance=self.instance or None,
        )
