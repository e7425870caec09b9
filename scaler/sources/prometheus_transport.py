"""Requests to Prometheus' HTTP API, through prometheus-api-client (`PrometheusConnect`): one
client per connection (URL, credentials, TLS, headers, tenant), each on its own pooled session
whose adapter reads an answer whole within the timeout and under MAX_ANSWER_BYTES
(scaler/sources/bounded.py); the instant query asked uncompressed (`Client.instant`), and the
ledger's range query too, decoded by sources/matrix.py (`Client.matrix`); and the retries.

Each request carries what sources/credentials.py says (credentials read from the scaler's
files, TLS options, custom headers, the tenant `namespace` parameter). A request that fails fast
(refused or reset connection, HTTP 429/502/503/504: prometheus_failures.retryable) is tried
again, at most `retries` times with doubling backoff, and only while the whole call (a
history's chunks, or a latest value) stays within `call_budget`. A timeout is never retried: a
Prometheus too slow to answer is an outage, and waiting again would hide it from the endpoint's
breaker (serving/isolation.py) and blow the refresh deadline. A call that still fails reaches
the breaker as one failure, translated by prometheus_failures.py. Every attempt is counted
(`on_request(kind, outcome)`), so queries per target per minute can be watched.

It is the only module that imports prometheus_api_client. Must not: read an answer's values
(prometheus_answers.py), cache answers, or word a failure (prometheus_failures.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import requests
import requests.auth
from prometheus_api_client.exceptions import PrometheusApiClientException
from prometheus_api_client.prometheus_connect import PrometheusConnect
from urllib3.util.retry import Retry

from scaler.decision.spec import TargetSpec
from scaler.settings import PrometheusAuth
from scaler.sources import matrix, prometheus_failures
from scaler.sources.bounded import BoundedAdapter
from scaler.sources.credentials import Connection, Credentials

POOL_CONNECTIONS = 64
"""Connections kept per Prometheus: more than the requests a bulkhead lets in at once."""

MAX_ANSWER_BYTES = 32 * 2**20
"""Largest answer body read (scaler.sources.bounded): about a million samples, past anything one
series asks (MAX_POINTS a request) or a ledger batch of ScaledObjects over a day holds; parsed,
it is a few hundred MB of Python objects, the scaler's whole memory limit in deploy/."""

T = TypeVar("T")

OnRequest = Callable[[str, str], None]
"""Told (kind, outcome) of every HTTP attempt: kind range, instant or ledger; outcome ok,
retried or failed."""


class Transport:
    """The clients of one PrometheusSource and its retry loop; thread-safe."""

    def __init__(
        self,
        default_url: str,
        *,
        timeout: float,
        credentials: Credentials | None,
        retries: int,
        backoff: float,
        call_budget: float,
        on_request: OnRequest | None,
        sleep: Callable[[float], None],
    ) -> None:
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
        self._on_request = on_request
        self._sleep = sleep
        self._translator = prometheus_failures.Translator(
            self.default_url,
            credentials=self.credentials,
            timeout=timeout,
            max_bytes=MAX_ANSWER_BYTES,
        )
        self._clients: dict[Connection, Client] = {}
        self._lock = threading.Lock()

    def url(self, spec: TargetSpec) -> str:
        """The Prometheus `spec` reads its load from: its serverAddress, else the default."""
        return (spec.server_address or self.default_url).rstrip("/")

    def ask(
        self,
        spec: TargetSpec,
        call: Callable[[Client, dict[str, str]], T],
        *,
        kind: str,
        began: float,
        url: str | None = None,
        query: str | None = None,
    ) -> T:
        """Run one request for `spec` (its query and Prometheus unless `query`/`url` say
        otherwise), retried while it fails fast and the call started at `began` (monotonic)
        has budget left; every failure translated into the scaler's errors."""
        url = url.rstrip("/") if url else self.url(spec)
        connection = self.credentials.connection(spec, url)  # ConfigError: the target's fix
        client, params = self._client(connection), dict(connection.params)
        for attempt in range(self.retries + 1):
            try:
                result = call(client, params)
            except requests.RequestException as e:
                wait = self.backoff * 2**attempt
                spent = time.monotonic() - began
                if (
                    prometheus_failures.retryable(e)
                    and attempt < self.retries
                    and spent + wait + self.timeout <= self.call_budget
                ):
                    self._count(kind, "retried")
                    self._sleep(wait)
                    continue
                self._count(kind, "failed")
                tries = f" (after {attempt + 1} attempts)" if attempt else ""
                translate = self._translator.translate
                raise translate(spec, url, e, query=query, tries=tries, kind=kind) from e
            except (KeyError, TypeError, AttributeError) as e:
                self._count(kind, "failed")
                # The library reads response.json()["data"]["result"]: a 200 JSON answer that
                # is not a Prometheus API response.
                shape = "a JSON object with data.result"
                raise prometheus_failures.malformed(spec, url, e, shape) from e
            self._count(kind, "ok")
            return result
        raise AssertionError("unreachable: the last attempt returns or raises")

    def close(self) -> None:
        """Close every HTTP connection pool."""
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

    def _client(self, connection: Connection) -> Client:
        with self._lock:
            client = self._clients.get(connection)
            if client is None:
                client = self._clients[connection] = self._connect(connection)
            return client

    def _connect(self, connection: Connection) -> Client:
        # PrometheusConnect sends nothing in __init__. We hand it our own session so that
        # `verify` may be a CA bundle path (disable_ssl can only say yes or no), so that the
        # credentials are read from their files on each request (session.auth), and so that
        # HTTP errors arrive as requests.HTTPError with the response attached, instead of the
        # library's exception that only carries the status and body inside its message.
        session = _Session(self.credentials)
        session.verify = connection.verify
        session.cert = connection.cert
        session.auth = _FileAuth(self.credentials, connection.modes)
        session.hooks["response"].append(_raise_for_status)
        # No retries by urllib3 (ask retries, within its budget); read=False lets a read
        # timeout surface as requests.Timeout rather than as a "max retries" ConnectionError.
        retry = Retry(total=0, read=False, raise_on_status=False)
        # Keep a connection for every request in flight: the library's adapter pools 10, and
        # at start-up the bulkhead runs 16 at once, so each extra one was a new TCP connection
        # thrown away after use. The longer prefix wins over the adapter the library mounts.
        adapter = BoundedAdapter(
            max_bytes=MAX_ANSWER_BYTES, max_retries=retry, pool_maxsize=POOL_CONNECTIONS
        )
        session.mount(connection.url.rstrip("/") + "/", adapter)
        return Client(
            url=connection.url,
            headers=dict(connection.headers),
            disable_ssl=connection.verify is False,
            retry=retry,
            session=session,
            # Annotated `int` in the library, but handed to requests, which takes float seconds.
            timeout=self.timeout,  # type: ignore[arg-type]
        )

    def _count(self, kind: str, outcome: str) -> None:
        if self._on_request is not None:
            self._on_request(kind, outcome)


class _Session(requests.Session):
    """A session that sends no credential past a redirect to a URL not trusted with them.
    requests drops only `Authorization`, and only when the host changes: a trusted Prometheus
    (or the proxy in front of it) redirecting to another host, a login page say, was handed
    the custom auth header (`X-Api-Key`) as well."""

    def __init__(self, credentials: Credentials) -> None:
        super().__init__()
        self.credentials = credentials

    def rebuild_auth(
        self, prepared_request: requests.PreparedRequest, response: requests.Response
    ) -> None:
        super().rebuild_auth(prepared_request, response)  # type: ignore[no-untyped-call]
        if not self.credentials.trusts(prepared_request.url or ""):
            for name in self.credentials.secret_header_names():
                prepared_request.headers.pop(name, None)


class _FileAuth(requests.auth.AuthBase):
    """Adds the credential headers of `modes`, read from their files at each request."""

    def __init__(self, credentials: Credentials, modes: tuple[str, ...]) -> None:
        self.credentials, self.modes = credentials, modes

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers.update(self.credentials.secret_headers(self.modes))
        return request


def _raise_for_status(response: requests.Response, *args: Any, **kwargs: Any) -> None:
    response.raise_for_status()


class Client(PrometheusConnect):
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


def query_instant(client: Client, extra: dict[str, str], query: str, at: float) -> dict[str, Any]:
    """An instant query's request (`Client.instant`) at `at`, with `extra` parameters."""
    return client.instant(query, {"time": ts(at), **extra})


def ts(seconds: float) -> str:
    """Epoch seconds as Prometheus reads them, to the millisecond it stores."""
    return f"{seconds:.3f}"
