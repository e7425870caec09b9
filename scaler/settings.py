"""One typed Settings, made of small frozen groups. Built once in cli.py from flags and
`SCALER_*` environment variables and passed explicitly; no other module reads the environment."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from scaler.errors import ConfigError


@dataclass(frozen=True)
class TLSSettings:
    """Server-side TLS. All paths are PEM files; empty means plaintext."""

    cert: Path | None = None
    """Server certificate chain."""
    key: Path | None = None
    """Server private key."""
    client_ca: Path | None = None
    """CA bundle that client certificates are verified against (mTLS)."""
    require_client_cert: bool = False
    """Refuse clients without a certificate signed by client_ca."""

    @property
    def enabled(self) -> bool:
        return self.cert is not None

    def check(self) -> None:
        """ConfigError for a combination of TLS flags that would not do what it says: every one
        `scaler serve` refuses at start-up, before any file is read."""
        if self.key is not None and self.cert is None:
            raise ConfigError("--tls-key is set but --tls-cert is not; give both")
        if self.cert is not None and self.key is None:
            raise ConfigError("--tls-cert is set but --tls-key is not; give both")
        client = [
            flag
            for flag, given in (
                ("--tls-client-ca", self.client_ca is not None),
                ("--tls-require-client-cert", self.require_client_cert),
            )
            if given
        ]
        if self.cert is None and client:
            verb = "is" if len(client) == 1 else "are"
            raise ConfigError(
                f"{' and '.join(client)} {verb} set but --tls-cert is not, so the ExternalScaler "
                "would be plaintext and open to anyone; give --tls-cert and --tls-key too"
            )
        if self.require_client_cert and self.client_ca is None:
            raise ConfigError(
                "--tls-require-client-cert needs --tls-client-ca to verify clients against"
            )
        if self.client_ca is not None and not self.require_client_cert:
            raise ConfigError(
                "--tls-client-ca is set without --tls-require-client-cert: gRPC would accept any "
                "client, with a certificate from another CA or none; add --tls-require-client-cert"
            )


@dataclass(frozen=True)
class ServerSettings:
    grpc_port: int = 9000
    """Port of the ExternalScaler and grpc.health.v1 services; 0 picks a free one."""
    http_port: int = 8080
    """Port of /metrics, /healthz and /readyz; 0 picks a free one, -1 disables it."""
    health_port: int = -1
    """Plaintext port serving only grpc.health.v1, for kubelet's `grpc:` probe, which cannot
    speak TLS to the gRPC port; -1 disables it."""
    host: str = "[::]"
    """Address to bind both ports to."""
    grace_seconds: float = 5.0
    """How long in-flight RPCs may finish after SIGTERM."""
    drain_seconds: float = 0.0
    """After SIGTERM, how long health says NOT_SERVING while new RPCs are still answered, before
    the grace period starts: the time Kubernetes takes to drop the pod from the Service's
    endpoints, so a rolling restart costs KEDA no failed poll."""
    tls: TLSSettings = field(default_factory=TLSSettings)


@dataclass(frozen=True)
class PrometheusAuth:
    """Credentials for Prometheus, read from files (a mounted Secret) by
    scaler/sources/credentials.py; never from trigger metadata. KEDA resolves a
    TriggerAuthentication only for its own scalers: an external scaler receives the trigger's
    `metadata`, so secrets must live with the scaler. Paths are read again when they change (a
    rotated token is used on the next request)."""

    bearer_token_file: Path | None = None
    """File holding a bearer token (`Authorization: Bearer ...`), KEDA's `bearer` mode."""
    username: str | None = None
    """Basic auth user name (not a secret), with `password_file`: KEDA's `basic` mode."""
    password_file: Path | None = None
    """File holding the basic auth password."""
    custom_auth_header: str | None = None
    """Header name of KEDA's `custom` mode (e.g. `X-Api-Key`), with `custom_auth_value_file`."""
    custom_auth_value_file: Path | None = None
    ca_file: Path | None = None
    """CA bundle (PEM) that Prometheus' certificate must chain to; None: the system's."""
    client_cert: Path | None = None
    """Client certificate (PEM) for mTLS to Prometheus, KEDA's `tls` mode, with client_key."""
    client_key: Path | None = None
    insecure_skip_verify: bool = False
    """Do not verify Prometheus' certificate (KEDA's `unsafeSsl` for its Prometheus scaler)."""
    headers: tuple[tuple[str, str], ...] = ()
    """Extra non-secret headers on every request (e.g. X-Scope-OrgID for Cortex/Mimir)."""
    trusted: tuple[str, ...] = ()
    """Extra Prometheus URLs (serverAddress values) that may receive the credentials; the
    default and ledger URLs always may. Any other serverAddress gets none: a ScaledObject
    author must not be able to send the scaler's token to a server of their choosing."""

    @property
    def modes(self) -> tuple[str, ...]:
        """The KEDA authModes these settings can serve."""
        found = {
            "bearer": self.bearer_token_file is not None,
            "basic": self.username is not None,
            "custom": self.custom_auth_header is not None,
            "tls": self.client_cert is not None,
        }
        return tuple(mode for mode, yes in found.items() if yes)


@dataclass(frozen=True)
class PrometheusSettings:
    url: str = "http://prometheus-operated.monitoring.svc:9090"
    """Default Prometheus for targets without `serverAddress`."""
    timeout: float = 10.0
    """Seconds per Prometheus HTTP request."""
    ledger_url: str | None = None
    """Prometheus that scrapes the scaler's own /metrics, where the prewarm ledger is rebuilt
    from after a restart; None means `url`."""
    retries: int = 2
    """Extra attempts of a request that failed fast (refused, reset, HTTP 429/502/503/504);
    a timeout is never retried (sources/prometheus_transport.py)."""
    backoff: float = 0.25
    """Seconds before the first retry, doubling for each next one."""
    call_budget: float = 15.0
    """Seconds one call (a history or a latest value, with its chunks and retries) may take:
    no retry starts that could end past it. The engine makes two calls per refresh, so half
    the refresh deadline keeps retries inside it."""
    auth: PrometheusAuth = field(default_factory=PrometheusAuth)


@dataclass(frozen=True)
class EngineSettings:
    step: float = 30.0
    """Seconds between decisions; decisions are stamped on multiples of it, so every scaler
    replica gives the same answer for the same target at the same time."""
    model_step: float = 300.0
    """Resolution models are fitted and predict at (5 min is plenty for a 10-30 min horizon)."""
    history: float = 28 * 86400.0
    """Seconds of history fetched for a fit."""
    max_targets: int = 1000
    """Targets held at once; a new one past it is refused until one expires (idle_expiry). 1,000
    is what docs/benchmark.md measured within 512 MiB, under deploy/'s 768 MiB limit: a cluster
    whose ScaledObjects change their metadata often (each change a new target) cannot grow the
    scaler until the kernel kills it, and every target with it."""
    history_peaks: float | None = None
    """Sampling step (seconds, e.g. `step`) of per-bucket peaks for the fit history: each
    model-step point the highest value in its bucket, the series `scaler backtest` fits on.
    None: the value at each point. `scaler serve` sets it to --peaks-every (30 s) unless
    `--fit-input points` (scaler/sources/fit_input.py); Prometheus reads it as plain range
    queries at this step with the peaks taken in-process (sources/prometheus_range.py)."""
    refit_every: float = 7 * 86400.0
    """Seconds between refits of a target's model."""
    retrain_grace: float = 86400.0
    """Seconds past a refit period after the retrain job's latest sign of life for a target (a
    champion it wrote, a success it recorded) before serve's scheduled refit steps in for it
    (scaler/serving/refit_due.py): a weekly job that failed or was suspended longer is late."""
    staleness: float = 300.0
    """How old the newest sample (or the last successful refresh) may be before the target's
    answers become UNAVAILABLE instead of a guess."""
    idle_expiry: float = 3600.0
    """Targets no RPC asked about for this long are dropped."""
    concurrency: int = 16
    """Source requests in flight at once per endpoint (Prometheus URL); each runs in a thread."""
    refresh_deadline: float = 30.0
    """Seconds one target's refresh (its source requests and decision) may take before it
    counts as failed; its endpoint's breaker counts the failure (scaler.serving.isolation)."""
    ledger_scrape_interval: float = 30.0
    """Seconds between the scrapes of the scaler's spend counter by the ledger's Prometheus;
    a rebuilt ledger reserves the prewarm a pod can charge in that time without it being
    recorded (scaler/decision/unrecorded.py)."""
    fit_workers: int = 1
    """Processes that fit models off the serving process; 0 fits in a thread (tests, demo)."""
    fit_timeout: float = 900.0
    """Seconds one fit may run in a worker process before the worker is killed and replaced
    (an `auto` selection on four weeks takes seconds to a minute)."""
    fit_memory: int = 2 * 1024**3
    """Bytes of address space (RLIMIT_AS) of a fit worker; 0 leaves it unbounded. An `auto`
    fit peaks near 0.5 GiB of address space (0.2 GiB resident)."""
    warm_nice: int = 0
    """Nice levels the start-up warm-up runs below the process's priority (0-19; 0: none), so
    that a replica warming next to a serving one leaves it the CPU (scaler/serving/priority.py).
    Off by default: at 10 a 300-target warm start took 37.5 s instead of 21.1 s on a machine
    shared with other work, and what it spares a serving replica is not measured yet."""


@dataclass(frozen=True)
class Settings:
    server: ServerSettings = field(default_factory=ServerSettings)
    prometheus: PrometheusSettings = field(default_factory=PrometheusSettings)
    engine: EngineSettings = field(default_factory=EngineSettings)
    source: str = "prometheus"
    """`prometheus`, or `file:PATH` to replay a timestamp,value CSV (or a folder of them)."""
    ledger_source: str = "prometheus"
    """Where the prewarm ledger is rebuilt from: `prometheus` (the spend counter every replica
    exports, read from `prometheus.ledger_url`), or `none` (an in-memory ledger that a restart
    forgets; the file source, which has no place to store spend, always uses it)."""
    targets_file: Path | None = None
    """ScaledObject manifests whose targets are warmed up before the scaler says SERVING."""
    scaler_address: str | None = None
    """The scalerAddress KEDA dials this scaler by: without targets_file, the cluster's
    ScaledObjects naming it are discovered and watched (scaler/kube/discovery.py); with it,
    only the file's triggers naming it count."""
    watch_namespace: str | None = None
    """Discovery reads this namespace's ScaledObjects only; None: all namespaces."""
    store: str | None = None
    """Model store the champions are read from and new models written to: a directory, or
    `configmap:NAMESPACE`; None fits every model in-process and keeps it in memory."""
    store_keep: int = 5
    """Versions the store keeps per target, the champion always (`scaler retrain --keep`'s:
    both prune, so they must agree)."""
    store_poll: float = 60.0
    """Seconds between reads of each target's champion pointer (hot reload)."""
    checkpoints: bool = True
    """Write each target's fit input to the store hourly and start from the newest one, so a
    fresh replica reads only what came after it (serving/checkpoints.py); off: neither."""
    decision_log: Path | None = None
    """Append a JSON line per target per decision change to this file (record/decisionlog.py)."""
    decision_log_max_bytes: int = 64 * 2**20
    """Past this size the decision log is rotated to FILE.1, FILE.2, ..."""
    kube_events: bool = False
    """Post Kubernetes Events on ScaledObjects (drift fallback, budget exhausted, model
    promoted; scaler/kube/events.py); needs RBAC to create events."""
    kube_events_interval: float = 600.0
    """Seconds of one Event window per ScaledObject and reason (scaler/kube/events.py)."""
    kube_pod_selectors: bool = False
    """leadTime: auto without podSelector reads the scaleTargetRef's selector from the
    Kubernetes API (needs get on scaledobjects and deployments/statefulsets/replicasets)."""
    kubeconfig: Path | None = None
    """Kubernetes client configuration; None: the pod's service account, else ~/.kube/config."""
    decision_log_keep: int = 5
    """Rotated decision logs kept; the log uses at most (keep + 1) x max_bytes."""
