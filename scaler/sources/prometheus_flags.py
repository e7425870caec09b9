"""The Prometheus connection flags shared by `scaler serve` and `scaler backtest`: credentials
(files, never values), TLS, headers, timeout and retries; and the source they build.

Environment variables are read by cli.py's `env`, handed in here: no module but cli reads
the environment. Must not: hold a secret in a flag value (only paths to files).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from pathlib import Path

from scaler import switches
from scaler.decision import promkeys, ranges
from scaler.decision.promkeys import parse_headers
from scaler.errors import ConfigError
from scaler.settings import PrometheusAuth, PrometheusSettings
from scaler.sources.credentials import Credentials
from scaler.sources.prometheus import PrometheusSource
from scaler.sources.prometheus_transport import OnRequest

logger = logging.getLogger(__name__)

TIMEOUT = ranges.Range(1, 300, duration=True)
"""--prometheus-timeout: 0s failed every request; past 5 minutes a sick Prometheus holds a
request's thread (and a slot of its endpoint's bulkhead) for as long."""

Env = Callable[[str], str | None]


def add_flags(p: argparse.ArgumentParser, env: Env) -> None:
    g = p.add_argument_group(
        "Prometheus connection (docs/prometheus.md; secrets come from files, e.g. a mounted "
        "Secret, since KEDA passes no TriggerAuthentication to an external scaler)"
    )

    def path(flag: str, var: str, text: str) -> None:
        g.add_argument(
            flag, type=Path, default=env(var), metavar="FILE", help=f"{text} (env SCALER_{var})"
        )

    path(
        "--prometheus-token-file",
        "PROMETHEUS_TOKEN_FILE",
        "bearer token, read again when it changes",
    )
    g.add_argument(
        "--prometheus-username",
        default=env("PROMETHEUS_USERNAME"),
        help="basic auth user, with --prometheus-password-file (env SCALER_PROMETHEUS_USERNAME)",
    )
    path("--prometheus-password-file", "PROMETHEUS_PASSWORD_FILE", "basic auth password")
    g.add_argument(
        "--prometheus-custom-auth-header",
        default=env("PROMETHEUS_CUSTOM_AUTH_HEADER"),
        metavar="NAME",
        help="header of KEDA's `custom` auth mode, e.g. X-Api-Key "
        "(env SCALER_PROMETHEUS_CUSTOM_AUTH_HEADER)",
    )
    path(
        "--prometheus-custom-auth-value-file",
        "PROMETHEUS_CUSTOM_AUTH_VALUE_FILE",
        "value of that header",
    )
    path(
        "--prometheus-ca-file", "PROMETHEUS_CA_FILE", "CA bundle Prometheus' certificate chains to"
    )
    path("--prometheus-client-cert", "PROMETHEUS_CLIENT_CERT", "client certificate for mTLS")
    path("--prometheus-client-key", "PROMETHEUS_CLIENT_KEY", "its private key")
    switches.add(
        g,
        "--prometheus-insecure-skip-verify",
        env=env,
        name="PROMETHEUS_INSECURE_SKIP_VERIFY",
        help="do not verify Prometheus' certificate (KEDA's unsafeSsl); unsafe (env "
        "SCALER_PROMETHEUS_INSECURE_SKIP_VERIFY)",
    )
    # The plural names are their former ones (commands.ALIASES), read when the rule's is unset.
    headers = env("PROMETHEUS_HEADER") or env("PROMETHEUS_HEADERS")
    g.add_argument(
        "--prometheus-header",
        action="append",
        default=[headers] if headers else [],
        metavar="NAME=VALUE[,...]",
        help="non-secret header on every request, e.g. X-Scope-OrgID=team-a; repeatable "
        "(env SCALER_PROMETHEUS_HEADER, comma-separated)",
    )
    trusted = env("PROMETHEUS_TRUSTED_URL") or env("PROMETHEUS_TRUSTED_URLS") or ""
    g.add_argument(
        "--prometheus-trusted-url",
        action="append",
        default=[u.strip() for u in trusted.split(",") if u.strip()],
        metavar="URL",
        help="a serverAddress that may receive the credentials too (the default Prometheus "
        "always may, any other gets none); repeatable (env SCALER_PROMETHEUS_TRUSTED_URL, "
        "comma-separated)",
    )
    g.add_argument(
        "--prometheus-timeout",
        type=ranges.duration_flag(TIMEOUT, "a whole request, from connecting to its last byte"),
        metavar="1s-5m",
        default=env("PROMETHEUS_TIMEOUT") or "10s",
        help="a whole request, from connecting to its last byte: a Prometheus that answers "
        "slower, or trickles its answer, has failed it (env SCALER_PROMETHEUS_TIMEOUT; "
        "default %(default)s; serve also cuts each target's refresh at 30s)",
    )
    g.add_argument(
        "--prometheus-retries",
        type=ranges.flag(
            ranges.count_in(ranges.Range(0, 10)), "retries of a request that failed fast"
        ),
        metavar="0-10",
        default=env("PROMETHEUS_RETRIES") or str(PrometheusSettings.retries),
        help="retries of a request that failed fast (refused, 429/502/503/504), never of a "
        "timeout (env SCALER_PROMETHEUS_RETRIES; default %(default)s)",
    )


def auth_from(args: argparse.Namespace) -> PrometheusAuth:
    headers: list[tuple[str, str]] = []
    for text in args.prometheus_header:
        try:
            headers += parse_headers(text)
        except ValueError as e:
            raise ConfigError(f"--prometheus-header {text!r}: {e}") from None
    return PrometheusAuth(
        bearer_token_file=args.prometheus_token_file,
        username=args.prometheus_username,
        password_file=args.prometheus_password_file,
        custom_auth_header=args.prometheus_custom_auth_header,
        custom_auth_value_file=args.prometheus_custom_auth_value_file,
        ca_file=args.prometheus_ca_file,
        client_cert=args.prometheus_client_cert,
        client_key=args.prometheus_client_key,
        insecure_skip_verify=args.prometheus_insecure_skip_verify,
        headers=tuple(headers),
        trusted=tuple(args.prometheus_trusted_url),
    )


def source(
    settings: PrometheusSettings, url: str, *, on_request: OnRequest | None = None
) -> PrometheusSource:
    """A source on `url` with `settings`' credentials, trusted to the default and ledger URLs;
    ConfigError at once when a credential file cannot be read."""
    for flag, given in (
        ("--prometheus-url", settings.url),
        ("--ledger-prometheus-url", settings.ledger_url),
        *(("--prometheus-trusted-url", u) for u in settings.auth.trusted),
    ):
        if given is not None:
            check_url(given, flag)
    trusted = tuple(u for u in (settings.url, settings.ledger_url, url) if u)
    credentials = Credentials(settings.auth, trusted_urls=trusted)
    credentials.check()
    for origin in credentials.in_clear():
        logger.warning(
            "the scaler's Prometheus credentials go to %s in clear text, where anyone on the "
            "path can read them; give an https:// URL (with --prometheus-ca-file)",
            origin,
        )
    return PrometheusSource(
        url,
        timeout=settings.timeout,
        credentials=credentials,
        retries=settings.retries,
        backoff=settings.backoff,
        call_budget=settings.call_budget,
        on_request=on_request,
    )


def check_url(url: str, flag: str) -> None:
    """A Prometheus URL is http:// or https:// and a host, as a trigger's serverAddress must be:
    anything else would fail every query of every target, each naming it only in its error."""
    redacted = promkeys.without_credentials(url.strip())
    if redacted is not None:
        raise ConfigError(f"{flag} {redacted!r}: {promkeys.CREDENTIALS_IN_URL}")
    try:
        promkeys.http_url(url.strip())
    except ValueError:
        raise ConfigError(
            f"{flag} {url!r}: give an http:// or https:// URL of Prometheus, e.g. "
            "http://prometheus.monitoring:9090"
        ) from None
