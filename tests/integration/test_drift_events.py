"""A target that drifts while the server runs: `run_server` (the engine, the decision log and the
Event recorder `scaler serve --kube-events` wires) on a file source and an accelerated clock,
polled over a real gRPC channel as KEDA polls it, posting to the Kubernetes API emulator over
HTTP. The model is fitted at start on a calm history, so the target starts trusted; the load
triples mid-run (fallback: one Warning Event on its ScaledObject) and comes back (recovered:
one Normal Event)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from pathlib import Path
from typing import Any

import grpc
import numpy as np

from models.base import DAY, HOUR
from scaler._pb import externalscaler_pb2 as pb
from scaler._pb import externalscaler_pb2_grpc as pb_grpc
from scaler.clock import ReplayClock
from scaler.record.notable import DRIFT_FALLBACK, DRIFT_RECOVERED
from scaler.serving.engine import Engine
from scaler.settings import EngineSettings, ServerSettings, Settings
from scaler.sources.file import FileSource
from tests.contract import synthetic
from tests.integration.kube_api import KubeAPI

STEP = 300.0
WARMUP = 14 * DAY
"""History in the past when the server starts (the file source's default for this trace)."""
JUMP_AFTER = 6 * HOUR
"""The load triples this long after the server started (its first fit takes a few wall
seconds, an hour or two of replay time on a busy machine)..."""
JUMP_FOR = 0.75 * HOUR
"""...for this long, then returns to its usual level."""
SPEED = 1500.0
"""Replay seconds per wall second: a 5-minute step every 0.2 s."""
WITHIN = 14 * HOUR
"""Replay time the recovery may take: fallback ends after a 6-hour window of accuracy
(scaler/decision/drift.py), once the excursion has left it."""


def write_trace(path: Path) -> float:
    """28 days of synthetic daily load, x3 for JUMP_FOR from JUMP_AFTER past the warm-up;
    returns the jump's offset from the trace's start."""
    base = synthetic.load(28, seed=11)
    values = base.values.copy()
    offset = WARMUP + JUMP_AFTER
    since = base.times() - base.start
    values[(since >= offset) & (since < offset + JUMP_FOR)] *= 3
    lines = ["timestamp,value"]
    for at, value in zip(base.times(), values, strict=True):
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(float(at)))
        lines.append(f"{stamp},{value:g}")
    path.write_text("\n".join(lines) + "\n")
    return offset


def drift_events(kube_api: KubeAPI) -> list[dict[str, Any]]:
    found = [
        e
        for e in kube_api.objects("v1", "events", "gpu")
        if e["involvedObject"]["name"] == "llm" and e["reason"] in (DRIFT_FALLBACK, DRIFT_RECOVERED)
    ]
    return sorted(found, key=lambda e: e["lastTimestamp"])


async def poll_until_recovered(
    port: int, engine: Engine, clock: ReplayClock, kube_api: KubeAPI
) -> list[tuple[float, bool]]:
    """Poll as KEDA does until both Events exist or WITHIN passes; (trace time, in fallback)
    of each step the engine decided, watched apart from the polls: a poll may take longer than
    a step on a busy machine, and one sample a poll would then miss decisions."""
    ref = pb.ScaledObjectRef(
        name="llm",
        namespace="gpu",
        scalerMetadata={"query": "load", "threshold": "20", "model": "seasonal"},
    )
    seen: list[tuple[float, bool]] = []
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.ExternalScalerStub(channel)  # type: ignore[no-untyped-call]
        spec = await stub.GetMetricSpec(ref)  # KEDA's first call: the engine takes it on
        request = pb.GetMetricsRequest(
            scaledObjectRef=ref, metricName=spec.metricSpecs[0].metricName
        )

        async def poll() -> None:
            while True:
                await clock.sleep(STEP)
                with contextlib.suppress(grpc.aio.AioRpcError):  # no decision yet: UNAVAILABLE
                    await stub.GetMetrics(request)

        polling = asyncio.create_task(poll())
        try:
            until = clock.now() + JUMP_AFTER + WITHIN
            decided = -math.inf
            while clock.now() < until and len(drift_events(kube_api)) < 2:
                await asyncio.sleep(0.01)  # far shorter than a step (0.2 s): no decision missed
                state = next(iter(engine.targets.values()), None)
                if state is None or state.drift is None or state.decision is None:
                    continue
                if state.decided_at == decided:
                    continue
                decided = state.decided_at
                source = engine.source_for(state.spec)
                assert isinstance(source, FileSource)
                shift = source.shift(source.trace_for(state.spec))
                seen.append((decided - shift, state.drift.monitor.in_fallback))
        finally:
            polling.cancel()
    return seen


def test_a_target_drifting_mid_run_posts_fallback_then_recovered_on_its_scaled_object(
    kube_api: KubeAPI, tmp_path: Path
) -> None:
    trace = tmp_path / "load.csv"
    offset = write_trace(trace)
    start = math.floor(time.time() / STEP) * STEP
    clock = ReplayClock(start=start, speed=SPEED)
    settings = Settings(
        server=ServerSettings(grpc_port=0, http_port=-1, host="127.0.0.1", grace_seconds=0.5),
        engine=EngineSettings(
            step=STEP, model_step=STEP, staleness=3 * STEP, fit_workers=0, history=WARMUP
        ),
        source=f"file:{trace}",
        kube_events=True,
        kubeconfig=tmp_path / "kubeconfig",
    )
    jump_at = synthetic.START + offset  # in trace time

    async def run() -> list[tuple[float, bool]]:
        from scaler.wiring import run_server

        ready: asyncio.Future[tuple[int, Engine]] = asyncio.get_running_loop().create_future()
        stop = asyncio.Event()
        task = asyncio.create_task(
            run_server(
                settings,
                clock=clock,
                stop=stop,
                on_ready=lambda port, _http, engine: ready.set_result((port, engine)),
            )
        )
        port, engine = await ready
        try:
            return await poll_until_recovered(port, engine, clock, kube_api)
        finally:
            stop.set()
            await task

    seen = asyncio.run(run())
    before = [fell for at, fell in seen if at < jump_at]
    assert before and not any(before), seen[:20]  # decided on a trusted model before the jump
    said = drift_events(kube_api)
    assert [e["reason"] for e in said] == [DRIFT_FALLBACK, DRIFT_RECOVERED], said
    entered, left = said
    assert entered["type"] == "Warning" and "drifted" in entered["message"]
    assert left["type"] == "Normal" and "trusted again" in left["message"]
    first = min(at for at, fell in seen if fell)
    assert first - jump_at <= 0.5 * HOUR  # engaged within 30 minutes of the jump
    assert np.count_nonzero([fell for _, fell in seen]) >= 2  # a state held, not one blip
    assert not seen[-1][1]  # the engine left fallback, as the second Event says
