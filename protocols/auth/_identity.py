# -*- test-case-name: tests.protocols.auth.test_identity,tests.protocols.auth.test_urls -*-
"""A server's persistent TLS key, and the hash that names it.

Contract: L{keyHash} is the lowercase base32 (no padding, 52 characters) of
SHA-256 over a certificate's DER-encoded SubjectPublicKeyInfo, so it names
the key, not the certificate: a certificate re-issued for the same key has
the same hash.  L{ServerIdentity.loadOrCreate} keeps one PEM file (key and a
self-signed certificate), created once with mode 0600 and never rewritten,
so the hash a server publishes stays the same across restarts.  Nothing here
checks names or dates: a client that knows the hash needs neither (see
L{protocols.auth._urls.pinnedClientOptions}).  L{ServerIdentity} serves over
C{tcp:} and C{unix:} alike, as a description or as an endpoint.

pyOpenSSL and cryptography (the C{tls} extra) are imported inside the
functions that need them, so C{protocols} imports without them.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Any

from framing.login._urls import KEY_HASH_LENGTH as KEY_HASH_LENGTH  # the key hash is sans-IO (object URLs)
from framing.login._urls import spkiHash as spkiHash

from ._tlsendpoints import (
    PREFIX,
    TLSServerEndpoint,
    joinDescription,
    keyAndCertificate,
    splitDescription,
    tlsServerEndpoint,
)

NEVER_EXPIRES = datetime.datetime(9999, 12, 31, 23, 59, 59, tzinfo=datetime.timezone.utc)
"""RFC 5280's "no well-defined expiration": a pinned key is trusted by its hash, not by dates."""


class InsecureKeyFile(ValueError):
    """A server key file can be read or written by users other than its owner."""


def _cryptographyCertificate(certificate: Any) -> Any:
    """C{certificate} as a cryptography C{x509.Certificate}: given as one, as pyOpenSSL's C{X509}, or as PEM."""
    from cryptography import x509

    if isinstance(certificate, x509.Certificate):
        return certificate
    if isinstance(certificate, bytes | bytearray | memoryview):
        return x509.load_pem_x509_certificate(bytes(certificate))
    toCryptography = getattr(certificate, "to_cryptography", None)
    if toCryptography is None:
        raise TypeError(f"not a certificate: {type(certificate).__name__}")
    return toCryptography()


def keyHash(certificate: Any) -> str:
    """
    The hash that names the key of C{certificate}.

    @param certificate: a cryptography C{x509.Certificate}, a pyOpenSSL
        C{X509}, or the certificate in PEM (C{bytes}).
    @return: 52 characters of lowercase base32 (RFC 4648, padding removed)
        of SHA-256 over the DER SubjectPublicKeyInfo.
    """
    from cryptography.hazmat.primitives import serialization

    publicKey = _cryptographyCertificate(certificate).public_key()
    spki = publicKey.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return spkiHash(spki)


def _newKeyFile() -> bytes:
    """A new P-256 key and a self-signed certificate for it, in PEM, key first."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    # The name says nothing a peer relies on; clients check the key hash.
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "chunkwire server")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(NEVER_EXPIRES)
        .sign(key, hashes.SHA256())
    )
    keyPEM = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return keyPEM + certificate.public_bytes(serialization.Encoding.PEM)


def _createExclusively(path: Path, content: bytes) -> None:
    """
    Write C{content} to C{path} with mode 0600 unless C{path} exists.  The
    file appears whole or not at all (a temporary file hard-linked into
    place), so a concurrent creator never sees half a key, and the first
    creator wins.
    """
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(content)
            stream.flush()
            os.fsync(stream.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass
    finally:
        temporary.unlink()


class ServerIdentity:
    """
    A server's TLS key and self-signed certificate, kept in one PEM file.

    @ivar pemPath: the file (key, then certificate).
    @ivar keyHash: the hash of the key (see L{keyHash}).
    @ivar keyPEM: the private key, PEM.
    @ivar certPEM: the certificate, PEM.
    """

    def __init__(self, pemPath: Path, keyPEM: bytes, certPEM: bytes) -> None:
        self.pemPath, self.keyPEM, self.certPEM = pemPath, keyPEM, certPEM
        self.keyHash = keyHash(certPEM)

    def __repr__(self) -> str:
        return f"<ServerIdentity {self.keyHash} in {self.pemPath}>"

    @classmethod
    def loadOrCreate(cls, path: str | Path) -> ServerIdentity:
        """
        Load the identity kept in C{path}, creating it (mode 0600) first if
        the file does not exist.

        @raise InsecureKeyFile: the file's mode lets group or others in.
        @raise ValueError: the file does not hold a key and a certificate for it.
        """
        path = Path(path)
        if not path.exists():
            _createExclusively(path, _newKeyFile())
        if os.name == "posix" and path.stat().st_mode & 0o077:
            raise InsecureKeyFile(f"{path} is open to group or others (mode {path.stat().st_mode & 0o777:o}); use 0600")
        return cls.fromPEM(path, path.read_bytes())

    @classmethod
    def fromPEM(cls, path: Path, data: bytes) -> ServerIdentity:
        """
        An identity from the PEM text of its file.

        @raise ValueError: C{data} lacks the key or the certificate, or they do not match.
        """
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization

        key = serialization.load_pem_private_key(data, password=None)
        certificate = x509.load_pem_x509_certificate(data)
        public = serialization.PublicFormat.SubjectPublicKeyInfo
        if key.public_key().public_bytes(serialization.Encoding.DER, public) != certificate.public_key().public_bytes(
            serialization.Encoding.DER, public
        ):
            raise ValueError(f"{path}: the certificate is not for the key")
        keyPEM = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return cls(path, keyPEM, certificate.public_bytes(serialization.Encoding.PEM))

    def certificateOptions(self) -> Any:
        """Twisted server-side TLS options presenting this key (no client certificate asked for)."""
        from twisted.internet.ssl import CertificateOptions

        return CertificateOptions(**keyAndCertificate(self.keyPEM, self.certPEM))

    def serverDescription(self, listen: str) -> str:
        """
        The server description serving TLS with this identity where the
        plain description C{listen} would listen: C{ssl:} (Twisted's own)
        for C{tcp:}, C{chunkwire-tls:} (L{protocols.auth._tlsendpoints}) for
        anything else, such as C{unix:}.

        @raise ValueError: C{listen} is already TLS.
        """
        kind, positional, keywords = splitDescription(listen)
        if kind.lower() in ("ssl", PREFIX):
            raise ValueError(f"{listen!r} is TLS already; give the plain endpoint")
        keywords = {**keywords, "privateKey": str(self.pemPath)}
        if kind.lower() == "tcp":
            return joinDescription("ssl", positional, keywords)
        return joinDescription(PREFIX, [kind, *positional], keywords)

    def serverEndpoint(self, reactor: Any, listen: str) -> TLSServerEndpoint:
        """A server endpoint serving TLS with this identity over the endpoint C{listen} (C{tcp:}, C{unix:}, ...)."""
        return tlsServerEndpoint(reactor, listen, self.certificateOptions())
