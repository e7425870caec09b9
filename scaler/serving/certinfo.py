"""What a certificate says, read with `cryptography`: when it is valid, the names a TLS client
checks the host it dialled against, whether it is a CA; and the words for them in a log line.

The one home of `cryptography`. Must not: read files or decide what to serve
(certificates.py does).
"""

from __future__ import annotations

import datetime
from pathlib import Path

from cryptography import x509

from scaler.errors import ConfigError


def first(pem: bytes) -> x509.Certificate:
    """The first certificate of a PEM chain (the server's own), already checked by `validity`."""
    return x509.load_pem_x509_certificates(pem)[0]


def validity(cert: bytes, path: Path) -> tuple[float, float]:
    """The start and end of the validity of the first certificate in the PEM `cert` (the
    server's own; its chain follows it), epoch seconds."""
    try:
        leaf = first(cert)
    except ValueError as exc:
        raise ConfigError(
            f"TLS certificate {path} cannot be parsed ({exc}); give a PEM certificate chain"
        ) from None
    return leaf.not_valid_before_utc.timestamp(), leaf.not_valid_after_utc.timestamp()


def subject_names(cert: x509.Certificate) -> list[str]:
    """The DNS names and IP addresses of `cert`'s subjectAltName, which TLS clients (KEDA's
    Go client among them) check the host they dialled against; the common name is not."""
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    ips = [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]
    return [*san.get_values_for_type(x509.DNSName), *ips]


def covers(names: list[str], host: str) -> bool:
    """Whether a certificate with `names` is valid for `host`, as Go's crypto/x509 decides: an
    exact name, or a wildcard standing for the host's first label."""
    host = host.lower().rstrip(".")
    for name in (n.lower().rstrip(".") for n in names):
        if name == host:
            return True
        if name.startswith("*.") and "." in host and host.split(".", 1)[1] == name[2:]:
            return True
    return False


def only_leaves(pem: bytes | None) -> list[str]:
    """The subjects of the certificates in a CA bundle when none of them is a CA (no
    basicConstraints CA:TRUE): a leaf given where a CA is wanted, which verifies no client.
    Empty when one is a CA, or when it cannot be parsed (Python's ssl has read it already, and
    OpenSSL reads more than cryptography parses)."""
    cas = _bundle(pem) or []
    if any(is_authority(c) for c in cas):
        return []
    return [c.subject.rfc4514_string() for c in cas]


def is_authority(cert: x509.Certificate) -> bool:
    try:
        return bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False


def subjects(pem: bytes | None) -> str:
    """The subjects of the certificates in a CA bundle (Python's ssl has read it already)."""
    cas = _bundle(pem)
    if cas is None:  # say less, never fail
        return "its CA bundle"
    return "; ".join(ca.subject.rfc4514_string() for ca in cas)


def _bundle(pem: bytes | None) -> list[x509.Certificate] | None:
    """The certificates of a CA bundle; None when there is none or cryptography cannot parse
    it (OpenSSL, which Python's ssl has read it with already, reads more than cryptography)."""
    try:
        return x509.load_pem_x509_certificates(pem or b"")
    except ValueError:
        return None


def host_of(address: str) -> str:
    """The host of HOST:PORT, without the brackets of an IPv6 address."""
    return address.rpartition(":")[0].strip("[]")


def utc(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
