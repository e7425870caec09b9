"""The samples of the scaler's own spend counters (the prewarm ledger's shared record, see
budget.spent_per_step), read from the Prometheus that scrapes the scaler: one (n, 2) float
array of (time, value) rows per series (per scaler pod and trigger key), many ScaledObjects
in one range query per connection (`spent_samples_of`), chunked under MAX_POINTS and decoded by
sources/matrix.py on the transport's own uncompressed request (`Client.matrix`). A ledger
read back in money (budget.read_in_money) has each trigger's series priced in the query, at
the `costPerReplicaHour` that trigger exported.

Must not: ask a target's serverAddress (the ledger lives in the scaler's Prometheus, the
transport's default URL), or turn samples into spend (budget.py does).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from functools import partial

import numpy as np

from models.base import FloatArray
from scaler.decision import budget
from scaler.decision.spec import TargetSpec
from scaler.errors import ConfigError
from scaler.sources import prometheus_answers, prometheus_failures, prometheus_range
from scaler.sources.credentials import Connection
from scaler.sources.prometheus_range import Grid
from scaler.sources.prometheus_transport import Transport

SPENT_COUNTER = "scaler_prewarm_replica_hours_total"
SHADOW_COUNTER = "scaler_shadow_prewarm_replica_hours_total"
REACTIVE_COUNTER = "scaler_reactive_replica_hours_total"
"""The spend counters every scaler replica exports (telemetry.Telemetry.prewarm_spent, and
shadow_prewarm: what a `mode: shadow` trigger would have spent, its ledger's record)."""
UNPRICED = "scaler_unpriced"
"""The label a money read puts on a series of a trigger that exported no price."""
PRICE_GAUGE = "scaler_cost_per_replica_hour"
"""The `costPerReplicaHour` each trigger exports (target_metrics.py): the price its spend was
paid at, for a ledger read back in money."""


def spent_samples_of(
    transport: Transport,
    specs: Sequence[TargetSpec],
    *,
    start: float,
    end: float,
    step: float,
    reactive: bool = False,
) -> dict[str, list[FloatArray]]:
    """prometheus.PrometheusSource.spent_samples_of: each of `specs`' samples, keyed by
    spec.key, in one range query per connection and counter; a target whose connection is
    misconfigured (ConfigError) is left out when asked with others."""
    groups: dict[tuple[Connection, str, bool], list[TargetSpec]] = {}
    for spec in specs:
        try:
            connection = transport.credentials.connection(spec, transport.default_url)
        except ConfigError:
            if len(specs) == 1:
                raise
            continue
        money = not reactive and _in_money(spec)
        groups.setdefault((connection, _counter(spec, reactive=reactive), money), []).append(spec)
    found: dict[str, list[FloatArray]] = {}
    for (_, counter, money), members in groups.items():
        found.update(
            _spent_of(
                transport, members, start=start, end=end, step=step, counter=counter, money=money
            )
        )
    return found


def _in_money(spec: TargetSpec) -> bool:
    """Whether `spec`'s ledger is read back in money (budget.read_in_money)."""
    share, cost = spec.prewarm_budget_share, spec.cost_per_replica_hour
    return budget.read_in_money(cost_per_replica_hour=cost, share=share)


def _query(counter: str, selector: str, *, money: bool, window: float) -> str:
    """The query of `counter{selector}`; in `money`, each trigger's series at the
    `costPerReplicaHour` it exported (PRICE_GAUGE, seen within `window`), and one that exported
    none (a trigger budgeted in replica-hours before an edit) marked UNPRICED, for the reader
    to price at the asking trigger's own price. A price is part of a trigger's key, so a series
    has one price, and stays a counter."""
    series = f"{counter}{{{selector}}}"
    if not money:
        return series
    seen = f"max by (target) (max_over_time({PRICE_GAUGE}{{{selector}}}[{int(window) + 1}s]))"
    unpriced = f'label_replace({series} unless on (target) {seen}, "{UNPRICED}", "1", "", "")'
    return f"({series} * on (target) group_left () {seen}) or {unpriced}"


def _spent_of(
    transport: Transport,
    specs: list[TargetSpec],
    *,
    start: float,
    end: float,
    step: float,
    counter: str,
    money: bool,
) -> dict[str, list[FloatArray]]:
    # Every trigger key of these ScaledObjects (`namespace/name#<metadata hash>`): editing
    # a trigger's metadata changes its hash, and must not hand it a fresh budget. Spend of
    # the ScaledObject's other triggers counts too (per time, the max across series), which
    # errs on the side of spending less, never more.
    objects = sorted({spend_key(spec) for spec in specs})
    alternatives = "|".join(re.escape(key) for key in objects)
    group = alternatives if len(objects) == 1 else f"(?:{alternatives})"
    pattern = group + re.escape("#") + "[0-9a-f]+"
    target = pattern.replace("\\", "\\\\").replace('"', '\\"')
    query = _query(counter, f'target=~"{target}"', money=money, window=end - start)
    series: dict[str, dict[str, list[FloatArray]]] = {key: {} for key in objects}
    unpriced: set[str] = set()
    began = time.monotonic()
    first, url = specs[0], transport.default_url
    grid = Grid(start, step, prometheus_range.grid_size(start, end, step))
    for chunk in grid.chunks(prometheus_range.MAX_POINTS):
        call = partial(prometheus_range.query_matrix, query=query, chunk=chunk)
        result = transport.ask(first, call, url=url, query=query, kind="ledger", began=began)
        with prometheus_failures.expecting(first, url, prometheus_answers.RANGE_SHAPE):
            for found in result:
                owner = str(found["metric"]["target"]).rsplit("#", 1)[0]
                if owner not in series:  # not one of ours: another object's prefix
                    continue
                name = repr(sorted(found["metric"].items()))
                if UNPRICED in found["metric"]:
                    unpriced.add(name)
                chunks = series[owner].setdefault(name, [])
                chunks.append(prometheus_answers.counter_samples(found["values"]))
    return {spec.key: _samples(spec, series[spend_key(spec)], unpriced) for spec in specs}


def _samples(
    spec: TargetSpec, series: dict[str, list[FloatArray]], unpriced: set[str]
) -> list[FloatArray]:
    """`spec`'s series, each one array; one marked UNPRICED in replica-hours priced at `spec`'s
    own price."""
    price = spec.cost_per_replica_hour
    out = []
    for name, chunks in series.items():
        rows = np.concatenate(chunks)
        if name in unpriced and price is not None:
            rows = rows * np.array([1.0, price])
        out.append(rows)
    return out


def _counter(spec: TargetSpec, *, reactive: bool) -> str:
    """The counter a ledger of `spec` is rebuilt from: a shadow trigger's own simulated spend,
    never the active one's (and the other way round)."""
    if reactive:
        return REACTIVE_COUNTER
    return SHADOW_COUNTER if spec.mode == "shadow" else SPENT_COUNTER


def spend_key(spec: TargetSpec) -> str:
    """The ScaledObject whose spend a target's ledger is rebuilt from: `namespace/name`."""
    return f"{spec.namespace}/{spec.name}"
