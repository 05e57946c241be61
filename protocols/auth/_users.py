# -*- test-case-name: tests.protocols.auth.test_users,tests.protocols.auth.test_portals -*-
"""The user file (one salted SCRAM verifier per user), the C{twisted.cred} checker reading it, and the proof it checks.

Contract: the file holds no password and nothing a client could log in
with, only each user's L{ScramVerifier}, one line per user::

    name:SCRAM-SHA-256:iterations:salt_b64:storedKey_b64:serverKey_b64

L{UserFile} reloads the file when its size, mtime or inode changes; a bad
line raises L{UserFileError}, and a file that goes bad while serving refuses
every login (fail closed).  L{addUser} and L{removeUser} rewrite it
atomically, mode 0600.  An unknown name is shown a decoy verifier derived
from a key kept beside the file (L{decoyKeyPath}), the same in every worker
and across restarts, and refused after the same work as a wrong password.

Cost: one C{stat} per lookup.

Design: docs/design/auth.md
"""

from __future__ import annotations

import base64
import binascii
import hmac
import os
from collections import Counter
from typing import Any

from twisted.cred.checkers import ICredentialsChecker
from twisted.cred.credentials import ICredentials, IUsernamePassword
from twisted.cred.error import UnauthorizedLogin
from twisted.internet.defer import Deferred, fail, succeed
from twisted.logger import Logger
from zope.interface import Attribute, classImplements, implementer

from framing.login._scram import (
    DEFAULT_ITERATIONS,
    MECHANISM,
    MIN_ITERATIONS,
    ScramResponse,
    ScramVerifier,
    decoyVerifier,
)
from protocols.auth._secretfiles import SecretFileError, StrPath, entries, replaceEntry, sharedKey

# The refusal for a wrong password and an unknown user alike.
REFUSAL = "invalid user name or password"

_KEY_BYTES = 32


class IScramResponse(ICredentials):
    """A client's SCRAM proof, for a C{twisted.cred} checker that holds the user's StoredKey."""

    username = Attribute("The UTF-8 user name (bytes) the client logs in as.")

    def checkProof(storedKey):  # type: ignore[no-untyped-def]
        """
        Whether the proof shows knowledge of the password behind C{storedKey}, compared in constant time.

        @param storedKey: the user's L{ScramVerifier.storedKey}.
        @rtype: C{bool}
        """


# The sans-IO ScramResponse (framing.login._scram, free of Twisted) provides the twisted.cred interface.
classImplements(ScramResponse, IScramResponse)


def decoyKeyPath(path: StrPath) -> str:
    """The file beside the user file at C{path} that holds the key its decoys derive from."""
    return os.fspath(path) + ".decoy-key"


class UserFileError(SecretFileError):
    """The user file is missing, unreadable, or has a malformed line (named by its number)."""


class InvalidName(ValueError):
    """A user name (or token owner) that a user or token file cannot hold."""


def checkName(name: str) -> bytes:
    """
    C{name}'s UTF-8, if a user or token file can hold it: not empty, printable, no C{:}, not starting with C{#}.

    @raise InvalidName: it cannot.
    """
    if not name or not name.isprintable() or ":" in name or name.startswith("#") or name != name.strip():
        raise InvalidName(f"invalid name {name!r}: it must be printable, without ':' or a leading '#' or spaces")
    try:
        return name.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidName(f"invalid name {name!r}: it is not valid text") from None


def formatLine(username: str, verifier: ScramVerifier) -> str:
    """The user file's line for C{username}."""
    keys = [verifier.salt, verifier.storedKey, verifier.serverKey]
    encoded = ":".join(base64.b64encode(k).decode("ascii") for k in keys)
    return f"{username}:{MECHANISM}:{verifier.iterations}:{encoded}"


def parseLine(path: StrPath, number: int, line: str) -> tuple[str, ScramVerifier]:
    """
    The user and verifier on line C{number} of the user file.

    @raise UserFileError: the line is malformed.
    """
    fields = line.split(":")
    if len(fields) != 6:
        raise UserFileError(path, number, "expected name:SCRAM-SHA-256:iterations:salt:storedKey:serverKey")
    name, mechanism, count, *keys = fields
    if mechanism != MECHANISM:
        raise UserFileError(path, number, f"unknown mechanism {mechanism!r}")
    if not count.isdigit() or int(count) < MIN_ITERATIONS:
        raise UserFileError(path, number, f"the iteration count must be a number of at least {MIN_ITERATIONS}")
    try:
        checkName(name)
        salt, storedKey, serverKey = (base64.b64decode(k, validate=True) for k in keys)
    except InvalidName as e:
        raise UserFileError(path, number, str(e)) from None
    except (binascii.Error, ValueError):
        raise UserFileError(path, number, "a salt or key is not valid base64") from None
    if not salt or len(storedKey) != _KEY_BYTES or len(serverKey) != _KEY_BYTES:
        raise UserFileError(path, number, "the salt is empty or a key is not 32 bytes")
    return name, ScramVerifier(salt, int(count), storedKey, serverKey)


def loadUsers(path: StrPath) -> dict[str, ScramVerifier]:
    """
    Every user in the file at C{path}.

    @raise UserFileError: the file cannot be read, a line is malformed, or a name appears twice.
    """
    users: dict[str, ScramVerifier] = {}
    for number, line in entries(path, UserFileError):
        name, verifier = parseLine(path, number, line)
        if name in users:
            raise UserFileError(path, number, f"the user {name!r} appears twice")
        users[name] = verifier
    return users


@implementer(ICredentialsChecker)
class UserFile:
    """
    A C{twisted.cred} checker for SCRAM proofs (and, for local use, plain passwords) against a user file.

    @cvar credentialsInterfaces: the same, by the name the issue's brief used.
    @cvar credentialInterfaces: L{IScramResponse} and C{IUsernamePassword}.
    """

    credentialInterfaces = (IScramResponse, IUsernamePassword)
    credentialsInterfaces = credentialInterfaces
    _log = Logger()

    def __init__(self, path: StrPath, decoyKey: bytes | None = None) -> None:
        """
        @param path: the user file.
        @param decoyKey: what unknown names' decoys derive from; if C{None},
            the key in L{decoyKeyPath}, made there if missing.
        @raise UserFileError: the user file is missing or malformed, or the
            decoy key file cannot be read or made (make it with
            C{chunkwire-adduser}, which writes it beside the user file).
        """
        self._path = path
        self._stamp = self._statStamp()
        self._users = loadUsers(path)
        self._counts = _countsOf(self._users)
        self._decoyKey = decoyKey if decoyKey is not None else sharedKey(decoyKeyPath(path), UserFileError)

    def _statStamp(self) -> tuple[int, int, int] | None:
        try:
            s = os.stat(self._path)
        except OSError:
            return None
        return (s.st_mtime_ns, s.st_size, s.st_ino)

    def _refresh(self) -> None:
        stamp = self._statStamp()
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            self._users = loadUsers(self._path)
        except UserFileError as e:
            self._users = {}
            self._log.error("Refusing every login until the user file is fixed: {reason}", reason=str(e))
        self._counts = _countsOf(self._users)

    def verifier(self, username: str) -> ScramVerifier | None:
        """
        The verifier of C{username}, from the file as it is now; C{None} for an unknown user.

        Suitable as L{framing.login._scram.ScramServer}'s C{lookup}.
        """
        self._refresh()
        return self._users.get(username)

    def scramVerifier(self, username: str) -> ScramVerifier:
        """
        The verifier C{username} is shown: their own, or the decoy of an unknown name (see the module docstring).

        Suitable as L{framing.login._scram.ScramServer}'s C{lookup} (it never answers C{None}).
        """
        return self.lookup(username)[0]

    def lookup(self, username: str) -> tuple[ScramVerifier, bool]:
        """
        The verifier C{username} is shown and whether it is theirs: the decoy is derived either way.
        """
        self._refresh()
        decoy = decoyVerifier(self._decoyKey, username, self._counts)
        verifier = self._users.get(username)
        return (decoy, False) if verifier is None else (verifier, True)

    def decoyIterations(self) -> int:
        """
        The iteration count most users in the file have (L{DEFAULT_ITERATIONS} for an empty file).

        (Older API: L{scramVerifier} shows unknown names each real count as
        often as users have it, which this single count cannot.)
        """
        self._refresh()
        counts = Counter(verifier.iterations for verifier in self._users.values())
        return counts.most_common(1)[0][0] if counts else DEFAULT_ITERATIONS

    def requestAvatarId(self, credentials: Any) -> Deferred[bytes]:
        """
        The user's name (UTF-8 bytes) if C{credentials} prove the password, else a failed Deferred.

        @param credentials: an L{IScramResponse} (its proof is checked against
            the stored key) or an C{IUsernamePassword} (the verifier is derived
            again from the password and compared).
        @return: a Deferred that fires with the avatar id, or fails with
            C{UnauthorizedLogin}, with the same text for an unknown user and a wrong password.
        """
        username = getattr(credentials, "username", b"")
        try:
            name = username.decode("utf-8")
        except (AttributeError, UnicodeDecodeError):
            # Still a lookup (of a name no file holds), so that this refusal costs what others do.
            name, username = "", b""
        verifier, known = self.lookup(name)
        if IScramResponse.providedBy(credentials):
            good = credentials.checkProof(verifier.storedKey)
        elif IUsernamePassword.providedBy(credentials):
            good = self._checkPassword(verifier, credentials.password)
        else:
            good = False
        if good and known:
            return succeed(bytes(username))
        return fail(UnauthorizedLogin(REFUSAL))

    def _checkPassword(self, verifier: ScramVerifier, password: bytes) -> bool:
        # A decoy is derived at its own salt and count, as a real verifier is: the same work.
        derived = ScramVerifier.fromPassword(password, verifier.salt, verifier.iterations)
        return hmac.compare_digest(derived.storedKey, verifier.storedKey)


def _countsOf(users: dict[str, ScramVerifier]) -> tuple[int, ...]:
    """Every user's iteration count, sorted: what decoys draw theirs from, the same in every process."""
    return tuple(sorted(verifier.iterations for verifier in users.values()))


def addUser(path: StrPath, username: str, password: bytes, iterations: int = DEFAULT_ITERATIONS) -> bool:
    """
    Add C{username} to the user file at C{path}, or replace their verifier;
    creates the file (mode 0600), and its decoy key beside it (L{decoyKeyPath}) if missing.

    @param password: the password's bytes; it is not stored, only its salted verifier.
    @param iterations: PBKDF2 rounds, at least L{MIN_ITERATIONS}.
    @return: whether C{username} was already there (their verifier replaced).
    @raise InvalidName: the name cannot be stored.
    @raise ValueError: the password is empty or C{iterations} is too small.
    @raise UserFileError: the existing file is malformed (it is left alone).
    """
    checkName(username)
    if not password:
        raise ValueError("the password is empty")
    verifier = ScramVerifier.fromPassword(password, iterations=iterations)
    if os.path.exists(path):
        loadUsers(path)
    sharedKey(decoyKeyPath(path), UserFileError)
    return replaceEntry(path, username, formatLine(username, verifier))


def removeUser(path: StrPath, username: str) -> bool:
    """
    Remove C{username} from the user file at C{path}.

    @return: whether the user was there.
    @raise UserFileError: the file is malformed (it is left alone).
    """
    if not os.path.exists(path):
        return False
    loadUsers(path)
    return replaceEntry(path, username, None)
