"""The ExternalScaler gRPC service KEDA calls, the grpc.health.v1 service, and TLS/mTLS.

RPCs only parse the metadata (cached) and read the engine's in-memory state: no Prometheus
query, no model fit on the request path. This is the only module that knows gRPC status codes:
bad metadata -> INVALID_ARGUMENT naming the key and the fix; no trustworthy decision ->
UNAVAILABLE with the reason (never a made-up 0, so KEDA's `fallback` can take over); a
StreamIsActive on a target the engine drops -> NOT_FOUND saying why.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping
from functools import lru_cache
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from scaler._pb import externalscaler_pb2 as pb
from scaler._pb import externalscaler_pb2_grpc as pb_grpc
from scaler.decision import quoting
from scaler.decision import spec as specs
from scaler.errors import ConfigError, SpecError, TooManyTargets, Unavailable
from scaler.serving.answers import Answer
from scaler.serving.certificates import Certificates
from scaler.serving.engine import Engine
from scaler.serving.state import TargetState
from scaler.serving.telemetry import Telemetry
from scaler.settings import ServerSettings, TLSSettings

logger = logging.getLogger(__name__)

SERVICE_NAME = "externalscaler.ExternalScaler"
LIVENESS_SERVICE = "liveness"
"""A grpc.health.v1 service SERVING while the server's event loop answers, warm or not: what
kubelet's startup and liveness probes ask (deploy/base/scaler.yaml). The overall status ("")
says SERVING only once warm, which is readiness: probed for liveness, a warm-up longer than
the startup probe's budget (120 s: about 500 targets, or fewer while Prometheus hangs) got the
replica killed and started over, for ever."""
Context = grpc.aio.ServicerContext[Any, Any]


@lru_cache(maxsize=65536)
def _parse_cached(
    namespace: str, name: str, items: tuple[tuple[str, str], ...]
) -> specs.TargetSpec:
    return specs.parse(namespace, name, dict(items))


def parse_ref(ref: pb.ScaledObjectRef) -> specs.TargetSpec:
    """The TargetSpec of a ScaledObjectRef (SpecError on bad metadata); cached per metadata."""
    meta: Mapping[str, str] = ref.scalerMetadata
    return _parse_cached(ref.namespace, ref.name, tuple(sorted(meta.items())))


MAX_DETAILS_BYTES = 1000
"""Longest status details: they travel in a header that gRPC caps at 16 KB by default, and a
client past the cap sees RESOURCE_EXHAUSTED, losing the key that was wrong."""


def refusal(ref: pb.ScaledObjectRef, exc: SpecError) -> str:
    """INVALID_ARGUMENT details: the target, the key, a short quote of the value and the fix,
    in at most MAX_DETAILS_BYTES of UTF-8 whatever the request held."""
    return bounded(f"{quoting.echo(ref.namespace)}/{quoting.echo(ref.name)}: {exc}")


def unnamed(ref: pb.ScaledObjectRef) -> str | None:
    """INVALID_ARGUMENT details for a ScaledObjectRef without a name or a namespace, or None.
    KEDA always sends its ScaledObject's; a target named `/` would be answered, logged and
    billed under no object anyone can find."""
    name, namespace = ref.name.strip(), ref.namespace.strip()
    if name and namespace:
        return None
    if namespace:
        which = f"ScaledObjectRef in namespace {quoting.echo(namespace)!r} has no name"
    elif name:
        which = f"ScaledObjectRef {quoting.echo(name)!r} has no namespace"
    else:
        which = "ScaledObjectRef has no name and no namespace"
    return bounded(
        f"{which}: KEDA sends its ScaledObject's name and namespace; a client calling the "
        "scaler itself must send both"
    )


def bounded(text: str) -> str:
    """`text` cut to MAX_DETAILS_BYTES of UTF-8 (a reason may quote a 4 KB query)."""
    encoded = text.encode()
    if len(encoded) <= MAX_DETAILS_BYTES:
        return text
    return encoded[: MAX_DETAILS_BYTES - 3].decode(errors="ignore") + "..."


class ExternalScalerServicer(pb_grpc.ExternalScalerServicer):
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def _state(self, ref: pb.ScaledObjectRef, context: Context) -> TargetState:
        missing = unnamed(ref)
        if missing is not None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, missing)
        try:
            spec = parse_ref(ref)
        except SpecError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, refusal(ref, exc))
        return await self._ensure(spec, context)

    async def _ensure(self, spec: specs.TargetSpec, context: Context) -> TargetState:
        try:
            return self.engine.ensure(spec)
        except TooManyTargets as exc:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, bounded(str(exc)))

    async def _answer(self, state: TargetState, context: Context) -> Answer:
        try:
            return self.engine.answer(state)
        except SpecError as exc:  # the source says the query is wrong (BadQuery)
            value = quoting.echo_query(exc.value)
            quoted = f"scalerMetadata key {exc.key!r} = {value!r}: {exc.fix}"
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, bounded(f"{state.spec.label}: {quoted}")
            )
        except Unavailable as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, bounded(str(exc)))

    async def IsActive(  # noqa: N802 - gRPC method names
        self, request: pb.ScaledObjectRef, context: Context
    ) -> pb.IsActiveResponse:
        state = await self._state(request, context)
        answer = await self._answer(state, context)
        return pb.IsActiveResponse(result=answer.active)

    async def StreamIsActive(  # noqa: N802
        self, request: pb.ScaledObjectRef, context: Context
    ) -> AsyncIterator[pb.IsActiveResponse]:
        state = await self._state(request, context)
        # The first message is the current state, once known. A target without a trustworthy
        # answer (no data yet, or data older than --staleness: Prometheus down) is silent, on
        # purpose: `false` would be a made-up answer (KEDA takes a pushed false as inactive: to
        # zero once cooldownPeriod has passed since it was last active), and an UNAVAILABLE
        # would end the stream, which KEDA reopens after a backoff growing to a minute,
        # delaying the wake-up `true` by as much once data comes. Its errors reach KEDA on the
        # polling path (IsActive, GetMetrics), where `fallback` applies. A bad query ends it.
        while self._unavailable(state):
            await self._updated(state, context)
        answer = await self._answer(state, context)
        yield pb.IsActiveResponse(result=answer.active)
        was_active = answer.active
        while True:
            await self._updated(state, context)
            await self._ensure(state.spec, context)  # asked by an open stream: not idle
            try:
                now_active = self.engine.answer(state).active
            except (Unavailable, SpecError):
                continue  # keep the stream; KEDA's polling path reports the error
            if now_active and not was_active:
                yield pb.IsActiveResponse(result=True)
            was_active = now_active

    def _unavailable(self, state: TargetState) -> bool:
        """Whether the target has no answer to trust now (a bad query is an answer: an error)."""
        try:
            self.engine.answer(state)
        except Unavailable:
            return True
        except SpecError:
            return False
        return False

    async def _updated(self, state: TargetState, context: Context) -> None:
        """Until the engine updates `state`. NOT_FOUND once it has dropped the target (its
        ScaledObject deleted, an edit superseding it, idle): nothing would wake the stream
        again, and KEDA ends a deleted object's stream itself, or opens it again after a
        backoff while it still asks, which registers the target anew as any first call does."""
        await state.updated.wait()
        if state.dropped is not None:
            why = f"{state.spec.label}: this scaler no longer serves the target: {state.dropped}"
            await context.abort(grpc.StatusCode.NOT_FOUND, bounded(why))

    async def GetMetricSpec(  # noqa: N802
        self, request: pb.ScaledObjectRef, context: Context
    ) -> pb.GetMetricSpecResponse:
        state = await self._state(request, context)
        metric = pb.MetricSpec(metricName=state.spec.metric_name, targetSize=1, targetSizeFloat=1.0)
        return pb.GetMetricSpecResponse(metricSpecs=[metric])

    async def GetMetrics(  # noqa: N802
        self, request: pb.GetMetricsRequest, context: Context
    ) -> pb.GetMetricsResponse:
        state = await self._state(request.scaledObjectRef, context)
        answer = await self._answer(state, context)
        value = metric_value(answer.desired)
        return pb.GetMetricsResponse(
            metricValues=[
                pb.MetricValue(
                    metricName=request.metricName or state.spec.metric_name,
                    metricValue=math.ceil(value),
                    metricValueFloat=value,
                )
            ]
        )

    async def StreamMetricSpec(  # noqa: N802
        self, request: pb.ScaledObjectRef, context: Context
    ) -> AsyncIterator[pb.GetMetricSpecResponse]:
        await context.abort(
            grpc.StatusCode.UNIMPLEMENTED,
            "StreamMetricSpec is not supported; KEDA falls back to GetMetricSpec",
        )
        yield pb.GetMetricSpecResponse()  # pragma: no cover - abort raises


def metric_value(desired: float) -> float:
    """KEDA turns NaN, inf and negatives into 0 anyway; never send them."""
    return float(desired) if math.isfinite(desired) and desired > 0 else 0.0


class _Timing(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    """Records RPC latency per method and status code into the telemetry histogram."""

    def __init__(self, engine: Engine) -> None:
        self.histogram = engine.telemetry.rpc_seconds

    async def intercept_service(self, continuation, handler_call_details):  # type: ignore[no-untyped-def]
        handler = await continuation(handler_call_details)
        method = handler_call_details.method.rsplit("/", 1)[-1]
        if handler is None or handler.unary_unary is None:
            return handler
        inner, histogram = handler.unary_unary, self.histogram

        async def timed(request, context):  # type: ignore[no-untyped-def]
            start = time.perf_counter()
            code = "OK"
            try:
                return await inner(request, context)
            except BaseException:
                code = (context.code() or grpc.StatusCode.UNKNOWN).name
                raise
            finally:
                histogram.labels(method, code).observe(time.perf_counter() - start)

        return grpc.unary_unary_rpc_method_handler(
            timed,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


def server_credentials(
    tls: TLSSettings, telemetry: Telemetry | None = None, *, address: str | None = None
) -> grpc.ServerCredentials:
    """TLS (and mTLS when a client CA is given) credentials that read renewed files on new
    connections (scaler.serving.certificates), the expiry of the certificate in use exported on
    `telemetry`; ConfigError names a bad file. `address`: the HOST:PORT KEDA dials, if known."""
    certificates = Certificates(tls, address=address)
    if telemetry is not None:
        telemetry.tls_expiry.labels(str(tls.cert)).set_function(certificates.expires)
    return certificates.credentials()


async def create_server(
    settings: ServerSettings, engine: Engine, *, scaler_address: str | None = None
) -> tuple[grpc.aio.Server, int, HealthServicer]:
    """A started-ready (not yet started) grpc.aio server and its bound port; `scaler_address`
    (--scaler-address), the address KEDA dials, is checked against the TLS certificate."""
    server = grpc.aio.server(interceptors=[_Timing(engine)], options=[("grpc.so_reuseport", 0)])
    pb_grpc.add_ExternalScalerServicer_to_server(  # type: ignore[no-untyped-call]
        ExternalScalerServicer(engine), server
    )
    health = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    address = f"{settings.host}:{settings.grpc_port}"
    credentials = (
        server_credentials(settings.tls, engine.telemetry, address=scaler_address)
        if settings.tls.enabled
        else None
    )
    port = _bind(server, address, credentials)
    if port == 0:
        raise ConfigError(
            f"could not bind the gRPC port {address}; is it in use, or --host not an address "
            "of this machine? Pick another --grpc-port (SCALER_GRPC_PORT) or --host"
        )
    # NOT_SERVING until the engine is warm (`set_serving`): ready means warm. Alive at once.
    for name in ("", SERVICE_NAME):
        await health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
    await health.set(LIVENESS_SERVICE, health_pb2.HealthCheckResponse.SERVING)
    return server, port, health


async def set_serving(health: HealthServicer) -> None:
    """Say SERVING: every target known at start-up has been warmed up and decided for."""
    for name in ("", SERVICE_NAME):
        await health.set(name, health_pb2.HealthCheckResponse.SERVING)


def create_health_server(settings: ServerSettings, health: HealthServicer) -> grpc.aio.Server:
    """A plaintext server with only grpc.health.v1 on `settings.health_port`, sharing `health`
    with the main server (so it turns NOT_SERVING on drain). Kubelet's `grpc:` probe speaks no
    TLS; this lets it probe an mTLS scaler without opening the ExternalScaler to plaintext."""
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    address = f"{settings.host}:{settings.health_port}"
    if _bind(server, address) == 0:
        raise ConfigError(
            f"could not bind the health port {address}; is it in use? Pick another "
            "--health-port (SCALER_HEALTH_PORT), or -1 to serve no health port"
        )
    return server


def _bind(
    server: grpc.aio.Server, address: str, credentials: grpc.ServerCredentials | None = None
) -> int:
    """The port `server` bound at `address` (TLS with `credentials`), 0 when it could not:
    grpcio returns 0 for some failures and raises RuntimeError for others (a port in use, an
    address that is not this machine's)."""
    try:
        if credentials is not None:
            return server.add_secure_port(address, credentials)
        return server.add_insecure_port(address)
    except RuntimeError:
        return 0


async def serve_until_stopped(
    server: grpc.aio.Server,
    health: HealthServicer,
    *,
    grace: float,
    stop: asyncio.Event,
    on_stop: Callable[[], object] = lambda: None,
    drain: float = 0.0,
) -> None:
    """Run until `stop` is set, then drain: NOT_SERVING first, new RPCs still answered for
    `drain` seconds (while the pod leaves the Service's endpoints), then a graceful stop of at
    most `grace` seconds; `on_stop` runs first, so other work winds down during the drain."""
    await server.start()
    await stop.wait()
    on_stop()
    await health.enter_graceful_shutdown()
    if drain > 0:
        await asyncio.sleep(drain)
    await server.stop(grace)
