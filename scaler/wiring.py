"""The serve process built from Settings: the load source, the spend record, the model store,
cluster discovery, Kubernetes Events, the decision log, the engine, the gRPC server and the HTTP
port; `run_server` runs them until stopped and closes them in order. Used by `scaler serve`
(cli.py), `scaler demo` and the tests. Must not: parse flags or read os.environ."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry

from scaler.clock import Clock
from scaler.decision.spec import TargetSpec
from scaler.errors import ConfigError
from scaler.record.decisionlog import DecisionLog
from scaler.serving import champions, discovered, warmup
from scaler.serving import server as grpc_server
from scaler.serving.engine import Engine
from scaler.serving.explain_http import explain_app
from scaler.serving.httpport import serve_http
from scaler.serving.telemetry import Telemetry
from scaler.settings import (
    Settings,
)
from scaler.sources import prometheus_flags
from scaler.sources.base import Source, SpendRecord
from scaler.store import location

if TYPE_CHECKING:
    from scaler.kube.discovery import Discovery

logger = logging.getLogger("scaler")


def open_decision_log(
    settings: Settings, on_record: Callable[[dict[str, object]], None] | None
) -> DecisionLog:
    """The decision log of --decision-log, opened for appending; ConfigError names the flag
    when the path cannot be (a directory, a read-only or missing mount)."""
    try:
        return DecisionLog(
            settings.decision_log,
            max_bytes=settings.decision_log_max_bytes,
            keep=settings.decision_log_keep,
            on_record=on_record,
        )
    except OSError as e:
        raise ConfigError(
            f"--decision-log {settings.decision_log}: cannot append to it ({e.strerror}); give "
            "a file in a writable directory, e.g. an emptyDir mounted at /var/log/scaler"
        ) from None


def make_source(settings: Settings, clock: Clock, telemetry: Telemetry | None = None) -> Source:
    kind = settings.source
    if kind == "prometheus":
        count = None if telemetry is None else _request_counter(telemetry)
        return prometheus_flags.source(
            settings.prometheus, settings.prometheus.url, on_request=count
        )
    if kind.startswith("file:"):
        from scaler.sources.file import FileSource, bundled_trace

        path = Path(kind.removeprefix("file:")) if kind != "file:" else bundled_trace()
        if not path.exists():
            raise ConfigError(f"--source {kind}: {path} does not exist; give a CSV or a folder")
        return FileSource(path, clock=clock)
    raise ConfigError(f"--source {kind!r} is not prometheus or file:PATH")


def _request_counter(telemetry: Telemetry) -> Callable[[str, str], None]:
    def count(kind: str, outcome: str) -> None:
        telemetry.prometheus_requests.labels(kind, outcome).inc()

    return count


def make_spend_record(settings: Settings, telemetry: Telemetry | None = None) -> SpendRecord | None:
    """Where ledgers are rebuilt from; None for `ledger_source` none and for a file: source."""
    if settings.ledger_source == "none" or settings.source.startswith("file:"):
        return None
    if settings.ledger_source != "prometheus":
        raise ConfigError(f"ledger source {settings.ledger_source!r} is not prometheus or none")
    url = settings.prometheus.ledger_url or settings.prometheus.url
    count = None if telemetry is None else _request_counter(telemetry)
    return prometheus_flags.source(settings.prometheus, url, on_request=count)


async def run_server(
    settings: Settings,
    *,
    clock: Clock,
    stop: asyncio.Event,
    on_ready: Callable[[int, int, Engine], None] | None = None,
) -> None:
    """Start engine, gRPC server and HTTP endpoint; run until `stop`, then shut down cleanly."""
    discovery = make_discovery(settings)
    targets = known_targets(settings)  # warmed up before health says SERVING
    pinned: list[str] = []
    if discovery is not None:
        found = discovery.initial()
        targets += found
        pinned = [target.key for target in found]
    store = (
        None
        if settings.store is None
        else location.open_store(
            settings.store, kubeconfig=settings.kubeconfig, keep=settings.store_keep
        )
    )
    registry = CollectorRegistry()
    telemetry = Telemetry(registry)
    store_models = None
    if store is not None:
        store_models = champions.Champions(
            store,
            poll=settings.store_poll,
            on_status=champions.retrain_gauges(telemetry),
            fit_input=(settings.engine.model_step, settings.engine.history_peaks)
            if settings.checkpoints
            else None,
            model_step=settings.engine.model_step,
        )
    source = make_source(settings, clock, telemetry)
    spend_record = make_spend_record(settings, telemetry)
    recorder, on_record = make_event_recorder(settings)
    decision_log = open_decision_log(settings, on_record)
    engine = Engine(
        settings=settings.engine,
        source_for=lambda _spec: source,
        clock=clock,
        telemetry=telemetry,
        decision_log=decision_log,
        spend_record=spend_record,
    )
    engine.pinned.update(pinned)
    if settings.kube_pod_selectors:
        from scaler.kube import api, selectors

        engine.pod_selectors = selectors.PodSelectors(api.connect(settings.kubeconfig)).pod_selector
    server, port, health = await grpc_server.create_server(
        settings.server, engine, scaler_address=settings.scaler_address
    )
    probe = None
    if settings.server.health_port >= 0:
        probe = grpc_server.create_health_server(settings.server, health)
        await probe.start()
    http = None
    http_port = -1
    if settings.server.http_port >= 0:
        http, http_port = serve_http(
            registry,
            host=settings.server.host,
            port=settings.server.http_port,
            unready=lambda: unready(engine),
            routes={"/explain": explain_app(decision_log, clock.now)},
        )
    engine.fitter.store = store_models
    background: list[asyncio.Task[None]] = []

    def warm() -> None:
        background.append(asyncio.create_task(grpc_server.set_serving(health)))
        if store_models is not None:
            background.append(asyncio.create_task(store_models.poll(engine.targets)))
            if settings.checkpoints:
                background.append(asyncio.create_task(store_models.keep(engine.targets)))
        if discovery is not None:
            following = discovered.follow(engine, discovery, load=load)
            background.append(asyncio.create_task(following))

    load = None if store_models is None else store_models.load
    engine_task = asyncio.create_task(
        warmup.run(engine, targets, load=load, on_warm=warm), name="engine"
    )
    logger.info(
        "serving ExternalScaler on port %d (%s), %s, source %s",
        port,
        "TLS" if settings.server.tls.enabled else "plaintext",
        f"metrics on {http_port}" if http_port >= 0 else "no metrics port",
        settings.source,
    )
    if on_ready is not None:
        on_ready(port, http_port, engine)
    try:
        # The engine stops (queued fits cancelled, workers killed) while RPCs drain: answers
        # come from memory, and a fit must not hold the exit past the grace period.
        await grpc_server.serve_until_stopped(
            server,
            health,
            grace=settings.server.grace_seconds,
            drain=settings.server.drain_seconds,
            stop=stop,
            on_stop=engine_task.cancel,
        )
    finally:
        logger.debug("RPCs drained")
        if probe is not None:
            await probe.stop(0)
        for task in (engine_task, *background):
            task.cancel()
        await asyncio.gather(engine_task, *background, return_exceptions=True)
        logger.debug("engine stopped")
        if http is not None:
            http.shutdown()
            http.server_close()
        for used in (source, spend_record, recorder):
            close = getattr(used, "close", None)
            if close is not None:
                close()
        logger.info("stopped")


def make_event_recorder(
    settings: Settings,
) -> tuple[object | None, Callable[[dict[str, object]], None] | None]:
    """The Kubernetes Event recorder and the decision-record hook that feeds it, when
    --kube-events is set."""
    if not settings.kube_events:
        return None, None
    import socket

    from scaler.kube import api, events
    from scaler.record.notable import Notable

    recorder = events.EventRecorder(
        api.connect(settings.kubeconfig),
        min_interval=settings.kube_events_interval,
        instance=socket.gethostname(),
    )
    notable = Notable()

    def on_record(record: dict[str, object]) -> None:
        for notice in notable.changes(record):
            recorder.emit(notice)

    return recorder, on_record


def make_discovery(settings: Settings) -> Discovery | None:
    """Cluster discovery (scaler/kube/discovery.py) for --scaler-address without --targets."""
    if settings.scaler_address is None or settings.targets_file is not None:
        return None
    from scaler.kube import api
    from scaler.kube.discovery import Discovery
    from scaler.kube.scaledobjects import ScaledObjects

    objects = ScaledObjects(api.connect(settings.kubeconfig))
    return Discovery(
        objects, scaler_address=settings.scaler_address, namespace=settings.watch_namespace
    )


def known_targets(settings: Settings) -> list[TargetSpec]:
    """The targets of --targets (those naming --scaler-address, when given); a trigger that
    does not parse is logged and left to KEDA's first call, which answers it INVALID_ARGUMENT
    naming the key."""
    if settings.targets_file is None:
        return []
    from scaler.kube import targets

    objects = targets.read_file(settings.targets_file)
    found, problems = targets.from_objects(objects, scaler_address=settings.scaler_address)
    for problem in problems:
        logger.warning("--targets %s: %s: %s", settings.targets_file, problem.where, problem.error)
    if not found and not problems:
        logger.warning(
            "--targets %s: %s, so nothing is warmed up before SERVING; is it the right file?",
            settings.targets_file,
            targets.nothing_to_serve(len(objects), settings.scaler_address),
        )
    return [t.spec for t in found]


def unready(engine: Engine) -> str | None:
    """Why /readyz fails, or None: the engine must have refreshed, and fits must be possible."""
    if not engine.refreshed_once:
        return "engine has not completed a refresh yet"
    if not engine.fitter.healthy:
        return f"model fitting is unavailable: {engine.fitter.problem}"
    return None
