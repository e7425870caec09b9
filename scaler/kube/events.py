"""Kubernetes Events on a target's ScaledObject (`kubectl describe scaledobject` shows them):
drift fallback entered or left, prewarm budget exhausted, a new model promoted
(scaler/record/notable.py finds them in the decision records).

Rate-limited per ScaledObject and reason: at most one Event per `min_interval`; the ones held
back are counted into the next message. Posted by one background thread from a bounded queue,
so a slow or unreachable API server never holds up a decision; when the queue is full a notice
is dropped and counted (`dropped`).

Must not: raise into the caller (a failed post is logged once per change of error), or post
for a target whose ScaledObject it does not know the namespace and name of.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from kubernetes import client

from scaler.kube import api
from scaler.record.notable import Notice

logger = logging.getLogger(__name__)

COMPONENT = "predictive-autoscaler"
MIN_INTERVAL = 600.0
"""Seconds between two Events of one reason on one ScaledObject: a drift detector that
flaps every step must not flood the namespace's events."""
QUEUE = 1000
MAX_MESSAGE = 1024
"""Event messages are capped by the API server; ours stay well under."""


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
        self.posted = 0
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
        stamp = datetime.fromtimestamp(notice.at, UTC)
        message = notice.message
        if held:
            message += f" ({held} more held back in the last {self.min_interval / 60:.0f} min)"
        body = client.CoreV1Event(
            metadata=client.V1ObjectMeta(
                # client-go's `<object>.<unix nanoseconds in hex>`, plus a random suffix:
                # two reasons of one decision share its time.
                name=f"{notice.name}.{int(notice.at * 1e9):x}{uuid.uuid4().hex[:6]}",
                namespace=notice.namespace,
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
        what = f"create event {notice.reason} on scaledobject {notice.namespace}/{notice.name}"
        try:
            with api.translated(what):
                self._core.create_namespaced_event(
                    notice.namespace, body, _request_timeout=api.REQUEST_TIMEOUT
                )
        except api.KubeError as exc:
            if str(exc) != self._problem:
                logger.warning("%s", exc)
            self._problem = str(exc)
            return
        self._problem = ""
        self.posted += 1
