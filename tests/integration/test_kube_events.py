"""Kubernetes Events on ScaledObjects through the official client, against the Kubernetes API
emulator over HTTP: what is posted, the rate limit per object and reason, and an API server
that fails."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from scaler.kube import api, events
from scaler.record.notable import BUDGET_EXHAUSTED, DRIFT_FALLBACK, DRIFT_RECOVERED, Notice
from tests.integration.kube_api import KubeAPI


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def notice(reason: str = DRIFT_FALLBACK, name: str = "llm", at: float = 1_800_000_000.0) -> Notice:
    return Notice("gpu", name, reason, f"{reason} happened", reason == DRIFT_FALLBACK, at)


def recorder(tmp_path: Path, clock: Clock) -> events.EventRecorder:
    return events.EventRecorder(
        api.connect(tmp_path / "kubeconfig"), min_interval=600.0, instance="pod-a", now=clock
    )


def posted(kube_api: KubeAPI) -> list[dict]:  # type: ignore[type-arg]
    return kube_api.objects("v1", "events", "gpu")


def test_a_notice_becomes_an_event_on_the_scaled_object(kube_api: KubeAPI, tmp_path: Path) -> None:
    sink = recorder(tmp_path, Clock())
    assert sink.emit(notice())
    sink.close()
    (event,) = posted(kube_api)
    assert event["involvedObject"] == {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "name": "llm",
        "namespace": "gpu",
    }
    assert (event["reason"], event["type"]) == (DRIFT_FALLBACK, "Warning")
    assert event["message"] == f"{DRIFT_FALLBACK} happened"
    assert event["source"] == {"component": events.COMPONENT}
    assert event["reportingInstance"] == "pod-a"


def test_events_are_rate_limited_per_object_and_reason(kube_api: KubeAPI, tmp_path: Path) -> None:
    clock = Clock()
    sink = recorder(tmp_path, clock)
    assert sink.emit(notice())
    assert not sink.emit(notice())  # same object and reason, within the interval
    assert not sink.emit(notice())
    assert sink.emit(notice(BUDGET_EXHAUSTED))  # another reason
    assert sink.emit(notice(name="other"))  # another object
    clock.now += 600.0
    assert sink.emit(notice(at=clock.now))
    sink.close()
    found = sorted(
        (e["involvedObject"]["name"], e["reason"], e["message"]) for e in posted(kube_api)
    )
    assert found == [
        ("llm", DRIFT_FALLBACK, f"{DRIFT_FALLBACK} happened"),
        ("llm", DRIFT_FALLBACK, f"{DRIFT_FALLBACK} happened (2 more held back in the last 10 min)"),
        ("llm", BUDGET_EXHAUSTED, f"{BUDGET_EXHAUSTED} happened"),
        ("other", DRIFT_FALLBACK, f"{DRIFT_FALLBACK} happened"),
    ]


def test_a_failing_api_server_neither_raises_nor_holds_up_the_caller(
    kube_api: KubeAPI, tmp_path: Path
) -> None:
    kube_api.fail_next("POST", "/events", 500, count=1)
    sink = recorder(tmp_path, Clock())
    began = time.monotonic()
    assert sink.emit(notice())
    assert sink.emit(notice(name="second"))
    assert time.monotonic() - began < 0.1  # posted by the background thread
    sink.close()
    assert [e["involvedObject"]["name"] for e in posted(kube_api)] == ["second"]
    assert sink.posted == 1


def test_replicas_saying_the_same_thing_in_one_window_make_one_event(
    kube_api: KubeAPI, tmp_path: Path
) -> None:
    clock = Clock()
    replicas = [recorder(tmp_path, clock) for _ in range(3)]
    for sink in replicas:
        assert sink.emit(notice())
    for sink in replicas:
        sink.close()
    (event,) = posted(kube_api)
    assert event["metadata"]["name"] == events.event_name(notice(), 600.0)
    assert event["count"] == 1
    assert sum(s.posted for s in replicas) == 1 and sum(s.skipped for s in replicas) == 2
    creates = kube_api.requests("POST", "/events")
    assert len(creates) == 3  # each tried once: the two 409s were not retried


def test_the_next_window_is_another_event(kube_api: KubeAPI, tmp_path: Path) -> None:
    clock = Clock()
    first = recorder(tmp_path, clock)
    assert first.emit(notice())
    first.close()
    clock.now += 600.0
    second = recorder(tmp_path, clock)  # another replica, a window later
    assert second.emit(notice(at=clock.now))
    second.close()
    assert len(posted(kube_api)) == 2


def test_a_start_in_fallback_is_said_once_across_restarts_until_the_target_recovers(
    kube_api: KubeAPI, tmp_path: Path
) -> None:
    clock = Clock()

    def life(item: Notice) -> events.EventRecorder:
        """One process: starts, says `item`, stops."""
        sink = recorder(tmp_path, clock)
        assert sink.emit(item)
        sink.close()
        return sink

    start = replace(notice(), initial=True)
    assert life(start).posted == 1
    clock.now += 3600.0  # restarted an hour later, still in fallback: nothing new to say
    again = life(replace(start, at=clock.now))
    assert (again.posted, again.skipped) == (0, 1)
    clock.now += 60.0
    life(notice(DRIFT_RECOVERED, at=clock.now))  # seen recovering, then restarted in fallback
    clock.now += 600.0
    assert life(replace(start, at=clock.now)).posted == 1
    reasons = [e["reason"] for e in sorted(posted(kube_api), key=lambda e: e["lastTimestamp"])]
    assert reasons == [DRIFT_FALLBACK, DRIFT_RECOVERED, DRIFT_FALLBACK]
    elsewhere = replace(start, name="other", at=clock.now)  # another object's history
    assert life(elsewhere).posted == 1


def test_without_the_list_grant_a_start_in_fallback_is_still_said(
    kube_api: KubeAPI, tmp_path: Path
) -> None:
    kube_api.fail_next("GET", "/events", 403)
    sink = recorder(tmp_path, Clock())
    assert sink.emit(replace(notice(), initial=True))
    assert sink.emit(replace(notice(name="other"), initial=True))
    sink.close()
    assert [e["reason"] for e in posted(kube_api)] == [DRIFT_FALLBACK, DRIFT_FALLBACK]
    assert len(kube_api.requests("GET", "/events")) == 1  # refused once: not asked again
