"""The samples of the scaler's own spend counters (the prewarm ledger's shared record, see
budget.spent_per_step), read from the Prometheus that scrapes the scaler: one (n, 2) float
array of (time, value) rows per series (per scaler pod and trigger key), many ScaledObjects
in one range query per connection (`spent_samples_of`), chunked under MAX_POINTS and decoded by
sources/matrix.py on the transport's own uncompressed request (`Client.matrix`). A ledger
read back in money (TargetSpec.spend_in_money) has each trigger's series priced at the
`costPerReplicaHour` that trigger exported (one instant query of PRICE_GAUGE per read).

Must not: ask a target's serverAddress (the ledger lives in the scaler's Prometheus, the
transport's default URL), or turn samples into spend (budget.py does).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from functools import partial

import numpy as np

from models.base import FloatArray
from scaler.decision.spec import TargetSpec
from scaler.errors import ConfigError
from scaler.sources import (
    prometheus_answers,
    prometheus_failures,
    prometheus_range,
    prometheus_transport,
)
from scaler.sources.credentials import Connection
from scaler.sources.prometheus_range import Grid
from scaler.sources.prometheus_transport import Transport

SPENT_COUNTER = "scaler_prewarm_replica_hours_total"
SHADOW_COUNTER = "scaler_shadow_prewarm_replica_hours_total"
REACTIVE_COUNTER = "scaler_reactive_replica_hours_total"
"""The spend counters every scaler replica exports (telemetry.Telemetry.prewarm_spent, and
shadow_prewarm: what a `mode: shadow` trigger would have spent, its ledger's record)."""
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
    groups: dict[tuple[Connection, str], list[TargetSpec]] = {}
    for spec in specs:
        try:
            connection = transport.credentials.connection(spec, transport.default_url)
        except ConfigError:
            if len(specs) == 1:
                raise
            continue
        groups.setdefault((connection, _counter(spec, reactive=reactive)), []).append(spec)
    found: dict[str, list[FloatArray]] = {}
    for (_, counter), members in groups.items():
        found.update(
            _spent_of(
                transport,
                members,
                start=start,
                end=end,
                step=step,
                counter=counter,
                priced=not reactive,
            )
        )
    return found


def _spent_of(
    transport: Transport,
    specs: list[TargetSpec],
    *,
    start: float,
    end: float,
    step: float,
    counter: str,
    priced: bool,
) -> dict[str, list[FloatArray]]:
    # Every trigger key of these ScaledObjects (`namespace/name#<metadata hash>`): editing
    # a trigger's metadata changes its hash, and must not hand it a fresh budget. Spend of
    # the ScaledObject's other triggers counts too (per time, the max across series), which
    # errs on the side of spending less, never more.
    objects = sorted({spend_key(spec) for spec in specs})
    selector = _selector(objects)
    query = f"{counter}{{{selector}}}"
    series: dict[str, dict[str, list[FloatArray]]] = {key: {} for key in objects}
    triggers: dict[str, str] = {}  # each series' trigger key, by the series' name
    began = time.monotonic()
    first, url = specs[0], transport.default_url
    grid = Grid(start, step, prometheus_range.grid_size(start, end, step))
    for chunk in grid.chunks(prometheus_range.MAX_POINTS):
        call = partial(prometheus_range.query_matrix, query=query, chunk=chunk)
        result = transport.ask(first, call, url=url, query=query, kind="ledger", began=began)
        with prometheus_failures.expecting(first, url, prometheus_answers.RANGE_SHAPE):
            for found in result:
                trigger = str(found["metric"]["target"])
                owner = trigger.rsplit("#", 1)[0]
                if owner not in series:  # not one of ours: another object's prefix
                    continue
                name = repr(sorted(found["metric"].items()))
                triggers[name] = trigger
                chunks = series[owner].setdefault(name, [])
                chunks.append(prometheus_answers.counter_samples(found["values"]))
    prices: dict[str, float] = {}
    if priced and triggers and any(spec.spend_in_money for spec in specs):
        prices = _prices(transport, first, selector, at=end, window=end - start, began=began)
    out: dict[str, list[FloatArray]] = {}
    for spec in specs:
        own = series[spend_key(spec)]
        arrays = {name: np.concatenate(chunks) for name, chunks in own.items()}
        if spec.spend_in_money:
            arrays = {
                name: _at_price(rows, prices, triggers[name], spec) for name, rows in arrays.items()
            }
        out[spec.key] = list(arrays.values())
    return out


def _prices(
    transport: Transport,
    first: TargetSpec,
    selector: str,
    *,
    at: float,
    window: float,
    began: float,
) -> dict[str, float]:
    """The `costPerReplicaHour` each trigger of `selector` exported within `window` before
    `at` (PRICE_GAUGE), by trigger key: one instant query."""
    query = f"max by (target) (max_over_time({PRICE_GAUGE}{{{selector}}}[{int(window) + 1}s]))"
    url = transport.default_url
    call = partial(prometheus_transport.query_instant, query=query, at=at)
    data = transport.ask(first, call, url=url, query=query, kind="ledger", began=began)
    with prometheus_failures.expecting(first, url, prometheus_answers.INSTANT_SHAPE):
        return {
            str(item["metric"]["target"]): prometheus_answers.to_float(item["value"][1])
            for item in data["result"]
        }


def _at_price(
    rows: FloatArray, prices: dict[str, float], trigger: str, spec: TargetSpec
) -> FloatArray:
    """A series of replica-hours in money: at the price its trigger exported, or at `spec`'s
    own when it exported none (a trigger budgeted in replica-hours before an edit) or one not
    finite and positive. A price is part of a trigger's key, so a series has one price."""
    price = prices.get(trigger, math.nan)
    if not (math.isfinite(price) and price > 0):
        price = spec.cost_per_replica_hour or 0.0
    priced: FloatArray = rows * np.array([1.0, price])
    return priced


def _selector(objects: Sequence[str]) -> str:
    """The label matcher of every trigger key of the ScaledObjects `objects`."""
    alternatives = "|".join(re.escape(key) for key in objects)
    group = alternatives if len(objects) == 1 else f"(?:{alternatives})"
    pattern = group + re.escape("#") + "[0-9a-f]+"
    target = pattern.replace("\\", "\\\\").replace('"', '\\"')
    return f'target=~"{target}"'


def spent_series(spec: TargetSpec) -> str:
    """The series `spec`'s ledger is rebuilt from, as the range query asks for them."""
    return f"{_counter(spec, reactive=False)}{{{_selector([spend_key(spec)])}}}"


def _counter(spec: TargetSpec, *, reactive: bool) -> str:
    """The counter a ledger of `spec` is rebuilt from: a shadow trigger's own simulated spend,
    never the active one's (and the other way round)."""
    if reactive:
        return REACTIVE_COUNTER
    return SHADOW_COUNTER if spec.mode == "shadow" else SPENT_COUNTER


def spend_key(spec: TargetSpec) -> str:
    """The ScaledObject whose spend a target's ledger is rebuilt from: `namespace/name`."""
    return f"{spec.namespace}/{spec.name}"
