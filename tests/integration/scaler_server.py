"""Runs the real scaler (engine + grpc.aio server) in a background thread for tests, and gives
them a real gRPC channel to it on an ephemeral loopback port."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from scaler._pb import externalscaler_pb2 as pb
from scaler.clock import Clock, WallClock
from scaler.serving.engine import Engine
from scaler.settings import EngineSettings, ServerSettings, Settings
from scaler.wiring import run_server


def fast_settings(source: str, **server: Any) -> Settings:
    """Settings for tests: ports 0, decisions every 0.2 s, fits in a thread."""
    return Settings(
        server=ServerSettings(
            grpc_port=0, http_port=0, host="127.0.0.1", grace_seconds=0.5, **server
        ),
        engine=EngineSettings(step=0.2, fit_workers=0, model_step=600.0, history=7 * 86400.0),
        source=source,
    )


class RunningScaler:
    """The scaler running in a thread with its own event loop; `.port`, `.http_port`, `.engine`."""

    def __init__(self, settings: Settings, clock: Clock | None = None) -> None:
        self.settings = settings
        self.clock = clock or WallClock()
        self.port = 0
        self.http_port = 0
        self.engine: Engine | None = None
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="scaler", daemon=True)

    def __enter__(self) -> RunningScaler:
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError(f"scaler did not start: {self._error!r}")
        if self._error is not None:
            raise self._error
        deadline = time.monotonic() + 30  # ready means warm: health says SERVING from then on
        while not (self.engine is not None and self.engine.refreshed_once and self._serving()):
            if time.monotonic() > deadline or self._error is not None:
                raise RuntimeError(f"scaler did not warm up: {self._error!r}")
            time.sleep(0.01)
        return self

    def _serving(self) -> bool:
        """Whether grpc.health.v1 says SERVING where a plaintext client can ask it: warm sets
        it from a task on the scaler's loop, which may run well after `refreshed_once` on a
        busy machine. True when no plaintext health endpoint exists (TLS, no --health-port)."""
        server = self.settings.server
        if server.health_port > 0:
            address = f"{server.host}:{server.health_port}"
        elif not server.tls.enabled:
            address = self.address
        else:
            return True
        with grpc.insecure_channel(address) as channel:
            request = health_pb2.HealthCheckRequest(service="")
            try:
                reply = health_pb2_grpc.HealthStub(channel).Check(request, timeout=5)
            except grpc.RpcError:
                return False
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(15)

    def _main(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()

            def ready(port: int, http_port: int, engine: Engine) -> None:
                self.port, self.http_port, self.engine = port, http_port, engine
                self._ready.set()

            await run_server(self.settings, clock=self.clock, stop=self._stop, on_ready=ready)

        try:
            asyncio.run(main())
        except BaseException as exc:  # surfaced to the test by __enter__
            self._error = exc
            self._ready.set()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


def ref(name: str = "llm-serve", namespace: str = "team-a", **meta: str) -> pb.ScaledObjectRef:
    metadata = {"query": "llm_serving_10min", "threshold": "60"}
    metadata.update(meta)
    return pb.ScaledObjectRef(name=name, namespace=namespace, scalerMetadata=metadata)


def eventually(call: Callable[[], Any], timeout: float = 20.0) -> Any:
    """Retry `call` while it raises UNAVAILABLE (the engine is warming up), up to `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def refused(call: Callable[[], Any], *, says: str, timeout: float = 20.0) -> grpc.RpcError:
    """Call until the server refuses with details containing `says` (the engine fills in the
    reason on its next refresh); returns that error. Fails if it answers or never says so."""
    deadline = time.monotonic() + timeout
    last: grpc.RpcError | None = None
    while time.monotonic() < deadline:
        try:
            call()
        except grpc.RpcError as exc:
            last = exc
            if says in str(exc.details()):
                return exc
        else:
            raise AssertionError(f"expected a refusal saying {says!r}, got an answer")
        time.sleep(0.1)
    raise AssertionError(f"never refused with {says!r}; last error: {last!r}")


__all__ = ["RunningScaler", "eventually", "fast_settings", "ref", "refused", "replace"]
