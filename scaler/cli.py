"""`scaler serve | demo`: builds Settings from flags and SCALER_* environment variables, sets up
logging, wires source, engine, server and telemetry. The only module that reads os.environ."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from scaler import commands, helptext, quiet, switches, threads
from scaler.clock import Clock, WallClock
from scaler.decision import ranges
from scaler.decision.spec import TargetSpec, duration_arg, format_duration
from scaler.errors import ConfigError, ScalerError
from scaler.record.decisionlog import DecisionLog
from scaler.serving import certificates, champions, discovered, warmup
from scaler.serving import server as grpc_server
from scaler.serving.engine import Engine
from scaler.serving.explain_http import explain_app
from scaler.serving.httpport import serve_http
from scaler.serving.telemetry import Telemetry
from scaler.settings import (
    EngineSettings,
    PrometheusSettings,
    ServerSettings,
    Settings,
    TLSSettings,
)
from scaler.sources import fit_input, prometheus_flags
from scaler.sources.base import Source, SpendRecord
from scaler.store import base as store_base
from scaler.store import location

if TYPE_CHECKING:
    from scaler.kube.discovery import Discovery

logger = logging.getLogger("scaler")


def env(name: str, default: str | None = None) -> str | None:
    """SCALER_`name`, read for a flag's default; the name is recorded as one the command being
    built reads (commands.READS), so that a variable no flag reads is told at start-up."""
    commands.READS.asked(name)
    return os.environ.get(f"SCALER_{name}", default)


MEMORY_UNITS = {"": 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
FIT_MEMORY_RANGE = (256 * 2**20, 1024 * 2**30)
"""Bounds of --fit-memory: below 256 MiB a worker cannot even import the models."""
FIT_WORKERS_RANGE = (0, 64)
STEP_RANGE = (1.0, 600.0)
"""Bounds of --step: KEDA polls every 30 s by default, and a decision made less often than every
10 minutes would be older than a GPU replica's cold start."""
STALENESS_RANGE = (1.0, 86400.0)
EXIT_SLACK = 0.8
"""Seconds past the grace period after which a stuck shutdown is cut short."""


def count_within(low: int, high: int) -> Callable[[str], int]:
    """argparse `type=` for a whole number in plain ASCII digits within [low, high]."""

    def parse(text: str) -> int:
        # A sign is read, so that -1 is told the range rather than "not a whole number".
        if re.fullmatch(r"[-+]?[0-9]+", text.strip()) is None:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(
                f"{text.strip()} is outside [{low}, {high}]: it must be at least {low}"
            )
        if value > high:
            raise argparse.ArgumentTypeError(
                f"{text.strip()} is outside [{low}, {high}]: it must be at most {high}"
            )
        return value

    return parse


def port_arg(*, off: bool) -> Callable[[str], int]:
    """argparse `type=` for a TCP port: 1-65535, 0 for any free one, and -1 for none when `off`."""
    low = -1 if off else 0

    def parse(text: str) -> int:
        if re.fullmatch(r"-?[0-9]+", text.strip()) is None:
            raise argparse.ArgumentTypeError(f"{text!r} is not a port number")
        value = int(text)
        if not low <= value <= 65535:
            hint = "; -1 serves none" if off else ""
            raise argparse.ArgumentTypeError(
                f"{text} is not a TCP port: give 1-65535, or 0 for any free port{hint}"
            )
        return value

    return parse


def one_of(*values: str) -> Callable[[str], str]:
    """argparse `type=` for one of `values`: unlike `choices`, it checks a SCALER_* default too
    (argparse runs a string default through the type only)."""

    def parse(text: str) -> str:
        if text not in values:
            raise argparse.ArgumentTypeError(f"{text!r}: use one of {', '.join(values)}")
        return text

    return parse


def memory_arg(text: str) -> int:
    """argparse `type=` for a size such as 2Gi, 512Mi or bytes; 0 means unbounded."""
    match = re.fullmatch(r"([0-9]+)([KMGT]i)?", text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size; use e.g. 2Gi, 512Mi or 0")
    size = int(match[1]) * MEMORY_UNITS[match[2] or ""]
    low, high = FIT_MEMORY_RANGE
    if size != 0 and not low <= size <= high:
        raise argparse.ArgumentTypeError(f"{text} is outside [256Mi, 1Ti]; 0 means unbounded")
    return size


def size_within(low: int, high: int) -> Callable[[str], int]:
    """argparse `type=` for a size such as 64Mi, 1Gi or bytes, within [low, high] bytes."""

    def parse(text: str) -> int:
        match = re.fullmatch(r"([0-9]+)([KMGT]i)?", text.strip())
        if match is None:
            raise argparse.ArgumentTypeError(f"{text!r} is not a size; use e.g. 64Mi or 1Gi")
        size = int(match[1]) * MEMORY_UNITS[match[2] or ""]
        if not low <= size <= high:
            raise argparse.ArgumentTypeError(f"{text} is outside [{low}, {high}] bytes")
        return size

    return parse


def duration_within(low: float, high: float) -> Callable[[str], float]:
    """argparse `type=` for a Prometheus duration within [low, high] seconds; the error shows
    the range as the help text does (1s-10m, not 600s)."""

    def parse(text: str) -> float:
        seconds = duration_arg(text)
        if not low <= seconds <= high:
            raise argparse.ArgumentTypeError(
                f"{text} is outside [{format_duration(low)}, {format_duration(high)}]"
            )
        return seconds

    return parse


def add_serve_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("server")
    g.add_argument(
        "--grpc-port",
        type=port_arg(off=False),
        default=env("GRPC_PORT", "9000"),
        help="ExternalScaler + grpc.health.v1 port (env SCALER_GRPC_PORT; default 9000)",
    )
    g.add_argument(
        "--http-port",
        type=port_arg(off=True),
        default=env("HTTP_PORT", "8080"),
        help="/metrics, /healthz, /readyz port; -1 disables (env SCALER_HTTP_PORT; default 8080)",
    )
    g.add_argument(
        "--health-port",
        type=port_arg(off=True),
        default=env("HEALTH_PORT", "-1"),
        help="plaintext port serving only grpc.health.v1, for kubelet's grpc probe of a TLS "
        "scaler; -1 disables (env SCALER_HEALTH_PORT; default -1)",
    )
    g.add_argument(
        "--host", default=env("HOST", "[::]"), help="bind address (env SCALER_HOST; default [::])"
    )
    g.add_argument(
        "--drain-delay",
        type=duration_within(0.0, 60.0),
        default=env("DRAIN_DELAY", "0s"),
        help="after SIGTERM, keep answering new RPCs this long with health NOT_SERVING, while "
        "Kubernetes drops the pod from the Service, then drain (env SCALER_DRAIN_DELAY; 0s-60s; "
        "default 0s; 5s in deploy/)",
    )
    g.add_argument(
        "--source",
        default=env("SOURCE", "prometheus"),
        help="prometheus, or file:PATH to replay a timestamp,value CSV or a folder of "
        "them (query = file name); file: alone replays the bundled trace "
        "(env SCALER_SOURCE; default prometheus)",
    )
    g.add_argument(
        "--prometheus-url",
        default=env("PROMETHEUS_URL", PrometheusSettings.url),
        help="Prometheus for targets without serverAddress (env SCALER_PROMETHEUS_URL; "
        "default %(default)s)",
    )
    g.add_argument(
        "--ledger-prometheus-url",
        default=env("LEDGER_PROMETHEUS_URL"),
        help="Prometheus that scrapes this scaler's /metrics: after a restart, and on every "
        "replica, the prewarm ledger is rebuilt from scaler_prewarm_replica_hours_total there, "
        "and prewarm stays 0 (reason budget_unknown) until it answers; ignored with a file: "
        "source (env SCALER_LEDGER_PROMETHEUS_URL; default --prometheus-url)",
    )
    g.add_argument(
        "--ledger-scrape-interval",
        type=duration_within(1.0, 600.0),
        default=env("LEDGER_SCRAPE_INTERVAL", "30s"),
        help="how often that Prometheus scrapes this scaler: a rebuilt ledger books "
        "maxPrewarmReplicas for this interval + 1m + --step as spent, the bound of what a "
        "killed pod charged but no scrape recorded (env SCALER_LEDGER_SCRAPE_INTERVAL; "
        "1s-10m; default 30s, as deploy/monitoring)",
    )
    g.add_argument(
        "--decision-log",
        type=Path,
        default=env("DECISION_LOG"),
        help="append a JSON line per target per decision change here, read by `scaler "
        "explain --log` (env SCALER_DECISION_LOG; docs/decision-log.md)",
    )
    g.add_argument(
        "--decision-log-max-size",
        type=size_within(2**10, 2**40),
        default=env("DECISION_LOG_MAX_SIZE", "64Mi"),
        help="rotate the decision log to FILE.1, FILE.2, ... past this size "
        "(env SCALER_DECISION_LOG_MAX_SIZE; 1Ki-1Ti; default 64Mi)",
    )
    g.add_argument(
        "--decision-log-keep",
        type=count_within(0, 1000),
        default=env("DECISION_LOG_KEEP", "5"),
        help="rotated decision logs kept (env SCALER_DECISION_LOG_KEEP; 0-1000; default 5)",
    )
    switches.add(
        g,
        "--kube-events",
        env=env,
        name="KUBE_EVENTS",
        help="post Kubernetes Events on ScaledObjects when a target enters or leaves drift "
        "fallback, exhausts its budget or gets a new model; rate-limited (env SCALER_KUBE_EVENTS)",
    )
    g.add_argument(
        "--kube-events-interval",
        type=duration_within(60.0, 86400.0),
        default=env("KUBE_EVENTS_INTERVAL", "10m"),
        help="at most one Event per ScaledObject and reason in this window, across replicas "
        "(env SCALER_KUBE_EVENTS_INTERVAL; 1m-24h; default 10m)",
    )
    switches.add(
        g,
        "--kube-pod-selectors",
        env=env,
        name="KUBE_POD_SELECTORS",
        help="for leadTime: auto without podSelector, read the scaleTargetRef's pod selector "
        "from the Kubernetes API (env SCALER_KUBE_POD_SELECTORS)",
    )
    g.add_argument(
        "--kubeconfig",
        type=Path,
        default=env("KUBECONFIG") or env("KUBECONFIG_FILE"),  # the second: its former name
        help="Kubernetes client config (default: the service account, else ~/.kube/config; "
        "env SCALER_KUBECONFIG, as `scaler retrain`)",
    )
    prometheus_flags.add_flags(p, env)
    w = p.add_argument_group('targets and models (README "Replicas", docs/store.md)')
    w.add_argument(
        "--targets",
        type=Path,
        default=env("TARGETS"),
        help="ScaledObject manifests (multi-document YAML, or `kubectl get scaledobjects -A -o "
        "yaml`): their external triggers are warmed up (model, history, drift state) before "
        "gRPC health and /readyz say SERVING (env SCALER_TARGETS)",
    )
    w.add_argument(
        "--scaler-address",
        metavar="HOST:PORT",
        default=env("SCALER_ADDRESS"),
        help="the scalerAddress KEDA dials this scaler by, e.g. "
        "predictive-scaler.keda.svc.cluster.local:9000: without --targets, the cluster's "
        "ScaledObjects whose external trigger names it are listed and warmed up before "
        "SERVING, then followed with a watch (needs list and watch on keda.sh scaledobjects, "
        "deploy/discovery); with --targets, only that file's triggers naming it "
        "(env SCALER_SCALER_ADDRESS, shared with `scaler retrain`)",
    )
    w.add_argument(
        "--namespace",
        metavar="NS",
        default=env("NAMESPACE"),
        help="with --scaler-address: read the ScaledObjects of this namespace only "
        "(env SCALER_NAMESPACE; default all namespaces)",
    )
    w.add_argument(
        "--store",
        default=env("STORE"),
        help="model store shared by every replica: DIR, or configmap:NAMESPACE; answers come "
        "from its champions, promotions are hot-reloaded, a target without a model gets one "
        "fitted here and written there, first writer wins (env SCALER_STORE; default: fit "
        "in-process, keep in memory)",
    )
    location.add_keep_flag(w, env)
    w.add_argument(
        "--store-poll",
        type=duration_within(1.0, 3600.0),
        default=env("STORE_POLL", "60s"),
        help="how often every champion pointer and retrain outcome is read, one request for "
        "the whole store, to hot-reload promotions and export the retrain gauges "
        "(env SCALER_STORE_POLL; 1s-1h; default 60s)",
    )
    w.add_argument(
        "--checkpoints",
        type=one_of("on", "off"),
        metavar="{on,off}",
        default=env("CHECKPOINTS", "on"),
        help="with --store: write each target's fit input to the store once an hour (about "
        "60 kB a target; two kept) and start a fresh replica from the newest, so it reads "
        "only the last hour from Prometheus; off for a ConfigMap store whose etcd must not "
        "take that write rate (env SCALER_CHECKPOINTS; default on)",
    )
    e = p.add_argument_group("engine")
    e.add_argument(
        "--step",
        type=duration_within(*STEP_RANGE),
        default=env("STEP", "30s"),
        help="time between decisions (env SCALER_STEP; 1s-10m; default 30s)",
    )
    e.add_argument(
        "--staleness",
        type=duration_within(*STALENESS_RANGE),
        default=env("STALENESS", "5m"),
        help="answer UNAVAILABLE once a target's data is this old (env SCALER_STALENESS; "
        "1s-1d; default 5m)",
    )
    fit_input.add_flags(e, env, every_default=fit_input.DEFAULT_EVERY)
    e.add_argument(
        "--idle-expiry",
        type=duration_within(1.0, 366 * 86400.0),
        default=env("IDLE_EXPIRY", "1h"),
        help="drop a target no KEDA call asked about for this long (env SCALER_IDLE_EXPIRY; "
        "default 1h); targets "
        "discovered in the cluster stay while their ScaledObject exists",
    )
    e.add_argument(
        "--max-targets",
        type=count_within(1, 100_000),
        default=env("MAX_TARGETS", "1000"),
        help="targets held at once, about 0.5 MiB each; a new one past it is answered "
        "RESOURCE_EXHAUSTED (KEDA's fallback applies) until another expires, so ScaledObjects "
        "whose metadata keeps changing cannot grow the pod until it is killed (env "
        "SCALER_MAX_TARGETS; 1-100000; default 1000, within deploy/'s 768Mi)",
    )
    e.add_argument(
        "--fit-workers",
        type=count_within(*FIT_WORKERS_RANGE),
        default=env("FIT_WORKERS", "1"),
        help="processes fitting models off the serving process, 0-64; 0 = a thread (env "
        "SCALER_FIT_WORKERS; default 1). Each runs BLAS on one thread unless "
        "OPENBLAS_NUM_THREADS or OMP_NUM_THREADS is set",
    )
    e.add_argument(
        "--warm-nice",
        type=count_within(0, 19),
        default=env("WARM_NICE", "0"),
        help="nice levels the start-up warm-up runs below the process, so a replica warming "
        "next to a serving one leaves it the CPU, 0-19; 0 = none (env SCALER_WARM_NICE; "
        "default 0)",
    )
    e.add_argument(
        "--fit-timeout",
        type=duration_within(ranges.FIT_TIMEOUT.low, ranges.FIT_TIMEOUT.high),
        default=env("FIT_TIMEOUT", "15m"),
        help="a fit running longer has its worker killed and replaced, and its target backs "
        "off (env SCALER_FIT_TIMEOUT; 10s-1d; default 15m)",
    )
    e.add_argument(
        "--fit-memory",
        type=memory_arg,
        default=env("FIT_MEMORY", "2Gi"),
        help="address space of a fit worker (RLIMIT_AS); a fit needing more fails alone and "
        "its target backs off (env SCALER_FIT_MEMORY; 256Mi-1Ti, 0 = unbounded; default 2Gi)",
    )
    t = p.add_argument_group(
        "TLS (KEDA dials TLS when its TriggerAuthentication gives caCert / tlsClientCert)"
    )
    t.add_argument(
        "--tls-cert",
        type=Path,
        default=env("TLS_CERT"),
        help="server certificate (PEM; env SCALER_TLS_CERT)",
    )
    t.add_argument(
        "--tls-key",
        type=Path,
        default=env("TLS_KEY"),
        help="server private key (PEM; env SCALER_TLS_KEY)",
    )
    t.add_argument(
        "--tls-client-ca",
        type=Path,
        default=env("TLS_CLIENT_CA"),
        help="CA that client certificates must chain to (PEM; env SCALER_TLS_CLIENT_CA)",
    )
    switches.add(
        t,
        "--tls-require-client-cert",
        env=env,
        name="TLS_REQUIRE_CLIENT_CERT",
        help="mTLS: refuse clients without a certificate from --tls-client-ca (env "
        "SCALER_TLS_REQUIRE_CLIENT_CERT)",
    )


def settings_from(args: argparse.Namespace) -> Settings:
    tls = TLSSettings(
        cert=args.tls_cert,
        key=args.tls_key,
        client_ca=args.tls_client_ca,
        require_client_cert=args.tls_require_client_cert,
    )
    certificates.check_flags(tls)
    if args.staleness < 2 * args.step:
        raise ConfigError(
            f"--staleness {format_duration(args.staleness)} is under twice --step "
            f"{format_duration(args.step)}: a decision is up to a step old when KEDA asks, and "
            "its newest sample older still, so healthy targets would flap UNAVAILABLE; give "
            f"--staleness {format_duration(2 * args.step)} or more"
        )
    return Settings(
        server=ServerSettings(
            grpc_port=args.grpc_port,
            http_port=args.http_port,
            health_port=args.health_port,
            host=args.host,
            drain_seconds=args.drain_delay,
            tls=tls,
        ),
        prometheus=PrometheusSettings(
            url=args.prometheus_url,
            ledger_url=args.ledger_prometheus_url or None,
            timeout=args.prometheus_timeout,
            retries=args.prometheus_retries,
            auth=prometheus_flags.auth_from(args),
        ),
        engine=EngineSettings(
            step=args.step,
            staleness=args.staleness,
            idle_expiry=args.idle_expiry,
            max_targets=args.max_targets,
            fit_workers=args.fit_workers,
            fit_timeout=args.fit_timeout,
            fit_memory=args.fit_memory,
            warm_nice=args.warm_nice,
            ledger_scrape_interval=args.ledger_scrape_interval,
            history_peaks=fit_input.resolution(args),
        ),
        source=args.source,
        targets_file=args.targets,
        scaler_address=scaler_address(args.scaler_address),
        watch_namespace=args.namespace or None,
        store=args.store or None,
        store_keep=store_base.check_keep(args.keep),
        store_poll=args.store_poll,
        checkpoints=args.checkpoints == "on",
        decision_log=args.decision_log,
        decision_log_max_bytes=args.decision_log_max_size,
        decision_log_keep=args.decision_log_keep,
        kube_events=args.kube_events,
        kube_events_interval=args.kube_events_interval,
        kube_pod_selectors=args.kube_pod_selectors,
        kubeconfig=args.kubeconfig,
    )


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


def scaler_address(text: str | None) -> str | None:
    from scaler.kube import targets

    return targets.scaler_address(text)


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
    server, port, health = await grpc_server.create_server(settings.server, engine)
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


def exit_deadline(grace: float) -> None:
    """Cut a stuck shutdown short at `grace` + EXIT_SLACK seconds: a thread still waiting on a
    Prometheus query must not hold the pod past its terminationGracePeriod."""

    def expire() -> None:
        logger.error("shutdown took longer than %.1fs; exiting now", grace + EXIT_SLACK)
        logging.shutdown()
        os._exit(1)

    timer = threading.Timer(grace + EXIT_SLACK, expire)
    timer.daemon = True
    timer.start()


def cmd_serve(args: argparse.Namespace) -> int:
    settings = settings_from(args)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_signal() -> None:
            if not stop.is_set():
                logger.info(
                    "stopping: in-flight RPCs have %gs, queued fits are cancelled",
                    settings.server.grace_seconds,
                )
                exit_deadline(settings.server.drain_seconds + settings.server.grace_seconds)
            stop.set()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal)
        await run_server(settings, clock=WallClock(), stop=stop)

    asyncio.run(main())
    # Everything of ours is closed. The interpreter's own teardown (numpy, pandas, Prophet)
    # takes 0.5-0.7 s on a busy node, all of it past the grace period: skip it.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def build_parser(*, serve_only: bool = False) -> argparse.ArgumentParser:
    """The CLI; `serve_only` leaves out the other subcommands, whose modules import pandas (a
    second of CPU at every replica's start, which `scaler serve` never uses)."""
    commands.READS.reset()
    parser = argparse.ArgumentParser(
        prog="scaler",
        description="Predictive GPU autoscaler: a KEDA external scaler that prewarms replicas "
        "from a calibrated P95 forecast, under a strict budget. `scaler COMMAND --help` says "
        "more about each command.",
        epilog="examples:\n"
        "  scaler demo                                  # see it work, no Prometheus, ~1 min\n"
        "  scaler backtest export.csv --out /tmp/bt     # what it would have done on your load\n"
        "  scaler serve --prometheus-url http://prometheus:9090   # what KEDA talks to\n"
        "  scaler explain inference/llm --server http://localhost:8080 --since 6h",
        formatter_class=helptext.Paragraphs,
        allow_abbrev=False,  # `explain --log` is not an abbreviation of --log-level
    )
    add_global_flags(parser, from_env=True)
    # Every command takes them after its name too; there a flag not given sets nothing, so the
    # value given before the name (or the variable's) stands.
    common = argparse.ArgumentParser(add_help=False)
    add_global_flags(common, from_env=False)
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", action=commands.commands_with(common)
    )
    serve = sub.add_parser(
        "serve",
        help="run the gRPC external scaler KEDA talks to",
        description="Run the KEDA external scaler (gRPC) with /metrics.\n\n"
        "Each ScaledObject trigger's metadata is one target, learnt on KEDA's first call; with\n"
        "--targets FILE or --scaler-address (the cluster's ScaledObjects naming this scaler,\n"
        "then watched) they are warmed up before SERVING. Every flag can also be set as\n"
        "SCALER_<FLAG>.",
        epilog="examples:\n"
        "  scaler serve --prometheus-url http://prometheus-operated.monitoring.svc:9090\n"
        "  scaler serve --source file: --step 30s          # the bundled trace, no Prometheus\n"
        "  scaler serve --store configmap:keda --scaler-address scaler.keda.svc:9000  # discover\n"
        "  scaler serve --tls-cert tls.crt --tls-key tls.key --tls-client-ca ca.crt "
        "--tls-require-client-cert",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_serve_flags(serve)
    serve.set_defaults(func=cmd_serve)
    if serve_only:
        return parser
    from scaler.kube import check_cli
    from scaler.offline import backtest_cli, demo, retrain_cli
    from scaler.record import explain_cli

    demo.add_parser(sub)
    backtest_cli.add_parser(sub, env)
    explain_cli.add_parser(sub)
    retrain_cli.add_parser(sub, env=env, job_index=os.environ.get("JOB_COMPLETION_INDEX"))
    check_cli.add_parser(sub)
    return parser


def add_global_flags(parser: argparse.ArgumentParser, *, from_env: bool) -> None:
    """--log-level and --log-format, on `parser` (defaults from SCALER_*, `from_env`) or on a
    parent of every command's parser (no default: argparse.SUPPRESS)."""
    g = parser.add_argument_group("logging (before or after the command)")
    g.add_argument(
        "--log-level",
        type=log_level,
        default=env("LOG_LEVEL", "INFO") if from_env else argparse.SUPPRESS,
        help="DEBUG, INFO, WARNING or ERROR (env SCALER_LOG_LEVEL; default INFO)",
    )
    g.add_argument(
        "--log-format",
        type=one_of("text", "json"),
        metavar="{text,json}",
        default=env("LOG_FORMAT", "text") if from_env else argparse.SUPPRESS,
        help="text for terminals, json for log pipelines (env SCALER_LOG_FORMAT)",
    )


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is when a record is emitted, not when the handler was made
    (as logging's own last-resort handler does): `main` run in a process that later swaps or
    closes its stderr (a notebook, a test's capture) must not log into a closed stream."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass  # StreamHandler.__init__ and setStream assign it; the current stderr wins


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def log_level(text: str) -> str:
    """argparse `type=` for --log-level: a level name, in any case."""
    level = text.strip().upper()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a log level; use {', '.join(LOG_LEVELS)}"
        )
    return level


def setup_logging(level: str, fmt: str) -> None:
    handler = _Stderr()
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    quiet.silence_third_party()


class _JsonFormatter(logging.Formatter):
    """One JSON object a line. A record's traceback (`logger.exception`, or the text a fit
    worker formatted before sending it: workers._Kept) goes under "exc", its stack under
    "stack": a log pipeline must not lose why a target failed."""

    def format(self, record: logging.LogRecord) -> str:
        import json

        line: dict[str, object] = {
            "ts": record.created,
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exc"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        try:
            return _main(argv)
        finally:
            sys.stdout.flush()  # a reader that left is met here, not in the interpreter's exit
    except BrokenPipeError:
        # `scaler explain ... | head`: the reader has what it wanted. Say nothing; stdout goes
        # to /dev/null so that the exit's own flush of what is left fails no more.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


def _main(argv: Sequence[str] | None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(serve_only=given[:1] == ["serve"])
    args = parser.parse_args(given)
    setup_logging(args.log_level, args.log_format)
    for unread in commands.READS.unread(args.command, os.environ):
        logger.warning(unread)
    logger.debug(threads.limit(os.environ))
    try:
        code: int = args.func(args)
        return code
    except ScalerError as exc:
        print(f"scaler: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
