"""Bringing the real scaler to its steady state the way KEDA would: register every target
with GetMetricSpec, wait until each answers GetMetrics, until every model is fitted and the
engine has refreshed once more; read its counters from /metrics."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import time
import urllib.error
import urllib.request
from collections import Counter
from typing import Any

import grpc
from loadgen import probe_latency
from procs import Server, wait_channel

from scaler._pb import externalscaler_pb2 as pb
from scaler._pb import externalscaler_pb2_grpc as pb_grpc

_COUNTER = re.compile(r"^(scaler_(?:model_fits|decisions|refresh_errors)_total)\{([^}]*)\} (\S+)$")
_RESULT = re.compile(r'result="\w+"')


def scrape(http_port: int) -> dict[str, float]:
    """Counters from the scaler's /metrics, summed over labels: name{label=value} -> value."""
    url = f"http://127.0.0.1:{http_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _COUNTER.match(line)
        if m:
            result = _RESULT.search(m.group(2))
            key = m.group(1) + (f"{{{result.group(0)}}}" if result else "")
            out[key] = out.get(key, 0.0) + float(m.group(3))
    return out


def wait_http(server: Server, http_port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        server.check_alive()
        with contextlib.suppress(OSError, urllib.error.URLError):
            urllib.request.urlopen(f"http://127.0.0.1:{http_port}/healthz", timeout=1).close()
            return
        time.sleep(0.2)
    raise RuntimeError(f"scaler /healthz not up after {timeout:.0f}s:\n{server.tail()}")


async def register(server: Server, refs: list[pb.ScaledObjectRef]) -> list[str]:
    """GetMetricSpec for every target, as KEDA does when it reads a ScaledObject."""
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.ExternalScalerStub(channel)  # type: ignore[no-untyped-call]
        names: list[str] = []
        for batch in range(0, len(refs), 16):
            answers = await asyncio.gather(
                *(stub.GetMetricSpec(ref, timeout=10) for ref in refs[batch : batch + 16])
            )
            names += [a.metricSpecs[0].metricName for a in answers]
        return names


async def wait_answering(
    server: Server, requests: list[pb.GetMetricsRequest], within: float
) -> Counter[str]:
    """Poll GetMetrics until every target answers OK; returns the last round's failure codes."""
    pending = list(requests)
    deadline = time.monotonic() + within
    codes: Counter[str] = Counter()
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.ExternalScalerStub(channel)  # type: ignore[no-untyped-call]

        async def ok(req: pb.GetMetricsRequest) -> bool:
            try:
                await stub.GetMetrics(req, timeout=10)
                return True
            except grpc.aio.AioRpcError as exc:
                codes[exc.code().name] += 1
                return False

        while pending and time.monotonic() < deadline:
            codes.clear()
            results = []
            for batch in range(0, len(pending), 16):
                results += await asyncio.gather(*(ok(r) for r in pending[batch : batch + 16]))
            pending = [r for r, good in zip(pending, results, strict=True) if not good]
            if pending:
                server.check_alive()
                await asyncio.sleep(0.5)
    return codes


async def wait_fits(http_port: int, targets: int, within: float) -> dict[str, float]:
    """/metrics counters once every target has had a fit (ok or failed), or after `within`."""
    deadline = time.monotonic() + within
    while True:
        counts = await asyncio.to_thread(scrape, http_port)
        done = sum(v for k, v in counts.items() if k.startswith("scaler_model_fits_total"))
        if done >= targets or time.monotonic() > deadline:
            return counts
        await asyncio.sleep(1.0)


async def wait_refreshed(http_port: int, targets: int, within: float) -> bool:
    """Wait until the engine has decided for every target once more and is idle again: the
    refresh that follows the last fit does one-off work per new model (see docs/benchmark.md),
    which would otherwise land in the first measured window."""
    key = "scaler_decisions_total"
    first = (await asyncio.to_thread(scrape, http_port)).get(key, 0.0)
    deadline = time.monotonic() + within
    last, still = first, 0
    while time.monotonic() < deadline:
        await asyncio.sleep(1.0)
        now = (await asyncio.to_thread(scrape, http_port)).get(key, 0.0)
        still = still + 1 if now == last else 0
        if now >= first + targets and still >= 2:
            return True
        last = now
    return False


async def start_scaler(
    args: argparse.Namespace,
    server: Server,
    http_port: int,
    refs: list[pb.ScaledObjectRef],
    requests: list[pb.GetMetricsRequest],
    s: dict[str, Any],
) -> None:
    """Up, every target registered (GetMetricSpec) and answering, every model fitted."""
    t0 = time.monotonic()
    wait_http(server, http_port, 60)
    await wait_channel(server, 30)
    s["process_up_s"] = time.monotonic() - t0
    t = time.monotonic()
    names = await register(server, refs)
    s["register_s"] = time.monotonic() - t
    if names != [r.metricName for r in requests]:
        raise RuntimeError("GetMetricSpec's metric names differ from scaler.decision.spec.parse's")
    failing = await wait_answering(server, requests, args.startup_timeout)
    s["all_answering_s"] = time.monotonic() - t
    if failing:
        raise RuntimeError(f"targets still failing after {args.startup_timeout:.0f}s: {failing}")
    print(
        f"  {len(refs)} targets registered in {s['register_s']:.1f}s, all answering "
        f"GetMetrics {s['all_answering_s']:.1f}s after registration began"
    )
    stop = asyncio.Event()
    prober = asyncio.create_task(probe_latency(server, requests, stop, every=0.01))
    try:
        counts = await wait_fits(http_port, len(refs), args.startup_timeout)
        s["fits_done_s"] = time.monotonic() - t
        s["fits_ok"] = counts.get('scaler_model_fits_total{result="ok"}', 0)
        s["fits_error"] = counts.get('scaler_model_fits_total{result="error"}', 0)
        print(
            f"  model fits: {s['fits_ok']:.0f} ok, {s['fits_error']:.0f} failed, "
            f"{s['fits_done_s']:.1f}s after registration ({args.fit_workers} fit worker(s))"
        )
        if s["fits_ok"] + s["fits_error"] < len(refs):
            print(f"  NOTE: fitting did not finish within {args.startup_timeout:.0f}s")
        settled = await wait_refreshed(http_port, len(refs), 3 * args.step_seconds + 30)
        s["settled_s"] = time.monotonic() - t
        if not settled:
            print("  NOTE: the engine did not finish a refresh after fitting; measuring anyway")
    finally:
        stop.set()
        s["while_fitting"] = w = await prober
    server.check_alive()
    errors = f", errors {w['errors']}" if w["errors"] else ""
    print(
        f"  GetMetrics while fitting (one call per 10 ms, {w['calls']} calls): p50 "
        f"{w['p50_ms']:.2f} ms, p99 {w['p99_ms']:.1f} ms, max {w['max_ms']:.0f} ms, "
        f"{w['over_100ms']} calls over 100 ms{errors}"
    )
