"""The keys that say how to reach a target's Prometheus: `serverAddress`, `authModes`,
`customHeaders` and `namespace`, read as KEDA's Prometheus scaler reads them, and shared with the
scaler's own flags (sources/prometheus_flags.py). Credentials never come this way: a URL with a
user:password@ or a header that looks like one is refused, naming the flag that reads the
credential from a mounted Secret. Pure: no I/O.
"""

from __future__ import annotations

import re

from scaler.decision import quoting

AUTH_MODES = ("bearer", "basic", "custom", "tls")
MAX_HEADERS = 16
_HEADER_NAME_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")
_HEADER_VALUE_RE = re.compile(r"^[\x20-\x2b\x2d-\x7e]{0,256}$")
"""Printable ASCII but the comma, which separates headers."""
SECRET_HEADER_WORDS = ("auth", "token", "secret", "password", "passwd", "key", "cookie")
"""A customHeaders name holding one of these is a credential in clear text: refused."""
FORBIDDEN_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
_NAMESPACE_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

_USERINFO = re.compile(r"^(https?://)[^/?#@]*@", re.IGNORECASE)
CREDENTIALS_IN_URL = (
    "credentials in a URL are clear text wherever it is written, and errors and logs quote it; "
    "give the scaler --prometheus-username and --prometheus-password-file instead (a trigger "
    "opts in with authModes: basic)"
)


def without_credentials(url: str) -> str | None:
    """`url` with its user:password@ shown as ***@, or None when it carries none."""
    if not _USERINFO.match(url):
        return None
    return _USERINFO.sub(r"\1***@", url, count=1)


def http_url(text: str) -> str:
    """A Prometheus URL, as `serverAddress` and the scaler's URL flags take it: http:// or
    https:// and a host; without the trailing slash."""
    if not re.match(r"^https?://[^\s/:]+", text):
        raise ValueError("must be an http:// or https:// URL")
    return text.rstrip("/")


def parse_auth_modes(text: str) -> tuple[str, ...]:
    """`bearer,tls` (KEDA's authModes) as the modes, in order, each once."""
    modes = tuple(dict.fromkeys(m.strip() for m in text.split(",")))
    for mode in modes:
        if mode not in AUTH_MODES:
            raise ValueError(f"{quoting.echo(mode)!r} is not one of {', '.join(AUTH_MODES)}")
    if "bearer" in modes and "basic" in modes:
        raise ValueError("bearer and basic both set the Authorization header; pick one")
    return modes


def parse_headers(text: str) -> tuple[tuple[str, str], ...]:
    """`Name=value,Name2=value2` (KEDA's customHeaders) as (name, value) pairs; a header that
    would carry a credential is refused: credentials come from the scaler's files."""
    headers: list[tuple[str, str]] = []
    for item in text.split(","):
        name, sep, value = item.strip().partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not _HEADER_NAME_RE.match(name):
            raise ValueError(
                f"{quoting.echo(item.strip())!r} is not Name=value with a valid header name"
            )
        if not _HEADER_VALUE_RE.match(value):
            raise ValueError(f"the value of {name} must be printable ASCII, at most 256 characters")
        lowered = name.lower()
        if lowered in FORBIDDEN_HEADERS:
            raise ValueError(f"{name} is set by the HTTP client, not by metadata")
        if any(word in lowered for word in SECRET_HEADER_WORDS):
            raise ValueError(
                f"{name} looks like a credential, which must not sit in clear text in the "
                f"ScaledObject; use the scaler's --prometheus-custom-auth-header and "
                f"--prometheus-custom-auth-value-file (authModes: custom)"
            )
        headers.append((name, value))
    if len(headers) > MAX_HEADERS:
        raise ValueError(f"{len(headers)} headers; at most {MAX_HEADERS}")
    return tuple(headers)


def parse_namespace(text: str) -> str:
    """`namespace`: a Kubernetes namespace name, sent as the query's `namespace` parameter."""
    if len(text) > 63 or not _NAMESPACE_RE.match(text):
        raise ValueError("must be a Kubernetes namespace name (lowercase, digits, '-')")
    return text
