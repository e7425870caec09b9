"""`leadTime: auto`: a target's cold start learned from kube-state-metrics in Prometheus.

A pod's cold start is the time from its creation (`kube_pod_created`) to Ready
(`kube_pod_status_ready_time`; where that is absent, the first minute the pod's Ready condition
is seen true, `kube_pod_status_ready{condition="true"}`, up to a scrape plus a minute late). The
lead time is the P90 over the pods
alive in the last week, found by the target's `podSelector` on `kube_pod_labels` (pod labels
reach it only through kube-state-metrics' `--metric-labels-allowlist`). With fewer than
MIN_STARTS pod starts, or no podSelector, or no answer, the target keeps the default
(10 min) and the reason says why.

Owns: the queries, the estimate and its bounds, and when to learn again. Must not: block the
event loop (it runs in the endpoint's bulkhead, serving/isolation.py) or change a target's
lead time to a value outside the metadata's bounds (1 s to 2 h).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Protocol, runtime_checkable

from scaler.decision import selector
from scaler.decision.ranges import LEAD_TIME
from scaler.decision.spec import TargetSpec, format_duration
from scaler.errors import ScalerError
from scaler.serving.state import TargetState
from scaler.serving.telemetry import Telemetry

logger = logging.getLogger(__name__)

WINDOW = 7 * 86400.0
QUANTILE = 0.9
MIN_STARTS = 10
"""Pod starts needed: with n starts, the P90 estimate is an order statistic, and the chance
that the true P90 lies above all n is 0.9^n (35 % at 10, 4 % at 30); below 10 the estimate
is little more than the slowest start seen, so the default is kept."""
DEFAULT = 600.0
RELEARN = 6 * 3600.0
"""Seconds between learnings: cold starts change with images and node pools, not by minute."""
RETRY = 300.0
"""Seconds before trying again after Prometheus could not answer."""


@runtime_checkable
class PodStarts(Protocol):
    def values(self, spec: TargetSpec, query: str, *, at: float) -> list[float]: ...


@dataclass(frozen=True)
class LeadTime:
    seconds: float
    source: str
    """`learned: P90 of 24 pod starts in 7d (kube_pod_status_ready_time)`, or
    `default: <why>`, or `metadata`."""
    starts: int = 0
    """Pod starts the estimate read."""

    @property
    def learned(self) -> bool:
        return self.source.startswith("learned")


def ready_queries(spec: TargetSpec) -> list[tuple[str, str]]:
    """(query, the metric it reads) giving one cold start per pod of `spec`, best first."""
    assert spec.pod_selector is not None
    namespace = f'namespace="{spec.namespace}"'
    matchers = ",".join([namespace, *selector.promql_matchers(selector.parse(spec.pod_selector))])
    window = format_duration(WINDOW)
    pods = f"max by (namespace, pod) (max_over_time(kube_pod_labels{{{matchers}}}[{window}]))"
    created = f"max by (namespace, pod) (max_over_time(kube_pod_created{{{namespace}}}[{window}]))"
    ready_time = (
        f"min by (namespace, pod) "
        f"(min_over_time(kube_pod_status_ready_time{{{namespace}}}[{window}]))"
    )
    first_ready = (
        f"min by (namespace, pod) (min_over_time((timestamp(kube_pod_status_ready"
        f'{{{namespace},condition="true"}} == 1))[{window}:1m]))'
    )
    return [
        (f"({ready} - {created}) and on (namespace, pod) {pods}", metric)
        for ready, metric in (
            (ready_time, "kube_pod_status_ready_time"),
            (first_ready, 'kube_pod_status_ready{condition="true"}'),
        )
    ]


def estimate(starts: list[float], metric: str) -> LeadTime:
    """The P90 of the plausible cold starts (positive, at most the bound), or the default."""
    plausible = sorted(s for s in starts if 0 < s <= LEAD_TIME.high and math.isfinite(s))
    if len(plausible) < MIN_STARTS:
        return LeadTime(
            DEFAULT,
            f"default: {len(plausible)} pod starts in the last {format_duration(WINDOW)} "
            f"({metric}), at least {MIN_STARTS} are needed",
            len(plausible),
        )
    rank = math.ceil(QUANTILE * len(plausible)) - 1  # the nearest-rank P90
    seconds = max(LEAD_TIME.low, float(round(plausible[rank])))
    return LeadTime(
        seconds,
        f"learned: P{QUANTILE * 100:.0f} of {len(plausible)} pod starts in the last "
        f"{format_duration(WINDOW)} ({metric})",
        len(plausible),
    )


PodSelectors = Callable[[str, str], "str | None"]
"""(namespace, ScaledObject name) -> the label selector of its scaleTargetRef's pods, or None
(scaler/kube/selectors.py)."""


def learn(
    source: PodStarts,
    spec: TargetSpec,
    *,
    at: float,
    selectors: PodSelectors | None = None,
) -> LeadTime:
    """`spec`'s cold start from its Prometheus at `at`; the default with the reason when its
    pods cannot be found (no podSelector, and no selector from the Kubernetes API) or started
    too few times. Raises what the source raises (the caller keeps the lead time it has and
    tries again after RETRY)."""
    if spec.pod_selector is None and selectors is not None:
        found_selector = selectors(spec.namespace, spec.name)
        if found_selector is not None:
            try:
                selector.parse(found_selector)
            except ValueError:
                found_selector = None
        if found_selector is not None:
            spec = replace(spec, pod_selector=found_selector)
    if spec.pod_selector is None:
        where = "" if selectors is None else ", and the scaleTargetRef's could not be read"
        return LeadTime(
            DEFAULT,
            f"default: no podSelector to find the target's pods{where} (set podSelector, "
            f"e.g. 'app=llm-serve')",
        )
    best: LeadTime | None = None
    for query, metric in ready_queries(spec):
        found = estimate(source.values(spec, query, at=at), metric)
        if found.learned:
            return found
        if best is None or found.starts > best.starts:
            best = found
    assert best is not None
    return best


async def keep_learned(
    state: TargetState,
    now: float,
    *,
    source: object,
    run: Callable[[Callable[[], LeadTime]], Awaitable[LeadTime]],
    telemetry: Telemetry,
    selectors: PodSelectors | None = None,
) -> None:
    """Learn `state`'s lead time when it is `leadTime: auto` and due (every RELEARN), through
    `run` (the endpoint's bulkhead). A failure keeps the lead time it has, with the reason,
    and tries again after RETRY; it never fails the refresh."""
    spec = state.spec
    if not spec.lead_time_auto or now < state.lead_time_next:
        return
    if not isinstance(source, PodStarts):
        found = LeadTime(DEFAULT, "default: the source holds no kube-state-metrics (a replay)")
    else:
        try:
            found = await run(partial(learn, source, spec, at=now, selectors=selectors))
        except ScalerError as exc:
            state.lead_time_next = now + RETRY
            if not state.lead_time_source.startswith("learned"):
                state.lead_time_source = f"default: cannot read kube-state-metrics: {exc}"
            logger.warning("%s: lead time not learned, kept %gs: %s", spec.key, spec.lead_time, exc)
            return
    adopt(state, found, now=now, telemetry=telemetry)


def adopt(state: TargetState, found: LeadTime, *, now: float, telemetry: Telemetry) -> None:
    """Use `found` as `state`'s lead time until the next learning; a longer one than the
    model was fitted for asks for a refit, so that its forecast reaches far enough."""
    old = state.spec.lead_time
    state.spec = replace(state.spec, lead_time=found.seconds)
    state.lead_time_source = found.source
    state.lead_time_next = now + RELEARN
    if found.seconds > old:
        state.fitted_at = -math.inf
    telemetry.lead_time.labels(state.spec.key).set(found.seconds)
    telemetry.lead_time_learned.labels(state.spec.key).set(1.0 if found.learned else 0.0)
    if found.seconds != old:
        logger.info("%s: lead time %gs (%s)", state.spec.key, found.seconds, found.source)
