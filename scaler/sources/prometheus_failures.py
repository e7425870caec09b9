"""Why a request to Prometheus failed, in the scaler's errors: every HTTP, transport and
answer-shape failure becomes `SourceUnavailable`, `MalformedAnswer` or `BadQuery`, with a
message naming the URL and the fix (the target's serverAddress, the ledger's URL, the
credentials, the CA file, the client certificate, http:// for a server without TLS, a host the
server's certificate names, or the PromQL), here and nowhere else. Also which failures a second
try may not meet (`retryable`): a refused or reset connection, HTTP 429/502/503/504; never a
timeout (an outage the breaker must see) nor TLS (a config).

Messages carry no timestamps and no request query strings (`_short`), so that the engine can
log a problem once per change.

Must not: send or retry a request (prometheus_transport.py does), or read an answer's values
(prometheus_answers.py does).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import requests

from scaler.decision.spec import TargetSpec
from scaler.errors import BadQuery, MalformedAnswer, SourceRefused, SourceUnavailable
from scaler.sources.bounded import AnswerTooLarge
from scaler.sources.credentials import Credentials

URL_FIX = "check serverAddress / --prometheus-url"
LEDGER_URL_FIX = "check --ledger-prometheus-url (the Prometheus that scrapes the scaler)"
CREDENTIALS_FIX = (
    "check the scaler's Prometheus credentials (--prometheus-token-file, "
    "--prometheus-username/--prometheus-password-file, --prometheus-client-cert) and "
    "the target's authModes"
)
"""What to do about a 401 or 403 from a Prometheus trusted with the credentials."""

RETRY_STATUSES = frozenset({429, 502, 503, 504})
"""Answers of a proxy or Prometheus that is briefly overloaded or restarting."""


class Translator:
    """Turns a failed request of one PrometheusSource into the scaler's error, knowing what
    the messages name: its default URL, its credentials, its timeout and its answer cap."""

    def __init__(
        self, default_url: str, *, credentials: Credentials, timeout: float, max_bytes: int
    ) -> None:
        self.default_url, self.credentials = default_url, credentials
        self.timeout, self.max_bytes = timeout, max_bytes

    def translate(
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
                f"{url} answered with over {self.max_bytes // 2**20} MiB, so it was not read "
                "on; the query returns many series or points: aggregate it to one series with "
                "sum() or max()",
            )
        if isinstance(e, AnswerTooLarge):
            return MalformedAnswer(
                f"{url} answered the prewarm ledger's query with over "
                f"{self.max_bytes // 2**20} MiB, so it was not read on; {fix}"
            )
        if isinstance(e, requests.HTTPError):
            status = e.response.status_code if e.response is not None else 0
            if status in (401, 403):
                fix = self._denied_fix(url)
            return _http_error(
                spec,
                url,
                e,
                query=query or spec.query,
                fix=fix,
                tries=tries,
                redact=self.credentials.redact,
            )
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
            fix = tls_fix(url, str(e))
        # Refused connections, DNS, TLS, and bytes that are not HTTP at all.
        return SourceUnavailable(
            f"Prometheus at {url} is unavailable for {spec.label}{tries} "
            f"({type(e).__name__}: {_short(str(e))}); {fix}"
        )

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


CA_FIX = "check --prometheus-ca-file (the CA that signed Prometheus' certificate)"
_PLAIN_HTTP = ("WRONG_VERSION_NUMBER", "record layer failure", "HTTP_REQUEST")
"""OpenSSL's words for a handshake answered in plain HTTP (1.1, 3.x, a server's side)."""
_CLIENT_CERT = ("CERTIFICATE_REQUIRED", "certificate required", "EOF occurred in violation")
"""A server that wants a client certificate: TLS 1.3 alerts it, or just closes the handshake."""
_NAME_MISMATCH = ("Hostname mismatch", "IP address mismatch", "doesn't match")
"""OpenSSL's (and urllib3's own check's) words for a certificate that does not name the host."""


def tls_fix(url: str, error: str) -> str:
    """What to do about a TLS failure with `url`: only a certificate that does not verify is
    about the CA file, and telling everyone to check it sent a user whose serverAddress said
    https:// to a plain-HTTP Prometheus, or whose certificate does not name the host dialled,
    after the wrong file."""
    if any(word in error for word in _PLAIN_HTTP):
        plain = "http://" + url.removeprefix("https://")
        return (
            f"{url} does not speak TLS (it answered the handshake in plain HTTP); write "
            f"serverAddress / --prometheus-url as {plain}"
        )
    if any(word in error for word in _NAME_MISMATCH):
        host = urlsplit(url).hostname or url
        return (
            f"the certificate {url} presents does not name {host}: its names (subjectAltName) "
            f"do not include {host}, the host dialled, and no CA file changes that; write "
            "serverAddress / --prometheus-url with a name the certificate holds (often the "
            f"Service's DNS name, not an IP), or reissue Prometheus' certificate with {host} "
            "among its names (cert-manager: dnsNames or ipAddresses)"
        )
    if any(word in error for word in _CLIENT_CERT):
        return (
            "Prometheus ended the TLS handshake, as a server requiring a client certificate "
            "does when it gets none it trusts: give the scaler --prometheus-client-cert and "
            "--prometheus-client-key, signed by a CA Prometheus trusts (sent to --prometheus-url "
            "and --prometheus-trusted-url only, and only when the trigger's authModes is empty "
            "or includes tls)"
        )
    return CA_FIX


def retryable(e: requests.RequestException) -> bool:
    """A failure that a second try may not meet: a refused or reset connection, or a busy or
    restarting server. Not a timeout (an outage the breaker must see), not TLS (a config)."""
    if isinstance(e, requests.HTTPError):
        return e.response is not None and e.response.status_code in RETRY_STATUSES
    if isinstance(e, requests.Timeout | requests.exceptions.SSLError):
        return False
    return isinstance(e, requests.ConnectionError)


@contextmanager
def expecting(spec: TargetSpec, url: str, shape: str) -> Iterator[None]:
    """Translate the errors of reading a result of the wrong shape into MalformedAnswer."""
    try:
        yield
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        raise malformed(spec, url, e, shape) from e


def malformed(spec: TargetSpec, url: str, e: Exception, shape: str) -> MalformedAnswer:
    return MalformedAnswer(
        f"{url} answered {spec.label}'s query with JSON of the wrong shape "
        f"({type(e).__name__}: {_short(str(e))}); expected {shape}; check serverAddress / "
        f"--prometheus-url "
        f"(it must be Prometheus' HTTP API, not a proxy or another service)"
    )


def _http_error(
    spec: TargetSpec,
    url: str,
    e: requests.HTTPError,
    *,
    query: str,
    fix: str,
    tries: str = "",
    redact: Callable[[str], str],
) -> Exception:
    """BadQuery for a target's query Prometheus rejects (400/422), SourceUnavailable for the
    rest, and for our own ledger query (not the user's to fix). The server's words go through
    `redact`: one that echoes a rejected credential must not have it quoted."""
    response = e.response
    status = response.status_code if response is not None else 0
    error = redact(_error_text(response))
    if status in (400, 422) and query == spec.query:
        return BadQuery(
            query,
            f"Prometheus at {url} rejected it (HTTP {status}): {error}; fix the PromQL "
            f"(try it in the Prometheus UI)",
        )
    refused = 400 <= status < 500 and status not in TRANSIENT
    return (SourceRefused if refused else SourceUnavailable)(
        f"Prometheus at {url} answered HTTP {status} for {spec.label}{tries}: {error}; {fix}"
    )


TRANSIENT = (408, 429)
"""4xx answers that ask the client to come back (Request Timeout, Too Many Requests)."""


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


_QUERY_STRING = re.compile(r"(/api/v1/\w+)\?[^\s'\")]*")


def _short(text: str, limit: int = 300) -> str:
    """An error text without request query strings (their times change every step, and the
    engine logs a problem once per change) and at most `limit` characters (a transport error
    may quote a whole body)."""
    text = _QUERY_STRING.sub(r"\1", text)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
