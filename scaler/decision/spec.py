"""scalerMetadata -> TargetSpec: the one place where a trigger's metadata is read and validated.

Keys follow KEDA's own Prometheus scaler where the meaning matches (`serverAddress`, `query`,
`threshold`, `activationThreshold`), so migrating a trigger is `type: prometheus` ->
`type: external` plus `scalerAddress`. Every bad value raises `SpecError` naming the key, the
value and the fix.

Any team that can write a ScaledObject can send any metadata, so every value is bounded: the
count of keys and the length of each value are capped before anything is read (metakeys.py),
numbers are plain ASCII decimals (literals.py) within the ranges of ranges.py, and the keys that
reach Prometheus are read by promkeys.py. An error quotes a long key or value as its first
characters and its length (quoting.py), so it stays short whatever was sent. This module owns
the TargetSpec, the reading of each key into it and the rules that tie keys together.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TypeVar

from scaler.decision import (
    budget,
    countries,
    literals,
    metakeys,
    promkeys,
    quoting,
    ranges,
    selector,
)
from scaler.decision.literals import duration_arg as duration_arg
from scaler.decision.literals import format_duration as format_duration
from scaler.decision.literals import parse_duration as parse_duration
from scaler.errors import SpecError

MODEL_NAMES = ("auto", "seasonal", "ets", "prophet")
MODES = ("active", "shadow")

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

    @property
    def no_budget(self) -> bool:
        """No prewarm may be bought: an amount of 0 (`prewarmBudget: "0"`) and no share."""
        return self.prewarm_budget <= 0 and self.prewarm_budget_share is None

    @property
    def spend_in_money(self) -> bool:
        """The ledger's spend is read back in money, each trigger's replica-hours at that
        trigger's own price (sources/prometheus_ledger.py): an amount budget with a price. An
        edit of `costPerReplicaHour` is a new trigger, and the spend its predecessor made in the
        window was paid at the old price; priced at the new one, a cut price would hand back
        money that was spent. A share is unit-free (both sides priced alike), so it is read in
        replica-hours."""
        return self.cost_per_replica_hour is not None and self.prewarm_budget_share is None


T = TypeVar("T")

_SPACE = " \t\r\n"


def _get(meta: Mapping[str, str], key: str, parse: Callable[[str], T], default: T, fix: str) -> T:
    raw = meta.get(key)
    text = "" if raw is None else raw.strip(_SPACE)
    if not text:
        if raw is not None and key not in metakeys.EMPTY_IS_UNSET:
            raise SpecError(
                key,
                quoting.echo(raw),
                f"empty; remove the key for the default, or give a value ({fix})",
            )
        return default
    try:
        return parse(text)
    except ValueError as exc:
        raise SpecError(key, quoting.echo(text), f"{exc}; {fix}") from None


def currency_code(text: str) -> str:
    """A currency code as the key `currency` reads it, for a flag that mirrors it."""
    return _currency(text)


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


def fingerprint(meta: Mapping[str, str]) -> str:
    """A stable 8-hex-digit hash of the metadata, ignoring pass-through keys."""
    items = sorted((k, v) for k, v in meta.items() if k not in metakeys.PASSTHROUGH_KEYS)
    digest = hashlib.sha256(repr(items).encode()).hexdigest()
    return digest[:8]


def default_metric_name(name: str, fp: str) -> str:
    """`predictive-<name>-<fp>`, valid as a metric name and stable for the same trigger."""
    stem = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:40] or "target"
    return f"predictive-{stem}-{fp}"


def parse(namespace: str, name: str, meta: Mapping[str, str]) -> TargetSpec:
    """Validate scalerMetadata into a TargetSpec; SpecError names the key, value and fix."""
    metakeys.check_shape(meta)
    redacted = promkeys.without_credentials(meta.get("serverAddress", "").strip(_SPACE))
    if redacted is not None:
        raise SpecError("serverAddress", quoting.echo(redacted), promkeys.CREDENTIALS_IN_URL)
    query = meta.get("query", "").strip()
    if not query:
        raise SpecError(
            "query",
            quoting.echo(meta.get("query", "")),
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
            meta,
            "threshold",
            ranges.number_in(ranges.THRESHOLD),
            1.0,
            "set the load one replica serves, e.g. '50'",
        ),
        server_address=_get(
            meta, "serverAddress", promkeys.http_url, None, "e.g. http://prometheus.monitoring:9090"
        ),
        activation_threshold=_get(
            meta,
            "activationThreshold",
            ranges.number_in(ranges.ACTIVATION),
            0.0,
            "e.g. '0' to wake on any load",
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
            ranges.duration_in(ranges.HORIZON),
            900.0,
            "use a Prometheus duration such as '15m'",
        ),
        quantile=_get(meta, "quantile", ranges.parse_quantile, 0.95, "e.g. '0.95'"),
        min_replicas=_get(meta, "minReplicas", ranges.count_in(ranges.REPLICAS), 0, "e.g. '0'"),
        max_replicas=_get(meta, "maxReplicas", ranges.count_in(ranges.CEILING), 100, "e.g. '20'"),
        max_prewarm_replicas=_get(
            meta, "maxPrewarmReplicas", ranges.count_in(ranges.REPLICAS), 10, "e.g. '4'"
        ),
        prewarm_budget=prewarm_budget,
        prewarm_budget_share=prewarm_budget_share,
        prewarm_budget_window=_get(
            meta,
            "prewarmBudgetWindow",
            ranges.duration_in(ranges.BUDGET_WINDOW),
            86400.0,
            "use a Prometheus duration such as '24h'",
        ),
        cost_per_replica_hour=_get(
            meta,
            "costPerReplicaHour",
            ranges.number_in(ranges.COST),
            None,
            "price of one replica-hour, e.g. '2.5'; leave it unset to budget in replica-hours",
        ),
        currency=_get(meta, "currency", _currency, "USD", "an ISO 4217 code such as 'USD'"),
        monthly_budget=_get(
            meta,
            "monthlyBudget",
            ranges.number_in(ranges.COST_BUDGET),
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
        auth_modes=_get(
            meta, "authModes", promkeys.parse_auth_modes, (), "e.g. 'bearer' or 'tls,basic'"
        ),
        custom_headers=_get(
            meta, "customHeaders", promkeys.parse_headers, (), "e.g. 'X-Scope-OrgID=team-a'"
        ),
        query_namespace=_get(meta, "namespace", promkeys.parse_namespace, None, "e.g. 'team-a'"),
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
                quoting.echo(meta["minReplicas"]),
                f"must be <= maxReplicas ({spec.max_replicas} unless set); set maxReplicas too",
            )
        raise SpecError(
            "maxReplicas",
            quoting.echo(meta["maxReplicas"]),
            f"must be >= minReplicas ({spec.min_replicas})",
        )
    if spec.holidays is not None and spec.model != "prophet":
        raise SpecError(
            "holidays",
            quoting.echo(meta["holidays"]),
            f"holidays are Prophet's; set model: prophet too (model is {spec.model})",
        )
    if spec.monthly_budget is not None and spec.cost_per_replica_hour is None:
        raise SpecError(
            "monthlyBudget",
            quoting.echo(meta["monthlyBudget"]),
            "is money: set costPerReplicaHour too, so replica-hours can be priced",
        )
    if "currency" in meta and spec.cost_per_replica_hour is None:
        raise SpecError(
            "currency",
            quoting.echo(meta["currency"]),
            "is the unit of costPerReplicaHour, which is not set, so nothing is priced: set "
            "costPerReplicaHour too, or remove currency",
        )
    if not spec.metric_name:
        spec = replace(spec, metric_name=default_metric_name(spec.name, fp))
    return spec


def _lead_time(text: str) -> float:
    if text == "auto":
        return 600.0  # the default until a cold start is learned (serving/leadtime.py)
    return ranges.LEAD_TIME.check(literals.parse_duration(text))


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
