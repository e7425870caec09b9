"""What a request to Prometheus carries: credentials from the scaler's own files, TLS options,
custom headers and the tenant `namespace` parameter.

Owns: which Prometheus URLs may receive the scaler's credentials (the default and ledger URLs
and `PrometheusAuth.trusted`, compared by origin; a redirect elsewhere is sent none), the
header each KEDA authMode adds, read from its file and read again when the file changes (a
rotated token is used on the next request), and the check that a target's `authModes` are
ones the scaler can serve, and that its `prometheusUnsafeSsl` does not expose them.
Must not: import requests (sources/prometheus_transport.py sends them), put a secret into a
message or a log line (`redact` takes the scaler's own out of a server's answer that echoes
one), or take a secret from trigger metadata (spec.py refuses them).
"""

from __future__ import annotations

import base64
import os
import re
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from scaler.decision.spec import TargetSpec
from scaler.errors import ConfigError
from scaler.settings import PrometheusAuth

MAX_SECRET_BYTES = 16 * 1024
"""Largest secret file read: a service-account JWT is about 1 KiB."""

FLAGS = {
    "bearer": "--prometheus-token-file",
    "basic": "--prometheus-username and --prometheus-password-file",
    "custom": "--prometheus-custom-auth-header and --prometheus-custom-auth-value-file",
    "tls": "--prometheus-client-cert and --prometheus-client-key",
}
"""The scaler flags that give each KEDA authMode its credentials."""

DEFAULT_PORTS = {"http": 80, "https": 443}

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
"""Characters no header value (nor a password) holds: a file of two lines, say."""

MIN_REDACTED = 4
"""Shortest secret hidden from quoted answers: a shorter one would blank out common letters."""


@dataclass(frozen=True)
class Connection:
    """Everything one request to one Prometheus carries but its query; hashable, so that
    targets with the same options share an HTTP client."""

    url: str
    verify: bool | str
    """True, False (no verification: unsafe), or the path of a CA bundle."""
    cert: tuple[str, str] | None
    """Client certificate and key files (mTLS), only to a trusted URL."""
    headers: tuple[tuple[str, str], ...]
    """Non-secret headers (customHeaders, --prometheus-header)."""
    params: tuple[tuple[str, str], ...]
    """Extra query-string parameters (`namespace` for Thanos / prom-label-proxy)."""
    modes: tuple[str, ...]
    """The authModes whose credentials this request carries (none to an untrusted URL)."""


def origin(url: str) -> str:
    """`scheme://host:port` of a URL, lowercased with its default port spelt out."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    try:
        port = parts.port or DEFAULT_PORTS.get(scheme, 0)
    except ValueError:
        port = 0
    return f"{scheme}://{(parts.hostname or '').lower()}:{port}"


class SecretFile:
    """A secret read from a file, again whenever the file is replaced (another inode: a
    Secret volume's symlink swap, a rename) or its size or mtime changes; thread-safe. Errors
    name the file and the flag, never the secret."""

    def __init__(self, path: Path, flag: str) -> None:
        self.path, self.flag = path, flag
        self._stamp: tuple[int, int, int] | None = None
        self._value = ""
        self._lock = threading.Lock()

    def read(self) -> str:
        with self._lock:
            try:
                info = os.stat(self.path)
                # The inode too: a rotated token is often of the same length, and a mount
                # that keeps one mtime (or a copy that preserves it) hid the new one.
                stamp = (info.st_ino, info.st_mtime_ns, info.st_size)
                if stamp != self._stamp:
                    if info.st_size > MAX_SECRET_BYTES:
                        raise ConfigError(
                            f"{self.flag} {self.path} holds {info.st_size} bytes, more than a "
                            f"secret ({MAX_SECRET_BYTES}); point it at the token/password file"
                        )
                    self._value = self.path.read_text(encoding="utf-8").strip()
                    self._stamp = stamp
            except (OSError, UnicodeDecodeError) as e:
                why = e.strerror if isinstance(e, OSError) else "not UTF-8 text"
                raise ConfigError(
                    f"cannot read {self.flag} {self.path} ({why}); mount the Secret there or "
                    f"fix the path"
                ) from None
            if not self._value:
                raise ConfigError(f"{self.flag} {self.path} is empty; put the secret in it")
            if _CONTROL.search(self._value):
                # requests refuses such a header with the value in its message, which went
                # to the log and to KEDA: say what is wrong without it
                raise ConfigError(
                    f"{self.flag} {self.path} holds a line break or another control character "
                    "inside the secret; put the secret alone on one line (a final newline is fine)"
                )
            return self._value

    @property
    def last(self) -> str:
        """The secret last read ("" before the first read), without reading the file."""
        return self._value


class Credentials:
    """The scaler's Prometheus credentials and the URLs trusted with them."""

    def __init__(self, auth: PrometheusAuth, *, trusted_urls: tuple[str, ...] = ()) -> None:
        if auth.bearer_token_file is not None and auth.username is not None:
            raise ConfigError(
                "--prometheus-token-file and --prometheus-username both set an Authorization "
                "header; give one of them"
            )
        _pair(
            auth.username, auth.password_file, "--prometheus-username", "--prometheus-password-file"
        )
        _pair(
            auth.custom_auth_header,
            auth.custom_auth_value_file,
            "--prometheus-custom-auth-header",
            "--prometheus-custom-auth-value-file",
        )
        _pair(
            auth.client_cert, auth.client_key, "--prometheus-client-cert", "--prometheus-client-key"
        )
        self.auth = auth
        self._trusted = frozenset(origin(u) for u in (*trusted_urls, *auth.trusted) if u)
        self._files = {
            mode: SecretFile(path, flag)
            for mode, path, flag in (
                ("bearer", auth.bearer_token_file, "--prometheus-token-file"),
                ("basic", auth.password_file, "--prometheus-password-file"),
                ("custom", auth.custom_auth_value_file, "--prometheus-custom-auth-value-file"),
            )
            if path is not None
        }

    def check(self) -> None:
        """Read every secret and certificate file once: a bad path fails at start-up."""
        for secret in self._files.values():
            secret.read()
        for path, flag in (
            (self.auth.ca_file, "--prometheus-ca-file"),
            (self.auth.client_cert, "--prometheus-client-cert"),
            (self.auth.client_key, "--prometheus-client-key"),
        ):
            if path is not None and not os.access(path, os.R_OK):
                raise ConfigError(f"cannot read {flag} {path}; mount it there or fix the path")
        _check_tls_files(self.auth)

    def in_clear(self) -> list[str]:
        """The http:// origins trusted with a token, password or custom header: anyone on the
        path reads them there (a client certificate's key never leaves the scaler)."""
        if not set(self._files) & {"bearer", "basic", "custom"}:
            return []
        return sorted(o for o in self._trusted if o.startswith("http://"))

    def trusts(self, url: str) -> bool:
        return origin(url) in self._trusted

    def connection(self, spec: TargetSpec, url: str) -> Connection:
        """The options of `spec`'s requests to `url`; ConfigError when its authModes cannot be
        served (a mode the scaler has no credentials for, or a URL not trusted with them)."""
        configured = self.auth.modes
        missing = [mode for mode in spec.auth_modes if mode not in configured]
        if missing:
            raise ConfigError(
                f"{spec.label}: authModes asks for {missing[0]}, which this scaler has no "
                f"credentials for; set {FLAGS[missing[0]]} on the scaler (files from a mounted "
                f"Secret: KEDA does not pass a TriggerAuthentication to an external scaler)"
            )
        trusted = self.trusts(url)
        if spec.auth_modes and not trusted:
            raise ConfigError(
                f"{spec.label}: serverAddress {url} is not trusted with the scaler's "
                f"credentials; add it to --prometheus-trusted-url, or drop authModes"
            )
        modes = (spec.auth_modes or configured) if trusted else ()
        secrets = [mode for mode in modes if mode != "tls"]  # a client key never leaves
        unverified = spec.prometheus_unsafe_ssl and not self.auth.insecure_skip_verify
        if unverified and secrets and url.lower().startswith("https://"):
            raise ConfigError(
                f"{spec.label}: prometheusUnsafeSsl would send the scaler's Prometheus "
                f"credentials to {url} without verifying its certificate, so anyone on the path "
                "could take them; give the scaler --prometheus-ca-file (the CA of Prometheus' "
                "certificate), or drop prometheusUnsafeSsl (an operator who accepts the risk "
                "for every target sets --prometheus-insecure-skip-verify)"
            )
        if self.auth.insecure_skip_verify or spec.prometheus_unsafe_ssl:
            verify: bool | str = False
        else:
            verify = str(self.auth.ca_file) if self.auth.ca_file is not None else True
        cert = None
        if "tls" in modes and self.auth.client_cert and self.auth.client_key:
            cert = (str(self.auth.client_cert), str(self.auth.client_key))
        params = (("namespace", spec.query_namespace),) if spec.query_namespace else ()
        return Connection(
            url=url,
            verify=verify,
            cert=cert,
            headers=(*self.auth.headers, *spec.custom_headers),
            params=params,
            modes=modes,
        )

    def secret_header_names(self) -> tuple[str, ...]:
        """The names of every header that can carry one of the scaler's credentials."""
        custom = self.auth.custom_auth_header
        return ("Authorization", custom) if custom else ("Authorization",)

    def redact(self, text: str) -> str:
        """`text` (a server's answer quoted in an error) with each secret last read, and the
        basic auth pair as sent, shown as ***: a server that echoes a rejected header put the
        scaler's token into the error KEDA logs and the target's owner reads."""
        secrets = [secret.last for secret in self._files.values()]
        basic = self._files.get("basic")
        if basic is not None and basic.last:
            pair = f"{self.auth.username}:{basic.last}".encode()
            secrets.append(base64.b64encode(pair).decode())
        for secret in secrets:
            if len(secret) >= MIN_REDACTED:
                text = text.replace(secret, "***")
        return text

    def secret_headers(self, modes: tuple[str, ...]) -> dict[str, str]:
        """The headers carrying the credentials of `modes`, read from their files now."""
        headers: dict[str, str] = {}
        if "bearer" in modes:
            headers["Authorization"] = f"Bearer {self._files['bearer'].read()}"
        if "basic" in modes:
            pair = f"{self.auth.username}:{self._files['basic'].read()}".encode()
            headers["Authorization"] = f"Basic {base64.b64encode(pair).decode()}"
        if "custom" in modes and self.auth.custom_auth_header:
            headers[self.auth.custom_auth_header] = self._files["custom"].read()
        return headers


def _check_tls_files(auth: PrometheusAuth) -> None:
    """Parse the CA bundle and the client certificate and key as requests will, so that a file
    that is not PEM, or a key that does not match its certificate, fails at start-up, naming
    the flag, instead of failing every query with an SSL error."""
    if auth.ca_file is not None:
        try:
            ssl.create_default_context(cafile=str(auth.ca_file))
        except (ssl.SSLError, ValueError) as e:
            raise ConfigError(
                f"--prometheus-ca-file {auth.ca_file} holds no usable PEM certificate "
                f"({_reason(e)}); give the CA bundle that signed Prometheus' certificate"
            ) from None
    if auth.client_cert is not None and auth.client_key is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        try:  # an encrypted key gets an empty passphrase: requests cannot prompt for one
            context.load_cert_chain(str(auth.client_cert), str(auth.client_key), password=b"")
        except (ssl.SSLError, ValueError) as e:
            raise ConfigError(
                f"--prometheus-client-cert {auth.client_cert} and --prometheus-client-key "
                f"{auth.client_key} are not a PEM certificate and its unencrypted private key "
                f"({_reason(e)}); give the pair Prometheus' client CA signed"
            ) from None


def _reason(error: Exception) -> str:
    """OpenSSL's reason for a failed load (e.g. NO_CERTIFICATE_OR_CRL_FOUND), else the text."""
    return str(getattr(error, "reason", None) or error)


def _pair(first: object, second: object, first_flag: str, second_flag: str) -> None:
    if (first is None) != (second is None):
        given, other = (first_flag, second_flag) if first is not None else (second_flag, first_flag)
        raise ConfigError(f"{given} is set but {other} is not; give both")
