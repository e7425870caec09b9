"""Replicas on a shared model store and a real Prometheus: how fast a fresh replica with 1,000
known targets is warm, what the engine's refresh costs at 1,000 targets, and whether a rolling
restart of two replicas costs a KEDA-like client any failed poll.

A benchmark, not a test: it prints what it measures and a PASS / FALL SHORT line per goal of
issue 8, and exits 1 only when it cannot run. In order:

1. a real Prometheus (tests/integration/prometheus_server.py) backfilled with the traces, each
   running on AHEAD past now, so the load stays fresh for the whole run;
2. a targets file of N ScaledObjects over those traces (thresholds, lead times and horizons
   differ) and a warm store: each target's champion (`--champion` kind, seasonal by default)
   fitted on history up to `--model-age` before now, written and promoted as `scaler retrain`
   or a replica would, with the drift null a replica stores with it (`--no-null`: as the
   retrain job writes it); with `--checkpoints` a first replica then serves until every
   target's checkpoint is in the store (scaler/serving/checkpoints.py), and stops; with
   `--ledger-history 24h` Prometheus also holds both ledger counters of every target for
   `--ledger-pods` scaler pods over that span (bench/ledger_history.py), as a fleet that old
   leaves them: without it a fresh replica's ledger reads find nothing;
3. replica A: `scaler serve --targets --store` from process start to gRPC health SERVING, then
   GetMetrics for every target at once (goal: all answer, under 30 s from start);
4. A's steady state over `--window` seconds: CPU seconds of its process tree per wall second
   (goal under 0.20 of one core) and the Prometheus queries it sent per target per minute (from
   Prometheus' own prometheus_http_requests_total);
5. replica B, then a rolling restart (A2 up and SERVING, SIGTERM A; B2 up and SERVING, SIGTERM
   B) under a client that polls every target every `--poll` seconds, spread evenly, each call to
   a replica its last health check (every HEALTH_EVERY) saw SERVING, as KEDA reaches only the
   ready pods behind the headless Service (goal: no UNAVAILABLE).

    .venv/bin/python bench/replicas.py --targets 1000 --json /tmp/replicas.json
    .venv/bin/python bench/replicas.py --targets 1000 --drain-delay 0s   # the ablation
    .venv/bin/python bench/replicas.py --targets 1000 --only steady --checkpoints \
        --ledger-history 24h                                              # a day-old fleet
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import io
import json
import math
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import procs
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import ledger_history  # noqa: E402

from models import artefact  # noqa: E402
from models.base import Series  # noqa: E402
from scaler._pb import externalscaler_pb2 as pb  # noqa: E402
from scaler._pb import externalscaler_pb2_grpc as pb_grpc  # noqa: E402
from scaler.decision import drift_measure  # noqa: E402
from scaler.decision import spec as specs  # noqa: E402
from scaler.decision.spec import duration_arg  # noqa: E402
from scaler.serving import driftstate  # noqa: E402
from scaler.serving.state import forecast_steps  # noqa: E402
from scaler.store.base import StoreKey  # noqa: E402
from scaler.store.directory import DirectoryStore  # noqa: E402
from tests.integration import prometheus_server as promtest  # noqa: E402

AHEAD = 3600.0
"""Seconds of trace backfilled past now."""
HEALTH_EVERY = 1.0
"""Seconds between the client's health checks of each replica (endpoint propagation)."""
GOAL_WARM_S = 30.0
GOAL_CPU = 0.20
MODEL_STEP = 300.0
LOOKBACK = 300.0
"""Prometheus' default lookback for a sample, in seconds."""
SCRAPE = 120.0
"""Seconds between the samples of a backfilled trace over SCRAPED_SPAN (`scraped`)."""
SCRAPED_SPAN = 40 * 86400.0
"""The newest part of each trace that the replicas read: the 28-day window, a week-old
champion's fit before it, and room to spare."""


def scraped(trace: promtest.BackfilledTrace, *, now: float) -> promtest.BackfilledTrace:
    """`trace` as a scraped gauge reads: each row's value again every SCRAPE seconds until the
    next row, over the SCRAPED_SPAN the replicas read. A 10- or 30-minute trace as it is has no
    sample in Prometheus' 5-minute lookback for most of each row, so the replicas' instant
    query found nothing and answered UNAVAILABLE for a reason no real cluster has."""
    if trace.step <= SCRAPE:
        return trace
    begin = max(trace.start, now - SCRAPED_SPAN)
    older = trace.times < begin
    fine = np.arange(begin, trace.end + trace.step, SCRAPE)
    rows = np.clip(np.floor((fine - trace.start) / trace.step).astype(np.int64), 0, None)
    rows = np.minimum(rows, trace.values.size - 1)
    times = np.concatenate([trace.times[older], fine])
    values = np.concatenate([trace.values[older], trace.values[rows]])
    return dataclasses.replace(trace, times=times, values=values)


def target_objects(count: int, traces: dict[str, promtest.BackfilledTrace]) -> list[dict[str, Any]]:
    names = sorted(traces)
    objects = []
    for i in range(count):
        trace = traces[names[i % len(names)]]
        level = float(max(1.0, abs(float(_nanmean(trace.values)))))
        meta = {
            "scalerAddress": "predictive-scaler.keda.svc:9000",
            "query": f"sum({trace.selector})",
            "threshold": f"{level * (0.2 + (i % 7) / 20):.3f}",
            "leadTime": ("10m", "15m")[i % 2],
            "horizon": "15m",
            "maxReplicas": str(20 + i % 60),
            "maxPrewarmReplicas": str(2 + i % 6),
        }
        objects.append(
            {
                "apiVersion": "keda.sh/v1alpha1",
                "kind": "ScaledObject",
                "metadata": {"name": f"llm-{i:04d}", "namespace": f"team-{i % 25:02d}"},
                "spec": {
                    "scaleTargetRef": {"name": f"llm-{i:04d}"},
                    "triggers": [{"type": "external", "metadata": meta}],
                },
            }
        )
    return objects


def _nanmean(values: Any) -> float:
    finite = [float(v) for v in values.tolist() if math.isfinite(v)]
    return sum(finite) / max(len(finite), 1)


def spec_of(obj: dict[str, Any]) -> specs.TargetSpec:
    meta = obj["metadata"]
    return specs.parse(meta["namespace"], meta["name"], obj["spec"]["triggers"][0]["metadata"])


def history_of(trace: promtest.BackfilledTrace, *, until: float) -> Series:
    """The trace at the model step up to `until`, as the engine reads it from Prometheus: at
    each grid time the newest sample at or before it, within the 5-minute lookback."""
    start = math.ceil(trace.start / MODEL_STEP) * MODEL_STEP
    end = math.floor(until / MODEL_STEP) * MODEL_STEP
    grid = start + MODEL_STEP * np.arange(int((end - start) // MODEL_STEP) + 1)
    newest = np.searchsorted(trace.times, grid, side="right") - 1
    fresh = (newest >= 0) & (grid - trace.times[np.maximum(newest, 0)] < LOOKBACK)
    values = np.where(fresh, trace.values[np.maximum(newest, 0)], np.nan)
    return Series(start, MODEL_STEP, values)


def warm_store(
    store: Path,
    objects: list[dict[str, Any]],
    traces: dict[str, promtest.BackfilledTrace],
    *,
    until: float,
    null: bool,
    kind: str,
) -> float:
    """Fit one champion per (trace, lead time, horizon) and store it for every target that
    shares them; returns the seconds it took."""
    began = time.monotonic()
    by_query = {f"sum({t.selector})": t for t in traces.values()}
    fitted: dict[tuple[str, float, float], dict[str, Any]] = {}
    target = DirectoryStore(store)
    for obj in objects:
        spec = spec_of(obj)
        combo = (spec.query, spec.lead_time, spec.horizon)
        if combo not in fitted:
            history = history_of(by_query[spec.query], until=until)
            steps = forecast_steps(spec, MODEL_STEP)
            data = artefact.fit(kind, history, steps, quantile=spec.quantile)
            if null:
                model = artefact.load(data)
                measured = drift_measure.null_for(
                    model, history, lead_time=spec.lead_time, quantile=spec.quantile
                )
                data[driftstate.NULL_KEY] = driftstate.null_to_json(measured, spec, MODEL_STEP)
            fitted[combo] = data
        key = StoreKey.of(spec)
        version = target.put(key, fitted[combo], {"writer": "bench"})
        target.promote(key, version, expected=target.champion_version(key))
    return time.monotonic() - began


class Replica:
    def __init__(
        self,
        name: str,
        args: argparse.Namespace,
        work: Path,
        prom: str,
        extra: tuple[str, ...] = (),
    ) -> None:
        self.grpc_port, self.http_port = procs.free_port(), procs.free_port()
        argv = [
            sys.executable, "-m", "scaler", "serve", "--host", "127.0.0.1",
            "--grpc-port", str(self.grpc_port), "--http-port", str(self.http_port),
            "--prometheus-url", prom, "--store", str(work / "store"),
            "--step", args.step, "--fit-workers", "1", "--drain-delay", args.drain_delay,
            "--max-targets", str(max(args.targets, 1000)),
        ]  # fmt: skip
        if not args.no_targets_file:
            argv += ["--targets", str(work / "targets.yaml")]
        if args.warm_nice is not None:
            argv += ["--warm-nice", str(args.warm_nice)]
        if args.fit_input is not None:
            argv += ["--fit-input", args.fit_input]
        argv += extra
        self.started = time.monotonic()
        self.server = procs.Server(name, argv, work / f"{name}.log", port=self.grpc_port)
        self.name = name

    def serving(self) -> bool:
        self.server.check_alive()
        with grpc.insecure_channel(self.server.address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            try:
                reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=1)
            except grpc.RpcError:
                return False
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)

    def wait_serving(self, within: float) -> float:
        while not self.serving():
            if time.monotonic() - self.started > within:
                raise RuntimeError(f"{self.name} never SERVING:\n{self.server.tail()}")
            time.sleep(0.05)
        return time.monotonic() - self.started


def sampled(replica: Replica, out: Path) -> subprocess.Popen[bytes]:
    """py-spy sampling `replica`, every thread, 20 times a second (more falls behind on two
    loaded cores), until sent SIGINT; its collapsed stacks go to `out`."""
    spy = str(Path(sys.executable).with_name("py-spy"))
    argv = [spy, "record", "--nonblocking", "--rate", "20", "--format", "raw", "-o", str(out)]
    return subprocess.Popen([*argv, "--pid", str(replica.server.proc.pid)])


async def backfilled(replica: Replica, within: float) -> float:
    """Seconds from the replica's start until its log says the older histories are read."""
    while "older history read" not in replica.server.log.read_text():
        if time.monotonic() - replica.started > within:
            raise RuntimeError(f"{replica.name} never read its older history")
        await asyncio.sleep(0.5)
    return time.monotonic() - replica.started


def checkpoints_current(replica: Replica) -> int:
    """Targets whose newest due checkpoint is in the store, as the replica last logged."""
    found = re.findall(r"; (\d+) of \d+ up to date", replica.server.log.read_text())
    return int(found[-1]) if found else 0


async def checkpoints_written(replica: Replica, targets: int, within: float) -> float:
    """Seconds from the replica's start until every target's checkpoint is in the store."""
    while checkpoints_current(replica) < targets:
        if time.monotonic() - replica.started > within:
            raise RuntimeError(f"{replica.name} never checkpointed all:\n{replica.server.tail()}")
        await asyncio.sleep(0.5)
    return time.monotonic() - replica.started


async def checkpointed_store(args: argparse.Namespace, work: Path, prom: str) -> float:
    """A replica serves on the warm store until every target's checkpoint is written (the store
    as a serving fleet leaves it: scaler/serving/checkpoints.py), then stops."""
    writer = Replica("w", args, work, prom, extra=("--store-poll", "5s"))
    try:
        writer.wait_serving(args.startup_timeout)
        return await checkpoints_written(writer, args.targets, 3 * args.startup_timeout)
    finally:
        writer.server.stop()


def requests_of(objects: list[dict[str, Any]]) -> list[pb.GetMetricsRequest]:
    out = []
    for obj in objects:
        spec = spec_of(obj)
        meta = obj["spec"]["triggers"][0]["metadata"]
        ref = pb.ScaledObjectRef(name=spec.name, namespace=spec.namespace, scalerMetadata=meta)
        out.append(pb.GetMetricsRequest(scaledObjectRef=ref, metricName=spec.metric_name))
    return out


async def all_answer(address: str, requests: list[pb.GetMetricsRequest]) -> Counter[str]:
    """GetMetrics for every target, 32 at a time: status code counts."""
    codes: Counter[str] = Counter()
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.ExternalScalerStub(channel)  # type: ignore[no-untyped-call]
        for batch in range(0, len(requests), 32):
            calls = [stub.GetMetrics(r, timeout=10) for r in requests[batch : batch + 32]]
            for result in await asyncio.gather(*calls, return_exceptions=True):
                codes["OK" if not isinstance(result, Exception) else _code(result)] += 1
    return codes


def _code(exc: BaseException) -> str:
    return exc.code().name if isinstance(exc, grpc.aio.AioRpcError) else type(exc).__name__


def prometheus_queries(url: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    pattern = (
        r'^prometheus_http_requests_total\{[^}]*handler="/api/v1/query(?:_range)?"[^}]*\} (\S+)$'
    )
    return sum(float(v) for v in re.findall(pattern, text, re.M))


class Client:
    """Polls every target every `poll` seconds over the replicas last seen SERVING."""

    def __init__(self, requests: list[pb.GetMetricsRequest], poll: float) -> None:
        self.requests, self.poll = requests, poll
        self.replicas: list[Replica] = []
        self.ready: dict[str, bool] = {}
        self.codes: Counter[str] = Counter()
        self.failures: list[tuple[float, str, str]] = []
        self.stop = asyncio.Event()
        self.known = asyncio.Event()
        self.calls: set[asyncio.Future[None]] = set()

    async def health(self) -> None:
        while not self.stop.is_set():
            for r in list(self.replicas):
                try:
                    self.ready[r.name] = await asyncio.to_thread(r.serving)
                except RuntimeError:  # exited
                    self.ready[r.name] = False
            if any(self.ready.values()):
                self.known.set()
            await asyncio.sleep(HEALTH_EVERY)

    async def run(self) -> None:
        channels: dict[str, Any] = {}
        health = asyncio.create_task(self.health())
        await self.known.wait()  # the endpoints are known before the first poll
        gap = self.poll / len(self.requests)
        i, began = 0, time.monotonic()
        try:
            while not self.stop.is_set():
                ready = [r for r in self.replicas if self.ready.get(r.name)]
                if ready:
                    r = ready[i % len(ready)]
                    if r.name not in channels:
                        channel = grpc.aio.insecure_channel(r.server.address)
                        stub = pb_grpc.ExternalScalerStub
                        channels[r.name] = stub(channel)  # type: ignore[no-untyped-call]
                    request = self.requests[i % len(self.requests)]
                    call = asyncio.ensure_future(self._call(channels[r.name], r.name, request))
                    self.calls.add(call)
                    call.add_done_callback(self.calls.discard)
                else:
                    self.codes["NO_READY_REPLICA"] += 1
                i += 1
                await asyncio.sleep(max(0.0, began + i * gap - time.monotonic()))
        finally:
            health.cancel()

    async def _call(self, stub: Any, name: str, request: pb.GetMetricsRequest) -> None:
        try:
            await stub.GetMetrics(request, timeout=5)
            self.codes["OK"] += 1
        except grpc.aio.AioRpcError as exc:
            self.codes[exc.code().name] += 1
            self.failures.append((time.time(), name, exc.code().name))


async def rolling_restart(
    args: argparse.Namespace,
    work: Path,
    prom: str,
    a: Replica,
    requests: list[pb.GetMetricsRequest],
) -> dict[str, Any]:
    b = Replica("b", args, work, prom)
    b.wait_serving(args.startup_timeout)
    client = Client(requests, args.poll)
    client.replicas = [a, b]
    task = asyncio.create_task(client.run())
    events: list[tuple[float, str]] = []
    began = time.monotonic()

    def note(what: str) -> None:
        events.append((round(time.monotonic() - began, 1), what))
        print(f"    {events[-1][0]:6.1f}s {what}; client so far: {dict(client.codes)}")

    await asyncio.sleep(10)
    for old, new_name in ((a, "a2"), (b, "b2")):
        new = Replica(new_name, args, work, prom)
        client.replicas.append(new)
        note(f"{new_name} started")
        await asyncio.to_thread(new.wait_serving, args.startup_timeout)
        note(f"{new_name} SERVING")
        await asyncio.sleep(2 * HEALTH_EVERY)
        note(f"SIGTERM {old.name}")
        code = await asyncio.to_thread(old.server.stop)
        note(f"{old.name} exited ({code})")
        client.replicas.remove(old)
        await asyncio.sleep(10)
    note("done")
    client.stop.set()
    await task
    await asyncio.sleep(1)
    for r in client.replicas:
        r.server.stop()
    return {"codes": dict(client.codes), "events": events, "failures": client.failures[:20]}


async def main_async(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    out: dict[str, Any] = {
        "targets": args.targets,
        "model_age_s": args.model_age,
        "step": args.step,
        "ledger_history_s": args.ledger_history,
        "ledger_pods": args.ledger_pods,
    }
    now = time.time()
    print(f"Prometheus: backfilling the traces up to {AHEAD / 60:.0f} min past now ...")
    (work / "prom").mkdir(parents=True, exist_ok=True)
    prometheus = promtest.backfilled_server(work / "prom", now=now + AHEAD)
    prometheus.traces = {name: scraped(t, now=now) for name, t in prometheus.traces.items()}
    objects = target_objects(args.targets, prometheus.traces)
    if args.ledger_history:  # pods up an hour before the window, scraped until AHEAD past now
        span = args.ledger_history + 3600.0 + AHEAD
        keys = [spec_of(obj).key for obj in objects]
        prometheus.counters = ledger_history.counters(
            keys, pods=args.ledger_pods, end=now + AHEAD, span=span
        )
        print(
            f"  and both ledger counters of {args.targets} targets x {args.ledger_pods} pods, "
            f"{len(prometheus.counters[0].times):,} samples each ..."
        )
    began = time.monotonic()
    prometheus.backfill_timeout = 1800.0
    prometheus.start(ready_timeout=300.0)
    print(f"  Prometheus backfilled and ready in {time.monotonic() - began:.0f}s")
    try:
        (work / "targets.yaml").write_text(
            yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects})
        )
        took = warm_store(
            work / "store",
            objects,
            prometheus.traces,
            until=now - args.model_age,
            null=not args.no_null,
            kind=args.champion,
        )
        print(f"  warm store: {args.targets} champions written in {took:.1f}s")
        if args.checkpoints:
            took = await checkpointed_store(args, work, prometheus.url)
            print(f"  checkpoints: a first replica wrote all {args.targets} in {took:.1f}s")
        out["checkpoints"] = args.checkpoints
        requests = requests_of(objects)
        prom_pid = prometheus._process.pid if prometheus._process is not None else 0
        prom_before = procs.cpu_seconds([prom_pid])
        queries_before = prometheus_queries(prometheus.url)
        a = Replica("a", args, work, prometheus.url)
        spy = None if args.profile is None else sampled(a, args.profile)
        serving = a.wait_serving(args.startup_timeout)
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=60)
        cpu_at_serving = procs.cpu_seconds(a.server.cpu_pids())
        prom_at_serving = procs.cpu_seconds([prom_pid]) - prom_before
        queries_warm = prometheus_queries(prometheus.url) - queries_before
        codes = await all_answer(a.server.address, requests)
        answered = time.monotonic() - a.started
        lines = a.server.log.read_text().splitlines()
        warm_line = next((line for line in lines if "warm in" in line), "")
        ledgers = ledger_history.log_counts(lines)
        out["warm"] = {
            "serving_s": serving,
            "all_answered_s": answered,
            "codes": dict(codes),
            "log": warm_line[24:],
            "ledgers": ledgers,
        }
        print(
            f"  fresh replica: SERVING {serving:.1f}s after start; GetMetrics for all "
            f"{args.targets}: {dict(codes)}, done {answered:.1f}s after start"
        )
        print(f"    {warm_line[24:]}")
        print(
            f"    before SERVING: {ledgers['read_at_serving']} ledgers rebuilt, "
            f"{ledgers['unknown_at_serving']} budget unknown (reactive), "
            f"{ledgers['deadline_at_serving']} refreshes past their deadline"
        )
        prom_cpu = procs.cpu_seconds([prom_pid])
        out["warm"]["scaler_cpu_s"] = cpu_at_serving
        out["warm"]["prometheus_cpu_s_total"] = prom_cpu
        out["warm"]["prometheus_cpu_s_warm_up"] = prom_at_serving
        out["warm"]["queries_per_target_warm_up"] = queries_warm / args.targets
        print(
            f"    CPU spent until SERVING: scaler {cpu_at_serving:.1f}s (process tree, imports "
            f"included); Prometheus {prom_at_serving:.1f}s from the replica's start, "
            f"{prom_cpu:.1f}s since it started (backfill load included); "
            f"{queries_warm / args.targets:.2f} Prometheus queries per target until SERVING"
        )
        ok = codes.get("OK", 0) == args.targets and answered < GOAL_WARM_S
        print(
            f"  {'PASS' if ok else 'FALL SHORT'}: all {args.targets} answering {answered:.1f}s "
            f"after start (goal under {GOAL_WARM_S:.0f}s)"
        )

        if args.only == "warm":
            a.server.stop()
            return out
        await asyncio.sleep(2 * float(args.step.rstrip("s")))  # past the first refreshes
        # The older history the warm-up left for after SERVING (scaler/serving/warmup.py
        # backfill) is one-off work: the steady state is measured once it is read.
        filled = await backfilled(a, within=args.startup_timeout)
        out["warm"]["backfilled_s"] = filled
        print(f"  older history read {filled:.1f}s after start (after SERVING, one at a time)")
        # So are the checkpoints of a replica that restored none (scaler/serving/checkpoints.py).
        written = await checkpoints_written(a, args.targets, within=args.startup_timeout)
        out["warm"]["checkpointed_s"] = written
        print(f"  every target's checkpoint in the store {written:.1f}s after start")
        spy = None if args.profile_steady is None else sampled(a, args.profile_steady)
        q0, c0, t0 = (
            prometheus_queries(prometheus.url),
            procs.cpu_seconds(a.server.cpu_pids()),
            time.monotonic(),
        )
        await asyncio.sleep(args.window)
        if spy is not None:  # py-spy is not in the replica's process tree: not in its CPU
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=60)
        q1, c1, t1 = (
            prometheus_queries(prometheus.url),
            procs.cpu_seconds(a.server.cpu_pids()),
            time.monotonic(),
        )
        share = (c1 - c0) / (t1 - t0)
        per_target_minute = (q1 - q0) / args.targets / ((t1 - t0) / 60)
        out["steady"] = {
            "cpu_share": share,
            "queries_per_target_minute": per_target_minute,
            "window_s": t1 - t0,
            "ledgers": ledger_history.log_counts(a.server.log.read_text().splitlines()),
        }
        print(f"  ledgers by the window's end: {out['steady']['ledgers']}")
        print(
            f"  engine at {args.targets} targets, step {args.step}, {t1 - t0:.0f}s window: CPU "
            f"{share:.3f} of one core, {per_target_minute:.2f} Prometheus queries per target "
            "per minute"
        )
        print(
            f"  {'PASS' if share < GOAL_CPU else 'FALL SHORT'}: CPU share {share:.3f} "
            f"(goal under {GOAL_CPU:.2f})"
        )

        if args.only == "steady":
            a.server.stop()
            return out
        print(
            f"  rolling restart under a client polling every target every {args.poll:g}s "
            f"(drain delay {args.drain_delay}):"
        )
        restart = await rolling_restart(args, work, prometheus.url, a, requests)
        out["rolling_restart"] = restart
        bad = sum(v for k, v in restart["codes"].items() if k != "OK")
        print(f"  client saw {restart['codes']}")
        print(
            f"  {'PASS' if bad == 0 else 'FALL SHORT'}: {bad} failed polls during the rolling "
            "restart (goal 0)"
        )
        return out
    finally:
        prometheus.stop()


def main() -> int:
    if isinstance(sys.stdout, io.TextIOWrapper):  # progress shows in a log file as it happens
        sys.stdout.reconfigure(line_buffering=True)
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--targets", type=int, default=1000)
    p.add_argument("--step", default="30s")
    p.add_argument(
        "--model-age", type=float, default=600.0, help="seconds between the champions' fit and now"
    )
    p.add_argument("--champion", default="seasonal", help="model kind of the stored champions")
    p.add_argument(
        "--no-null", action="store_true", help="store champions without their drift null"
    )
    p.add_argument(
        "--no-targets-file",
        action="store_true",
        help="ablation: replicas learn targets from KEDA's calls",
    )
    p.add_argument("--drain-delay", default="5s")
    p.add_argument(
        "--fit-input",
        choices=("peaks", "points"),
        help="scaler serve --fit-input (default: serve's own, peaks); points is the ablation",
    )
    p.add_argument(
        "--warm-nice",
        type=int,
        help="the replicas' --warm-nice (default: the scaler's, 0)",
    )
    p.add_argument(
        "--checkpoints",
        action="store_true",
        help="a first replica serves until it has written every target's checkpoint, as a "
        "serving fleet leaves the store; without it the store holds champions only (ablation)",
    )
    p.add_argument(
        "--ledger-history",
        type=duration_arg,
        help="backfill both ledger counters of every target over this span (e.g. 24h, the "
        "default prewarmBudgetWindow), as a fleet that old leaves them; default: none",
    )
    p.add_argument("--ledger-pods", type=int, default=2, help="scaler pods of that fleet")
    p.add_argument("--poll", type=float, default=10.0)
    p.add_argument("--window", type=float, default=120.0)
    p.add_argument("--startup-timeout", type=float, default=600.0)
    p.add_argument(
        "--only",
        choices=("warm", "steady", "all"),
        default="all",
        help="stop after the fresh replica's start (warm), after its steady state, or run all",
    )
    p.add_argument("--json", type=Path)
    p.add_argument("--keep", type=Path)
    p.add_argument(
        "--profile",
        type=Path,
        help="sample the first replica with py-spy (pip install py-spy; it is not a "
        "dependency) and write its collapsed stacks to this file",
    )
    p.add_argument(
        "--profile-steady",
        type=Path,
        help="sample the first replica with py-spy over the steady-state window (the engine's "
        "refresh) and write its collapsed stacks to this file",
    )
    args = p.parse_args()
    with contextlib.ExitStack() as stack:
        work = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        work.mkdir(parents=True, exist_ok=True)
        out = asyncio.run(main_async(args, work))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
