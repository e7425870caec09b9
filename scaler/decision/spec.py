"""scalerMetadata -> TargetSpec: the one place where a trigger's metadata is read and validated.

Keys follow KEDA's own Prometheus scaler where the meaning matches (`serverAddress`, `query`,
`threshold`, `activationThreshold`), so migrating a trigger is `type: prometheus` ->
`type: external` plus `scalerAddress`. Every bad value raises `SpecError` naming the key, the
value and the fix. Unknown keys are an error, not a warning: a misspelt `maxReplica` silently
ignored would let the scaler spend past a cap the user believes is set. Keys KEDA itself adds
(`scalerAddress`) or that other KEDA tooling commonly sets are accepted and ignored.

Any team that can write a ScaledObject can send any metadata, so every value is bounded: numbers
are plain ASCII decimals (literals.py) within the ranges below, and the count of keys and
the length of each value are capped before anything is read. An error quotes a long key or
value as its first characters and its length, so it stays short whatever was sent.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TypeVar

from scaler.decision import budget, countries, literals, selector
from scaler.decision.literals import duration_arg as duration_arg
from scaler.decision.literals import format_duration as format_duration
from scaler.decision.literals import parse_duration as parse_duration
from scaler.errors import SpecError

MODEL_NAMES = ("auto", "seasonal", "ets", "prophet")
MODES = ("active", "shadow")

# Keys KEDA passes through or that belong to the trigger rather than to us.
PASSTHROUGH_KEYS = frozenset({"scalerAddress", "unsafeSsl", "tlsCertFile", "enableTLS"})

_METRIC_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class TargetSpec:
    """Everything the scaler needs to know about one trigger, validated."""

    namespace: str
    name: str
    query: str
    threshold: float
    """Load one replica serves within its SLO; > 0."""
    server_address: str | None = None
    """Prometheus URL; None means the server's default (--prometheus-url)."""
    activation_threshold: float = 0.0
    lead_time: float = 600.0
    """Seconds a new replica needs to become useful (cold start)."""
    horizon: float = 900.0
    """Seconds past the lead time the forecast looks ahead."""
    quantile: float = 0.95
    min_replicas: int = 0
    max_replicas: int = 100
    max_prewarm_replicas: int = 10
    prewarm_budget: float = budget.DEFAULT[0]
    """Prewarm allowed per `prewarm_budget_window`: replica-hours, or money in `currency` when
    `cost_per_replica_hour` is set. Not used when `prewarm_budget_share` is set."""
    prewarm_budget_share: float | None = budget.DEFAULT[1]
    """`prewarmBudget: "10%"`: the budget is this share (0 < share <= 1) of the window's
    reactive replica-hours instead (budget.Ledger)."""
    prewarm_budget_window: float = 86400.0
    cost_per_replica_hour: float | None = None
    currency: str = "USD"
    monthly_budget: float | None = None
    """`monthlyBudget`: GPU money per calendar month for this target, in `currency`; read only by
    the month-end spend alerts (exported as scaler_monthly_budget_cost), never by decisions."""
    model: str = "auto"
    mode: str = "active"
    metric_name: str = ""
    auth_modes: tuple[str, ...] = ()
    """KEDA authModes the target's Prometheus needs (bearer, basic, custom, tls); the
    credentials are the scaler's own (sources/credentials.py), never metadata."""
    custom_headers: tuple[tuple[str, str], ...] = ()
    """`customHeaders: X-Scope-OrgID=team-a,...`: non-secret headers on every request."""
    query_namespace: str | None = None
    """`namespace`: sent as the `namespace` query parameter, as KEDA's Prometheus scaler does
    (Thanos querier behind prom-label-proxy)."""
    prometheus_unsafe_ssl: bool = False
    """`prometheusUnsafeSsl: "true"`: do not verify the Prometheus certificate. (`unsafeSsl` is
    KEDA's own key, for its gRPC connection to this scaler.)"""
    holidays: str | None = None
    """`holidays: US`: country code of the public holidays Prophet models (model prophet)."""
    lead_time_auto: bool = False
    """`leadTime: auto`: learn the cold start from kube-state-metrics (serving/leadtime.py);
    `lead_time` holds the default until a value is learned."""
    pod_selector: str | None = None
    """`podSelector`: label selector of the target's pods, for `leadTime: auto`."""
    level_insurance: bool = False
    """`levelInsurance: "true"`: also buy the reactive floor's load times how far the band
    reaches above its median (policy.level_ratio, reason level), paid from the budget. It pays
    where the forecast's median lags the load's level and costs where the budget binds:
    measure it with `scaler backtest --level` first (docs/policy.md "Level insurance")."""
    fingerprint: str = field(default="", compare=False)
    """Short hash of the metadata; tells two triggers of one ScaledObject apart."""

    @property
    def key(self) -> str:
        """`namespace/name#fingerprint`, the identity of the target in state and logs."""
        return f"{self.namespace}/{self.name}#{self.fingerprint}"

    @property
    def label(self) -> str:
        """`namespace/name`, for humans."""
        return f"{self.namespace}/{self.name}"

    @property
    def lookahead(self) -> float:
        """Seconds of forecast the decision reads: lead time plus horizon."""
        return self.lead_time + self.horizon


T = TypeVar("T")

HOUR = 3600.0
DAY = 86400.0
MIN_POSITIVE = 0.000001
"""Smallest positive threshold or price: well above any subnormal, far below any real load."""
MAX_LOAD = 1e12
"""Largest threshold or activation threshold, in the query's own unit."""
MAX_REPLICAS = 10_000
MAX_LOOKAHEAD = 6 * HOUR
"""leadTime + horizon: the forecast a decision reads (73 points at the default 5-minute model
step). Within a quarter of the daily cycle the models learn from weeks of history, and it keeps
the calibration backtest (origins x forecast points) small."""
MAX_KEYS = 64
"""Keys read from one scalerMetadata (there are 21 known ones)."""
VALUE_CHARS = {
    "query": 4096,
    "serverAddress": 2048,
    "customHeaders": 2048,
    "podSelector": 1024,
} | dict.fromkeys(PASSTHROUGH_KEYS, 2048)
"""Longest value of a key, in characters; any other key's value is at most DEFAULT_VALUE_CHARS."""
DEFAULT_VALUE_CHARS = 64
ECHO_CHARS = 40
"""Longest quote of a key or value in an error message: errors must stay well under gRPC's
16 KB metadata limit (the status details travel as a header), or the client loses the key."""
QUERY_ECHO_CHARS = 200
"""Longest quote of a target's query in a log line or an answer's error: a usual query (a sum of
a rate, 60-120 characters) whole, a 4 KB one its start and length (the key's fingerprint names
it), so that a message keeps its fix within the 1 KB of status details (server.bounded)."""
_SPACE = " \t\r\n"


@dataclass(frozen=True)
class Range:
    """The closed range a numeric key allows; `duration` shows its ends as durations."""

    low: float
    high: float
    duration: bool = False

    def check(self, value: float) -> float:
        if not self.low <= value <= self.high:
            raise ValueError(f"must be from {self.show(self.low)} to {self.show(self.high)}")
        return value

    def show(self, value: float) -> str:
        return literals.format_duration(value) if self.duration else literals.format_decimal(value)


def flag(parse: Callable[[str], T], why: str) -> Callable[[str], T]:
    """argparse `type=` from a parser that raises ValueError (a key's, e.g. number_in): the
    error gives the flag's text, the parser's reason and `why` (e.g. "as the trigger's
    `leadTime`")."""

    def arg(text: str) -> T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: {exc} ({why})") from None

    return arg


def duration_flag(bounds: Range, why: str) -> Callable[[str], float]:
    """argparse `type=` for a duration within `bounds` (see `flag`)."""
    return flag(lambda text: bounds.check(duration_arg(text)), why)


THRESHOLD = Range(MIN_POSITIVE, MAX_LOAD)
ACTIVATION = Range(0, MAX_LOAD)
REPLICAS = Range(0, MAX_REPLICAS)
CEILING = Range(1, MAX_REPLICAS)
LEAD_TIME = Range(1, 2 * HOUR, duration=True)
"""A GPU replica's cold start is 6-11 minutes; two hours covers a node pool that must be bought."""
HORIZON = Range(0, MAX_LOOKAHEAD - LEAD_TIME.high, duration=True)
"""Together with LEAD_TIME, at most MAX_LOOKAHEAD of forecast."""
MODEL_STEP = Range(60, HOUR, duration=True)
"""The step models are fitted at, offline (backtest --step, retrain --model-step): finer than a
minute, weeks of history are millions of points to fit; coarser than an hour, the daily cycle
has under 24 points and the lead time falls inside one step. The live engine's is 5m."""
FIT_TIMEOUT = Range(10, DAY, duration=True)
"""A fit's time bound, serve's and retrain's --fit-timeout: 0s killed every fit worker; an `auto`
selection on four weeks takes seconds to a minute."""
BUDGET = Range(0, budget.MAX_BUDGET)
"""prewarmBudget as an amount (budget.parse_budget reads it, and its share form): replica-hours
or money per window; 10,000 replicas for a week is 1.7 million replica-hours."""
BUDGET_WINDOW = Range(HOUR, 7 * DAY, duration=True)
"""The ledger keeps every charge of two windows: a week at a 30 s step is 40,320 entries."""
COST = Range(MIN_POSITIVE, 1e9)
COST_BUDGET = Range(MIN_POSITIVE, 1e12)
"""monthlyBudget, in money: a trillion a month bounds any fleet."""
"""Price of a replica-hour in any currency (an 8-GPU node is millions of VND an hour)."""


def echo(text: str, limit: int = ECHO_CHARS) -> str:
    """`text` as an error may quote it: whole when short, else its first characters and its
    length. Escapes count at their printed width (`\\x00` is 4), so the quote stays short."""
    if len(text) <= limit and len(repr(text)) <= limit + 2:
        return text
    width = cut = 0
    for char in text[:limit]:
        width += len(repr(char)) - 2
        if width > limit:
            break
        cut += 1
    return f"{text[:cut]}... ({len(text)} characters)"


def shown(value: object) -> str:
    """A value read from YAML as an error may quote it: a list or a mapping by its kind and
    size (through aliases it may be millions of nodes), a boolean as YAML writes it, anything
    else as its text, cut by `echo`."""
    if isinstance(value, list | dict):
        kind, part = ("list", "item") if isinstance(value, list) else ("mapping", "key")
        return f"a {kind} of {len(value):,} {part}{'' if len(value) == 1 else 's'}"
    if isinstance(value, bool):
        return "true" if value else "false"
    return echo(str(value))


def quoted(value: object) -> str:
    """`shown`, but a string in quotes (its repr), so that text reads apart from a number."""
    return repr(echo(value)) if isinstance(value, str) else shown(value)


def echo_query(query: str) -> str:
    """`query` as a log line or an answer's error quotes it: up to QUERY_ECHO_CHARS."""
    return echo(query, QUERY_ECHO_CHARS)


EMPTY_IS_UNSET = frozenset(
    {
        "serverAddress",
        "authModes",
        "customHeaders",
        "namespace",
        "holidays",
        "podSelector",
        "metricName",
    }
)
"""Optional keys whose empty value means unset, as deploy/overlays/active writes them
(`holidays: ""`). Any other key's empty value is refused: it is a template's value left unset
far more often than a choice, and the default in its place can turn a shadow trigger active
(`mode`), lift a cap (`maxReplicas`, `prewarmBudget`) or change the forecast read."""


def _get(meta: Mapping[str, str], key: str, parse: Callable[[str], T], default: T, fix: str) -> T:
    raw = meta.get(key)
    text = "" if raw is None else raw.strip(_SPACE)
    if not text:
        if raw is not None and key not in EMPTY_IS_UNSET:
            raise SpecError(
                key, echo(raw), f"empty; remove the key for the default, or give a value ({fix})"
            )
        return default
    try:
        return parse(text)
    except ValueError as exc:
        raise SpecError(key, echo(text), f"{exc}; {fix}") from None


def _number(bounds: Range) -> Callable[[str], float]:
    def parse(text: str) -> float:
        return bounds.check(literals.parse_decimal(text))

    return parse


def _count(bounds: Range) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = literals.parse_decimal(text)
        if not value.is_integer():
            raise ValueError("must be a whole number")
        return int(bounds.check(value))

    return parse


def number_in(bounds: Range) -> Callable[[str], float]:
    """A plain decimal within `bounds`, read as its key reads it, for a flag that mirrors one."""
    return _number(bounds)


def currency_code(text: str) -> str:
    """A currency code as the key `currency` reads it, for a flag that mirrors it."""
    return _currency(text)


def count_in(bounds: Range) -> Callable[[str], int]:
    """A whole number within `bounds`, read as its key reads it, for a flag that mirrors one."""
    return _count(bounds)


def _duration(bounds: Range) -> Callable[[str], float]:
    def parse(text: str) -> float:
        return bounds.check(literals.parse_duration(text))

    return parse


def parse_quantile(text: str) -> float:
    """A forecast quantile as the `quantile` key reads it: a plain decimal in (0.5, 1)."""
    value = literals.parse_decimal(text)
    if not (0.5 < value < 1):
        raise ValueError("must lie strictly between 0.5 and 1")
    return value


def _choice(options: tuple[str, ...]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in options:
            raise ValueError(f"must be one of {', '.join(options)}")
        return text

    return parse


def _metric_name(text: str) -> str:
    if len(text) > 63 or not _METRIC_NAME_RE.match(text):
        raise ValueError("must be lowercase letters, digits and '-', at most 63 characters")
    return text


_USERINFO = re.compile(r"^(https?://)[^/?#@]*@", re.IGNORECASE)
CREDENTIALS_IN_URL = (
    "credentials in a URL are clear text wherever it is written, and errors and logs quote it; "
    "give the scaler --prometheus-username and --prometheus-password-file instead (a trigger "
    "opts in with authModes: basic)"
)


def without_credentials(url: str) -> str | None:
    """`url` with its user:password@ shown as ***@, or None when it carries none."""
    if not _USERINFO.match(url):
        return None
    return _USERINFO.sub(r"\1***@", url, count=1)


def http_url(text: str) -> str:
    """A Prometheus URL, as `serverAddress` and the scaler's URL flags take it: http:// or
    https:// and a host; without the trailing slash."""
    if not re.match(r"^https?://[^\s/:]+", text):
        raise ValueError("must be an http:// or https:// URL")
    return text.rstrip("/")


KNOWN_KEYS = frozenset(
    {
        "serverAddress",
        "query",
        "authModes",
        "customHeaders",
        "namespace",
        "prometheusUnsafeSsl",
        "holidays",
        "podSelector",
        "threshold",
        "activationThreshold",
        "leadTime",
        "horizon",
        "quantile",
        "minReplicas",
        "maxReplicas",
        "maxPrewarmReplicas",
        "prewarmBudget",
        "prewarmBudgetWindow",
        "costPerReplicaHour",
        "currency",
        "monthlyBudget",
        "model",
        "mode",
        "metricName",
        "levelInsurance",
    }
)


KEDA_PROMETHEUS_KEYS = {
    "ignoreNullValues": "no data here is always UNAVAILABLE, so that KEDA's `fallback` "
    "applies (as with ignoreNullValues: false), never a made-up 0; remove the key",
    "queryParameters": "extra query parameters are not sent by this scaler; remove the key "
    "(`namespace` is sent as the `namespace` parameter, as KEDA does)",
    "timeout": "the scaler's requests to Prometheus time out after its "
    "--prometheus-timeout flag (default 10s); remove the key",
    "cortexOrgID": "write customHeaders: 'X-Scope-OrgID=<org>' instead (KEDA deprecated "
    "cortexOrgID for it)",
}
"""Keys of KEDA's own Prometheus scaler with no meaning here: refused, saying what to do."""

SECRET_KEYS = {
    "bearerToken": "--prometheus-token-file",
    "password": "--prometheus-password-file",
    "username": "--prometheus-username",
    "customAuthValue": "--prometheus-custom-auth-value-file",
    "customAuthHeader": "--prometheus-custom-auth-header",
    "key": "--prometheus-client-key",
    "cert": "--prometheus-client-cert",
    "ca": "--prometheus-ca-file",
}
"""Credentials KEDA's Prometheus scaler reads from a TriggerAuthentication. KEDA passes no
TriggerAuthentication to an external scaler, so here they could only come in clear text in the
ScaledObject: refused, naming the scaler flag that reads them from a mounted Secret instead."""

AUTH_MODES = ("bearer", "basic", "custom", "tls")
MAX_HEADERS = 16
_HEADER_NAME_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")
_HEADER_VALUE_RE = re.compile(r"^[\x20-\x2b\x2d-\x7e]{0,256}$")
"""Printable ASCII but the comma, which separates headers."""
SECRET_HEADER_WORDS = ("auth", "token", "secret", "password", "passwd", "key", "cookie")
"""A customHeaders name holding one of these is a credential in clear text: refused."""
FORBIDDEN_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
_NAMESPACE_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def fingerprint(meta: Mapping[str, str]) -> str:
    """A stable 8-hex-digit hash of the metadata, ignoring pass-through keys."""
    items = sorted((k, v) for k, v in meta.items() if k not in PASSTHROUGH_KEYS)
    digest = hashlib.sha256(repr(items).encode()).hexdigest()
    return digest[:8]


def default_metric_name(name: str, fp: str) -> str:
    """`predictive-<name>-<fp>`, valid as a metric name and stable for the same trigger."""
    stem = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:40] or "target"
    return f"predictive-{stem}-{fp}"


def closest_key(key: str) -> str | None:
    """The known key a misspelt one most likely meant (`maxReplica`, `leadtime`,
    KEDA's `maxReplicaCount` -> `maxReplicas`), or None when none is close."""
    by_lower = {k.lower(): k for k in KNOWN_KEYS}
    close = difflib.get_close_matches(key.lower(), by_lower, n=1, cutoff=0.75)
    return by_lower[close[0]] if close else None


def check_shape(meta: Mapping[str, str]) -> None:
    """Refuse too many keys, unknown keys and oversized values before reading any of them."""
    if len(meta) > MAX_KEYS:  # more keys than exist, so some are unknown: name the first
        key = min(k for k in meta if k not in KNOWN_KEYS | PASSTHROUGH_KEYS)
        raise SpecError(
            echo(key),
            echo(meta[key]),
            f"{len(meta)} metadata keys; at most {MAX_KEYS} are read and this one is unknown",
        )
    secrets = sorted(set(meta) & set(SECRET_KEYS))
    if secrets:
        key = secrets[0]
        raise SpecError(
            key,
            "<hidden>",
            f"a credential in clear text in the ScaledObject; remove it, mount the Secret in "
            f"the scaler's pod and set {SECRET_KEYS[key]} (KEDA does not pass a "
            f"TriggerAuthentication to an external scaler); then `authModes` selects it",
        )
    unknown = sorted(set(meta) - KNOWN_KEYS - PASSTHROUGH_KEYS)
    if unknown:
        key = unknown[0]
        if key in KEDA_PROMETHEUS_KEYS:
            raise SpecError(
                key,
                echo(meta[key]),
                f"unknown metadata key: KEDA's Prometheus scaler reads it, this scaler does "
                f"not; {KEDA_PROMETHEUS_KEYS[key]}",
            )
        near = closest_key(key)
        hint = f"did you mean {near!r}? " if near else ""
        raise SpecError(
            echo(key),
            echo(meta[key]),
            f"unknown metadata key; {hint}known keys are {', '.join(sorted(KNOWN_KEYS))}",
        )
    for key, value in sorted(meta.items()):
        limit = VALUE_CHARS.get(key, DEFAULT_VALUE_CHARS)
        if len(value) > limit:
            raise SpecError(
                key, echo(value), f"{len(value)} characters is too long; at most {limit}"
            )


def parse(namespace: str, name: str, meta: Mapping[str, str]) -> TargetSpec:
    """Validate scalerMetadata into a TargetSpec; SpecError names the key, value and fix."""
    check_shape(meta)
    redacted = without_credentials(meta.get("serverAddress", "").strip(_SPACE))
    if redacted is not None:
        raise SpecError("serverAddress", echo(redacted), CREDENTIALS_IN_URL)
    query = meta.get("query", "").strip()
    if not query:
        raise SpecError(
            "query",
            echo(meta.get("query", "")),
            "set `query` to a PromQL expression "
            "returning one series, e.g. sum(rate(requests_total[2m]))",
        )
    if not meta.get("threshold", "").strip(_SPACE):
        raise SpecError(
            "threshold", "", "set `threshold` to the load one replica serves, e.g. '50'"
        )
    fp = fingerprint(meta)
    prewarm_budget, prewarm_budget_share = _get(
        meta,
        "prewarmBudget",
        budget.parse_budget,
        budget.DEFAULT,
        "e.g. '10%' of the reactive replica-hours, '24' replica-hours, '0' for purely reactive",
    )
    spec = TargetSpec(
        namespace=namespace or "default",
        name=name or "unnamed",
        query=query,
        threshold=_get(
            meta, "threshold", _number(THRESHOLD), 1.0, "set the load one replica serves, e.g. '50'"
        ),
        server_address=_get(
            meta, "serverAddress", http_url, None, "e.g. http://prometheus.monitoring:9090"
        ),
        activation_threshold=_get(
            meta, "activationThreshold", _number(ACTIVATION), 0.0, "e.g. '0' to wake on any load"
        ),
        lead_time=_get(
            meta,
            "leadTime",
            _lead_time,
            600.0,
            "use a Prometheus duration such as '10m', or 'auto' to learn it",
        ),
        horizon=_get(
            meta,
            "horizon",
            _duration(HORIZON),
            900.0,
            "use a Prometheus duration such as '15m'",
        ),
        quantile=_get(meta, "quantile", parse_quantile, 0.95, "e.g. '0.95'"),
        min_replicas=_get(meta, "minReplicas", _count(REPLICAS), 0, "e.g. '0'"),
        max_replicas=_get(meta, "maxReplicas", _count(CEILING), 100, "e.g. '20'"),
        max_prewarm_replicas=_get(meta, "maxPrewarmReplicas", _count(REPLICAS), 10, "e.g. '4'"),
        prewarm_budget=prewarm_budget,
        prewarm_budget_share=prewarm_budget_share,
        prewarm_budget_window=_get(
            meta,
            "prewarmBudgetWindow",
            _duration(BUDGET_WINDOW),
            86400.0,
            "use a Prometheus duration such as '24h'",
        ),
        cost_per_replica_hour=_get(
            meta,
            "costPerReplicaHour",
            _number(COST),
            None,
            "price of one replica-hour, e.g. '2.5'; leave it unset to budget in replica-hours",
        ),
        currency=_get(meta, "currency", _currency, "USD", "an ISO 4217 code such as 'USD'"),
        monthly_budget=_get(
            meta,
            "monthlyBudget",
            _number(COST_BUDGET),
            None,
            "the target's GPU money per month, e.g. '20000'; needs costPerReplicaHour",
        ),
        model=_get(meta, "model", _choice(MODEL_NAMES), "auto", "use 'auto' to let backtests pick"),
        mode=_get(
            meta,
            "mode",
            _choice(MODES),
            "active",
            "use 'shadow' to watch decisions before trusting them",
        ),
        metric_name=_get(meta, "metricName", _metric_name, "", "e.g. 'llm-serve-replicas'"),
        auth_modes=_get(meta, "authModes", _auth_modes, (), "e.g. 'bearer' or 'tls,basic'"),
        custom_headers=_get(
            meta, "customHeaders", parse_headers, (), "e.g. 'X-Scope-OrgID=team-a'"
        ),
        query_namespace=_get(meta, "namespace", _namespace, None, "e.g. 'team-a'"),
        prometheus_unsafe_ssl=_get(
            meta, "prometheusUnsafeSsl", _boolean, False, "use 'true' or 'false'"
        ),
        holidays=_get(meta, "holidays", _country, None, "an ISO 3166 code such as 'US'"),
        lead_time_auto=meta.get("leadTime", "").strip(_SPACE) == "auto",
        pod_selector=_get(meta, "podSelector", _selector, None, "e.g. 'app=llm-serve'"),
        level_insurance=_get(meta, "levelInsurance", _boolean, False, "use 'true' or 'false'"),
        fingerprint=fp,
    )
    if spec.max_replicas < spec.min_replicas:
        if "maxReplicas" not in meta:  # name the key the user wrote, not a default
            raise SpecError(
                "minReplicas",
                echo(meta["minReplicas"]),
                f"must be <= maxReplicas ({spec.max_replicas} unless set); set maxReplicas too",
            )
        raise SpecError(
            "maxReplicas",
            echo(meta["maxReplicas"]),
            f"must be >= minReplicas ({spec.min_replicas})",
        )
    if spec.holidays is not None and spec.model != "prophet":
        raise SpecError(
            "holidays",
            echo(meta["holidays"]),
            f"holidays are Prophet's; set model: prophet too (model is {spec.model})",
        )
    if spec.monthly_budget is not None and spec.cost_per_replica_hour is None:
        raise SpecError(
            "monthlyBudget",
            echo(meta["monthlyBudget"]),
            "is money: set costPerReplicaHour too, so replica-hours can be priced",
        )
    if "currency" in meta and spec.cost_per_replica_hour is None:
        raise SpecError(
            "currency",
            echo(meta["currency"]),
            "is the unit of costPerReplicaHour, which is not set, so nothing is priced: set "
            "costPerReplicaHour too, or remove currency",
        )
    if not spec.metric_name:
        spec = replace(spec, metric_name=default_metric_name(spec.name, fp))
    return spec


def _lead_time(text: str) -> float:
    if text == "auto":
        return 600.0  # the default until a cold start is learned (serving/leadtime.py)
    return LEAD_TIME.check(literals.parse_duration(text))


def _auth_modes(text: str) -> tuple[str, ...]:
    modes = tuple(dict.fromkeys(m.strip() for m in text.split(",")))
    for mode in modes:
        if mode not in AUTH_MODES:
            raise ValueError(f"{echo(mode)!r} is not one of {', '.join(AUTH_MODES)}")
    if "bearer" in modes and "basic" in modes:
        raise ValueError("bearer and basic both set the Authorization header; pick one")
    return modes


def parse_headers(text: str) -> tuple[tuple[str, str], ...]:
    """`Name=value,Name2=value2` (KEDA's customHeaders) as (name, value) pairs; a header that
    would carry a credential is refused: credentials come from the scaler's files."""
    headers: list[tuple[str, str]] = []
    for item in text.split(","):
        name, sep, value = item.strip().partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not _HEADER_NAME_RE.match(name):
            raise ValueError(f"{echo(item.strip())!r} is not Name=value with a valid header name")
        if not _HEADER_VALUE_RE.match(value):
            raise ValueError(f"the value of {name} must be printable ASCII, at most 256 characters")
        lowered = name.lower()
        if lowered in FORBIDDEN_HEADERS:
            raise ValueError(f"{name} is set by the HTTP client, not by metadata")
        if any(word in lowered for word in SECRET_HEADER_WORDS):
            raise ValueError(
                f"{name} looks like a credential, which must not sit in clear text in the "
                f"ScaledObject; use the scaler's --prometheus-custom-auth-header and "
                f"--prometheus-custom-auth-value-file (authModes: custom)"
            )
        headers.append((name, value))
    if len(headers) > MAX_HEADERS:
        raise ValueError(f"{len(headers)} headers; at most {MAX_HEADERS}")
    return tuple(headers)


def _namespace(text: str) -> str:
    if len(text) > 63 or not _NAMESPACE_RE.match(text):
        raise ValueError("must be a Kubernetes namespace name (lowercase, digits, '-')")
    return text


def _boolean(text: str) -> bool:
    lowered = text.lower()
    if lowered not in ("true", "false"):
        raise ValueError("must be true or false")
    return lowered == "true"


def _country(text: str) -> str:
    if text not in countries.CODES:
        raise ValueError(
            "is not a country Prophet has holidays for (the `holidays` package); codes are "
            "ISO 3166 alpha-2 or alpha-3, in capitals"
        )
    return text


def _selector(text: str) -> str:
    selector.parse(text)
    return text


def _currency(text: str) -> str:
    if not re.match(r"^[A-Z]{3}$", text):
        raise ValueError("must be three capital letters")
    return text
