"""A 401 or 403 from a trigger's serverAddress that is not trusted with the scaler's
credentials says that none were sent, and why, instead of pointing at the credentials: the
scaler withheld them on purpose (sources/credentials.py), so checking them would not help.
And a trusted Prometheus that redirects elsewhere does not pass the credentials on."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from scaler.decision import spec
from scaler.errors import ConfigError, SourceUnavailable
from scaler.settings import PrometheusAuth
from scaler.sources.credentials import Credentials
from scaler.sources.prometheus import PrometheusSource

DEFAULT = "http://prometheus.monitoring:9090"


class _Json(http.server.BaseHTTPRequestHandler):
    def reply(self, status: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Refuses(_Json):
    def do_GET(self) -> None:
        self.reply(401, {"status": "error", "error": "unauthorized"})


@pytest.fixture
def refusing() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refuses)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def refusal(source: PrometheusSource, server_address: str) -> str:
    target = spec.parse(
        "gpu", "llm", {"query": "up", "threshold": "1", "serverAddress": server_address}
    )
    with pytest.raises(SourceUnavailable) as refused:
        source.latest(target, at=1.7e9)
    return str(refused.value)


def test_a_refusal_by_an_untrusted_server_address_says_no_credentials_were_sent(
    refusing: str, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret")
    auth = PrometheusAuth(bearer_token_file=token)
    source = PrometheusSource(DEFAULT, credentials=Credentials(auth, trusted_urls=(DEFAULT,)))
    message = refusal(source, refusing)
    assert message.endswith(
        f"HTTP 401 for gpu/llm: unauthorized; no credentials were sent: serverAddress "
        f"{refusing} is not --prometheus-url ({DEFAULT}); add --prometheus-trusted-url "
        f"{refusing} if it is the same server"
    )
    assert "check the scaler's Prometheus credentials" not in message


def test_without_any_credentials_the_refusal_asks_for_them_too(refusing: str) -> None:
    source = PrometheusSource(DEFAULT)
    assert refusal(source, refusing).endswith(
        f"add --prometheus-trusted-url {refusing} if it is the same server, and give the "
        "scaler credentials (--prometheus-token-file, --prometheus-username/"
        "--prometheus-password-file or --prometheus-client-cert)"
    )


def test_a_refusal_by_a_trusted_server_points_at_the_credentials(refusing: str) -> None:
    source = PrometheusSource(DEFAULT, credentials=Credentials(PrometheusAuth(), trusted_urls=()))
    trusted = PrometheusSource(
        DEFAULT,
        credentials=Credentials(PrometheusAuth(trusted=(refusing,)), trusted_urls=(DEFAULT,)),
    )
    assert "no credentials were sent" in refusal(source, refusing)
    assert refusal(trusted, refusing).endswith(
        "unauthorized; check the scaler's Prometheus credentials (--prometheus-token-file, "
        "--prometheus-username/--prometheus-password-file, --prometheus-client-cert) and the "
        "target's authModes"
    )


class _Answers(_Json):
    """A server that answers every query with load 3 and keeps the headers it was sent."""

    seen: list[dict[str, str]]

    def do_GET(self) -> None:
        self.seen.append(dict(self.headers))
        result = [{"metric": {}, "value": [1.7e9, "3"]}]
        self.reply(200, {"status": "success", "data": {"resultType": "vector", "result": result}})


class _Echoes(_Json):
    """A gateway that quotes the credential it rejects in its answer."""

    def do_GET(self) -> None:
        sent = self.headers.get("Authorization") or self.headers.get("X-Api-Key")
        self.reply(401, {"status": "error", "error": f"invalid credential {sent!r}"})


def _serve(handler: type[http.server.BaseHTTPRequestHandler]) -> http.server.HTTPServer:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


each_secret = pytest.mark.parametrize(
    "auth",
    [
        {"bearer_token_file": "secret"},
        {"username": "scaler", "password_file": "secret"},
        {"custom_auth_header": "X-Api-Key", "custom_auth_value_file": "secret"},
    ],
    ids=["bearer", "basic", "custom"],
)
"""The credentials sent as a header, their file `secret` holding "s3cret"."""


def _trusting(url: str, auth: dict[str, str], folder: Path) -> PrometheusSource:
    """A source whose default (trusted) Prometheus is `url`, with the credentials `auth`."""
    (folder / "secret").write_text("s3cret\n")
    files = {k: folder / v if k.endswith("_file") else v for k, v in auth.items()}
    return PrometheusSource(
        url, credentials=Credentials(PrometheusAuth(**files), trusted_urls=(url,))
    )


@each_secret
def test_a_trusted_prometheus_redirecting_elsewhere_does_not_pass_the_credentials_on(
    auth: dict[str, str], tmp_path: Path
) -> None:
    seen: list[dict[str, str]] = []
    stranger = _serve(type("Stranger", (_Answers,), {"seen": seen}))
    elsewhere = f"http://localhost:{stranger.server_address[1]}"

    class Redirects(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(302)
            self.send_header("Location", elsewhere + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()

    trusted = _serve(Redirects)
    source = _trusting(f"http://127.0.0.1:{trusted.server_address[1]}", auth, tmp_path)
    target = spec.parse("gpu", "llm", {"query": "up", "threshold": "1"})
    try:
        source.latest(target, at=1.7e9)
    finally:
        for server in (trusted, stranger):
            server.shutdown()
            server.server_close()
    assert len(seen) == 1
    assert not {"Authorization", "X-Api-Key"} & set(seen[0]), seen[0]


@each_secret
def test_a_server_echoing_the_rejected_credential_does_not_get_it_quoted(
    auth: dict[str, str], tmp_path: Path
) -> None:
    """The error reaches KEDA's log and the ScaledObject's status, which its owner reads."""
    echoing = _serve(_Echoes)
    url = f"http://127.0.0.1:{echoing.server_address[1]}"
    try:
        message = refusal(_trusting(url, auth, tmp_path), url)
    finally:
        echoing.shutdown()
        echoing.server_close()
    assert "invalid credential '" in message
    assert "s3cret" not in message
    assert "czNjcmV0" not in message  # "s3cret" in base64, as a basic pair's end
    assert "c2NhbGVyOnMzY3JldA" not in message  # "scaler:s3cret"


def test_a_target_cannot_turn_off_verifying_a_prometheus_that_gets_the_credentials(
    tmp_path: Path,
) -> None:
    """prometheusUnsafeSsl is a ScaledObject author's key; the token is the scaler's, shared by
    every target: it went unverified to whoever answered for the trusted URL."""
    (tmp_path / "token").write_text("s3cret\n")
    auth = PrometheusAuth(bearer_token_file=tmp_path / "token")
    trusted = "https://prometheus.monitoring:9090"
    credentials = Credentials(auth, trusted_urls=(trusted,))
    unsafe = spec.parse(
        "gpu", "llm", {"query": "up", "threshold": "1", "prometheusUnsafeSsl": "true"}
    )
    with pytest.raises(
        ConfigError, match=r"gpu/llm: prometheusUnsafeSsl would send .*--prometheus-ca-file"
    ):
        credentials.connection(unsafe, trusted)
    # Allowed where no secret goes: a URL not trusted with them, or a scaler without any.
    assert credentials.connection(unsafe, "https://elsewhere:9090").verify is False
    assert (
        Credentials(PrometheusAuth(), trusted_urls=(trusted,)).connection(unsafe, trusted).verify
        is False
    )
    # And where the operator skips verification for every target anyway.
    skipping = PrometheusAuth(bearer_token_file=tmp_path / "token", insecure_skip_verify=True)
    assert Credentials(skipping, trusted_urls=(trusted,)).connection(unsafe, trusted).modes == (
        "bearer",
    )
