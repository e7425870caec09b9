"""`scaler serve`'s flags and their help (`add_serve_flags`), and the Settings they make
(`settings_from`). A flag's SCALER_* default is read through the `env` it is given (cli.env):
this module must not read os.environ, nor start anything."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Protocol

from scaler import argtypes, switches
from scaler.decision import ranges
from scaler.decision.spec import format_duration
from scaler.errors import ConfigError
from scaler.settings import (
    EngineSettings,
    PrometheusSettings,
    ServerSettings,
    Settings,
    TLSSettings,
)
from scaler.sources import fit_input, prometheus_flags
from scaler.store import base as store_base
from scaler.store import location


class Env(Protocol):
    """cli.env: a flag's SCALER_* default."""

    def __call__(self, name: str, default: str | None = None, /) -> str | None: ...


FIT_WORKERS_RANGE = (0, 64)
STEP_RANGE = (1.0, 600.0)
"""Bounds of --step: KEDA polls every 30 s by default, and a decision made less often than every
10 minutes would be older than a GPU replica's cold start."""
STALENESS_RANGE = (1.0, 86400.0)


def add_serve_flags(p: argparse.ArgumentParser, *, env: Env) -> None:
    g = p.add_argument_group("server")
    g.add_argument(
        "--grpc-port",
        type=argtypes.port_arg(off=False),
        default=env("GRPC_PORT", "9000"),
        help="ExternalScaler + grpc.health.v1 port (env SCALER_GRPC_PORT; default 9000)",
    )
    g.add_argument(
        "--http-port",
        type=argtypes.port_arg(off=True),
        default=env("HTTP_PORT", "8080"),
        help="/metrics, /healthz, /readyz port; -1 disables (env SCALER_HTTP_PORT; default 8080)",
    )
    g.add_argument(
        "--health-port",
        type=argtypes.port_arg(off=True),
        default=env("HEALTH_PORT", "-1"),
        help="plaintext port serving only grpc.health.v1, for kubelet's grpc probe of a TLS "
        "scaler; -1 disables (env SCALER_HEALTH_PORT; default -1)",
    )
    g.add_argument(
        "--host", default=env("HOST", "[::]"), help="bind address (env SCALER_HOST; default [::])"
    )
    g.add_argument(
        "--drain-delay",
        type=argtypes.duration_within(0.0, 60.0),
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
        type=argtypes.duration_within(1.0, 600.0),
        default=env("LEDGER_SCRAPE_INTERVAL", "30s"),
        help="how often that Prometheus scrapes this scaler: a rebuilt ledger books "
        "maxPrewarmReplicas for this interval + 1m + --step as spent, the bound of what a "
        "killed pod charged but no scrape recorded, until the record shows that span; and a "
        "charge not in that Prometheus 4 intervals + 1m + --step later holds the target's "
        "prewarm at 0 (reason spend_unrecorded) (env SCALER_LEDGER_SCRAPE_INTERVAL; 1s-10m; "
        "default 30s, as deploy/monitoring)",
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
        type=argtypes.size_within(2**10, 2**40),
        default=env("DECISION_LOG_MAX_SIZE", "64Mi"),
        help="rotate the decision log to FILE.1, FILE.2, ... past this size "
        "(env SCALER_DECISION_LOG_MAX_SIZE; 1Ki-1Ti; default 64Mi)",
    )
    g.add_argument(
        "--decision-log-keep",
        type=argtypes.count_within(0, 1000),
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
        type=argtypes.duration_within(60.0, 86400.0),
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
        type=argtypes.duration_within(1.0, 3600.0),
        default=env("STORE_POLL", "60s"),
        help="how often every champion pointer and retrain outcome is read, one request for "
        "the whole store, to hot-reload promotions and export the retrain gauges "
        "(env SCALER_STORE_POLL; 1s-1h; default 60s)",
    )
    w.add_argument(
        "--checkpoints",
        type=argtypes.one_of("on", "off"),
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
        type=argtypes.duration_within(*STEP_RANGE),
        default=env("STEP", "30s"),
        help="time between decisions (env SCALER_STEP; 1s-10m; default 30s)",
    )
    e.add_argument(
        "--staleness",
        type=argtypes.duration_within(*STALENESS_RANGE),
        default=env("STALENESS", "5m"),
        help="answer UNAVAILABLE once a target's data is this old (env SCALER_STALENESS; "
        "1s-1d; default 5m)",
    )
    fit_input.add_flags(e, env, every_default=fit_input.DEFAULT_EVERY)
    e.add_argument(
        "--idle-expiry",
        type=argtypes.duration_within(1.0, 366 * 86400.0),
        default=env("IDLE_EXPIRY", "1h"),
        help="drop a target no KEDA call asked about for this long (env SCALER_IDLE_EXPIRY; "
        "default 1h); targets "
        "discovered in the cluster stay while their ScaledObject exists",
    )
    e.add_argument(
        "--max-targets",
        type=argtypes.count_within(1, 100_000),
        default=env("MAX_TARGETS", "1000"),
        help="targets held at once, about 0.5 MiB each; a new one past it is answered "
        "RESOURCE_EXHAUSTED (KEDA's fallback applies) until another expires, so ScaledObjects "
        "whose metadata keeps changing cannot grow the pod until it is killed (env "
        "SCALER_MAX_TARGETS; 1-100000; default 1000, within deploy/'s 768Mi)",
    )
    e.add_argument(
        "--fit-workers",
        type=argtypes.count_within(*FIT_WORKERS_RANGE),
        default=env("FIT_WORKERS", "1"),
        help="processes fitting models off the serving process, 0-64; 0 = a thread (env "
        "SCALER_FIT_WORKERS; default 1). Each runs BLAS on one thread unless "
        "OPENBLAS_NUM_THREADS or OMP_NUM_THREADS is set",
    )
    e.add_argument(
        "--warm-nice",
        type=argtypes.count_within(0, 19),
        default=env("WARM_NICE", "0"),
        help="nice levels the start-up warm-up runs below the process, so a replica warming "
        "next to a serving one leaves it the CPU, 0-19; 0 = none (env SCALER_WARM_NICE; "
        "default 0)",
    )
    e.add_argument(
        "--fit-timeout",
        type=argtypes.duration_within(ranges.FIT_TIMEOUT.low, ranges.FIT_TIMEOUT.high),
        default=env("FIT_TIMEOUT", "15m"),
        help="a fit running longer has its worker killed and replaced, and its target backs "
        "off (env SCALER_FIT_TIMEOUT; 10s-1d; default 15m)",
    )
    e.add_argument(
        "--fit-memory",
        type=argtypes.memory_arg,
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
        help="server certificate chain (PEM; env SCALER_TLS_CERT); it, the key and the client "
        "CA are read again when they change (a cert-manager renewal), for new connections; a "
        "renewal that does not check out is logged and the files in use stay",
    )
    t.add_argument(
        "--tls-key",
        type=Path,
        default=env("TLS_KEY"),
        help="server private key (PEM, unencrypted; env SCALER_TLS_KEY)",
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
    tls.check()
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


def scaler_address(text: str | None) -> str | None:
    from scaler.kube import targets

    return targets.scaler_address(text)
