"""Which target an edit of a trigger replaces. KEDA names no edit: an edited ScaledObject's
trigger arrives as a new target (its metadata, and so its fingerprint, changed) while the old one
simply stops being asked. `superseded` finds the old ones to drop before --idle-expiry, and
`predecessor_sample` the old one whose newest sample a new target can be answered from while it
warms up (scaler/serving/engine.py). Pure functions of the engine's targets."""

from __future__ import annotations

from collections.abc import Mapping, Set

from scaler.decision import spec as specs
from scaler.decision.spec import TargetSpec
from scaler.serving.state import TargetState


def superseded(
    targets: Mapping[str, TargetState], pinned: Set[str], *, now: float, step: float
) -> list[str]:
    """Targets an edit of their trigger replaced: another target of the same ScaledObject and
    metric name was registered after KEDA last asked about them and has been asked since, and
    they have gone unasked for two of their polls (or steps). They would be decided for, logged
    and billed until --idle-expiry. Two live triggers alike in namespace, name and metric are
    both asked every poll, so neither is ever superseded, whatever the order of the calls.
    Pinned (discovered) targets follow the cluster."""
    newest: dict[tuple[str, str, str], TargetState] = {}
    for state in targets.values():
        identity = _trigger(state.spec)
        if identity not in newest or state.registered > newest[identity].registered:
            newest[identity] = state
    found = []
    for key, state in targets.items():
        latest = newest[_trigger(state.spec)]
        if (
            latest is not state
            and key not in pinned
            and state.last_asked < latest.registered < latest.last_asked
            and now - state.last_asked > 2 * max(state.poll_gap, step)
        ):
            found.append(key)
    return found


def predecessor_sample(
    targets: Mapping[str, TargetState], state: TargetState, now: float
) -> tuple[TargetState, float] | None:
    """Another target of `state`'s trigger (the one an edit of its metadata replaces) that
    reads the same load and was decided at `now` with a sample stamped `now`, and that sample's
    load; None when there is none."""
    spec = state.spec
    identity, read = _trigger(spec), _read(spec)
    for other in targets.values():
        if (other.spec.namespace, other.spec.name) != (spec.namespace, spec.name):
            continue  # first, cheap: a start-up registers a thousand targets at once
        if other is state or other.decided_at != now or not other.samples:
            continue
        at, load = other.samples[-1]
        if at == now and _trigger(other.spec) == identity and _read(other.spec) == read:
            return other, load
    return None


def _trigger(spec: TargetSpec) -> tuple[str, str, str]:
    """Which trigger of which ScaledObject `spec` is: its metric name, or "" for the default one
    (which holds the fingerprint, so an edit changes it)."""
    default = specs.default_metric_name(spec.name, spec.fingerprint)
    return spec.namespace, spec.name, "" if spec.metric_name == default else spec.metric_name


def _read(spec: TargetSpec) -> tuple[object, ...]:
    """What `spec`'s load reads (sources/prometheus.py): the same query of the same Prometheus,
    asked with the same credentials, headers and tenant, has the same newest sample."""
    return (
        spec.server_address,
        spec.query,
        spec.auth_modes,
        spec.custom_headers,
        spec.query_namespace,
        spec.prometheus_unsafe_ssl,
    )
