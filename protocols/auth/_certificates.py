# -*- test-case-name: tests.protocols.auth.test_certificates,tests.protocols.auth.test_certcommand -*-
"""TLS client certificates as logins: the verified certificate names an avatar.

Contract: a server built with L{requireClientCertificates} (or with
L{clientCertificateOptions} over any endpoint) finishes a TLS handshake only
with a client that presents a certificate issued by one of the CAs in its
CA directory; a client with no certificate, or with one from another CA or
self-signed, fails the handshake, and the server's protocol never receives
a byte from it.  Once the handshake is done, L{peerCertificateOf} gives the
client's certificate, and L{CertificateChecker} turns it into an avatar id
for a C{twisted.cred} portal (its common name by default), so one realm
serves password users and certificate users alike.

Twisted's C{ssl:} server description has no option for client
certificates (C{caCertsDir=} exists only on the C{ssl:} client), so
L{requireClientCertificates} turns an C{ssl:} description into a
C{chunkwire-tls:} one (L{protocols.auth._tlsendpoints}) that has it.

pyOpenSSL and cryptography (the C{tls} extra) are imported inside the
functions that need them, so C{protocols} imports without them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from twisted.cred.checkers import ICredentialsChecker
from twisted.cred.credentials import ICredentials
from twisted.cred.error import UnauthorizedLogin
from twisted.internet.defer import Deferred, fail, succeed
from zope.interface import Attribute, implementer

from ._tlsendpoints import (
    PREFIX,
    asTLSDescription,
    joinDescription,
    serverTLSOptions,
    splitDescription,
)

MECHANISM = "CERTIFICATE"
"""The login mechanism's name: the credentials are the TLS client certificate."""


class IPeerCertificate(ICredentials):
    """Credentials proven by the TLS handshake: the peer's verified certificate."""

    certificate = Attribute("the verified peer certificate, a cryptography x509.Certificate")


@implementer(IPeerCertificate)
class PeerCertificate:
    """
    The certificate a TLS peer proved it holds the key for.

    @ivar certificate: a cryptography C{x509.Certificate}.
    """

    def __init__(self, certificate: Any) -> None:
        self.certificate = certificate

    def __repr__(self) -> str:
        return f"<PeerCertificate {self.certificate.subject.rfc4514_string()}>"


def peerCertificateOf(transport: Any) -> PeerCertificate | None:
    """
    The certificate the peer presented on C{transport}, once its TLS
    handshake is done (a server's protocol receives no data before that).

    @param transport: a TLS transport (C{twisted.protocols.tls}, which
        C{ssl:} endpoints use), or a transport wrapping one that passes
        attributes on, such as L{protocols.CoalescingTransport}.
    @return: C{None} on a transport without TLS, before the handshake, or
        when the peer sent no certificate.
    """
    getPeerCertificate = getattr(transport, "getPeerCertificate", None)
    if getPeerCertificate is None:
        return None
    try:
        certificate = getPeerCertificate()
    except Exception:
        # A TLS transport whose connection is gone or never started.
        return None
    if certificate is None:
        return None
    return PeerCertificate(certificate.to_cryptography())


def commonName(certificate: Any) -> bytes | None:
    """The subject common name of C{certificate} (cryptography C{x509.Certificate}) in UTF-8, or C{None}."""
    from cryptography.x509.oid import NameOID

    names = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if len(names) != 1:
        return None
    value = names[0].value
    text = value if isinstance(value, str) else value.decode("utf-8", "replace")
    return text.encode("utf-8") if text else None


@implementer(ICredentialsChecker)
class CertificateChecker:
    """
    Gives the avatar id a verified client certificate names.

    The certificate was verified by the TLS handshake (issued by a trusted
    CA, key proven); this checker only maps it to an id.

    @ivar avatarIdOf: the mapping; C{None} refuses the certificate.
    """

    credentialInterfaces = (IPeerCertificate,)
    credentialsInterfaces = credentialInterfaces
    """The same, under the name the issue's brief used."""

    def __init__(self, avatarIdOf: Callable[[Any], bytes | None] = commonName) -> None:
        self.avatarIdOf = avatarIdOf

    def requestAvatarId(self, credentials: Any) -> Deferred[bytes]:
        """Fire with the id of C{credentials.certificate}, or fail with C{UnauthorizedLogin} when it names none."""
        try:
            avatarId = self.avatarIdOf(credentials.certificate)
        except Exception:
            avatarId = None
        if avatarId is None:
            return fail(UnauthorizedLogin("the certificate names no user"))
        return succeed(avatarId)


def clientCertificateOptions(privateKey: str | Path, caDirectory: str | Path, certKey: str | Path | None = None) -> Any:
    """
    Server TLS options that present the key and certificate in
    C{privateKey} (and C{certKey}, if the certificate is in its own file)
    and require a client certificate issued by a CA in C{caDirectory}; for
    L{protocols.auth._tlsendpoints.tlsServerEndpoint}.
    """
    return serverTLSOptions(privateKey, certKey, caDirectory)


def requireClientCertificates(description: str, caDirectory: str | Path) -> str:
    """
    The server description that listens where C{description} does, with
    the same key, and requires client certificates issued by a CA in
    C{caDirectory}: a C{chunkwire-tls:} description (see
    L{protocols.auth._tlsendpoints}), since Twisted's C{ssl:} server takes
    no C{caCertsDir=}.

    @param description: an C{ssl:} server description (port, C{interface},
        C{backlog}, C{privateKey}, C{certKey}) or a C{chunkwire-tls:} one.
    @raise ValueError: any other description, or an C{ssl:} option this
        does not carry over.
    """
    _, positional, keywords = splitDescription(asTLSDescription(description))
    return joinDescription(PREFIX, positional, {**keywords, "caCertsDir": str(caDirectory)})
