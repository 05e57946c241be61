"""Tests for protocols.auth._tokens: bearer tokens, their checker and the token file."""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
from typing import Any

from twisted.cred.checkers import ICredentialsChecker
from twisted.cred.credentials import ICredentials
from twisted.cred.error import UnauthorizedLogin
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from protocols.auth import _tokens as tokens
from protocols.auth._tokens import (
    BearerToken,
    IBearerToken,
    TokenChecker,
    TokenFileError,
    addToken,
    newToken,
    removeToken,
    tokenDigest,
)
from protocols.auth._users import REFUSAL, InvalidName


class BearerTokenTests(SynchronousTestCase):
    """Tokens are random, URL-safe, and never shown by a credential's repr."""

    def test_newToken(self) -> None:
        """A new token is 43 URL-safe characters (32 bytes, no padding) and different every time."""
        made = {newToken() for _ in range(20)}
        self.assertEqual(len(made), 20)
        for token in made:
            self.assertEqual(len(token), 43)
            self.assertTrue(set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"))

    def test_reprHidesToken(self) -> None:
        """Neither repr nor str of a BearerToken contains the token."""
        token = newToken().encode()
        credential = BearerToken(token)
        self.assertTrue(IBearerToken.providedBy(credential))
        self.assertTrue(ICredentials.providedBy(credential))
        for shown in (repr(credential), str(credential), repr([credential])):
            self.assertNotIn(token.decode(), shown)


class TokenCheckerTests(SynchronousTestCase):
    """TokenChecker gives the token's avatar id, refuses others, and holds only digests."""

    def setUp(self) -> None:
        self.alice, self.bob = newToken(), newToken()
        self.checker = TokenChecker({b"alice": self.alice, b"bob": self.bob.encode()})

    def test_providesChecker(self) -> None:
        """TokenChecker is a twisted.cred checker for bearer tokens."""
        self.assertTrue(verifyObject(ICredentialsChecker, self.checker))
        self.assertEqual(self.checker.credentialInterfaces, (IBearerToken,))
        self.assertEqual(self.checker.credentialsInterfaces, (IBearerToken,))

    def test_accepts(self) -> None:
        """Each avatar's token, given as text or bytes, gives that avatar's id."""
        self.assertEqual(self.successResultOf(self.checker.requestAvatarId(BearerToken(self.alice.encode()))), b"alice")
        self.assertEqual(self.successResultOf(self.checker.requestAvatarId(BearerToken(self.bob.encode()))), b"bob")

    def test_refuses(self) -> None:
        """An unknown, empty or truncated token is refused with the common refusal text."""
        for token in (newToken().encode(), b"", self.alice.encode()[:-1]):
            failure = self.failureResultOf(self.checker.requestAvatarId(BearerToken(token)), UnauthorizedLogin)
            self.assertEqual(str(failure.value), REFUSAL)

    def test_digestsOnly(self) -> None:
        """Nothing the checker holds contains a token, only their SHA-256 digests."""
        held = repr(vars(self.checker))
        for token in (self.alice, self.bob):
            self.assertNotIn(token, held)
            self.assertIn(repr(hashlib.sha256(token.encode()).digest()), held)

    def test_comparesEveryDigest(self) -> None:
        """A check compares the presented digest with every stored one, even after a match."""
        compared: list[bytes] = []
        original = hmac.compare_digest

        def recording(a: Any, b: Any) -> bool:
            compared.append(a)
            return original(a, b)

        self.patch(tokens.hmac, "compare_digest", recording)
        self.successResultOf(self.checker.requestAvatarId(BearerToken(self.alice.encode())))
        self.assertEqual(sorted(compared), sorted([tokenDigest(self.alice), tokenDigest(self.bob)]))

    def test_sameTokenTwiceRefused(self) -> None:
        """Two avatars may not share a token."""
        self.assertRaises(ValueError, TokenChecker, {b"a": "same", b"b": "same"})


class TokenFileTests(SynchronousTestCase):
    """addToken stores only digests, 0600, and fromFile reads them back."""

    def setUp(self) -> None:
        self.path = self.mktemp()

    def test_roundTrip(self) -> None:
        """A token made by addToken is accepted by a checker read from the file."""
        token = addToken(self.path, "alice")
        checker = TokenChecker.fromFile(self.path)
        self.assertEqual(self.successResultOf(checker.requestAvatarId(BearerToken(token.encode()))), b"alice")

    def test_fileHoldsDigestOnly(self) -> None:
        """The file holds the token's SHA-256 in hex, never the token, and is mode 0600."""
        token = addToken(self.path, "alice")
        with open(self.path) as f:
            content = f.read()
        self.assertNotIn(token, content)
        self.assertEqual(content, f"alice:{hashlib.sha256(token.encode()).hexdigest()}\n")
        self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode), 0o600)

    def test_replaceAndRemove(self) -> None:
        """A new token for an avatar replaces the old one; removeToken removes it."""
        old = addToken(self.path, "alice")
        new = addToken(self.path, "alice")
        checker = TokenChecker.fromFile(self.path)
        self.failureResultOf(checker.requestAvatarId(BearerToken(old.encode())), UnauthorizedLogin)
        self.successResultOf(checker.requestAvatarId(BearerToken(new.encode())))
        self.assertTrue(removeToken(self.path, "alice"))
        self.assertFalse(removeToken(self.path, "alice"))
        self.assertFalse(removeToken(self.mktemp(), "alice"))
        self.failureResultOf(TokenChecker.fromFile(self.path).requestAvatarId(BearerToken(new.encode())))

    def test_badName(self) -> None:
        """An avatar id the file cannot hold is refused before any file is made."""
        self.assertRaises(InvalidName, addToken, self.path, "a:b")
        self.assertFalse(os.path.exists(self.path))

    def test_malformedLines(self) -> None:
        """A malformed token file line is an error naming its number."""
        digest = "ab" * 32
        for bad in ("alice", "alice:" + digest[:-1], "alice:" + digest.upper(), ":" + digest, "a:b:" + digest):
            with open(self.path, "w") as f:
                f.write(f"# tokens\nbob:{'cd' * 32}\n{bad}\n")
            error = self.assertRaises(TokenFileError, TokenChecker.fromFile, self.path)
            self.assertEqual(error.line, 3, bad)

    def test_duplicates(self) -> None:
        """An avatar listed twice, or two avatars with one digest, is an error."""
        with open(self.path, "w") as f:
            f.write(f"a:{'cd' * 32}\na:{'ef' * 32}\n")
        self.assertEqual(self.assertRaises(TokenFileError, TokenChecker.fromFile, self.path).line, 2)
        with open(self.path, "w") as f:
            f.write(f"a:{'cd' * 32}\nb:{'cd' * 32}\n")
        self.assertRaises(TokenFileError, TokenChecker.fromFile, self.path)

    def test_missingFile(self) -> None:
        """A missing token file is a TokenFileError."""
        self.assertRaises(TokenFileError, TokenChecker.fromFile, self.path)
