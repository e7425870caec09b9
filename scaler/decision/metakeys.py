"""Which keys a scalerMetadata may hold, and how many and how long: checked (`check_shape`) before
any value is read. Unknown keys are an error, not a warning: a misspelt `maxReplica` silently
ignored would let the scaler spend past a cap the user believes is set. Keys KEDA itself adds
(`scalerAddress`) or that other KEDA tooling commonly sets are accepted and ignored; keys of
KEDA's Prometheus scaler that mean nothing here, and credentials, are refused saying what to do.
Pure: no I/O; reading each key's value is spec.py's.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from scaler.decision import quoting
from scaler.errors import SpecError

# Keys KEDA passes through or that belong to the trigger rather than to us.
PASSTHROUGH_KEYS = frozenset({"scalerAddress", "unsafeSsl", "tlsCertFile", "enableTLS"})
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


FROM_ENV = "FromEnv"


def from_env_fix(stem: str) -> str:
    """Why `<stem>FromEnv` is refused. KEDA resolves such a key from the scaled workload's
    container env for the gRPC call only (and drops it when unset); `scaler retrain` and
    `scaler check` read the ScaledObject itself and cannot, so serve and the retrain job would
    disagree on the target."""
    if stem in SECRET_KEYS:
        return (
            f"a credential sent by KEDA in clear text; mount the Secret in the scaler's pod and "
            f"set {SECRET_KEYS[stem]} instead"
        )
    return (
        f"*FromEnv keys are not read: KEDA resolves them from the workload's env for its calls "
        f"only, and `scaler retrain` reads the ScaledObject, which holds the variable's name; "
        f"write the value itself as {stem!r} (a Helm or Kustomize value if it varies)"
    )


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
            quoting.echo(key),
            quoting.echo(meta[key]),
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
                quoting.echo(meta[key]),
                f"unknown metadata key: KEDA's Prometheus scaler reads it, this scaler does "
                f"not; {KEDA_PROMETHEUS_KEYS[key]}",
            )
        stem = key.removesuffix(FROM_ENV)
        if stem != key and stem in KNOWN_KEYS | set(SECRET_KEYS):
            shown = "<hidden>" if stem in SECRET_KEYS else quoting.echo(meta[key])
            raise SpecError(key, shown, from_env_fix(stem))
        near = closest_key(key)
        hint = f"did you mean {near!r}? " if near else ""
        raise SpecError(
            quoting.echo(key),
            quoting.echo(meta[key]),
            f"unknown metadata key; {hint}known keys are {', '.join(sorted(KNOWN_KEYS))}",
        )
    for key, value in sorted(meta.items()):
        limit = VALUE_CHARS.get(key, DEFAULT_VALUE_CHARS)
        if len(value) > limit:
            raise SpecError(
                key, quoting.echo(value), f"{len(value)} characters is too long; at most {limit}"
            )
