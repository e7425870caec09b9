"""The yardstick for bench/getmetrics.py: an ExternalScaler that answers a constant.

Same service, same generated stubs, same grpc.aio server setup as scaler/serving/server.py, but
GetMetrics does no work beyond building its reply: no metadata parsing, no engine, no
interceptor, no health service. What it sustains is the ceiling of Python gRPC on this
machine, the number the real server is compared against.

The reply echoes the request's metricName (with a constant value), so its wire size matches the
real server's. Run by the benchmark as a subprocess:

    python bench/trivial_server.py --port 50051
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import AsyncIterator
from typing import Any

import grpc

from scaler._pb import externalscaler_pb2 as pb
from scaler._pb import externalscaler_pb2_grpc as pb_grpc

Context = grpc.aio.ServicerContext[Any, Any]
VALUE = 3


class ConstantScaler(pb_grpc.ExternalScalerServicer):
    async def IsActive(  # noqa: N802 - gRPC method names
        self, request: pb.ScaledObjectRef, context: Context
    ) -> pb.IsActiveResponse:
        return pb.IsActiveResponse(result=True)

    async def GetMetricSpec(  # noqa: N802
        self, request: pb.ScaledObjectRef, context: Context
    ) -> pb.GetMetricSpecResponse:
        spec = pb.MetricSpec(metricName=request.name, targetSize=1, targetSizeFloat=1.0)
        return pb.GetMetricSpecResponse(metricSpecs=[spec])

    async def GetMetrics(  # noqa: N802
        self, request: pb.GetMetricsRequest, context: Context
    ) -> pb.GetMetricsResponse:
        value = pb.MetricValue(
            metricName=request.metricName, metricValue=VALUE, metricValueFloat=float(VALUE)
        )
        return pb.GetMetricsResponse(metricValues=[value])

    async def StreamIsActive(  # noqa: N802
        self, request: pb.ScaledObjectRef, context: Context
    ) -> AsyncIterator[pb.IsActiveResponse]:
        yield pb.IsActiveResponse(result=True)


async def serve(host: str, port: int) -> None:
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    pb_grpc.add_ExternalScalerServicer_to_server(ConstantScaler(), server)  # type: ignore[no-untyped-call]
    if server.add_insecure_port(f"{host}:{port}") == 0:
        raise SystemExit(f"trivial server: cannot bind {host}:{port}")
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, required=True, help="port to serve on")
    args = parser.parse_args()
    asyncio.run(serve(args.host, args.port))


if __name__ == "__main__":
    main()
