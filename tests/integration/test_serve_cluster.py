"""`scaler serve --scaler-address --kube-events` as a process, on the real Prometheus and the
Kubernetes API emulator: the cluster's targets are discovered and warm before SERVING, the
watch follows new, edited and deleted ScaledObjects (resuming, and relisting after 410 Gone),
a promoted model becomes one Kubernetes Event on its ScaledObject, rate-limited; `scaler
retrain` writes the drift state serve writes with its own fits, and reads each target from its
serverAddress with the credential rules serve keeps."""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest

from models import artefact
from models.base import DAY, HOUR, Series
from scaler import cli
from scaler._pb import externalscaler_pb2 as pb
from scaler._pb import externalscaler_pb2_grpc as pb_grpc
from scaler.decision import spec as specs
from scaler.offline import retrain_live
from scaler.record.notable import (
    BUDGET_EXHAUSTED,
    DRIFT_FALLBACK,
    DRIFT_RECOVERED,
    MODEL_PROMOTED,
)
from scaler.serving import driftstate
from scaler.serving.state import forecast_steps
from scaler.sources.prometheus import PrometheusSource
from scaler.store.base import StoreKey
from scaler.store.directory import DirectoryStore
from tests.contract import synthetic
from tests.integration.auth_proxy import ProxyState, auth_proxy
from tests.integration.kube_api import KubeAPI
from tests.integration.prometheus_server import (
    JOB,
    BackfilledTrace,
    CounterSeries,
    PrometheusServer,
)
from tests.integration.serve_process import ServeProcess

pytestmark = pytest.mark.prometheus

STEP = 300.0
DAYS = 30
"""Longer than serve's 28-day window, so every history it asks for has data."""
AHEAD = 2 * HOUR
"""Samples written past the session's start, so the load stays fresh while the tests run."""
FIT_BEFORE = 6 * HOUR
"""The first champion was fitted this long before the module started, before the jump."""


PHASE_END = 1_796_218_200.0
"""2026-12-02 13:30 UTC: where the synthetic load's cycle and noise stand at the trace's end,
whatever the wall clock says (a load drawn for the real hour made the tests' drift verdict depend
on the time of day they ran)."""


def jump_trace(now: float) -> BackfilledTrace:
    """30 days of synthetic load that triples 4 hours before `now`: the same values at every
    run (drawn as if the trace ended at PHASE_END), stamped to end AHEAD past `now`."""
    end = math.floor(now / STEP) * STEP + AHEAD
    base = synthetic.load(DAYS, seed=7, start=PHASE_END - DAYS * DAY + STEP)
    times = base.times().astype(np.float64) - PHASE_END + end
    values = base.values.copy()
    values[times >= end - AHEAD - 4 * HOUR] *= 3
    return BackfilledTrace("cluster", "trace_cluster", STEP, 0.0, times, values)


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    now = time.time()
    server = PrometheusServer(tmp_path_factory.mktemp("prom"), [jump_trace(now)])
    times = np.arange(now - HOUR, now + AHEAD, 30.0)
    for name, value in (("fresh-drifting", 1.0), ("fresh-calm", 0.0)):  # as replicas export
        labels = {"job": "scaler", "pod": "scaler-a", "target": spec_of(name).key}
        values = np.full(len(times), value)
        server.counters.append(
            CounterSeries("scaler_drift_fallback", labels, times, values, kind="gauge")
        )
    server.start()
    try:
        yield server
    finally:
        server.stop()


ADDRESS = "scaler.keda.svc:9000"
META = {
    "scalerAddress": ADDRESS,
    "query": f'sum(trace_cluster{{job="{JOB}",trace="cluster"}})',
    "threshold": "20",
    "model": "seasonal",
    "prewarmBudget": "100000",
}


def spec_of(name: str) -> specs.TargetSpec:
    return specs.parse("gpu", name, META)


SO = ("keda.sh/v1alpha1", "scaledobjects")


def scaled_object(name: str, **meta: str) -> dict[str, Any]:
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": name, "namespace": "gpu"},
        "spec": {
            "scaleTargetRef": {"name": name},
            "triggers": [{"type": "external", "metadata": META | meta}],
        },
    }


def store_champion(store: Path, prometheus: PrometheusServer, name: str, before: float) -> int:
    """A seasonal model of `name` fitted on the history up to `before` seconds before the
    trace's present, stored and promoted over the current champion."""
    trace = prometheus.traces["cluster"]
    fit_at = math.floor((trace.end - AHEAD - before) / STEP) * STEP
    keep = trace.times <= fit_at
    history = Series(float(trace.times[0]), STEP, trace.values[keep])
    spec = spec_of(name)
    data = artefact.fit("seasonal", history, forecast_steps(spec, STEP), quantile=spec.quantile)
    target, key = DirectoryStore(store), StoreKey.of(spec)
    current = target.champion_version(key)
    version = target.put(key, data, {"writer": "test"})
    assert target.promote(key, version, expected=current)
    return version


class Serve(ServeProcess):
    """`scaler serve --scaler-address --kubeconfig --store --kube-events`, as a process."""

    def __init__(
        self, log: Path, *, prometheus: str, store: Path, kubeconfig: Path, extra: tuple[str, ...]
    ) -> None:
        flags = [
            "--prometheus-url", prometheus, "--store", str(store),
            "--scaler-address", ADDRESS, "--kubeconfig", str(kubeconfig), "--kube-events",
            *extra,
        ]  # fmt: skip
        super().__init__(log, flags, metadata=META)

    def served(self) -> set[str]:
        """namespace/name of every target the engine decides for."""
        prefix = "scaler_desired_replicas{"
        return {k[len(prefix) : -1] for k in self.metrics() if k.startswith(prefix)}


@contextlib.contextmanager
def serving(
    tmp: Path, prometheus: PrometheusServer, store: Path, *extra: str, log: str = "serve.log"
) -> Iterator[Serve]:
    running = Serve(
        tmp / log,
        prometheus=prometheus.url,
        store=store,
        kubeconfig=tmp / "kubeconfig",
        extra=extra,
    )
    try:
        running.wait_serving()
        yield running
    finally:
        running.kill()


def until(check: Callable[[], bool], what: str, log: Path, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"never {what}:\n{log.read_text()[-6000:]}"
        time.sleep(0.2)


def test_serve_warms_the_cluster_targets_before_serving_and_follows_the_watch(
    prometheus: PrometheusServer, kube_api: KubeAPI, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    store_champion(store, prometheus, "drifting", FIT_BEFORE)
    failed_at = time.time() - 3600  # the last retrain of it failed, as the job records it
    DirectoryStore(store).record_retrain(
        StoreKey.of(spec_of("drifting")), ok=False, at=failed_at, reason="test"
    )
    kube_api.add(scaled_object("drifting"))
    kube_api.add(scaled_object("foreign", scalerAddress="another-scaler:9000"))
    with serving(tmp_path, prometheus, store) as serve:
        gauges = serve.metrics()  # read at once: warm from the cluster before SERVING
        assert gauges["scaler_drift_fallback{gpu/drifting}"] == 1.0, serve.log.read_text()
        assert serve.answer("drifting") >= gauges["scaler_reactive_replicas{gpu/drifting}"]
        assert serve.served() == {"gpu/drifting"}  # not the trigger naming another scaler
        failure = "scaler_retrain_last_failure_timestamp_seconds{gpu/drifting}"
        until(lambda: failure in serve.metrics(), "exported the retrain outcome", serve.log)
        assert serve.metrics()[failure] == pytest.approx(failed_at)
        assert "scaler_retrain_last_success_timestamp_seconds{gpu/drifting}" not in serve.metrics()

        kube_api.add(scaled_object("late"))
        until(lambda: "gpu/late" in serve.served(), "served the new ScaledObject", serve.log)
        kube_api.delete(*SO, "gpu", "late")
        until(lambda: "gpu/late" not in serve.served(), "dropped the deleted one", serve.log)

        # An API server that restarts with its history compacted: the watch's resourceVersion
        # is gone (410), so discovery lists again and finds what changed meanwhile.
        # Every reconnect fails until the history is compacted: one that came between the add
        # and the compaction (after a backoff of about 1 s) would stream the add, not get 410.
        kube_api.fail_next("GET", "watch=", 500, count=1000)
        kube_api.end_watches()
        kube_api.add(scaled_object("after-gone"))
        kube_api.compact()
        kube_api.clear_failures()
        until(lambda: "gpu/after-gone" in serve.served(), "relisted after 410", serve.log)
        assert "listing again" in serve.log.read_text()
        lists = [p for _, p in kube_api.requests("GET", "scaledobjects") if "watch=" not in p]
        assert len(lists) == 2  # start-up, and after the 410: resumes do not list
    assert "Traceback" not in serve.log.read_text()


def test_a_discovered_target_stays_without_polls_while_its_scaled_object_exists(
    prometheus: PrometheusServer, kube_api: KubeAPI, tmp_path: Path
) -> None:
    kube_api.add(scaled_object("steady"))
    expiry = 3.0
    with serving(
        tmp_path, prometheus, tmp_path / "store", "--idle-expiry", f"{expiry:g}s"
    ) as serve:
        with contextlib.suppress(Exception):  # no decision yet: UNAVAILABLE is fine here
            serve.answer("asked-once")  # KEDA asks about a target the cluster does not list
        expired = "dropped idle target gpu/asked-once"
        until(lambda: expired in serve.log.read_text(), "expired the asked one", serve.log)
        assert "gpu/asked-once" not in serve.served()
        kube_api.add(scaled_object("late"))  # discovered by the watch, not at start-up
        until(lambda: "gpu/late" in serve.served(), "served the new ScaledObject", serve.log)
        time.sleep(2 * expiry)  # no KEDA poll for either, past the expiry
        assert {"gpu/steady", "gpu/late"} <= serve.served()
        assert "dropped idle target gpu/steady" not in serve.log.read_text()
        kube_api.delete(*SO, "gpu", "steady")
        until(lambda: "gpu/steady" not in serve.served(), "dropped the deleted one", serve.log)
        assert "dropped deleted target gpu/steady" in serve.log.read_text()


def test_a_stream_on_a_deleted_scaled_object_ends_at_once_with_not_found(
    prometheus: PrometheusServer, kube_api: KubeAPI, tmp_path: Path
) -> None:
    """KEDA's StreamIsActive waits for its target's next decision. A target dropped while one
    waited was never decided again, so the call stayed parked until KEDA closed it."""
    kube_api.add(scaled_object("streamed"))
    with serving(tmp_path, prometheus, tmp_path / "store") as serve:
        target = pb.ScaledObjectRef(name="streamed", namespace="gpu", scalerMetadata=META)
        stub = pb_grpc.ExternalScalerStub(serve.channel)  # type: ignore[no-untyped-call]
        stream = stub.StreamIsActive(target, timeout=30)
        next(stream)  # its state: warm before SERVING
        kube_api.delete(*SO, "gpu", "streamed")
        with pytest.raises(grpc.RpcError) as ended:
            next(stream)
        assert ended.value.code() is grpc.StatusCode.NOT_FOUND, ended.value.details()
        assert ended.value.details() == (
            "gpu/streamed: this scaler no longer serves the target: its ScaledObject, or its "
            "trigger naming this scaler, left the cluster"
        )
        assert "gpu/streamed" not in serve.served()  # the stream did not register it again


def test_a_promoted_model_is_one_event_on_its_scaled_object_rate_limited(
    prometheus: PrometheusServer, kube_api: KubeAPI, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    store_champion(store, prometheus, "llm", FIT_BEFORE)
    kube_api.add(scaled_object("llm"))

    def promoted() -> list[dict[str, Any]]:
        return [e for e in kube_api.objects("v1", "events", "gpu") if e["reason"] == MODEL_PROMOTED]

    with serving(tmp_path, prometheus, store) as serve:
        time.sleep(3)  # a few decisions from v1: a model already in use at start is no news
        assert promoted() == []
        second = store_champion(store, prometheus, "llm", FIT_BEFORE - 2 * HOUR)
        until(lambda: len(promoted()) == 1, "posted the promotion", serve.log)
        (event,) = promoted()
        assert event["involvedObject"] == {
            "apiVersion": "keda.sh/v1alpha1",
            "kind": "ScaledObject",
            "name": "llm",
            "namespace": "gpu",
        }
        assert event["type"] == "Normal" and "replaces" in event["message"]
        third = store_champion(store, prometheus, "llm", FIT_BEFORE - 4 * HOUR)
        until(
            lambda: f"seasonal v{third} from the model store" in serve.log.read_text(),
            f"adopted v{third}",
            serve.log,
        )
        time.sleep(4)  # two decisions from v3
        assert len(promoted()) == 1  # the second promotion is held back (10 min per reason)
        assert second < third


WINDOW = ("--kube-events-interval", "24h")
"""One Event window for the whole test (windows are aligned on the epoch: two replicas seeing
the same change a step apart fall in two windows only across midnight UTC)."""


def events_of(kube_api: KubeAPI, name: str, reason: str) -> list[dict[str, Any]]:
    return [
        e
        for e in kube_api.objects("v1", "events", "gpu")
        if e["involvedObject"]["name"] == name and e["reason"] == reason
    ]


def test_a_target_starting_in_fallback_says_so_once_across_replicas_and_a_restart(
    prometheus: PrometheusServer, kube_api: KubeAPI, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    store_champion(store, prometheus, "stale", FIT_BEFORE)  # fitted before the load tripled
    kube_api.add(scaled_object("stale"))
    fallback = "scaler_drift_fallback{gpu/stale}"
    with (
        serving(tmp_path, prometheus, store, *WINDOW, log="a.log") as a,
        serving(tmp_path, prometheus, store, *WINDOW, log="b.log") as b,
    ):
        assert a.metrics()[fallback] == b.metrics()[fallback] == 1.0  # fallback from the start
        until(lambda: len(events_of(kube_api, "stale", DRIFT_FALLBACK)) == 1, "said it", a.log)
        time.sleep(4)  # both replicas decided twice: the second said nothing new
        (said,) = events_of(kube_api, "stale", DRIFT_FALLBACK)
        assert said["type"] == "Warning" and "drifted" in said["message"]
        assert said["count"] == 1
        creates = len(kube_api.requests("POST", "/events"))
        lookups = len(kube_api.requests("GET", "involvedObject.name%3Dstale"))
        b.kill()  # a restart, still in fallback: the Event that exists says it
        with serving(tmp_path, prometheus, store, *WINDOW, log="b2.log") as again:
            assert again.metrics()[fallback] == 1.0
            until(
                lambda: len(kube_api.requests("GET", "involvedObject.name%3Dstale")) > lookups,
                "looked the Event up",
                again.log,
            )
            time.sleep(4)
            assert events_of(kube_api, "stale", DRIFT_FALLBACK) == [said]
            assert len(kube_api.requests("POST", "/events")) == creates  # not even tried

            # A model fitted on the load as it is now: trusted again, said once by the two.
            store_champion(store, prometheus, "stale", 0.0)
            for replica in (a, again):
                until(lambda r=replica: r.metrics()[fallback] == 0.0, "recovered", replica.log)
            until(lambda: events_of(kube_api, "stale", DRIFT_RECOVERED) != [], "said it", a.log)
            time.sleep(4)
            (recovered,) = events_of(kube_api, "stale", DRIFT_RECOVERED)
            assert recovered["type"] == "Normal" and "trusted again" in recovered["message"]
    assert len(events_of(kube_api, "stale", DRIFT_FALLBACK)) == 1
    for log in ("a.log", "b.log", "b2.log"):
        assert "Traceback" not in (tmp_path / log).read_text()


def test_a_spent_prewarm_budget_is_one_warning_event_across_replicas(
    prometheus: PrometheusServer, kube_api: KubeAPI, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    store_champion(store, prometheus, "thrifty", 0.0)  # trusted: it prewarms
    kube_api.add(scaled_object("thrifty", prewarmBudget="0.001"))
    with (
        serving(tmp_path, prometheus, store, *WINDOW, log="a.log") as a,
        serving(tmp_path, prometheus, store, *WINDOW, log="b.log"),
    ):
        until(lambda: events_of(kube_api, "thrifty", BUDGET_EXHAUSTED) != [], "said it", a.log)
        time.sleep(4)
        (spent,) = events_of(kube_api, "thrifty", BUDGET_EXHAUSTED)
        assert spent["type"] == "Warning" and "prewarm budget spent" in spent["message"]
        assert spent["count"] == 1
        assert a.metrics()["scaler_prewarm_budget_remaining{gpu/thrifty}"] <= 0


def test_retrain_writes_the_replicas_drift_fallback_and_the_null_with_a_model(
    prometheus: PrometheusServer, tmp_path: Path
) -> None:
    read = retrain_live.live_fallback(PrometheusSource(prometheus.url))
    now = time.time()
    assert read(spec_of("fresh-drifting"), now) is True  # the gauge the replicas export
    assert read(spec_of("fresh-calm"), now) is False
    assert read(spec_of("never-served"), now) is None
    manifest = tmp_path / "so.yaml"
    names = ["fresh-drifting", "fresh-calm", "never-served"]
    items = [scaled_object(name) for name in names]
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    code = cli.main(
        ["retrain", "--targets", str(manifest), "--store", str(tmp_path / "store"),
         "--prometheus-url", prometheus.url, "--workers", "0"]
    )  # fmt: skip
    assert code == 0
    store = DirectoryStore(tmp_path / "store")
    carried = {}
    for name in names:
        stored = store.champion(StoreKey.of(spec_of(name)))
        assert stored is not None and stored.meta["quick"] is False
        carried[name] = stored.meta["fallback_at_fit"]
        null = stored.artefact[driftstate.NULL_KEY]  # what serve reads instead of measuring
        assert driftstate.null_from_json(null, spec_of(name), STEP) is not None
    assert carried == {"fresh-drifting": True, "fresh-calm": False, "never-served": False}


def test_retrain_reads_each_target_from_its_server_address_with_the_credentials_serve_sends(
    prometheus: PrometheusServer, prometheus_server: PrometheusServer, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    guard = ProxyState(prometheus.url, expect=("Authorization", "Bearer s3cret"))
    nasa = prometheus_server.traces["nasa_http_5min"].selector  # only in the default one
    with auth_proxy(guard) as guarded:
        items = [
            scaled_object("own", serverAddress=prometheus.url),  # only in this one
            scaled_object("guarded", serverAddress=guarded),  # the same, behind a token
            scaled_object("default", query=f"sum({nasa})"),  # no serverAddress
        ]
        manifest = tmp_path / "so.yaml"
        manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))

        def run(store: str, *flags: str) -> dict[str, dict[str, Any]]:
            out = tmp_path / f"{store}.json"
            code = cli.main(
                ["retrain", "--targets", str(manifest), "--store", str(tmp_path / store),
                 "--prometheus-url", prometheus_server.url, "--prometheus-token-file",
                 str(token), "--workers", "0", "--json", str(out), *flags]
            )  # fmt: skip
            rows = json.loads(out.read_text())["outcomes"]
            assert code == (1 if any(r["failed"] for r in rows) else 0)
            return {r["target"].split("/")[1]: r for r in rows}

        trusted = run("trusted", "--prometheus-trusted-url", guarded)
        assert all(r["promoted"] for r in trusted.values()), trusted
        assert {s.headers.get("Authorization") for s in guard.seen} == {"Bearer s3cret"}
        guard.seen.clear()
        untrusted = run("untrusted")  # the token goes to the default Prometheus only
        assert untrusted["own"]["promoted"] and untrusted["default"]["promoted"]
        assert untrusted["guarded"]["failed"] and "401" in untrusted["guarded"]["reason"]
        assert not untrusted["guarded"]["unreachable"]  # a refusal: not waited out for 10m
        assert guard.seen and all("Authorization" not in s.headers for s in guard.seen)
