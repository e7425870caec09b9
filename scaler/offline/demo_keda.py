"""`scaler demo`'s stand-in for KEDA: an in-process gRPC client that polls the server each step
(GetMetricSpec once, then IsActive and GetMetrics), reads the engine's decision behind each
answer and prints the table's rows as they come.

Must not: start or stop the server (demo.py does), or score the run (demo_report.py does).
"""

from __future__ import annotations

import math

import grpc

from scaler._pb import externalscaler_pb2 as pb
from scaler._pb import externalscaler_pb2_grpc as pb_grpc
from scaler.clock import ReplayClock
from scaler.offline import demo_text
from scaler.offline.demo_text import Row
from scaler.serving.engine import Engine
from scaler.sources.file import FileSource


async def poll(
    port: int,
    engine: Engine,
    clock: ReplayClock,
    metadata: dict[str, str],
    *,
    steps: int,
    step: float,
) -> list[Row]:
    """Play `steps` steps against the server on `port`, printing a row per step the engine
    decided (demo_text.Table): the rows, in order."""
    ref = pb.ScaledObjectRef(name="llm-serve", namespace="demo", scalerMetadata=metadata)
    print(demo_text.HEADER)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.ExternalScalerStub(channel)  # type: ignore[no-untyped-call]
        spec = await stub.GetMetricSpec(ref)
        metric = spec.metricSpecs[0].metricName
        await clock.sleep(step * 0.5)
        table = demo_text.Table()
        for _ in range(steps):  # a step without an answer is played too: the run stays bounded
            now = _trace_time(engine, clock)
            try:
                active = (await stub.IsActive(ref)).result
                value = await stub.GetMetrics(
                    pb.GetMetricsRequest(scaledObjectRef=ref, metricName=metric)
                )
            except grpc.aio.AioRpcError as exc:
                _say(table.unanswered(f"{exc.code().name} {exc.details()}", now=now))
                await _next_step(clock, step)
                continue
            row = _row(engine, clock.now(), active, int(value.metricValues[0].metricValue))
            _say(table.answered(row, now=now))
            await _next_step(clock, step)
        _say(table.close())
    return table.rows


def _say(lines: list[str]) -> None:
    for line in lines:
        print(line)


def _trace_time(engine: Engine, clock: ReplayClock) -> float:
    """The trace's time now (the time column of the table), or the clock's before a target."""
    now = clock.now()
    state = next(iter(engine.targets.values()), None)
    source = engine.source_for(state.spec) if state is not None else None
    if state is not None and isinstance(source, FileSource):
        return now - source.shift(source.trace_for(state.spec))
    return now


async def _next_step(clock: ReplayClock, step: float) -> None:
    """Sleep to the middle of the next step: a fixed sleep after the RPCs drifts, and a
    decision would now and then go unseen (a step missing from the table)."""
    await clock.sleep(max(0.0, (math.floor(clock.now() / step) + 1.5) * step - clock.now()))


def _row(engine: Engine, now: float, active: bool, desired: int) -> Row:
    state = next(iter(engine.targets.values()))
    decision = state.predictive
    assert decision is not None
    source = engine.source_for(state.spec)
    at, load = state.decided_at, decision.load
    if isinstance(source, FileSource):
        # The decision's load is the highest of the HPA's 5-minute window (its reactive
        # floor): on a 1-minute trace not the step's own, which the table shows and the
        # yardstick scores, as the backtest's does.
        trace = source.trace_for(state.spec)
        load = float(source.history(state.spec, start=at, end=at, step=trace.step).values[0])
        at -= source.shift(trace)
    return Row(
        at=at,
        load=load,
        peak=decision.forecast_peak,
        reactive=decision.reactive,
        desired=desired,
        active=active,
        reason=decision.reason.value,
    )
