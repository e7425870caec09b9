"""The gRPC server's TLS files: read and checked at start-up, and read again when they change.

cert-manager renews a certificate in place, in the mounted Secret (Kubernetes swaps the files'
symlink). Credentials built once (`grpc.ssl_server_credentials`) kept presenting the old
certificate until it expired and every KEDA handshake failed, while health said SERVING. Here
gRPC asks `Certificates` on each new connection; it stats the files, and only when one changed
reads and checks them again. A renewal caught half-written (a key that does not match its
certificate yet) keeps the files in use, logged once, and is read again on a later connection.

A renewal swaps the files between two reads as easily as between two connections: the
certificate read before the swap and the key after it make no pair, and Python's ssl, which
reads the files again by path, would check the new pair, not the bytes handed to gRPC. So the
bytes are read again after the check, and used only when every file still holds them; and a
file's stamp is taken before it is read, so that a swap during the read is seen as a change.

Checked with Python's ssl: a certificate and key that do not make a pair, or a client CA that is
not a certificate, are refused at start-up naming the files (grpcio reported either as a gRPC
port it could not bind). An encrypted key is refused saying so (gRPC takes no passphrase), and
never prompts for one: OpenSSL asked on the terminal, so `scaler serve` hung there, and in a pod
the error blamed the pair. An expired certificate is refused too (at start-up, and as a renewal):
every KEDA handshake would fail while health said SERVING; so is one not valid yet (a clock
behind the issuer's), which as a renewal is read again once it is valid (the one in use serves
until then). At start-up, with nothing else to serve, a certificate whose validity starts
within CLOCK_SKEW of now is served, with a warning: a certificate issued seconds ago by an
issuer whose clock is a little ahead made the pod exit and restart. The expiry of the
certificate new connections get is exported (`scaler_tls_certificate_expiry_timestamp_seconds`)
for an alert well before then; a scrape reads the files again too, as KEDA may hold its one
connection for days.

At start-up and on each renewal it logs what it presents (the names, the issuer, the end of
validity) and whom it lets in (any client, or those with a certificate from the client CA's
subjects), and warns when the client CA holds no CA, only a leaf (such as KEDA's own tls.crt,
given for its issuer's ca.crt): every KEDA handshake would be refused. Given
the address KEDA dials (--scaler-address), a certificate whose names do not cover its host is
a warning: KEDA checks that host against them and refuses the handshake, which the scaler
never sees ("Hostname Verification Check failed" is only in KEDA's log). What a certificate
says (names, validity, CA or not) is read in certinfo.py.

Must not: decide who may connect (grpcio verifies clients against the client CA).
"""

from __future__ import annotations

import logging
import math
import os
import re
import ssl
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import grpc

from scaler.errors import ConfigError
from scaler.serving import certinfo
from scaler.settings import TLSSettings

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Material:
    """The PEM bytes of one consistent set of files."""

    cert: bytes
    key: bytes
    ca: bytes | None
    expires: float
    """When the server's certificate (the chain's first) stops being valid, epoch seconds."""
    starts: float = 0.0
    """When it starts being valid, epoch seconds."""

    def configuration(self) -> grpc.ServerCertificateConfiguration:
        return grpc.ssl_server_certificate_configuration(
            [(self.key, self.cert)], root_certificates=self.ca
        )


class NotYetValid(ConfigError):
    """A certificate whose validity starts at `starts` (epoch seconds), after now."""

    def __init__(self, message: str, *, starts: float) -> None:
        super().__init__(message)
        self.starts = starts


CLOCK_SKEW = 300.0
"""Seconds a certificate's validity may start after now and still be served at start-up: the
clocks of an issuer and of this node differ by that much at most when both keep NTP time, and
Kubernetes' own signer backdates certificates 5 minutes for the same reason."""

Stamp = tuple[tuple[int, int, int], ...]
"""(inode, size, mtime in ns) of each file: what changes when a file is replaced or written."""


class Certificates:
    """The TLS files of `tls` (with a certificate: TLSSettings.enabled), checked (ConfigError
    naming the file and the fix), and the gRPC server credentials that read them again when
    they change."""

    def __init__(self, tls: TLSSettings, *, address: str | None = None) -> None:
        tls.check()
        self.tls = tls
        self.address = address
        """HOST:PORT that KEDA dials (--scaler-address), whose host the names must cover."""
        self._paths = [p for p in (tls.cert, tls.key, tls.client_ca) if p is not None]
        self._lock = threading.Lock()
        try:  # before the read: a renewal during it is read again on the next connection
            stamp = self._stamps()
        except OSError:
            stamp = ()  # a missing file: `load` names it
        self.material = load(tls, skew=CLOCK_SKEW)  # its errors name the file and the fix
        self._stamp: Stamp = stamp
        self._refused: Stamp | None = None
        self._retry_at = math.inf
        """When files refused as not valid yet are read again (epoch seconds)."""
        self._given = self.material
        """The material gRPC was last handed."""
        self._tell("serving TLS")
        if self.material.starts > time.time():
            logger.warning(
                "TLS certificate %s is not valid before %s, %.0f s from now by this clock: "
                "served, as within the %.0f s of clock skew tolerated (an issuer's clock a little "
                "ahead of this node's); a client whose clock agrees with this node's refuses "
                "the handshake until then, so check the clocks (NTP) if this recurs",
                tls.cert,
                certinfo.utc(self.material.starts),
                self.material.starts - time.time(),
                CLOCK_SKEW,
            )

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.dynamic_ssl_server_credentials(
            self.material.configuration(),
            self.fetch,  # type: ignore[arg-type]  # grpc's docs: None keeps the current one
            require_client_authentication=self.tls.require_client_cert,
        )

    def fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """gRPC's fetcher, called on each new connection from its own threads: the new
        configuration when the files changed and check out, else None (keep the one in use).
        Never raises: a fetcher's exception would fail the handshake."""
        try:
            with self._lock:
                self._refresh()
                if self.material is self._given:
                    return None
                self._given = self.material
                return self.material.configuration()
        except Exception:  # a bug here must cost a renewal, not every connection
            logger.exception("TLS files: re-reading them failed; the ones in use stay")
            return None

    def expires(self) -> float:
        """When the certificate new connections get stops being valid (epoch seconds): the
        files are read again for it too. KEDA holds one connection for days, so a gauge that
        waited for the next one kept the renewed certificate's predecessor, and the expiry
        alert fired over a renewal that had worked. Never raises (a scrape calls it)."""
        try:
            with self._lock:
                self._refresh()
        except Exception:
            logger.exception("TLS files: re-reading them failed; the ones in use stay")
        return self.material.expires

    def _refresh(self) -> None:
        """`material` := the files, when they changed and check out."""
        try:
            stamp = self._stamps()
        except OSError:
            return  # mid-swap: a file is briefly missing
        if stamp == self._stamp or (stamp == self._refused and time.time() < self._retry_at):
            return
        try:
            material = load(self.tls)
        except ConfigError as exc:
            if stamp != self._refused:
                logger.warning(
                    "TLS files changed but do not check out, the ones in use stay: %s", exc
                )
            self._refused = stamp
            self._retry_at = exc.starts if isinstance(exc, NotYetValid) else math.inf
            return
        self._stamp, self._refused = stamp, None
        if material != self.material:
            self.material = material
            self._tell("TLS files changed, new connections get the renewed certificate")

    def _tell(self, event: str) -> None:
        """Log what the server presents and whom it lets in; warn when the certificate's names
        do not cover the host KEDA dials."""
        leaf = certinfo.first(self.material.cert)
        names = certinfo.subject_names(leaf)
        clients = "any client (no client certificate asked)"
        if self.tls.client_ca is not None:
            clients = f"only clients with a certificate from {certinfo.subjects(self.material.ca)}"
            clients += f" ({self.tls.client_ca})"
        logger.info(
            "%s: %s names %s, issued by %s, valid until %s; lets in %s",
            event,
            self.tls.cert,
            ", ".join(names) or "nothing (no subjectAltName)",
            leaf.issuer.rfc4514_string(),
            certinfo.utc(self.material.expires),
            clients,
        )
        leaves = certinfo.only_leaves(self.material.ca)
        if leaves:
            logger.warning(
                "client CA %s (--tls-client-ca) holds %s, which is not a CA (no basicConstraints "
                "CA:TRUE): KEDA's client certificate is verified against the CA that issued it, "
                "not against a certificate like itself, so its handshake is refused; give the "
                "issuing CA's certificate (cert-manager: ca.crt of KEDA's client Secret, not "
                "tls.crt)",
                self.tls.client_ca,
                "; ".join(leaves),
            )
        host = certinfo.host_of(self.address) if self.address else None
        if host is not None and not certinfo.covers(names, host):
            logger.warning(
                "TLS certificate %s does not name %s, the host of --scaler-address %s: KEDA "
                "checks that host against the certificate and refuses the handshake; add it to "
                "the certificate's dnsNames (deploy/cert-manager) or dial a name it has",
                self.tls.cert,
                host,
                self.address,
            )

    def _stamps(self) -> Stamp:
        stats = [os.stat(p) for p in self._paths]
        return tuple((s.st_ino, s.st_size, s.st_mtime_ns) for s in stats)


READ_ATTEMPTS = 3
"""Reads of the files in a row that a renewal may interrupt before they are given up on (and
read again on a later connection)."""


def load(tls: TLSSettings, *, skew: float = 0.0) -> Material:
    """The files of `tls`, read and checked with Python's ssl, the certificate not expired and
    valid now or within `skew` seconds, all of one generation (none changed while they were
    read); ConfigError names the file."""
    for _ in range(READ_ATTEMPTS):
        material = _load(tls, skew)
        if _contents(tls) == (material.cert, material.key, material.ca):
            return material
    raise ConfigError(
        f"TLS files {tls.cert} and {tls.key} changed while they were read, {READ_ATTEMPTS} "
        "times in a row; a renewal should swap them at once (a Kubernetes Secret volume does)"
    )


def _contents(tls: TLSSettings) -> tuple[bytes, bytes, bytes | None]:
    assert tls.cert is not None and tls.key is not None
    return (
        _read(tls.cert, "TLS certificate (--tls-cert)"),
        _read(tls.key, "TLS key (--tls-key)"),
        _read(tls.client_ca, "client CA (--tls-client-ca)") if tls.client_ca else None,
    )


def _load(tls: TLSSettings, skew: float) -> Material:
    """One read of the files of `tls`, checked (their bytes may be of two generations)."""
    assert tls.cert is not None and tls.key is not None
    cert, key, ca = _contents(tls)
    if _ENCRYPTED.search(key):
        raise ConfigError(
            f"TLS key {tls.key} is encrypted with a passphrase, which gRPC cannot take; give "
            f"it unencrypted (`openssl pkey -in {tls.key} -out tls.key`; cert-manager's are)"
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:  # a passphrase given, empty: without one, OpenSSL asks for it on the terminal
        context.load_cert_chain(tls.cert, tls.key, password=b"")
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(
            f"TLS certificate {tls.cert} and key {tls.key} cannot be used together "
            f"({_reason(exc)}); give the certificate chain and the private key it was issued for"
        ) from None
    if tls.client_ca is not None:
        try:
            context.load_verify_locations(cafile=tls.client_ca)
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(
                f"client CA {tls.client_ca} cannot be loaded ({_reason(exc)}); give the PEM "
                "certificate of the CA that signs KEDA's client certificate"
            ) from None
    starts, expires = certinfo.validity(cert, tls.cert)
    now = time.time()
    if expires <= now:
        raise ConfigError(
            f"TLS certificate {tls.cert} expired at {certinfo.utc(expires)}, so KEDA would "
            "refuse every handshake; renew it (cert-manager: `kubectl describe certificate` "
            "says why it did not) or give the renewed file"
        )
    if starts > now + skew:
        raise NotYetValid(
            f"TLS certificate {tls.cert} is not valid before {certinfo.utc(starts)} "
            f"({starts - now:.0f} s from now by this clock), so KEDA would refuse every "
            "handshake until then; check this node's clock (NTP) against the issuer's, or "
            "give a certificate valid now",
            starts=starts,
        )
    return Material(cert=cert, key=key, ca=ca, expires=expires, starts=starts)


_ENCRYPTED = re.compile(rb"-----BEGIN ENCRYPTED PRIVATE KEY-----|Proc-Type: *4, *ENCRYPTED")
"""PKCS#8 and OpenSSL's traditional headers of a key encrypted with a passphrase."""


def _read(path: Path, what: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise ConfigError(
            f"{what} {path}: {exc.strerror}; check the path or the mounted secret"
        ) from exc
    if b"-----BEGIN" not in data:
        raise ConfigError(f"{what} {path} is not a PEM file; expected -----BEGIN ...")
    return data


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return str(exc.reason)
    return str(exc)
