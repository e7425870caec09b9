"""Load from Prometheus' HTTP API, through prometheus-api-client (`PrometheusConnect`).

Owns: range queries cut into chunks under Prometheus' 11,000-points-per-series limit and laid on
the regular `Series` grid (NaN where Prometheus has no sample, +/-Inf included), each bucket's
peak of a history at a finer `resolution` (the `peak_query` subquery, Prometheus takes the
peaks; `peaks_raw` reads the samples raw and takes them here, the same numbers), instant
queries for the latest value (asked uncompressed, on the client's own session: `_Client`),
the samples of the scaler's own spend counter (the prewarm ledger's shared record, see
budget.spent_per_step; one float array per series, sources/matrix.py decoding the answer on the
client's own session, uncompressed: `_Client.matrix`), one client per Prometheus URL, and the
translation of every HTTP, transport, PromQL and answer-shape failure into `SourceUnavailable`,
`MalformedAnswer`, `BadQuery` or `NoData`, here and nowhere else. A query must return an instant
vector of one series (a range vector or a scalar is a BadQuery, from either read, saying so), and
its newest value must be a load: NaN or Inf is NoData, a negative one float noise read as 0
(`NEGATIVE_NOISE`) or else NegativeLoad, one above scaler/sources/load_bound.py's bound
ImplausibleLoad (both NoData); in a history, Inf and values past the bound are missing.
Messages name the URL and the fix, and carry no timestamps, so that the engine can log a
problem once per change.
It is the only module that imports prometheus_api_client (and its transport, requests).

Each request carries what sources/credentials.py says (credentials read from the scaler's
files, TLS options, custom headers, the tenant `namespace` parameter). A request that fails fast
(refused or reset connection, HTTP 429/502/503/504) is tried again, at most `retries` times with
doubling backoff, and only while the whole call (a history's chunks, or a latest value) stays
within `call_budget`. A timeout is never retried: a Prometheus too slow to answer is an outage,
and waiting again would hide it from the endpoint's breaker (serving/isolation.py) and blow the
refresh deadline. A call that still fails reaches the breaker as one failure. Every attempt is
counted (`on_request(kind, outcome)`), so queries per target per minute can be watched.

Must not: cache answers, or make up values for missing data.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

import numpy as np
import requests
import requests.auth
from prometheus_api_client.exceptions import PrometheusApiClientException
from prometheus_api_client.prometheus_connect import PrometheusConnect
from urllib3.util.retry import Retry

from models.base import FloatArray, Series
from scaler.decision.quoting import echo_query
from scaler.decision.spec import TargetSpec
from scaler.errors import (
    BadQuery,
    ConfigError,
    ImplausibleLoad,
    MalformedAnswer,
    NegativeLoad,
    NoData,
    SourceError,
    SourceUnavailable,
)
from scaler.settings import PrometheusAuth
from scaler.sources import load_bound, matrix
from scaler.sources.base import Sample
from scaler.sources.bounded import AnswerTooLarge, BoundedAdapter
from scaler.sources.credentials import Connection, Credentials

logger = logging.getLogger(__name__)

POOL_CONNECTIONS = 64
"""Connections kept per Prometheus: more than the requests a bulkhead lets in at once."""
MAX_POINTS = 11_000
"""Points per series Prometheus serves in one range query (it rejects more with HTTP 400)."""
MAX_SUBQUERY_SAMPLES = 10 * MAX_POINTS
"""Most samples at the peaks' resolution one subquery request evaluates (4 weeks at 30 s are
80,640): a finer resolution is asked in more requests, so that none runs into the timeout.
Measured (bench/warm_phases.py, 11.5 days at 30 s, 100 targets): the subquery costs Prometheus
56 ms of CPU and the scaler 11 ms, the same peaks read raw 108 and 88 ms (33,120 points to
encode and decode instead of 3,312)."""

URL_FIX = "check serverAddress / --prometheus-url"
LEDGER_URL_FIX = "check --ledger-prometheus-url (the Prometheus that scrapes the scaler)"
CREDENTIALS_FIX = (
    "check the scaler's Prometheus credentials (--prometheus-token-file, "
    "--prometheus-username/--prometheus-password-file, --prometheus-client-cert) and "
    "the target's authModes"
)
"""What to do about a 401 or 403 from a Prometheus trusted with the credentials."""

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

MAX_ANSWER_BYTES = 32 * 2**20
"""Largest answer body read (scaler.sources.bounded): about a million samples, past anything one
series asks (MAX_POINTS a request) or a ledger batch of ScaledObjects over a day holds; parsed,
it is a few hundred MB of Python objects, the scaler's whole memory limit in deploy/."""

SPENT_COUNTER = "scaler_prewarm_replica_hours_total"
SHADOW_COUNTER = "scaler_shadow_prewarm_replica_hours_total"
REACTIVE_COUNTER = "scaler_reactive_replica_hours_total"
"""The spend counters every scaler replica exports (telemetry.Telemetry.prewarm_spent, and
shadow_prewarm: what a `mode: shadow` trigger would have spent, its ledger's record)."""

T = TypeVar("T")

RETRY_STATUSES = frozenset({429, 502, 503, 504})
"""Answers of a proxy or Prometheus that is briefly overloaded or restarting."""

OnRequest = Callable[[str, str], None]
"""Told (kind, outcome) of every HTTP attempt: kind range, instant or ledger; outcome ok,
retried or failed."""


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
        if not (0 <= retries <= 10 and 0 <= backoff <= 60 and timeout > 0 and call_budget > 0):
            raise ValueError(
                f"Prometheus retries must be 0-10, backoff 0-60 s, timeout and call budget "
                f"positive; got {retries}, {backoff}, {timeout}, {call_budget}"
            )
        self.default_url = default_url.rstrip("/")
        self.timeout = timeout
        self.credentials = credentials or Credentials(
            PrometheusAuth(), trusted_urls=(self.default_url,)
        )
        self.retries, self.backoff, self.call_budget = retries, backoff, call_budget
        self.peaks_raw = peaks_raw
        self._on_request = on_request
        self._sleep = sleep
        self._clients: dict[Connection, PrometheusConnect] = {}
        self._lock = threading.Lock()

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
        points and MAX_SUBQUERY_SAMPLES samples. With `peaks_raw`, as a plain range query at
        `resolution` with the peaks taken here, when `step` is a whole multiple of
        `resolution` and `start` is on its grid.

        Raises NoData when the whole window holds no series at all.
        """
        began = time.monotonic()
        grid = _Grid(start, step, _grid_size(start, end, step))
        per = _samples_per_bucket(start, step, resolution) if self.peaks_raw else None
        if per is not None:
            fine = _Grid(start - step + step / per, step / per, grid.size * per)
            raw, found = self._range(spec, spec.query, fine, began)
            values = _bucket_peaks(raw, per)
        elif resolution is not None and resolution < step:
            query = peak_query(spec.query, step, resolution)
            most = max(1, min(MAX_POINTS, MAX_SUBQUERY_SAMPLES // math.ceil(step / resolution)))
            try:
                values, found = self._range(spec, query, grid, began, most=most)
            except BadQuery as refused:
                raise self._as_written(spec, at=end, began=began) or refused from None
        else:
            values, found = self._range(spec, spec.query, grid, began)
        if grid.size and not found:
            url, query = self._url(spec), echo_query(spec.query)
            raise NoData(
                f"query {query!r} for {spec.label} returned no series from {url} in the "
                f"{_span(end - start + step)} asked for; check the metric name and labels"
            )
        return Series(start, step, values)

    def _range(
        self, spec: TargetSpec, query: str, grid: _Grid, began: float, most: int = MAX_POINTS
    ) -> tuple[FloatArray, bool]:
        """`query`'s values on `grid` (NaN where no sample), in chunks of at most `most`
        points, and whether any chunk held a series."""
        values = np.full(grid.size, np.nan)
        found = False
        url = self._url(spec)
        logger.debug(
            "%s: history of %d points in %d queries",
            spec.label,
            grid.size,
            math.ceil(grid.size / most),
        )
        for chunk in grid.chunks(most):
            call = partial(_query_range, query=query, chunk=chunk)
            result = self._ask(spec, call, kind="range", began=began)
            with _expecting(spec, url, RANGE_SHAPE):
                series = _single_series(spec, url, result)
                if series is not None:
                    found = True
                    _place(values, chunk, series["values"])
        return values, found

    def latest(self, spec: TargetSpec, *, at: float) -> Sample:
        """The value of spec.query at `at` (Prometheus looks back 5 minutes for a sample), as a
        load: NoData when there is none, or it is NaN or Inf, or negative beyond float noise
        (`_load`); BadQuery when the query returns anything but an instant vector of at most
        one series."""
        value = self._instant(spec, at=at, began=time.monotonic())
        url = self._url(spec)
        if value is None or math.isnan(value):
            query = echo_query(spec.query)
            raise NoData(
                f"query {query!r} for {spec.label} has no value now at {url} (no sample "
                f"in Prometheus' lookback window, or NaN/Inf); check the metric name and labels"
            )
        return Sample(at, _load(spec, url, value))

    def _instant(self, spec: TargetSpec, *, at: float, began: float) -> float | None:
        """spec.query's value at `at`, None when there is no sample; BadQuery for a query
        Prometheus refuses or whose answer is not one number of an instant vector."""
        url = self._url(spec)
        call = partial(_query_instant, query=spec.query, at=at)
        data = self._ask(spec, call, kind="instant", began=began)
        with _expecting(spec, url, INSTANT_SHAPE):
            return _instant_value(spec, url, data)

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
        url = self._url(spec)
        call = partial(_query_instant, query=query, at=at)
        data = self._ask(spec, call, kind="leadtime", began=time.monotonic(), query=query)
        with _expecting(spec, url, INSTANT_SHAPE):
            result = data["result"]
            found = [_to_float(item["value"][1]) for item in result if isinstance(item, dict)]
        return [v for v in found if not math.isnan(v)]

    def spent_samples(
        self, spec: TargetSpec, *, start: float, end: float, step: float, reactive: bool = False
    ) -> list[FloatArray]:
        """(time, value) samples of SPENT_COUNTER (SHADOW_COUNTER for a shadow trigger,
        REACTIVE_COUNTER if `reactive`) for spec's
        ScaledObject at start, start + step, ... <= end: one (n, 2) array of rows per series
        (per scaler pod and trigger key), none when nothing was ever recorded.

        Asks `default_url`, never spec.server_address: the ledger lives in the Prometheus that
        scrapes the scaler, not in the one holding the target's load.
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
        groups: dict[tuple[Connection, str], list[TargetSpec]] = {}
        for spec in specs:
            try:
                connection = self.credentials.connection(spec, self.default_url)
            except ConfigError:
                if len(specs) == 1:
                    raise
                continue
            groups.setdefault((connection, _counter(spec, reactive=reactive)), []).append(spec)
        found: dict[str, list[FloatArray]] = {}
        for (_, counter), members in groups.items():
            found.update(self._spent_of(members, start=start, end=end, step=step, counter=counter))
        return found

    def _spent_of(
        self, specs: list[TargetSpec], *, start: float, end: float, step: float, counter: str
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
        query = f'{counter}{{target=~"{target}"}}'
        series: dict[str, dict[str, list[FloatArray]]] = {key: {} for key in objects}
        began = time.monotonic()
        first = specs[0]
        for chunk in _Grid(start, step, _grid_size(start, end, step)).chunks(MAX_POINTS):
            call = partial(_query_matrix, query=query, chunk=chunk)
            result = self._ask(
                first, call, url=self.default_url, query=query, kind="ledger", began=began
            )
            with _expecting(first, self.default_url, RANGE_SHAPE):
                for found in result:
                    owner = str(found["metric"]["target"]).rsplit("#", 1)[0]
                    if owner not in series:  # not one of ours: another object's prefix
                        continue
                    name = repr(sorted(found["metric"].items()))
                    chunks = series[owner].setdefault(name, [])
                    chunks.append(_counter_samples(found["values"]))
        return {
            spec.key: [np.concatenate(chunks) for chunks in series[spend_key(spec)].values()]
            for spec in specs
        }

    def close(self) -> None:
        """Close every HTTP connection pool."""
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

    def _url(self, spec: TargetSpec) -> str:
        return (spec.server_address or self.default_url).rstrip("/")

    def _client(self, connection: Connection) -> PrometheusConnect:
        with self._lock:
            client = self._clients.get(connection)
            if client is None:
                client = self._clients[connection] = self._connect(connection)
            return client

    def _connect(self, connection: Connection) -> PrometheusConnect:
        # PrometheusConnect sends nothing in __init__. We hand it our own session so that
        # `verify` may be a CA bundle path (disable_ssl can only say yes or no), so that the
        # credentials are read from their files on each request (session.auth), and so that
        # HTTP errors arrive as requests.HTTPError with the response attached, instead of the
        # library's exception that only carries the status and body inside its message.
        session = requests.Session()
        session.verify = connection.verify
        session.cert = connection.cert
        session.auth = _FileAuth(self.credentials, connection.modes)
        session.hooks["response"].append(_raise_for_status)
        # No retries by urllib3 (_ask retries, within its budget); read=False lets a read
        # timeout surface as requests.Timeout rather than as a "max retries" ConnectionError.
        retry = Retry(total=0, read=False, raise_on_status=False)
        # Keep a connection for every request in flight: the library's adapter pools 10, and
        # at start-up the bulkhead runs 16 at once, so each extra one was a new TCP connection
        # thrown away after use. The longer prefix wins over the adapter the library mounts.
        adapter = BoundedAdapter(
            max_bytes=MAX_ANSWER_BYTES, max_retries=retry, pool_maxsize=POOL_CONNECTIONS
        )
        session.mount(connection.url.rstrip("/") + "/", adapter)
        return _Client(
            url=connection.url,
            headers=dict(connection.headers),
            disable_ssl=connection.verify is False,
            retry=retry,
            session=session,
            # Annotated `int` in the library, but handed to requests, which takes float seconds.
            timeout=self.timeout,  # type: ignore[arg-type]
        )

    def _ask(
        self,
        spec: TargetSpec,
        call: Callable[[PrometheusConnect, dict[str, str]], T],
        *,
        kind: str,
        began: float,
        url: str | None = None,
        query: str | None = None,
    ) -> T:
        """Run one request for `spec` (its query and Prometheus unless `query`/`url` say
        otherwise), retried while it fails fast and the call started at `began` (monotonic)
        has budget left; every failure translated into the scaler's errors."""
        url = url.rstrip("/") if url else self._url(spec)
        connection = self.credentials.connection(spec, url)  # ConfigError: the target's fix
        client, params = self._client(connection), dict(connection.params)
        for attempt in range(self.retries + 1):
            try:
                result = call(client, params)
            except requests.RequestException as e:
                wait = self.backoff * 2**attempt
                spent = time.monotonic() - began
                if (
                    _retryable(e)
                    and attempt < self.retries
                    and spent + wait + self.timeout <= self.call_budget
                ):
                    self._count(kind, "retried")
                    self._sleep(wait)
                    continue
                self._count(kind, "failed")
                tries = f" (after {attempt + 1} attempts)" if attempt else ""
                raise self._translate(spec, url, e, query=query, tries=tries, kind=kind) from e
            except (KeyError, TypeError, AttributeError) as e:
                self._count(kind, "failed")
                # The library reads response.json()["data"]["result"]: a 200 JSON answer that
                # is not a Prometheus API response.
                raise _malformed(spec, url, e, "a JSON object with data.result") from e
            self._count(kind, "ok")
            return result
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _denied_fix(self, url: str) -> str:
        """What to do about a 401 or 403 from `url`: a URL not trusted with the credentials got
        none, by design, so checking them would not help."""
        if self.credentials.trusts(url):
            return CREDENTIALS_FIX
        fix = (
            f"no credentials were sent: serverAddress {url} is not --prometheus-url "
            f"({self.default_url}); add --prometheus-trusted-url {url} if it is the same server"
        )
        if not self.credentials.auth.modes:
            fix += (
                ", and give the scaler credentials (--prometheus-token-file, "
                "--prometheus-username/--prometheus-password-file or --prometheus-client-cert)"
            )
        return fix

    def _count(self, kind: str, outcome: str) -> None:
        if self._on_request is not None:
            self._on_request(kind, outcome)

    def _translate(
        self,
        spec: TargetSpec,
        url: str,
        e: requests.RequestException,
        *,
        query: str | None,
        tries: str,
        kind: str,
    ) -> Exception:
        fix = LEDGER_URL_FIX if kind == "ledger" else URL_FIX
        if isinstance(e, AnswerTooLarge) and kind != "ledger":
            return BadQuery(
                query or spec.query,
                f"{url} answered with over {MAX_ANSWER_BYTES // 2**20} MiB, so it was not read "
                "on; the query returns many series or points: aggregate it to one series with "
                "sum() or max()",
            )
        if isinstance(e, AnswerTooLarge):
            return MalformedAnswer(
                f"{url} answered the prewarm ledger's query with over "
                f"{MAX_ANSWER_BYTES // 2**20} MiB, so it was not read on; {fix}"
            )
        if isinstance(e, requests.HTTPError):
            status = e.response.status_code if e.response is not None else 0
            if status in (401, 403):
                fix = self._denied_fix(url)
            return _http_error(spec, url, e, query=query or spec.query, fix=fix, tries=tries)
        if isinstance(e, requests.Timeout):
            return SourceUnavailable(
                f"Prometheus at {url} did not answer within {self.timeout:g}s for {spec.label}; "
                f"{fix}, or raise the timeout if the query is slow"
            )
        if isinstance(e, requests.JSONDecodeError):
            return MalformedAnswer(
                f"{url} answered {spec.label}'s query with a body that is not JSON "
                f"({type(e).__name__}: {_short(str(e))}); expected a Prometheus API answer; "
                f"{fix} (it must "
                f"be Prometheus' HTTP API, not a UI page, a proxy or another service)"
            )
        if isinstance(e, requests.exceptions.SSLError):
            fix = "check --prometheus-ca-file (the CA that signed Prometheus' certificate)"
        # Refused connections, DNS, TLS, and bytes that are not HTTP at all.
        return SourceUnavailable(
            f"Prometheus at {url} is unavailable for {spec.label}{tries} "
            f"({type(e).__name__}: {_short(str(e))}); {fix}"
        )


class _FileAuth(requests.auth.AuthBase):
    """Adds the credential headers of `modes`, read from their files at each request."""

    def __init__(self, credentials: Credentials, modes: tuple[str, ...]) -> None:
        self.credentials, self.modes = credentials, modes

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers.update(self.credentials.secret_headers(self.modes))
        return request


def _counter(spec: TargetSpec, *, reactive: bool) -> str:
    """The counter a ledger of `spec` is rebuilt from: a shadow trigger's own simulated spend,
    never the active one's (and the other way round)."""
    if reactive:
        return REACTIVE_COUNTER
    return SHADOW_COUNTER if spec.mode == "shadow" else SPENT_COUNTER


def spend_key(spec: TargetSpec) -> str:
    """The ScaledObject whose spend a target's ledger is rebuilt from: `namespace/name`."""
    return f"{spec.namespace}/{spec.name}"


def _retryable(e: requests.RequestException) -> bool:
    """A failure that a second try may not meet: a refused or reset connection, or a busy or
    restarting server. Not a timeout (an outage the breaker must see), not TLS (a config)."""
    if isinstance(e, requests.HTTPError):
        return e.response is not None and e.response.status_code in RETRY_STATUSES
    if isinstance(e, requests.Timeout | requests.exceptions.SSLError):
        return False
    return isinstance(e, requests.ConnectionError)


@contextmanager
def _expecting(spec: TargetSpec, url: str, shape: str) -> Iterator[None]:
    """Translate the errors of reading a result of the wrong shape into MalformedAnswer."""
    try:
        yield
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        raise _malformed(spec, url, e, shape) from e


def _malformed(spec: TargetSpec, url: str, e: Exception, shape: str) -> MalformedAnswer:
    return MalformedAnswer(
        f"{url} answered {spec.label}'s query with JSON of the wrong shape "
        f"({type(e).__name__}: {_short(str(e))}); expected {shape}; check serverAddress / "
        f"--prometheus-url "
        f"(it must be Prometheus' HTTP API, not a proxy or another service)"
    )


def _raise_for_status(response: requests.Response, *args: Any, **kwargs: Any) -> None:
    response.raise_for_status()


def _http_error(
    spec: TargetSpec, url: str, e: requests.HTTPError, *, query: str, fix: str, tries: str = ""
) -> Exception:
    """BadQuery for a target's query Prometheus rejects (400/422), SourceUnavailable for the
    rest, and for our own ledger query (not the user's to fix)."""
    response = e.response
    status = response.status_code if response is not None else 0
    error = _error_text(response)
    if status in (400, 422) and query == spec.query:
        return BadQuery(
            query,
            f"Prometheus at {url} rejected it (HTTP {status}): {error}; fix the PromQL "
            f"(try it in the Prometheus UI)",
        )
    return SourceUnavailable(
        f"Prometheus at {url} answered HTTP {status} for {spec.label}{tries}: {error}; {fix}"
    )


def _error_text(response: requests.Response | None) -> str:
    """Prometheus' own `error` field, else the start of the body."""
    if response is None:
        return "no response"
    try:
        body = response.json()
    except ValueError:
        return response.text[:200].strip() or response.reason
    if isinstance(body, dict) and body.get("error"):
        return str(body["error"])
    return response.text[:200].strip()


class _Grid:
    """`size` points start, start + step, ...; a chunk is the slice [first, first + size)."""

    def __init__(self, start: float, step: float, size: int, first: int = 0) -> None:
        self.start, self.step, self.size, self.first = start, step, size, first

    def time(self, i: int) -> float:
        return self.start + i * self.step

    def chunks(self, max_points: int) -> Iterator[_Grid]:
        for first in range(0, self.size, max_points):
            size = min(max_points, self.size - first)
            yield _Grid(self.time(first), self.step, size, first)


def _grid_size(start: float, end: float, step: float) -> int:
    if not (math.isfinite(step) and step > 0):
        raise ValueError(f"history step must be a positive number of seconds, got {step}")
    if end < start:
        return 0
    # The epsilon keeps `end` on the grid when float rounding puts it a hair short.
    return math.floor((end - start) / step + 1e-9) + 1


def _samples_per_bucket(start: float, step: float, resolution: float | None) -> int | None:
    """How many samples at `resolution` a bucket of `step` holds when the bucket peaks can be
    taken from a plain range query on the same points the subquery samples (a whole number,
    on a grid through `start` aligned, as Prometheus aligns a subquery, to multiples of
    `resolution`); None when the history is the value at each point or takes the subquery."""
    if resolution is None or resolution >= step:
        return None
    _check_resolution(resolution)
    per = round(step / resolution)
    whole = abs(per * resolution - step) < 1e-6
    aligned = abs(start / resolution - round(start / resolution)) < 1e-6
    return per if whole and aligned else None


def _bucket_peaks(raw: FloatArray, per: int) -> FloatArray:
    """The highest of each run of `per` samples; NaN only where all of them are NaN."""
    peaks: FloatArray = np.fmax.reduce(raw.reshape(-1, per), axis=1)
    return peaks


def _check_resolution(resolution: float) -> None:
    if not (math.isfinite(resolution) and resolution >= 0.001):
        raise ValueError(f"history resolution must be at least 1 ms, got {resolution}")


def peak_query(query: str, step: float, resolution: float | None) -> str:
    """`query` as a range query at `step` whose value at T is its highest sampled every
    `resolution` in (T - step, T] (a PromQL subquery: the range stops 1 ms short of `step`,
    so the point at T - step, which belongs to the bucket before, is left out whether the
    Prometheus counts a range's left end in or not). `query` as it is when `resolution` is
    None or not finer than `step`."""
    if resolution is None or resolution >= step:
        return query
    _check_resolution(resolution)
    span, every = round(step * 1000) - 1, round(resolution * 1000)
    return f"max_over_time(({query})[{span}ms:{every}ms])"


def _query_range(
    client: PrometheusConnect, extra: dict[str, str], query: str, chunk: _Grid
) -> list[Any]:
    # The library rounds start/end to whole seconds; our own params (which take precedence)
    # keep millisecond precision, so the returned points land exactly on our grid.
    params = _range_params(chunk, extra)
    result: list[Any] = client.custom_query_range(
        query, _dt(chunk.start), _dt(chunk.time(chunk.size - 1)), step=params["step"], params=params
    )
    return result


def _query_matrix(
    client: PrometheusConnect, extra: dict[str, str], query: str, chunk: _Grid
) -> list[Any]:
    """`_query_range`'s request and answer, each series' samples decoded as an array where
    sources/matrix.py can (`_Client.matrix`)."""
    assert isinstance(client, _Client)  # every client is made by PrometheusSource._connect
    return client.matrix(query, _range_params(chunk, extra))


def _range_params(chunk: _Grid, extra: dict[str, str]) -> dict[str, str]:
    """A range query's start, end and step for `chunk`, to the millisecond, and `extra`."""
    last = chunk.time(chunk.size - 1)
    return {"start": _ts(chunk.start), "end": _ts(last), "step": _ts(chunk.step), **extra}


def _query_instant(
    client: PrometheusConnect, extra: dict[str, str], query: str, at: float
) -> dict[str, Any]:
    assert isinstance(client, _Client)  # every client is made by PrometheusSource._connect
    return client.instant(query, {"time": _ts(at), **extra})


class _Client(PrometheusConnect):
    """The library's client, plus the instant query the engine sends for every target every
    step, asked uncompressed: an answer of one sample is a few hundred bytes, and gzip cost
    both ends more CPU than the bytes it saved (bench/replicas.py --profile-steady). The same
    session (pooled keep-alive connections, credentials, TLS, the status hook) as
    `custom_query`, and its `data` with the `resultType` that one drops; the history's range
    queries stay the library's, compressed. The ledger's range queries (`matrix`) are asked
    uncompressed too: a day of 50 targets' counter is 4.7 MB of JSON, and gzip cost Prometheus
    220 ms of CPU a query to save 3.9 MB (bench/ledger_window.py; docs/benchmark.md)."""

    def instant(self, query: str, params: dict[str, str]) -> dict[str, Any]:
        """The answer's `data`: `result` and the `resultType` the library drops (a scalar and
        a string both come back as [time, "text"], and a range vector must be told apart)."""
        response = self._session.get(
            f"{self.url}/api/v1/query",
            params={"query": query, **params},
            headers={**(self.headers or {}), "Accept-Encoding": "identity"},
            timeout=self._timeout,
        )
        if response.status_code != 200:  # 2xx but not 200 (the hook raised for the rest)
            raise requests.HTTPError(f"HTTP {response.status_code}", response=response)
        data: dict[str, Any] = response.json()["data"]
        return data

    def matrix(self, query: str, params: dict[str, str]) -> list[Any]:
        """The library's `custom_query_range` (the same request, uncompressed; the same status
        handling and `data.result`), with each series' "values" an (n, 2) float array where
        sources/matrix.py decodes the body exactly, else the JSON lists as before."""
        response = self._session.request(
            method=self._method,
            url=f"{self.url}/api/v1/query_range",
            params={"query": query, **params},
            verify=self._session.verify,
            headers={**(self.headers or {}), "Accept-Encoding": "identity"},
            auth=self.auth,
            cert=self._session.cert,
            timeout=self._timeout,
        )
        if response.status_code != 200:
            raise PrometheusApiClientException(
                f"HTTP Status Code {response.status_code} ({response.content!r})"
            )
        document = matrix.decode(response.content, response.encoding)
        if document is None:
            document = response.json()
        result: list[Any] = document["data"]["result"]
        return result


def _single_series(spec: TargetSpec, url: str, result: list[Any]) -> dict[str, Any] | None:
    """The only series of a range result, None when there is none; BadQuery for several."""
    if len(result) > 1:
        raise _several_series(spec, url, len(result))
    return result[0] if result else None


def _place(values: FloatArray, chunk: _Grid, points: list[Any]) -> None:
    """Write a chunk's `[timestamp, "value"]` points into `values` at their grid index (as
    arrays: a 28-day history is 8,064 points, and a loop over them was most of its read)."""
    if not points:
        return
    stamps = np.fromiter((float(stamp) for stamp, _ in points), np.float64, len(points))
    found = np.array([_to_float(text) for _, text in points], dtype=np.float64)
    if not np.isfinite(stamps).all():
        raise ValueError("a sample time is not a finite number")
    # as _to_float: a Series holds no inf; a value past the load bound is no load either
    found[~np.isfinite(found) | (found > load_bound.MAX_LOAD)] = np.nan
    index = np.rint((stamps - chunk.start) / chunk.step)
    inside = (index >= 0) & (index < chunk.size)
    values[chunk.first + index[inside].astype(np.int64)] = found[inside]


def _counter_samples(values: Any) -> FloatArray:
    """A series' samples as (time, value) rows, a value NaN where not finite (as `_to_float`):
    decoded already (`_Client.matrix`), or converted here from `[[time, "value"], ...]`."""
    if isinstance(values, np.ndarray):
        return values
    rows = [(float(at), _to_float(text)) for at, text in values]
    return np.array(rows, dtype=np.float64).reshape(-1, 2)


def _instant_value(spec: TargetSpec, url: str, data: dict[str, Any]) -> float | None:
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
            number = _to_float(text)
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
    _, text = result[0]["value"]
    return _to_float(text)


def _load(spec: TargetSpec, url: str, value: float) -> float:
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


def _several_series(spec: TargetSpec, url: str, count: int) -> BadQuery:
    return BadQuery(
        spec.query,
        f"Prometheus at {url} returned {count} series; wrap it in sum() or max() so that it "
        f"returns one",
    )


def _to_float(text: str) -> float:
    """A Prometheus sample value; "NaN", "+Inf" and "-Inf" all become NaN (Series holds no inf).
    The API sends every value as a string: a JSON number or `true` (which float() reads as 1.0)
    is another service's answer, a TypeError here."""
    if not isinstance(text, str):
        raise TypeError(f"a sample value is {text!r}, not a string")
    value = float(text)
    return value if math.isfinite(value) else math.nan


def _ts(seconds: float) -> str:
    """Epoch seconds as Prometheus reads them, to the millisecond it stores."""
    return f"{seconds:.3f}"


def _dt(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


_QUERY_STRING = re.compile(r"(/api/v1/\w+)\?[^\s'\")]*")


def _short(text: str, limit: int = 300) -> str:
    """An error text without request query strings (their times change every step, and the
    engine logs a problem once per change) and at most `limit` characters (a transport error
    may quote a whole body)."""
    text = _QUERY_STRING.sub(r"\1", text)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _span(seconds: float) -> str:
    """A window length for messages: `7d`, `5h`, `300s`."""
    for unit, size in (("d", 86400.0), ("h", 3600.0)):
        if seconds >= size:
            return f"{seconds / size:.3g}{unit}"
    return f"{seconds:.3g}s"
