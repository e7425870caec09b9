"""Load from Prometheus' HTTP API: `PrometheusSource`, the `Source` the engine, `scaler
backtest --prometheus-url` and the retrain job read. What it asks and how it reads the answer
are its siblings' jobs; this module puts them together:

    prometheus_transport.py  the clients (prometheus-api-client), one per connection, the
                             retries within the call budget, and the count of every attempt
    prometheus_failures.py   every HTTP, transport and shape failure -> SourceUnavailable,
                             MalformedAnswer or BadQuery, messages naming the URL and the fix
    prometheus_answers.py    sample values, the one series, the instant value, the load bounds
    prometheus_range.py      a history's grid, chunks, points and bucket peaks
    prometheus_ledger.py     the samples of the scaler's own spend counters

A history is the query's values on the regular `Series` grid (NaN where Prometheus has no
sample), or with a finer `resolution` each bucket's peak: the `peak_query` subquery
(Prometheus takes the peaks), or with `peaks_raw` the raw samples with the peaks taken here,
the same numbers. The latest value is an instant query (Prometheus looks back 5 minutes), read
as a load. A query must return an instant vector of one series (a range vector or a scalar is
a BadQuery, from either read, saying so); a history with no series at all, and a newest value
that is none, NaN or Inf, are NoData. Messages name the URL and the fix, and carry no
timestamps, so that the engine can log a problem once per change.

Must not: cache answers, or make up values for missing data.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from functools import partial

from models.base import FloatArray, Series
from scaler.decision.quoting import echo_query
from scaler.decision.spec import TargetSpec
from scaler.errors import BadQuery, NoData, SourceError
from scaler.sources import (
    prometheus_answers,
    prometheus_failures,
    prometheus_ledger,
    prometheus_range,
    prometheus_transport,
)
from scaler.sources.base import Sample
from scaler.sources.credentials import Credentials
from scaler.sources.prometheus_range import Grid
from scaler.sources.prometheus_transport import OnRequest


class PrometheusSource:
    """A `Source` backed by Prometheus; thread-safe (the engine calls it from worker threads)."""

    def __init__(
        self,
        default_url: str,
        *,
        timeout: float = 10.0,
        credentials: Credentials | None = None,
        retries: int = 0,
        backoff: float = 0.25,
        call_budget: float = math.inf,
        on_request: OnRequest | None = None,
        sleep: Callable[[float], None] = time.sleep,
        peaks_raw: bool = False,
    ) -> None:
        """`credentials` default to none, with `default_url` trusted. Nothing is sent to
        Prometheus until the first query. `peaks_raw`: read bucket peaks as the raw samples
        (the ablation of the subquery, and its cross-check: the same numbers, at several
        times the CPU on both sides)."""
        self._transport = prometheus_transport.Transport(
            default_url,
            timeout=timeout,
            credentials=credentials,
            retries=retries,
            backoff=backoff,
            call_budget=call_budget,
            on_request=on_request,
            sleep=sleep,
        )
        self.peaks_raw = peaks_raw

    def history(
        self,
        spec: TargetSpec,
        *,
        start: float,
        end: float,
        step: float,
        resolution: float | None = None,
    ) -> Series:
        """Values of spec.query at start, start + step, ... <= end; NaN where there is no sample.
        With `resolution` finer than `step`, each value is the bucket's peak: the highest of
        the query sampled every `resolution` in (T - step, T], read as the `peak_query`
        subquery at `step` (Prometheus takes the peaks), in requests of at most MAX_POINTS
        points and MAX_SUBQUERY_SAMPLES samples (prometheus_range.py). With `peaks_raw`, as a
        plain range query at `resolution` with the peaks taken here, when `step` is a whole
        multiple of `resolution` and `start` is on its grid.

        Raises NoData when the whole window holds no series at all.
        """
        began = time.monotonic()
        grid = Grid(start, step, prometheus_range.grid_size(start, end, step))
        read = partial(prometheus_range.read, self._transport, spec, began=began)
        per = None
        if self.peaks_raw:
            per = prometheus_range.samples_per_bucket(start, step, resolution)
        if per is not None:
            fine = Grid(start - step + step / per, step / per, grid.size * per)
            raw, found = read(query=spec.query, grid=fine)
            values = prometheus_range.bucket_peaks(raw, per)
        elif resolution is not None and resolution < step:
            query = prometheus_range.peak_query(spec.query, step, resolution)
            samples = prometheus_range.MAX_SUBQUERY_SAMPLES // math.ceil(step / resolution)
            most = max(1, min(prometheus_range.MAX_POINTS, samples))
            try:
                values, found = read(query=query, grid=grid, most=most)
            except BadQuery as refused:
                raise self._as_written(spec, at=end, began=began) or refused from None
        else:
            values, found = read(query=spec.query, grid=grid)
        if grid.size and not found:
            url, query = self._transport.url(spec), echo_query(spec.query)
            raise NoData(
                f"query {query!r} for {spec.label} returned no series from {url} in the "
                f"{_span(end - start + step)} asked for; check the metric name and labels"
            )
        return Series(start, step, values)

    def latest(self, spec: TargetSpec, *, at: float) -> Sample:
        """The value of spec.query at `at` (Prometheus looks back 5 minutes for a sample), as a
        load: NoData when there is none, or it is NaN or Inf, or negative beyond float noise
        (prometheus_answers.load); BadQuery when the query returns anything but an instant
        vector of at most one series."""
        value = self._instant(spec, at=at, began=time.monotonic())
        url = self._transport.url(spec)
        if value is None or math.isnan(value):
            query = echo_query(spec.query)
            raise NoData(
                f"query {query!r} for {spec.label} has no value now at {url} (no sample "
                f"in Prometheus' lookback window, or NaN/Inf); check the metric name and labels"
            )
        return Sample(at, prometheus_answers.load(spec, url, value))

    def _instant(self, spec: TargetSpec, *, at: float, began: float) -> float | None:
        """spec.query's value at `at`, None when there is no sample; BadQuery for a query
        Prometheus refuses or whose answer is not one number of an instant vector."""
        url = self._transport.url(spec)
        call = partial(prometheus_transport.query_instant, query=spec.query, at=at)
        data = self._transport.ask(spec, call, kind="instant", began=began)
        with prometheus_failures.expecting(spec, url, prometheus_answers.INSTANT_SHAPE):
            return prometheus_answers.instant_value(spec, url, data)

    def _as_written(self, spec: TargetSpec, *, at: float, began: float) -> BadQuery | None:
        """Why Prometheus refused the peaks subquery wrapped around spec.query, in words about
        the query the user wrote, by asking it alone once: its own refusal (a parse error's
        position is then in their query, not in `peak_query`'s wrapper), or the type it
        returns (a range vector or a scalar, which no subquery takes). None when it is fine
        alone, or cannot be asked now: the wrapped query's refusal stands."""
        try:
            self._instant(spec, at=at, began=began)
        except BadQuery as refused:
            return refused
        except SourceError:
            return None
        return None

    def values(self, spec: TargetSpec, query: str, *, at: float) -> list[float]:
        """The value of every series `query` returns at `at` (NaN and Inf left out), from
        spec's Prometheus: e.g. one cold start per pod for leadTime: auto."""
        url = self._transport.url(spec)
        call = partial(prometheus_transport.query_instant, query=query, at=at)
        data = self._transport.ask(spec, call, kind="leadtime", began=time.monotonic(), query=query)
        with prometheus_failures.expecting(spec, url, prometheus_answers.INSTANT_SHAPE):
            result = data["result"]
            found = [
                prometheus_answers.to_float(item["value"][1])
                for item in result
                if isinstance(item, dict)
            ]
        return [v for v in found if not math.isnan(v)]

    def spent_samples(
        self, spec: TargetSpec, *, start: float, end: float, step: float, reactive: bool = False
    ) -> list[FloatArray]:
        """(time, value) samples of SPENT_COUNTER (SHADOW_COUNTER for a shadow trigger,
        REACTIVE_COUNTER if `reactive`; prometheus_ledger.py) for spec's
        ScaledObject at start, start + step, ... <= end: one (n, 2) array of rows per series
        (per scaler pod and trigger key), none when nothing was ever recorded. In money, each
        trigger's at the price it exported, for an amount budget with a price
        (TargetSpec.spend_in_money): an edited price does not reprice what was spent before.

        Asks the default URL, never spec.server_address: the ledger lives in the Prometheus
        that scrapes the scaler, not in the one holding the target's load.
        """
        found = self.spent_samples_of([spec], start=start, end=end, step=step, reactive=reactive)
        return found[spec.key]

    def spent_samples_of(
        self,
        specs: Sequence[TargetSpec],
        *,
        start: float,
        end: float,
        step: float,
        reactive: bool = False,
    ) -> dict[str, list[FloatArray]]:
        """`spent_samples` of each of `specs`, keyed by spec.key, in one range query (chunked
        under MAX_POINTS) per connection (credentials, headers, tenant) whose selector matches
        all their ScaledObjects: what a warm-up asks once for many targets instead of once for
        each. The same series, so the same samples, as each target's own query. Asked with
        others, a target whose connection is misconfigured (ConfigError) is left out: its own
        read says why. Errors name the first target of the request."""
        return prometheus_ledger.spent_samples_of(
            self._transport, specs, start=start, end=end, step=step, reactive=reactive
        )

    def spent_series(self, spec: TargetSpec) -> str:
        """Where `spent_samples` reads: its series, and the Prometheus asked."""
        return f"{prometheus_ledger.spent_series(spec)} at {self._transport.default_url}"

    def close(self) -> None:
        """Close every HTTP connection pool."""
        self._transport.close()


def _span(seconds: float) -> str:
    """A window length for messages: `7d`, `5h`, `300s`."""
    for unit, size in (("d", 86400.0), ("h", 3600.0)):
        if seconds >= size:
            return f"{seconds / size:.3g}{unit}"
    return f"{seconds:.3g}s"
