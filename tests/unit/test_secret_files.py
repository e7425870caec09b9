"""The scaler's Prometheus secret files: read again when a Secret volume swaps them in, one line
each, and warned of when they would cross the network in clear text."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from scaler.errors import ConfigError
from scaler.settings import PrometheusAuth, PrometheusSettings
from scaler.sources import prometheus_flags
from scaler.sources.credentials import Credentials


def _generation(volume: Path, name: str, token: str, *, mtime_ns: int) -> None:
    folder = volume / name
    folder.mkdir()
    (folder / "token").write_text(token)
    os.utime(folder / "token", ns=(mtime_ns, mtime_ns))


def _swap(volume: Path, name: str) -> None:
    """As kubelet does: a new ..data symlink renamed over the old one."""
    (volume / "..data_tmp").symlink_to(name)
    os.replace(volume / "..data_tmp", volume / "..data")


def test_a_rotated_token_of_the_same_length_and_mtime_is_read_again(tmp_path: Path) -> None:
    """Tokens of one issuer are of one length, and a mount that keeps one mtime (or a copy
    that preserves it) made the swapped file look unchanged: the old token went on being sent
    until Prometheus refused it."""
    mtime = 1_700_000_000 * 10**9
    _generation(tmp_path, "..first", "token-aaaa", mtime_ns=mtime)
    _generation(tmp_path, "..second", "token-bbbb", mtime_ns=mtime)
    _swap(tmp_path, "..first")
    (tmp_path / "token").symlink_to("..data/token")
    credentials = Credentials(PrometheusAuth(bearer_token_file=tmp_path / "token"))
    assert credentials.secret_headers(("bearer",)) == {"Authorization": "Bearer token-aaaa"}
    _swap(tmp_path, "..second")
    assert credentials.secret_headers(("bearer",)) == {"Authorization": "Bearer token-bbbb"}


@pytest.mark.parametrize(
    "text", ["first-s3cret\nsecond-s3cret\n", "s3cret\r\nX-Evil: 1", "s3\tcret"]
)
def test_a_secret_of_two_lines_is_refused_without_quoting_it(tmp_path: Path, text: str) -> None:
    """requests refused the header with the token in its message, which the engine logged and
    answered KEDA with."""
    (tmp_path / "token").write_text(text)
    credentials = Credentials(PrometheusAuth(bearer_token_file=tmp_path / "token"))
    with pytest.raises(
        ConfigError, match=r"--prometheus-token-file .* a line break or another"
    ) as e:
        credentials.secret_headers(("bearer",))
    assert not any(part in str(e.value) for part in ("s3cret", "s3\tcret", "Evil"))


def _client_pair(folder: Path) -> Path:
    """A self-signed client certificate (returned) and its key, `key`, in `folder`."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "scaler")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    (folder / "key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    (folder / "cert").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return folder / "cert"


def test_credentials_for_a_plain_http_prometheus_are_warned_of_at_start_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A bearer token to an http:// Prometheus crosses the network readable, and nothing
    said so."""
    (tmp_path / "token").write_text("s3cret\n")
    token = PrometheusAuth(bearer_token_file=tmp_path / "token")
    cert_only = PrometheusAuth(client_cert=_client_pair(tmp_path), client_key=tmp_path / "key")
    for url, auth in (
        ("http://prometheus.monitoring:9090", token),
        ("https://prometheus.monitoring:9090", token),
        ("http://prometheus.monitoring:9090", cert_only),  # its key never leaves the scaler
        ("http://prometheus.monitoring:9090", PrometheusAuth()),
    ):
        settings = PrometheusSettings(url=url, auth=auth)
        prometheus_flags.source(settings, url).close()
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warned == [
        "the scaler's Prometheus credentials go to http://prometheus.monitoring:9090 in clear "
        "text, where anyone on the path can read them; give an https:// URL (with "
        "--prometheus-ca-file)"
    ]
