# -*- test-case-name: tests.protocols.auth.test_urls,tests.protocols.auth.test_tls_logins -*-
"""Self-authenticating object URLs on Twisted: the key pinned in pyOpenSSL's handshake.

The URL itself (C{ObjectURL}, its grammar, C{InvalidURL}, C{KeyMismatch})
is sans-IO, in L{framing.login._urls}, shared with the blocking client
(import them from there); this module adds the Twisted side:
L{PinnedKeyOptions} (or L{pinnedClientOptions} under any TLS endpoint) and
L{clientEndpoint}.  A
client connecting with them needs no CA and checks no host name: its TLS
handshake succeeds only if the server's certificate holds the key the URL
names, and fails otherwise before any application byte, the object name
included, is sent.

pyOpenSSL (the C{tls} extra) is imported inside the functions that need it,
so C{protocols} imports without it.
"""

from __future__ import annotations

from typing import Any, cast

from twisted.internet.endpoints import HostnameEndpoint, UNIXClientEndpoint, wrapClientTLS
from twisted.internet.interfaces import IOpenSSLClientConnectionCreator, IStreamClientEndpoint
from zope.interface import implementer

from framing.login._urls import KeyMismatch, ObjectURL

from ._identity import keyHash


@implementer(IOpenSSLClientConnectionCreator)
class PinnedKeyOptions:
    """
    Client TLS options (C{IOpenSSLClientConnectionCreator}) that accept a
    server exactly when its leaf certificate holds the key with hash
    C{keyHash}: no CA, no host name, no dates.  Any other server fails the
    handshake, so the bytes an application wrote meanwhile are never sent.

    @ivar keyHash: the key hash a server must present.
    @ivar mismatches: a L{KeyMismatch} for each handshake this refused, oldest first.
    """

    def __init__(self, keyHash: str) -> None:
        from OpenSSL import SSL

        self.keyHash = keyHash
        self.mismatches: list[KeyMismatch] = []
        self._context = SSL.Context(SSL.TLS_METHOD)
        self._context.set_min_proto_version(SSL.TLS1_2_VERSION)
        self._context.set_options(SSL.OP_NO_COMPRESSION)

    def clientConnectionForTLS(self, tlsProtocol: Any) -> Any:
        """A new client-side C{OpenSSL.SSL.Connection} that checks the server's key (Twisted calls this)."""
        from OpenSSL import SSL

        connection = SSL.Connection(self._context, None)
        connection.set_connect_state()
        connection.set_verify(SSL.VERIFY_PEER | SSL.VERIFY_FAIL_IF_NO_PEER_CERT, self._verify)
        return connection

    def _verify(self, connection: Any, certificate: Any, errorNumber: int, depth: int, ok: int) -> bool:
        # OpenSSL asks about the chain from the top down; only the leaf's
        # key matters, and OpenSSL's own verdict (no CA) is ignored.
        if depth > 0:
            return True
        presented = keyHash(certificate)
        if presented == self.keyHash:
            return True
        self.mismatches.append(KeyMismatch(self.keyHash, presented))
        return False


def pinnedClientOptions(keyHash: str) -> PinnedKeyOptions:
    """Client TLS options accepting only a server whose key hash is C{keyHash} (see L{PinnedKeyOptions})."""
    return PinnedKeyOptions(keyHash)


def clientEndpoint(
    reactor: Any, url: ObjectURL, hint: str | None = None, options: PinnedKeyOptions | None = None
) -> IStreamClientEndpoint:
    """
    A client endpoint reaching the server of C{url} over TLS pinned to its key.

    @param hint: the location to use, one of C{url.hints}; the first if C{None}.
    @param options: the pinned options to use (to read their
        C{mismatches} afterwards); new ones for C{url.keyHash} if C{None}.
    @raise ValueError: C{hint} is not one of the URL's hints, or C{options}
        pin another key.
    """
    hint = url.hints[0] if hint is None else hint
    if hint not in url.hints:
        raise ValueError(f"{hint!r} is not a hint of {url}")
    options = pinnedClientOptions(url.keyHash) if options is None else options
    if options.keyHash != url.keyHash:
        raise ValueError("the options pin another key than the URL's")
    inner: Any
    if hint.startswith("unix:"):
        inner = UNIXClientEndpoint(reactor, hint[len("unix:") :])  # type: ignore[no-untyped-call]
    else:
        host, _, port = hint.rpartition(":")
        inner = HostnameEndpoint(reactor, host.strip("[]").encode("ascii"), int(port))
    endpoint: IStreamClientEndpoint = wrapClientTLS(cast(Any, options), inner)
    return endpoint
