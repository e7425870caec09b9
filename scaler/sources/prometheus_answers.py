"""What a Prometheus answer says, read and judged: the sample values (strings, "NaN"/"+Inf"/"-Inf"
read as NaN), the one series of a range result, the one number of an instant answer (a range
vector, a scalar, a string or a native histogram is a BadQuery saying so; several series a
BadQuery naming sum()),
a ledger series' samples as rows, and the newest value as a load: a negative one float noise
read as 0 (`NEGATIVE_NOISE`) or else NegativeLoad, one above scaler/sources/load_bound.py's
bound ImplausibleLoad (both NoData). Messages name the query, the target and the URL.

Pure: no I/O, no clock. Must not: send a request, or turn a shape error into MalformedAnswer
(prometheus_failures.expecting wraps the reading, with the shape expected).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from models.base import FloatArray
from scaler.decision.quoting import echo_query
from scaler.decision.spec import TargetSpec
from scaler.errors import BadQuery, ImplausibleLoad, NegativeLoad
from scaler.sources import load_bound

RANGE_SHAPE = '{"data": {"result": [{"metric": {...}, "values": [[time, "number"], ...]}]}}'
INSTANT_SHAPE = (
    '{"data": {"resultType": "vector", "result": [{"metric": {...}, "value": [time, "number"]}]}}'
)

NEGATIVE_NOISE = 1e-9
"""Largest negative newest value read as 0, as a share of the target's `threshold` (the load one
replica serves). A difference of counters or rates (`sum(rate(a)) - sum(rate(b))`, what a query
for "in flight" or "pending" often is) is off by the rounding of its operands, a few ulps
(2.2e-16 each) of their size: -1.1e-13 is one ulp of a value near 1000. 1e-9 leaves room for
operands four million times a replica's worth, and reading such a value as 0 moves the load by
a billionth of a replica, below any replica count. A broken subtraction gives negatives of the
load's own order, far above the bound. `scaler backtest` applies the same bound to a series, as
a share of its largest value (one newest value has no scale of its own, the threshold is it)."""


def single_series(spec: TargetSpec, url: str, result: list[Any]) -> dict[str, Any] | None:
    """The only series of a range result, None when there is none; BadQuery for several, or
    for a series of native histograms."""
    if len(result) > 1:
        raise _several_series(spec, url, len(result))
    if result and _histograms_only(result[0], "histograms", "values"):
        raise _native_histogram(spec, url)
    return result[0] if result else None


def counter_samples(values: Any) -> FloatArray:
    """A series' samples as (time, value) rows, a value NaN where not finite (as `to_float`):
    decoded already (prometheus_transport.Client.matrix), or converted here from
    `[[time, "value"], ...]`."""
    if isinstance(values, np.ndarray):
        return values
    rows = [(float(at), to_float(text)) for at, text in values]
    return np.array(rows, dtype=np.float64).reshape(-1, 2)


def instant_value(spec: TargetSpec, url: str, data: dict[str, Any]) -> float | None:
    """The value of an instant answer's vector of at most one sample, None for none; BadQuery
    for a range vector, a scalar or a string (an answer without `resultType`, from a proxy
    that dropped it, is told by its shape)."""
    kind, result = data.get("resultType"), data["result"]
    if kind == "matrix":
        raise BadQuery(
            spec.query,
            f"Prometheus at {url} returned a range vector (a matrix: a range such as x[5m] "
            "with no function over it); the query must return an instant vector: remove the "
            "range, or wrap it in a function over it, e.g. sum(rate(x[5m])) or "
            "max_over_time(x[5m])",
        )
    bare = bool(result) and not isinstance(result[0], dict)  # [time, "text"], no series
    if kind in ("scalar", "string") or (kind is None and bare):
        _, text = result
        try:
            number = to_float(text)
        except ValueError:
            raise BadQuery(
                spec.query,
                f"Prometheus at {url} returned the string {text!r}, not a number; "
                f"make it return one number",
            ) from None
        raise BadQuery(
            spec.query,
            f"Prometheus at {url} returned the scalar {number:g}, not an instant vector; the "
            "scaler reads its history as bucket peaks (a subquery), which takes only an "
            "instant vector: return one, e.g. sum(x) instead of scalar(sum(x)), or vector(42) "
            "for a number",
        )
    if not result:
        return None
    if len(result) > 1:
        raise _several_series(spec, url, len(result))
    if _histograms_only(result[0], "histogram", "value"):
        raise _native_histogram(spec, url)
    _, text = result[0]["value"]
    return to_float(text)


def load(spec: TargetSpec, url: str, value: float) -> float:
    """`value` as a load, which is never negative: a negative within NEGATIVE_NOISE of a
    replica's worth is float noise, read as 0; any other is NegativeLoad (as NaN is NoData:
    untrustworthy data is UNAVAILABLE, never a made-up 0)."""
    if value > load_bound.MAX_LOAD:
        query = echo_query(spec.query)
        problem = (
            f"query {query!r} for {spec.label} returned an implausible load at {url}, above "
            f"{load_bound.MAX_LOAD:g}, the largest read as a load (no fleet serves it: a counter "
            "read without rate(), or bytes summed over all time?); fix the query"
        )
        raise ImplausibleLoad(
            problem.replace("an implausible load", f"{value:g}", 1), problem=problem
        )
    if value >= 0:
        return value
    if -value <= NEGATIVE_NOISE * spec.threshold:
        return 0.0
    query = echo_query(spec.query)
    problem = (
        f"query {query!r} for {spec.label} returned a negative load at {url}, and a load "
        f"is never negative (a negative within {NEGATIVE_NOISE:g} of the threshold is float "
        "noise, read as 0); wrap the query in clamp_min(..., 0) or fix the subtraction in it"
    )
    raise NegativeLoad(problem.replace("a negative load", f"{value:g}", 1), problem=problem)


def _histograms_only(series: Any, histogram: str, number: str) -> bool:
    return isinstance(series, dict) and histogram in series and number not in series


def _native_histogram(spec: TargetSpec, url: str) -> BadQuery:
    """A query over native histograms returns histograms, not numbers. It used to be read as
    an answer of the wrong shape from the endpoint: UNAVAILABLE telling the user to check
    serverAddress, and a failure counted against every target sharing that Prometheus."""
    return BadQuery(
        spec.query,
        f"Prometheus at {url} returned a native histogram, not a number; take one number from "
        "it, e.g. histogram_count(sum(rate(x[5m]))) for the rate of observations (requests/s), "
        "or histogram_quantile(0.95, sum(rate(x[5m])))",
    )


def _several_series(spec: TargetSpec, url: str, count: int) -> BadQuery:
    return BadQuery(
        spec.query,
        f"Prometheus at {url} returned {count} series; wrap it in sum() or max() so that it "
        f"returns one",
    )


def to_float(text: str) -> float:
    """A Prometheus sample value; "NaN", "+Inf" and "-Inf" all become NaN (Series holds no inf).
    The API sends every value as a string: a JSON number or `true` (which float() reads as 1.0)
    is another service's answer, a TypeError here."""
    if not isinstance(text, str):
        raise TypeError(f"a sample value is {text!r}, not a string")
    value = float(text)
    return value if math.isfinite(value) else math.nan
