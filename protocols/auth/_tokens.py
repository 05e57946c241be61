# -*- test-case-name: tests.protocols.auth.test_tokens,tests.protocols.auth.test_portals -*-
"""Bearer tokens (API keys): a second credential type, kept only as digests and compared in constant time.

Contract: a token is 32 random bytes (L{newToken}), shown once when made;
the server keeps only its SHA-256 digest, in memory and in the token file
(one C{avatarId:sha256hex} line per avatar, C{#} comments and blank lines
ignored).  A plain hash suffices because a token has 256 random bits: no
dictionary to try.  L{TokenChecker} hashes the presented token once and
compares it with every stored digest, without stopping at a match, so the
time taken says nothing about which digest, or how much of one, matched:
O(number of tokens) per check.  A bearer token on the wire is replayable
by whoever sees it: send it only inside TLS.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import string
from collections.abc import Mapping
from typing import Any

from twisted.cred.checkers import ICredentialsChecker
from twisted.cred.credentials import ICredentials
from twisted.cred.error import UnauthorizedLogin
from twisted.internet.defer import Deferred, fail, succeed
from zope.interface import Attribute, implementer

from protocols.auth._secretfiles import SecretFileError, StrPath, entries, replaceEntry
from protocols.auth._users import REFUSAL, checkName

MECHANISM = "TOKEN"

_DIGEST_HEX = 64


class TokenFileError(SecretFileError):
    """The token file is missing, unreadable, or has a malformed line (named by its number)."""


class IBearerToken(ICredentials):
    """A bearer token presented as a credential."""

    token = Attribute("The token's bytes (the ASCII of L{newToken}'s text).")


@implementer(IBearerToken)
class BearerToken:
    """
    A presented bearer token; its repr never shows it.

    @ivar token: the token's bytes.
    """

    def __init__(self, token: bytes) -> None:
        """
        @param token: the token's bytes.
        """
        self.token = token

    def __repr__(self) -> str:
        return "<BearerToken (hidden)>"

    __str__ = __repr__


def newToken() -> str:
    """A fresh token: 32 random bytes in URL-safe base64 without padding (43 characters)."""
    return base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode("ascii")


def tokenDigest(token: str | bytes) -> bytes:
    """The SHA-256 digest kept in place of C{token} (text is taken as UTF-8)."""
    return hashlib.sha256(token.encode("utf-8") if isinstance(token, str) else token).digest()


@implementer(ICredentialsChecker)
class TokenChecker:
    """
    A C{twisted.cred} checker for L{IBearerToken}s against a fixed set of token digests.

    @cvar credentialsInterfaces: the same, by the name the issue's brief used.
    @cvar credentialInterfaces: L{IBearerToken}.
    """

    credentialInterfaces = (IBearerToken,)
    credentialsInterfaces = credentialInterfaces

    def __init__(self, tokens: Mapping[bytes, str | bytes], *, digests: Mapping[bytes, bytes] | None = None) -> None:
        """
        @param tokens: each avatar id's token; only their digests are kept.
        @param digests: each avatar id's token digest (L{tokenDigest}), as in a token file.
        @raise ValueError: two avatar ids have the same token.
        """
        held = {avatarId: tokenDigest(token) for avatarId, token in tokens.items()}
        held.update(digests or {})
        if len(set(held.values())) != len(held):
            raise ValueError("two avatar ids have the same token")
        self._digests = tuple(held.items())

    @classmethod
    def fromFile(cls, path: StrPath) -> TokenChecker:
        """
        A checker for the token file at C{path}.

        @raise TokenFileError: the file cannot be read or a line is malformed.
        """
        digests: dict[bytes, bytes] = {}
        for number, line in entries(path, TokenFileError):
            avatarId, digest = _parseLine(path, number, line)
            if avatarId in digests:
                raise TokenFileError(path, number, f"the avatar id {avatarId!r} appears twice")
            digests[avatarId] = digest
        try:
            return cls({}, digests=digests)
        except ValueError as e:
            raise TokenFileError(path, None, str(e)) from None

    def requestAvatarId(self, credentials: Any) -> Deferred[bytes]:
        """
        The avatar id whose token was presented, else a failed Deferred (C{UnauthorizedLogin}).

        Every stored digest is compared, in constant time each, whether or not one matched.
        """
        presented = tokenDigest(bytes(credentials.token))
        match: bytes | None = None
        for avatarId, digest in self._digests:
            if hmac.compare_digest(digest, presented):
                match = avatarId
        if match is None:
            return fail(UnauthorizedLogin(REFUSAL))
        return succeed(match)


def _parseLine(path: StrPath, number: int, line: str) -> tuple[bytes, bytes]:
    name, colon, digest = line.rpartition(":")
    if not colon or len(digest) != _DIGEST_HEX or not set(digest) <= set(string.hexdigits.lower()):
        raise TokenFileError(path, number, "expected avatarId:sha256hex (64 lowercase hex digits)")
    try:
        return checkName(name), bytes.fromhex(digest)
    except ValueError as e:
        raise TokenFileError(path, number, str(e)) from None


def addToken(path: StrPath, avatarId: str) -> str:
    """
    Make a token for C{avatarId}, store its digest in the token file at C{path} (replacing theirs), return it.

    The token is returned once, to be shown once; only its digest is stored.
    New files are mode 0600.

    @raise InvalidName: the avatar id cannot be stored.
    @raise TokenFileError: the existing file is malformed (it is left alone).
    """
    checkName(avatarId)
    if os.path.exists(path):
        TokenChecker.fromFile(path)
    token = newToken()
    replaceEntry(path, avatarId, f"{avatarId}:{tokenDigest(token).hex()}")
    return token


def removeToken(path: StrPath, avatarId: str) -> bool:
    """
    Remove C{avatarId}'s token from the token file at C{path}.

    @return: whether it was there.
    @raise TokenFileError: the file is malformed (it is left alone).
    """
    if not os.path.exists(path):
        return False
    TokenChecker.fromFile(path)
    return replaceEntry(path, avatarId, None)
