# -*- test-case-name: tests.framing.login.test_urls,tests.protocols.auth.test_urls -*-
"""Self-authenticating object URLs: where a server is, which key it holds, which object.

Sans-IO, without Twisted: the URL's grammar, and the key hash a client
compares (L{spkiHash}, L{certificateKeyHash}); how a client pins the key in
its handshake is its own (L{protocols.auth._urls.pinnedClientOptions} on
Twisted, C{ssl} in L{protocols.blocking.connectURL}).

Contract: C{chunkwire://KEYHASH@HINT[,HINT...]/NAME} (grammar and vectors in
docs/wire-format.md, "Object URLs").  L{ObjectURL.parse} accepts only the
canonical form (lowercase base32, compressed IPv6, minimal percent-encoding)
and says why it refused anything else, so C{str(ObjectURL.parse(text)) ==
text} for every URL it accepts.  A client
needs no CA and checks no host name: its TLS handshake succeeds only if
the server's certificate holds the key the URL names, and fails otherwise
before any application byte, the object name included, is sent.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import re
from collections.abc import Iterator
from dataclasses import dataclass

from ._errors import LoginFailed

KEY_HASH_LENGTH = 52
"""Characters in a key hash: 256 bits in base32, without the padding."""

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

    @ivar keyHash: the hash of the server's TLS key (L{protocols.auth._identity.keyHash}).
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


def spkiHash(spki: bytes) -> str:
    """
    The key hash of a DER-encoded SubjectPublicKeyInfo: 52 characters of
    lowercase base32 (RFC 4648, padding removed) of its SHA-256.
    """
    return base64.b32encode(hashlib.sha256(spki).digest()).decode("ascii").rstrip("=").lower()


def certificateKeyHash(der: bytes) -> str:
    """
    The key hash of the DER certificate C{der} (what C{ssl}'s
    C{getpeercert(binary_form=True)} gives): L{spkiHash} of its
    SubjectPublicKeyInfo, read from the DER without any X.509 library.

    @raise ValueError: C{der} is not a DER X.509 certificate.
    """
    certificate, _ = _element(der, 0, 0x30)
    tbs, _ = _element(der, _contents(der, certificate), 0x30)
    position = _contents(der, tbs)
    if position < len(der) and der[position] == 0xA0:  # [0] EXPLICIT version (absent: v1)
        position = _end(der, position)
    for _field in ("serialNumber", "signature", "issuer", "validity", "subject"):
        position = _end(der, position)
    spki, _ = _element(der, position, 0x30)
    return spkiHash(der[spki : _end(der, spki)])


def _element(der: bytes, position: int, tag: int) -> tuple[int, int]:
    """C{(position, end)} of the element at C{position}, which must have C{tag}."""
    if position >= len(der) or der[position] != tag:
        raise ValueError("not a DER X.509 certificate")
    return position, _end(der, position)


def _contents(der: bytes, position: int) -> int:
    """Where the contents of the element at C{position} start (past its tag and length)."""
    first = der[position + 1] if position + 1 < len(der) else 0
    return position + 2 + (first & 0x7F if first & 0x80 else 0)


def _end(der: bytes, position: int) -> int:
    """Where the element at C{position} ends; it must lie within C{der}."""
    if position + 2 > len(der):
        raise ValueError("not a DER X.509 certificate: cut short")
    first = der[position + 1]
    if first & 0x80:
        count = first & 0x7F
        if not 0 < count <= 4:
            raise ValueError("not a DER X.509 certificate: a length of more than 4 bytes")
        length = int.from_bytes(der[position + 2 : position + 2 + count], "big")
    else:
        length = first
    end = _contents(der, position) + length
    if end > len(der):
        raise ValueError("not a DER X.509 certificate: cut short")
    return end


def hintAddress(hint: str) -> tuple[str, int] | str:
    """
    Where a connection hint of an L{ObjectURL} points: C{(host, port)}, or
    a UNIX socket's path for a C{"unix:PATH"} hint.  (The hints of a parsed
    URL are valid, so this only takes them apart.)
    """
    if hint.startswith("unix:"):
        return hint[len("unix:") :]
    host, _, port = hint.rpartition(":")
    return host.strip("[]"), int(port)


def checkPresentedKey(certificate: bytes | None, expected: str) -> None:
    """
    Check the server's certificate (DER, as the TLS handshake gave it;
    C{None} if it gave none) holds the key C{expected} hashes, before
    anything is sent to it.

    @raise KeyMismatch: it holds another key, or there is no certificate.
    """
    presented = certificateKeyHash(certificate) if certificate else "(no certificate)"
    if presented != expected:
        raise KeyMismatch(expected, presented)


class HintAttempts:
    """
    A client's way through an L{ObjectURL}'s hints, in order, until one
    connects (the clients without Twisted share it; only how they connect
    differs)::

        attempts = HintAttempts(url)
        for target, hint in attempts:
            try:
                return connectTo(target)
            except Exception as error:
                attempts.failed(error)
        raise attempts.failure()

    A login refused or a key that does not match ends the search at once
    (another hint reaches the same server, or one that should not be
    trusted); any other error moves on to the next hint.
    """

    def __init__(self, url: ObjectURL) -> None:
        self.url = url
        self._failure: Exception | None = None

    def __iter__(self) -> Iterator[tuple[tuple[str, int] | str, str]]:
        """Each hint's address (L{hintAddress}) and the hint itself, to name the peer."""
        return ((hintAddress(hint), hint) for hint in self.url.hints)

    def failed(self, error: Exception) -> None:
        """
        Connecting to the current hint failed with C{error}.

        @raise Exception: C{error} itself, if it ends the search (L{KeyMismatch}, a L{LoginFailed}).
        """
        if isinstance(error, (KeyMismatch, LoginFailed)):
            raise error
        self._failure = error

    def failure(self) -> Exception:
        """What to raise once every hint failed: the last hint's error."""
        assert self._failure is not None, "an ObjectURL has at least one hint"
        return self._failure
