"""Self-authenticating object URLs: where a server is, which key it holds, which object.

Contract: C{chunkwire://KEYHASH@HINT[,HINT...]/NAME} (grammar and vectors in
docs/wire-format.md, "Object URLs").  L{ObjectURL.parse} accepts only the
canonical form (lowercase base32, compressed IPv6, minimal percent-encoding)
and says why it refused anything else, so C{str(ObjectURL.parse(text)) ==
text} for every URL it accepts.  A client connecting
with L{clientEndpoint} (or with L{pinnedClientOptions} under any TLS
endpoint) needs no CA and checks no host name: its TLS handshake succeeds
only if the server's certificate holds the key the URL names, and fails
otherwise before any application byte, the object name included, is sent.

pyOpenSSL (the C{tls} extra) is imported inside the functions that need it,
so C{protocols} imports without it.
"""

from __future__ import annotations

import base64
import ipaddress
import re
from dataclasses import dataclass
from typing import Any, cast

from twisted.internet.endpoints import HostnameEndpoint, UNIXClientEndpoint, wrapClientTLS
from twisted.internet.interfaces import IOpenSSLClientConnectionCreator, IStreamClientEndpoint
from zope.interface import implementer

from .identity import KEY_HASH_LENGTH, keyHash

__all__ = [
    "SCHEME",
    "InvalidURL",
    "KeyMismatch",
    "ObjectURL",
    "PinnedKeyOptions",
    "clientEndpoint",
    "pinnedClientOptions",
]

SCHEME = "chunkwire"

NAME_CHARACTERS = re.compile(r"[a-z2-7]{26,128}")
"""An object name: lowercase base32, at least 128 bits (26 characters), at most 128 characters."""

KEY_HASH_CHARACTERS = re.compile(f"[a-z2-7]{{{KEY_HASH_LENGTH}}}")
HOST_NAME = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)
PORT = re.compile(r"[1-9][0-9]{0,4}")
PATH_KEPT = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/")
"""Bytes of a UNIX socket path written as themselves; every other byte is C{%XX}."""


class InvalidURL(ValueError):
    """
    A text that is not a canonical chunkwire object URL.

    @ivar reason: what is wrong, in a few words.
    """

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"invalid chunkwire URL ({reason}): {url[:200]!r}")
        self.url, self.reason = url, reason


class KeyMismatch(Exception):
    """
    The server's key is not the one the URL names; nothing was sent to it.

    @ivar expected: the key hash in the URL.
    @ivar presented: the key hash of the certificate the server presented.
    """

    def __init__(self, expected: str, presented: str) -> None:
        super().__init__(f"server key {presented} is not the URL's {expected}")
        self.expected, self.presented = expected, presented


@dataclass(frozen=True)
class ObjectURL:
    """
    One object on one server, named so that only that server can serve it.

    @ivar keyHash: the hash of the server's TLS key (L{protocols.auth.identity.keyHash}).
    @ivar hints: where to connect, in order of preference: C{"host:port"},
        C{"[v6 address]:port"} or C{"unix:/absolute/path"}.
    @ivar name: the object's unguessable name on that server.
    """

    keyHash: str
    hints: tuple[str, ...]
    name: str

    def __post_init__(self) -> None:
        url = f"{SCHEME}://{self.keyHash}@...{self.name}"
        _checkKeyHash(url, self.keyHash)
        _checkName(url, self.name)
        if not self.hints:
            raise InvalidURL(url, "no location hint")
        for hint in self.hints:
            _checkHint(url, hint)

    @classmethod
    def parse(cls, url: str) -> ObjectURL:
        """
        Read a URL in its canonical form.

        @raise InvalidURL: C{url} is anything else; C{reason} says what.
        """
        prefix = SCHEME + "://"
        if not url.startswith(prefix):
            raise InvalidURL(url, f"the scheme is not {SCHEME}://")
        if not url.isascii() or any(character in url for character in "?# \t\r\n"):
            raise InvalidURL(url, "a character a URL may not hold here (non-ASCII, space, ? or #)")
        authority, slash, name = url[len(prefix) :].rpartition("/")
        if not slash:
            raise InvalidURL(url, "no /NAME")
        serverKey, at, hints = authority.partition("@")
        if not at:
            raise InvalidURL(url, "no KEYHASH@")
        _checkKeyHash(url, serverKey)
        _checkName(url, name)
        if not hints:
            raise InvalidURL(url, "no location hint")
        return cls(serverKey, tuple(_decodeHint(url, hint) for hint in hints.split(",")), name)

    def __str__(self) -> str:
        return f"{SCHEME}://{self.keyHash}@{','.join(_encodeHint(hint) for hint in self.hints)}/{self.name}"


def _checkKeyHash(url: str, serverKey: str) -> None:
    if not KEY_HASH_CHARACTERS.fullmatch(serverKey):
        raise InvalidURL(url, f"the key hash is not {KEY_HASH_LENGTH} characters of lowercase base32")
    # 256 bits leave 4 unused bits in the last character: they must be zero.
    if base64.b32encode(base64.b32decode(serverKey.upper() + "====")).decode().rstrip("=").lower() != serverKey:
        raise InvalidURL(url, "the key hash is not canonical base32 (unused bits set)")


def _checkName(url: str, name: str) -> None:
    if not NAME_CHARACTERS.fullmatch(name):
        raise InvalidURL(url, "the name is not 26 to 128 characters of lowercase base32")


def _checkHint(url: str, hint: str) -> None:
    if hint.startswith("unix:"):
        path = hint[len("unix:") :]
        if not path.startswith("/") or "\0" in path:
            raise InvalidURL(url, "a unix: hint's path must be absolute, without NUL")
        return
    if not hint:
        raise InvalidURL(url, "an empty hint")
    host, colon, port = hint.rpartition(":")
    if not colon or not PORT.fullmatch(port) or int(port) > 65535:
        raise InvalidURL(url, f"hint {hint[:80]!r}: the port is not 1 to 65535 without leading zeros")
    if host.startswith("[") and host.endswith("]"):
        _checkIPv6(url, host[1:-1])
    elif not HOST_NAME.fullmatch(host):
        raise InvalidURL(url, f"hint {hint[:80]!r}: the host is not a DNS name, an IPv4 address or [IPv6]")
    elif re.fullmatch(r"[0-9.]+", host) and not _isDottedQuad(host):
        raise InvalidURL(url, f"hint {hint[:80]!r}: the IPv4 address is not four decimal numbers 0 to 255")


def _isDottedQuad(host: str) -> bool:
    try:
        return str(ipaddress.IPv4Address(host)) == host
    except ValueError:
        return False


def _checkIPv6(url: str, address: str) -> None:
    try:
        parsed = ipaddress.IPv6Address(address)
    except ValueError:
        raise InvalidURL(url, f"{address[:80]!r} is not an IPv6 address") from None
    if parsed.compressed != address:
        raise InvalidURL(url, f"the IPv6 address {address!r} is not in its compressed lowercase form")


def _decodeHint(url: str, hint: str) -> str:
    """A hint as the URL writes it, to the form L{ObjectURL.hints} holds (unix: paths percent-decoded)."""
    if not hint.startswith("unix:"):
        _checkHint(url, hint)
        return hint
    encoded = hint[len("unix:") :]
    raw = bytearray()
    position = 0
    while position < len(encoded):
        character = encoded[position]
        if character == "%":
            digits = encoded[position + 1 : position + 3]
            if not re.fullmatch(r"[0-9A-F]{2}", digits) or int(digits, 16) in PATH_KEPT:
                raise InvalidURL(url, "a unix: path has a % that is not canonical %XX (uppercase, needed)")
            raw.append(int(digits, 16))
            position += 3
            continue
        if ord(character) not in PATH_KEPT:
            raise InvalidURL(url, f"a unix: path holds {character!r} unencoded")
        raw.append(ord(character))
        position += 1
    try:
        decoded = "unix:" + raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidURL(url, "a unix: path is not UTF-8") from None
    _checkHint(url, decoded)
    return decoded


def _encodeHint(hint: str) -> str:
    if not hint.startswith("unix:"):
        return hint
    path = hint[len("unix:") :].encode("utf-8")
    return "unix:" + "".join(chr(byte) if byte in PATH_KEPT else f"%{byte:02X}" for byte in path)


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
