"""scalerMetadata -> TargetSpec: the one place where a trigger's metadata is read and validated.

Keys follow KEDA's own Prometheus scaler where the meaning matches (`serverAddress`, `query`,
`threshold`, `activationThreshold`), so migrating a trigger is `type: prometheus` ->
`type: external` plus `scalerAddress`. Every bad value raises `SpecError` naming the key, the
value and the fix. Unknown keys are an error, not a warning: a misspelt `maxReplica` silently
ignored would let the scaler spend past a cap the user believes is set. Keys KEDA itself adds
(`scalerAddress`) or that other KEDA tooling commonly sets are accepted and ignored.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TypeVar

from scaler import budget
from scaler.errors import SpecError

MODEL_NAMES = ("auto", "seasonal", "ets", "prophet")
MODES = ("active", "shadow")

# Keys KEDA passes through or that belong to the trigger rather than to us.
PASSTHROUGH_KEYS = frozenset({"scalerAddress", "unsafeSsl", "tlsCertFile", "enableTLS"})

_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)(ms|y|w|d|h|m|s)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_METRIC_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def parse_duration(text: str) -> float:
    """Seconds in a Prometheus duration (`90s`, `10m`, `1h30m`, `14d`); ValueError otherwise."""
    text = text.strip()
    if not text:
        raise ValueError("empty duration")
    pos = 0
    total = 0.0
    for match in _DURATION_RE.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text):
        raise ValueError(f"not a Prometheus duration: {text!r}")
    return total


def duration_arg(text: str) -> float:
    """parse_duration for argparse `type=`: the error says what a duration looks like."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}; use a duration such as 30s, 10m or 14d") from None


def format_duration(seconds: float) -> str:
    """The shortest Prometheus duration for a whole number of seconds (`600` -> `10m`)."""
    s = round(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if s >= size:
            parts.append(f"{s // size}{unit}")
            s %= size
    return "".join(parts) or "0s"


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
    model: str = "auto"
    mode: str = "active"
    metric_name: str = ""
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


def _get(meta: Mapping[str, str], key: str, parse: Callable[[str], T], default: T, fix: str) -> T:
    raw = meta.get(key)
    if raw is None or raw.strip() == "":
        return default
    try:
        return parse(raw.strip())
    except ValueError as exc:
        raise SpecError(key, raw, f"{exc}; {fix}") from None


def _positive_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise ValueError("must be a finite number > 0")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError("must be a finite number >= 0")
    return value


def _non_negative_int(text: str) -> int:
    value = float(text)
    if not math.isfinite(value) or value < 0 or value != int(value):
        raise ValueError("must be a whole number >= 0")
    return int(value)


def _positive_duration(text: str) -> float:
    value = parse_duration(text)
    if value <= 0:
        raise ValueError("must be longer than 0s")
    return value


def _non_negative_duration(text: str) -> float:
    return parse_duration(text)


def _quantile(text: str) -> float:
    value = float(text)
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


def _url(text: str) -> str:
    if not re.match(r"^https?://[^\s/]+", text):
        raise ValueError("must be an http:// or https:// URL")
    return text.rstrip("/")


KNOWN_KEYS = frozenset(
    {
        "serverAddress",
        "query",
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
        "model",
        "mode",
        "metricName",
    }
)


def fingerprint(meta: Mapping[str, str]) -> str:
    """A stable 8-hex-digit hash of the metadata, ignoring pass-through keys."""
    items = sorted((k, v) for k, v in meta.items() if k not in PASSTHROUGH_KEYS)
    digest = hashlib.sha256(repr(items).encode()).hexdigest()
    return digest[:8]


def default_metric_name(name: str, fp: str) -> str:
    """`predictive-<name>-<fp>`, valid as a metric name and stable for the same trigger."""
    stem = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:40] or "target"
    return f"predictive-{stem}-{fp}"


def parse(namespace: str, name: str, meta: Mapping[str, str]) -> TargetSpec:
    """Validate scalerMetadata into a TargetSpec; SpecError names the key, value and fix."""
    unknown = sorted(set(meta) - KNOWN_KEYS - PASSTHROUGH_KEYS)
    if unknown:
        key = unknown[0]
        raise SpecError(
            key, meta[key], f"unknown metadata key; known keys are {', '.join(sorted(KNOWN_KEYS))}"
        )
    query = meta.get("query", "").strip()
    if not query:
        raise SpecError(
            "query",
            meta.get("query", ""),
            "set `query` to a PromQL expression "
            "returning one series, e.g. sum(rate(requests_total[2m]))",
        )
    if "threshold" not in meta or not meta["threshold"].strip():
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
            meta, "threshold", _positive_float, 1.0, "set the load one replica serves, e.g. '50'"
        ),
        server_address=_get(
            meta, "serverAddress", _url, None, "e.g. http://prometheus.monitoring:9090"
        ),
        activation_threshold=_get(
            meta, "activationThreshold", _non_negative_float, 0.0, "e.g. '0' to wake on any load"
        ),
        lead_time=_get(
            meta, "leadTime", _positive_duration, 600.0, "use a Prometheus duration such as '10m'"
        ),
        horizon=_get(
            meta,
            "horizon",
            _non_negative_duration,
            900.0,
            "use a Prometheus duration such as '15m'",
        ),
        quantile=_get(meta, "quantile", _quantile, 0.95, "e.g. '0.95'"),
        min_replicas=_get(meta, "minReplicas", _non_negative_int, 0, "e.g. '0'"),
        max_replicas=_get(meta, "maxReplicas", _non_negative_int, 100, "e.g. '20'"),
        max_prewarm_replicas=_get(meta, "maxPrewarmReplicas", _non_negative_int, 10, "e.g. '4'"),
        prewarm_budget=prewarm_budget,
        prewarm_budget_share=prewarm_budget_share,
        prewarm_budget_window=_get(
            meta,
            "prewarmBudgetWindow",
            _positive_duration,
            86400.0,
            "use a Prometheus duration such as '24h'",
        ),
        cost_per_replica_hour=_get(
            meta,
            "costPerReplicaHour",
            _non_negative_float,
            None,
            "price of one replica-hour, e.g. '2.5'",
        ),
        currency=_get(meta, "currency", _currency, "USD", "an ISO 4217 code such as 'USD'"),
        model=_get(meta, "model", _choice(MODEL_NAMES), "auto", "use 'auto' to let backtests pick"),
        mode=_get(
            meta,
            "mode",
            _choice(MODES),
            "active",
            "use 'shadow' to watch decisions before trusting them",
        ),
        metric_name=_get(meta, "metricName", _metric_name, "", "e.g. 'llm-serve-replicas'"),
        fingerprint=fp,
    )
    if spec.max_replicas < spec.min_replicas:
        raise SpecError(
            "maxReplicas",
            meta.get("maxReplicas", str(spec.max_replicas)),
            f"must be >= minReplicas ({spec.min_replicas})",
        )
    if not spec.metric_name:
        spec = replace(spec, metric_name=default_metric_name(spec.name, fp))
    return spec


def _currency(text: str) -> str:
    if not re.match(r"^[A-Z]{3}$", text):
        raise ValueError("must be three capital letters")
    return text
