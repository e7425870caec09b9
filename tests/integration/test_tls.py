"""TLS and mTLS with certificates generated here, over a real gRPC channel."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from scaler import cli, serve_flags
from scaler._pb import externalscaler_pb2_grpc as pb_grpc
from scaler.errors import ConfigError
from scaler.serving import certificates, certinfo
from scaler.serving.server import create_health_server, server_credentials
from scaler.settings import ServerSettings, TLSSettings
from scaler.sources.file import bundled_trace
from tests.integration.scaler_server import RunningScaler, fast_settings, ref


@dataclass(frozen=True)
class Pair:
    cert: bytes
    key: bytes


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _issue(
    name: str,
    *,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
    ca: bool,
    days: float = 1,
    starts: datetime.datetime | None = None,
    names: tuple[str, ...] = ("localhost", "127.0.0.1"),
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A certificate valid from 5 minutes ago (or from `starts`) for `days` from now
    (negative: expired); a leaf names `names` (DNS names and IP addresses)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer[0].subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(
            starts or min(now, now + datetime.timedelta(days=days)) - datetime.timedelta(minutes=5)
        )
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([_general_name(name) for name in names]),
            critical=False,
        )
    cert = builder.sign(issuer[1] if issuer else key, hashes.SHA256())
    return cert, key


def _general_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _pair(cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Pair:
    return Pair(cert.public_bytes(serialization.Encoding.PEM), _pem_key(key))


@dataclass(frozen=True)
class PKI:
    ca: bytes
    server: Pair
    client: Pair
    stranger: Pair
    """A client certificate from another CA."""
    paths: dict[str, Path]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    ca = _issue("test-ca", issuer=None, ca=True)
    other_ca = _issue("other-ca", issuer=None, ca=True)
    server = _pair(*_issue("scaler", issuer=ca, ca=False))
    client = _pair(*_issue("keda-operator", issuer=ca, ca=False))
    stranger = _pair(*_issue("keda-operator", issuer=other_ca, ca=False))
    ca_pem = ca[0].public_bytes(serialization.Encoding.PEM)
    folder = tmp_path_factory.mktemp("pki")
    paths = {"ca": folder / "ca.crt", "cert": folder / "tls.crt", "key": folder / "tls.key"}
    paths["ca"].write_bytes(ca_pem)
    paths["cert"].write_bytes(server.cert)
    paths["key"].write_bytes(server.key)
    return PKI(ca=ca_pem, server=server, client=client, stranger=stranger, paths=paths)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(pki: PKI, *, mtls: bool, health_port: int = -1) -> RunningScaler:
    tls = TLSSettings(
        cert=pki.paths["cert"],
        key=pki.paths["key"],
        client_ca=pki.paths["ca"] if mtls else None,
        require_client_cert=mtls,
    )
    return RunningScaler(fast_settings(f"file:{bundled_trace()}", tls=tls, health_port=health_port))


def _call(address: str, credentials: grpc.ChannelCredentials) -> int:
    with grpc.secure_channel(address, credentials) as channel:
        stub = pb_grpc.ExternalScalerStub(channel)
        return len(stub.GetMetricSpec(ref(), timeout=5).metricSpecs)


@pytest.fixture(scope="module")
def tls_server(pki: PKI) -> Iterator[RunningScaler]:
    with _serve(pki, mtls=False) as running:
        yield running


@pytest.fixture(scope="module")
def mtls_server(pki: PKI) -> Iterator[RunningScaler]:
    with _serve(pki, mtls=True) as running:
        yield running


def test_tls_server_answers_a_client_that_trusts_its_ca(
    tls_server: RunningScaler, pki: PKI
) -> None:
    assert _call(tls_server.address, grpc.ssl_channel_credentials(root_certificates=pki.ca)) == 1


def test_tls_server_refuses_plaintext_clients(tls_server: RunningScaler) -> None:
    with grpc.insecure_channel(tls_server.address) as channel:
        stub = pb_grpc.ExternalScalerStub(channel)
        with pytest.raises(grpc.RpcError) as err:
            stub.GetMetricSpec(ref(), timeout=3)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE


def test_mtls_server_answers_a_client_certificate_from_its_ca(
    mtls_server: RunningScaler, pki: PKI
) -> None:
    creds = grpc.ssl_channel_credentials(
        root_certificates=pki.ca, private_key=pki.client.key, certificate_chain=pki.client.cert
    )
    assert _call(mtls_server.address, creds) == 1


@pytest.mark.parametrize("who", ["no certificate", "certificate from another CA"])
def test_mtls_server_refuses_clients_it_cannot_verify(
    mtls_server: RunningScaler, pki: PKI, who: str
) -> None:
    if who == "no certificate":
        creds = grpc.ssl_channel_credentials(root_certificates=pki.ca)
    else:
        creds = grpc.ssl_channel_credentials(
            root_certificates=pki.ca,
            private_key=pki.stranger.key,
            certificate_chain=pki.stranger.cert,
        )
    with pytest.raises(grpc.RpcError) as err:
        _call(mtls_server.address, creds)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE


@pytest.fixture(scope="module")
def probed_mtls_server(pki: PKI) -> Iterator[tuple[RunningScaler, str]]:
    port = _free_port()
    with _serve(pki, mtls=True, health_port=port) as running:
        yield running, f"127.0.0.1:{port}"


def test_the_health_port_answers_kubelets_plaintext_grpc_probe_of_an_mtls_scaler(
    probed_mtls_server: tuple[RunningScaler, str],
) -> None:
    _, health_address = probed_mtls_server
    with grpc.insecure_channel(health_address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in ("", "externalscaler.ExternalScaler"):
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING, service


def test_the_health_port_does_not_open_the_external_scaler_to_plaintext(
    probed_mtls_server: tuple[RunningScaler, str],
) -> None:
    _, health_address = probed_mtls_server
    with grpc.insecure_channel(health_address) as channel, pytest.raises(grpc.RpcError) as err:
        stub = pb_grpc.ExternalScalerStub(channel)
        stub.GetMetricSpec(ref(), timeout=5)
    assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_a_health_port_in_use_is_a_config_error_naming_the_flag(
    probed_mtls_server: tuple[RunningScaler, str],
) -> None:
    _, health_address = probed_mtls_server
    taken = int(health_address.rpartition(":")[2])
    settings = ServerSettings(host="127.0.0.1", health_port=taken)
    with pytest.raises(ConfigError, match=r"--health-port"):
        asyncio.run(_bind_health(settings))


async def _bind_health(settings: ServerSettings) -> None:
    await create_health_server(settings, HealthServicer()).stop(0)


def test_unreadable_certificate_is_a_config_error_naming_the_file(pki: PKI, tmp_path: Path) -> None:
    missing = tmp_path / "absent.crt"
    with pytest.raises(ConfigError, match=r"absent\.crt"):
        server_credentials(TLSSettings(cert=missing, key=pki.paths["key"]))
    garbage = tmp_path / "garbage.crt"
    garbage.write_text("not a certificate")
    with pytest.raises(ConfigError, match="not a PEM file"):
        server_credentials(TLSSettings(cert=garbage, key=pki.paths["key"]))
    with pytest.raises(ConfigError, match=r"--tls-client-ca"):
        server_credentials(
            TLSSettings(cert=pki.paths["cert"], key=pki.paths["key"], require_client_cert=True)
        )


def test_a_key_that_is_not_the_certificates_or_a_broken_client_ca_is_refused_naming_them(
    pki: PKI, tmp_path: Path
) -> None:
    """grpcio reported either as a gRPC port it could not bind ("is it in use?")."""
    other_key = tmp_path / "other.key"
    other_key.write_bytes(pki.client.key)
    with pytest.raises(ConfigError, match=r"tls\.crt and key .*other\.key cannot be used together"):
        server_credentials(TLSSettings(cert=pki.paths["cert"], key=other_key))
    broken_ca = tmp_path / "ca.crt"
    broken_ca.write_text(
        "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n"
    )
    with pytest.raises(ConfigError, match=r"client CA .*ca\.crt cannot be loaded"):
        server_credentials(
            TLSSettings(
                cert=pki.paths["cert"],
                key=pki.paths["key"],
                client_ca=broken_ca,
                require_client_cert=True,
            )
        )


def test_a_renewed_certificate_is_presented_to_new_connections_and_a_half_written_one_is_not(
    pki: PKI, tmp_path: Path
) -> None:
    """cert-manager renews in place; credentials read once kept the old certificate until it
    expired. A renewal from another CA shows which certificate the server presents."""
    renewed_ca = _issue("renewed-ca", issuer=None, ca=True)
    renewed = _pair(*_issue("scaler", issuer=renewed_ca, ca=False))
    renewed_ca_pem = renewed_ca[0].public_bytes(serialization.Encoding.PEM)
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(pki.server.cert)
    key.write_bytes(pki.server.key)
    old_trust = grpc.ssl_channel_credentials(root_certificates=pki.ca)
    new_trust = grpc.ssl_channel_credentials(root_certificates=renewed_ca_pem)
    settings = fast_settings(f"file:{bundled_trace()}", tls=TLSSettings(cert=cert, key=key))
    with RunningScaler(settings) as running:
        assert _call(running.address, old_trust) == 1
        cert.write_bytes(renewed.cert)  # half-way: the new certificate, the old key
        assert _call(running.address, old_trust) == 1  # the files in use stay
        key.write_bytes(renewed.key)
        assert _call(running.address, new_trust) == 1
        with pytest.raises(grpc.RpcError):
            _call(running.address, old_trust)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--tls-client-ca", "ca.crt", "--tls-require-client-cert"], "would be plaintext"),
        (
            ["--tls-cert", "c.crt", "--tls-key", "c.key", "--tls-client-ca", "ca.crt"],
            "without --tls-require-client-cert: gRPC would accept",
        ),
    ],
)
def test_client_certificate_flags_that_would_verify_nothing_are_refused(
    flags: list[str], message: str
) -> None:
    args = cli.build_parser().parse_args(["serve", *flags])
    with pytest.raises(ConfigError, match=message):
        serve_flags.settings_from(args)


def _expiry_gauge(running: RunningScaler, cert: Path) -> float | None:
    assert running.engine is not None
    return running.engine.telemetry.registry.get_sample_value(
        "scaler_tls_certificate_expiry_timestamp_seconds", {"file": str(cert)}
    )


def test_an_expired_certificate_is_refused_at_start_up_and_as_a_renewal(
    pki: PKI, tmp_path: Path
) -> None:
    """An expired certificate failed every KEDA handshake while health said SERVING; its
    expiry is exported so an alert fires before that, and follows a renewal."""
    ca = _issue("ca", issuer=None, ca=True)
    ca_pem = ca[0].public_bytes(serialization.Encoding.PEM)
    expired = _pair(*_issue("scaler", issuer=ca, ca=False, days=-1))
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(expired.cert)
    key.write_bytes(expired.key)
    with pytest.raises(ConfigError, match=r"tls\.crt expired at 20\d\d-.* UTC.*renew it"):
        server_credentials(TLSSettings(cert=cert, key=key))

    first = _issue("scaler", issuer=ca, ca=False, days=2)
    renewed = _issue("scaler", issuer=ca, ca=False, days=30)
    cert.write_bytes(_pair(*first).cert)
    key.write_bytes(_pair(*first).key)
    trust = grpc.ssl_channel_credentials(root_certificates=ca_pem)
    settings = fast_settings(f"file:{bundled_trace()}", tls=TLSSettings(cert=cert, key=key))
    with RunningScaler(settings) as running:
        assert _expiry_gauge(running, cert) == first[0].not_valid_after_utc.timestamp()
        cert.write_bytes(expired.cert)
        key.write_bytes(expired.key)
        assert _call(running.address, trust) == 1  # the expired renewal is not presented
        assert _expiry_gauge(running, cert) == first[0].not_valid_after_utc.timestamp()
        cert.write_bytes(_pair(*renewed).cert)
        key.write_bytes(_pair(*renewed).key)
        assert _call(running.address, trust) == 1
        assert _expiry_gauge(running, cert) == renewed[0].not_valid_after_utc.timestamp()


@pytest.mark.parametrize(
    "form", [serialization.PrivateFormat.PKCS8, serialization.PrivateFormat.TraditionalOpenSSL]
)
def test_an_encrypted_key_is_refused_saying_so(
    pki: PKI, tmp_path: Path, form: serialization.PrivateFormat
) -> None:
    """OpenSSL asked for the passphrase on the terminal (`scaler serve` hung there), and
    without one the error said the certificate and key were not a pair."""
    key = serialization.load_pem_private_key(pki.server.key, password=None)
    encrypted = tmp_path / "tls.key"
    encrypted.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, form, serialization.BestAvailableEncryption(b"pw")
        )
    )
    with pytest.raises(ConfigError, match=r"tls\.key is encrypted .*`openssl pkey -in") as e:
        server_credentials(TLSSettings(cert=pki.paths["cert"], key=encrypted))
    assert "cannot be used together" not in str(e.value)


def test_a_certificate_not_valid_yet_is_refused_and_a_renewal_is_served_once_valid(
    pki: PKI, tmp_path: Path
) -> None:
    """A certificate from an issuer whose clock is ahead was served: every KEDA handshake
    failed ("certificate is not yet valid") while health said SERVING."""
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    later = _pair(
        *_issue("scaler", issuer=None, ca=False, starts=now + datetime.timedelta(hours=1))
    )
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(later.cert)
    key.write_bytes(later.key)
    with pytest.raises(ConfigError, match=r"tls\.crt is not valid before 20\d\d-.* UTC.*clock"):
        server_credentials(TLSSettings(cert=cert, key=key))

    renewed_ca = _issue("renewed-ca", issuer=None, ca=True)
    soon = now + datetime.timedelta(seconds=3)
    renewed = _pair(*_issue("scaler", issuer=renewed_ca, ca=False, starts=soon))
    old_trust = grpc.ssl_channel_credentials(root_certificates=pki.ca)
    new_trust = grpc.ssl_channel_credentials(
        root_certificates=renewed_ca[0].public_bytes(serialization.Encoding.PEM)
    )
    cert.write_bytes(pki.server.cert)
    key.write_bytes(pki.server.key)
    settings = fast_settings(f"file:{bundled_trace()}", tls=TLSSettings(cert=cert, key=key))
    with RunningScaler(settings) as running:
        cert.write_bytes(renewed.cert)
        key.write_bytes(renewed.key)
        assert _call(running.address, old_trust) == 1  # not valid yet: the old one stays
        time.sleep(max(0.0, soon.timestamp() - time.time()) + 0.5)
        assert _call(running.address, new_trust) == 1  # read again once valid
        with pytest.raises(grpc.RpcError):
            _call(running.address, old_trust)


def test_a_certificate_issued_seconds_ahead_of_this_clock_is_served_at_start_up_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """cert-manager issues the certificate as the pod starts; an issuer whose clock was a few
    seconds ahead of this node's made `scaler serve` exit ("not valid before") and restart. A
    start within certificates.CLOCK_SKEW is served, and KEDA's handshake works once it is
    valid; further ahead it is still refused (the test above)."""
    ca = _issue("issuer-ahead", issuer=None, ca=True)
    soon = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=3)
    ahead = _pair(*_issue("scaler", issuer=ca, ca=False, starts=soon))
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(ahead.cert)
    key.write_bytes(ahead.key)
    settings = fast_settings(f"file:{bundled_trace()}", tls=TLSSettings(cert=cert, key=key))
    with (
        caplog.at_level("WARNING", logger="scaler.serving.certificates"),
        RunningScaler(settings) as running,
    ):
        (warned,) = [m for m in caplog.messages if "not valid before" in m]
        assert f"TLS certificate {cert} is not valid before 20" in warned
        assert "served, as within the 300 s of clock skew tolerated" in warned
        time.sleep(max(0.0, soon.timestamp() - time.time()) + 0.5)
        trust = grpc.ssl_channel_credentials(
            root_certificates=ca[0].public_bytes(serialization.Encoding.PEM)
        )
        assert _call(running.address, trust) == 1


def test_start_up_says_what_is_presented_and_warns_when_it_does_not_name_the_dialled_host(
    pki: PKI, caplog: pytest.LogCaptureFixture
) -> None:
    """A certificate without the scalerAddress host failed every KEDA handshake, and only KEDA's
    log said so ("Hostname Verification Check failed"); the scaler logged "TLS" and no more."""
    tls = TLSSettings(
        cert=pki.paths["cert"],
        key=pki.paths["key"],
        client_ca=pki.paths["ca"],
        require_client_cert=True,
    )
    with caplog.at_level("INFO", logger="scaler.serving.certificates"):
        server_credentials(tls, address="localhost:9000")
    (told,) = caplog.messages
    assert "tls.crt names localhost, 127.0.0.1, issued by CN=test-ca, valid until 20" in told
    assert told.endswith(
        f"lets in only clients with a certificate from CN=test-ca ({tls.client_ca})"
    )
    caplog.clear()
    with caplog.at_level("INFO", logger="scaler.serving.certificates"):
        server_credentials(tls, address="predictive-scaler.keda.svc:9000")
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1
    assert "does not name predictive-scaler.keda.svc, the host of --scaler-address" in warned[0]
    assert "dnsNames" in warned[0]


def test_a_leaf_certificate_given_as_the_client_ca_is_warned_about_naming_the_file_and_the_fix(
    pki: PKI, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """KEDA's own tls.crt given as --tls-client-ca (for the ca.crt beside it) loads, and then
    every KEDA handshake is refused ("unable to get local issuer certificate") with nothing in
    the scaler's log to say why."""
    leaf = tmp_path / "keda-tls.crt"
    leaf.write_bytes(pki.client.cert)
    tls = TLSSettings(
        cert=pki.paths["cert"], key=pki.paths["key"], client_ca=leaf, require_client_cert=True
    )
    with caplog.at_level("WARNING", logger="scaler.serving.certificates"):
        server_credentials(tls)
    (warned,) = caplog.messages
    assert f"client CA {leaf} (--tls-client-ca) holds CN=keda-operator, which is not a CA" in warned
    assert "no basicConstraints CA:TRUE" in warned and "ca.crt of KEDA's client Secret" in warned
    caplog.clear()
    bundle = tmp_path / "bundle.crt"
    bundle.write_bytes(pki.ca + pki.client.cert)
    with caplog.at_level("WARNING", logger="scaler.serving.certificates"):
        for ca in (pki.paths["ca"], bundle):  # a CA, alone or with a leaf beside it, verifies
            server_credentials(replace(tls, client_ca=ca))
    assert [r.getMessage() for r in caplog.records if r.levelname != "INFO"] == []


@pytest.mark.parametrize(
    ("host", "covered"),
    [
        ("predictive-scaler.keda.svc", True),
        ("PREDICTIVE-SCALER.keda.svc.", True),
        ("x.keda.svc.cluster.local", True),  # the wildcard
        ("a.b.keda.svc.cluster.local", False),  # a wildcard stands for one label
        ("keda.svc.cluster.local", False),
        ("predictive-scaler", False),
        ("10.0.0.7", True),
        ("10.0.0.8", False),
    ],
)
def test_certificate_names_cover_a_host_as_tls_clients_check_it(host: str, covered: bool) -> None:
    names = ["predictive-scaler.keda.svc", "*.keda.svc.cluster.local", "10.0.0.7"]
    assert certinfo.covers(names, host) is covered


def test_the_expiry_gauge_follows_a_renewal_while_keda_keeps_its_connection(
    pki: PKI, tmp_path: Path
) -> None:
    """The gauge changed only when a new connection made gRPC read the files; KEDA holds one
    for days, so after a renewal the alert 7 days before the old expiry still fired."""
    ca, renewed_ca = _issue("ca", issuer=None, ca=True), _issue("ca2", issuer=None, ca=True)
    first = _issue("scaler", issuer=ca, ca=False, days=2)
    renewed = _issue("scaler", issuer=renewed_ca, ca=False, days=30)
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(_pair(*first).cert)
    key.write_bytes(_pair(*first).key)
    trust, new_trust = (
        grpc.ssl_channel_credentials(root_certificates=c.public_bytes(serialization.Encoding.PEM))
        for c, _ in (ca, renewed_ca)
    )
    settings = fast_settings(f"file:{bundled_trace()}", tls=TLSSettings(cert=cert, key=key))
    with RunningScaler(settings) as running, grpc.secure_channel(running.address, trust) as keda:
        stub = pb_grpc.ExternalScalerStub(keda)
        assert len(stub.GetMetricSpec(ref(), timeout=5).metricSpecs) == 1
        cert.write_bytes(_pair(*renewed).cert)
        key.write_bytes(_pair(*renewed).key)
        assert _expiry_gauge(running, cert) == renewed[0].not_valid_after_utc.timestamp()
        assert len(stub.GetMetricSpec(ref(), timeout=5).metricSpecs) == 1  # the same connection
        assert _call(running.address, new_trust) == 1  # and new connections get the renewal
        with pytest.raises(grpc.RpcError):
            _call(running.address, trust)


def _a_pair(cert: bytes, key: bytes) -> bool:
    """Whether the PEM certificate was issued for the PEM private key."""
    public = x509.load_pem_x509_certificate(cert).public_key()
    private = serialization.load_pem_private_key(key, password=None)
    der = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    return public.public_bytes(*der) == private.public_key().public_bytes(*der)


def test_a_renewal_between_reading_the_certificate_and_the_key_is_not_served_mixed(
    pki: PKI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ssl checked the files by path, after they were read: a renewal in between passed the
    check with the new pair while gRPC was handed the old certificate and the new key."""
    renewed = _pair(*_issue("scaler", issuer=_issue("ca", issuer=None, ca=True), ca=False))
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(pki.server.cert)
    key.write_bytes(pki.server.key)
    read = certificates._read

    def renewed_after_the_first_read(path: Path, what: str) -> bytes:
        data = read(path, what)
        if path == cert and cert.read_bytes() == pki.server.cert:
            cert.write_bytes(renewed.cert)
            key.write_bytes(renewed.key)
        return data

    monkeypatch.setattr(certificates, "_read", renewed_after_the_first_read)
    material = certificates.load(TLSSettings(cert=cert, key=key))
    assert _a_pair(material.cert, material.key)
    assert (material.cert, material.key) == (renewed.cert, renewed.key)


def test_a_renewal_while_the_server_starts_is_picked_up_by_the_next_connection(
    pki: PKI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The files' stamp was taken after they were read: a renewal in between was taken for
    the files in use, and never read until the next renewal."""
    renewed = _pair(*_issue("scaler", issuer=_issue("ca", issuer=None, ca=True), ca=False))
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(pki.server.cert)
    key.write_bytes(pki.server.key)
    load = certificates.load

    def renewed_once_read(tls: TLSSettings, *, skew: float = 0.0) -> certificates.Material:
        material = load(tls, skew=skew)
        cert.write_bytes(renewed.cert)
        key.write_bytes(renewed.key + b"\n")  # another size: a stamp that differs in any case
        return material

    monkeypatch.setattr(certificates, "load", renewed_once_read)
    files = certificates.Certificates(TLSSettings(cert=cert, key=key))
    monkeypatch.setattr(certificates, "load", load)
    assert files.material.cert == pki.server.cert
    assert files.fetch() is not None
    assert files.material.cert == renewed.cert
