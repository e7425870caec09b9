"""The load: N concurrent grpc.aio callers looping GetMetrics over every target on one
channel, timed per call, with the CPU the server and the client spent in the window."""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import grpc
import numpy as np
import numpy.typing as npt
from procs import Server, cpu_seconds

from scaler._pb import externalscaler_pb2 as pb
from scaler._pb import externalscaler_pb2_grpc as pb_grpc

FloatArray = npt.NDArray[np.float64]

REFRESH_AT = 2.0
"""Seconds into each of the scaler's measured windows at which its engine starts a refresh: the
engine refreshes every target once per step (30 s) on multiples of the step, and every window is
placed to hold exactly one refresh, so that runs are comparable (see docs/benchmark.md)."""
REFRESH_SPAN = 2.0
"""Seconds after REFRESH_AT left out of the `p99_between_refreshes_ms` figure."""


@dataclass
class Phase:
    server: str
    callers: int
    seconds: float
    calls: int
    calls_per_s: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    p99_between_refreshes_ms: float
    """p99 of the calls started more than REFRESH_SPAN after where a refresh falls."""
    errors: dict[str, int]
    server_cpu_per_call_us: float
    server_cpu_share: float
    """Server CPU seconds per wall second in the window (1.0 = one core busy)."""
    client_cpu_share: float
    timeline: list[list[float]] = field(default_factory=list)
    """[second, calls, p99 ms] per second of the measured window."""
    engine_decisions: int | None = None
    """Decisions the scaler's engine made during the phase (warm-up included)."""


async def drive(
    server: Server,
    requests: list[pb.GetMetricsRequest],
    *,
    callers: int,
    warmup: float,
    duration: float,
    step: float,
    window_at: float | None = None,
) -> Phase:
    """`callers` coroutines each loop GetMetrics over the targets round-robin on one channel;
    the calls started in the `duration` seconds after `warmup` are measured. With `window_at`
    (epoch seconds) the measured window starts then, the warm-up just before it."""
    if window_at is not None:
        await asyncio.sleep(max(0.0, window_at - warmup - time.time()))
    n = len(requests)
    latencies: list[float] = []
    started: list[float] = []
    errors: Counter[str] = Counter()
    marks: list[tuple[float, float, float]] = []
    pids = server.cpu_pids()
    async with grpc.aio.insecure_channel(server.address) as channel:
        await asyncio.wait_for(channel.channel_ready(), 10)
        call = pb_grpc.ExternalScalerStub(channel).GetMetrics  # type: ignore[no-untyped-call]
        lead = warmup if window_at is None else max(0.0, window_at - time.time())
        start = time.perf_counter() + lead
        end = start + duration

        async def caller(k: int) -> None:
            i = k * n // callers
            while (t0 := time.perf_counter()) < end:
                try:
                    await call(requests[i % n], timeout=10)
                except grpc.aio.AioRpcError as exc:
                    if t0 >= start:
                        errors[exc.code().name] += 1
                else:
                    if t0 >= start:
                        latencies.append(time.perf_counter() - t0)
                        started.append(t0 - start)
                i += 1

        async def sample() -> None:
            for at in (start, end):
                await asyncio.sleep(max(0.0, at - time.perf_counter()))
                marks.append((time.perf_counter(), time.process_time(), cpu_seconds(pids)))

        await asyncio.gather(sample(), *(caller(k) for k in range(callers)))
    (w0, c0, s0), (w1, c1, s1) = marks
    lat = np.array(latencies) * 1000 if latencies else np.full(1, np.nan)
    at = np.array(started) if started else np.zeros(1)
    p50, p90, p99, p999 = np.percentile(lat, [50, 90, 99, 99.9])
    return Phase(
        server=server.name,
        callers=callers,
        seconds=duration,
        calls=len(latencies),
        calls_per_s=len(latencies) / duration,
        p50_ms=float(p50),
        p90_ms=float(p90),
        p99_ms=float(p99),
        p999_ms=float(p999),
        max_ms=float(lat.max()),
        p99_between_refreshes_ms=float(np.percentile(lat[~_near_refresh(at, step)], 99)),
        errors=dict(errors),
        server_cpu_per_call_us=(s1 - s0) / max(len(latencies), 1) * 1e6,
        server_cpu_share=(s1 - s0) / (w1 - w0),
        client_cpu_share=(c1 - c0) / (w1 - w0),
        timeline=_timeline(at, lat, duration),
    )


def _near_refresh(started: FloatArray, step: float) -> npt.NDArray[np.bool_]:
    """Calls started within REFRESH_SPAN of where an aligned window puts an engine refresh."""
    offset = np.mod(started - REFRESH_AT, step)
    return offset < REFRESH_SPAN


def next_window(step: float, warmup: float) -> float:
    """Epoch seconds at which to start a measured window so that the engine's next refresh
    (it refreshes on multiples of `step`) begins REFRESH_AT seconds into it."""
    earliest = time.time() + warmup + REFRESH_AT + 0.5
    return math.ceil(earliest / step) * step - REFRESH_AT


def _timeline(started: FloatArray, lat_ms: FloatArray, duration: float) -> list[list[float]]:
    """[second, calls, p99 ms] for each second of the window: shows what a stall looks like."""
    out = []
    for second in range(math.ceil(duration)):
        mask = (started >= second) & (started < second + 1)
        p99 = float(np.percentile(lat_ms[mask], 99)) if mask.any() else math.nan
        out.append([float(second), float(mask.sum()), round(p99, 3)])
    return out


async def probe_latency(
    server: Server, requests: list[pb.GetMetricsRequest], stop: asyncio.Event, every: float
) -> dict[str, Any]:
    """One GetMetrics every `every` seconds (about what KEDA sends for 1,000 targets) until
    `stop`: what a caller sees while the scaler fits its models."""
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    async with grpc.aio.insecure_channel(server.address) as channel:
        call = pb_grpc.ExternalScalerStub(channel).GetMetrics  # type: ignore[no-untyped-call]
        i = 0
        while not stop.is_set():
            t0 = time.perf_counter()
            try:
                await call(requests[i % len(requests)], timeout=10)
                latencies.append(time.perf_counter() - t0)
            except grpc.aio.AioRpcError as exc:
                errors[exc.code().name] += 1
            i += 1
            await asyncio.sleep(max(0.0, every - (time.perf_counter() - t0)))
    lat = np.array(latencies or [math.nan]) * 1000
    return {
        "calls": len(latencies),
        "p50_ms": float(np.percentile(lat, 50)),
        "p99_ms": float(np.percentile(lat, 99)),
        "max_ms": float(lat.max()),
        "over_100ms": int((lat > 100).sum()),
        "errors": dict(errors),
    }
