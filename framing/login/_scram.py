# -*- test-case-name: tests.protocols.auth.test_scram,tests.framing.login.test_exchange -*-
"""SCRAM-SHA-256 (RFC 5802, RFC 7677): password logins that put nothing replayable on the wire.

Contract: sans-IO and free of Twisted.  L{ScramClient} and L{ScramServer}
turn the four SCRAM messages into bytes and back; the password never leaves
the client, and the server keeps only a L{ScramVerifier}.  An unknown user
gets a L{decoyVerifier} and a refusal that looks like a wrong password.
Limits: no channel binding, no authorization identity, no SASLprep; a user
name is text whose UTF-8 fits in L{MAX_NAME_BYTES}, a password is bytes, a
message is at most L{MAX_MESSAGE_BYTES}.  Anything malformed, out of order
or unproven raises a L{ScramError}, never another exception.

Cost: the client pays C{iterations} HMAC-SHA-256 rounds per login (about
73 ms at L{DEFAULT_ITERATIONS}); the server a handful of HMACs (about 60
microseconds), whatever the count.

Design: docs/design/auth.md
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

MECHANISM = "SCRAM-SHA-256"

# Measured with hashlib.pbkdf2_hmac on the development machine (2 shared
# cores, Python 3.11): 400,000 rounds cost about 73 ms of CPU (median of 5),
# the client's price of one login and an offline guesser's price of one
# guess per user.  The server's price of a login does not depend on it.
DEFAULT_ITERATIONS = 400_000

# RFC 7677 section 4: a client refuses fewer rounds than this.
MIN_ITERATIONS = 4096

# A client refuses more: a hostile server could otherwise make it burn minutes.
MAX_ITERATIONS = 10_000_000

MAX_MESSAGE_BYTES = 1024
MAX_NAME_BYTES = 255

_GS2_HEADERS = (b"n,,", b"y,,")
_KEY_BYTES = 32
_MAX_NONCE = 200
_MAX_SALT = 256
# Every '=' in a saslname starts one of the two escapes.
_SASLNAME = re.compile(rb"(?:[^=]|=2C|=3D)*")


class ScramError(Exception):
    """
    A SCRAM exchange failed: a malformed message, one out of order, or a check that did not pass.

    @cvar code: a short machine-readable reason, one per subclass.
    """

    code = "scram"


class MalformedMessage(ScramError):
    """A message does not parse, breaks a limit, or carries a nonce that is not this exchange's."""

    code = "malformed"


class OutOfOrder(ScramError):
    """A method was called before the message it depends on was seen."""

    code = "out-of-order"


class ServerRefused(ScramError):
    """
    The server's final message was C{e=...}.

    @ivar reason: the server's error value, e.g. C{"invalid-proof"}.
    """

    code = "refused"

    def __init__(self, reason: str) -> None:
        super().__init__(f"server refused the login: {reason}")
        self.reason = reason


class BadServerSignature(ScramError):
    """The server's signature does not match: it does not hold this user's verifier."""

    code = "bad-server-signature"


class Unproven(ScramError):
    """The server was asked for its final message before the client's proof was checked and found good."""

    code = "unproven"


def _hmac(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def saltedPassword(password: bytes, salt: bytes, iterations: int) -> bytes:
    """
    RFC 5802's C{Hi(password, salt, i)}: PBKDF2-HMAC-SHA-256 with a 32-byte output.

    @param password: the password's bytes.
    @param salt: the user's salt.
    @param iterations: the number of HMAC rounds.
    @return: the 32-byte salted password.
    """
    return hashlib.pbkdf2_hmac("sha256", password, salt, iterations)


@dataclass(frozen=True)
class ScramVerifier:
    """
    What a server stores for one user: enough to check a proof and sign, not enough to log in.

    @ivar salt: the user's random salt.
    @ivar iterations: the PBKDF2 rounds the client must spend.
    @ivar storedKey: C{H(HMAC(SaltedPassword, "Client Key"))}.
    @ivar serverKey: C{HMAC(SaltedPassword, "Server Key")}.
    """

    salt: bytes
    iterations: int
    storedKey: bytes
    serverKey: bytes

    @classmethod
    def fromPassword(
        cls, password: bytes, salt: bytes | None = None, iterations: int = DEFAULT_ITERATIONS
    ) -> ScramVerifier:
        """
        Derive the verifier for C{password}, spending C{iterations} rounds.

        @param password: the password's bytes.
        @param salt: the salt; 16 fresh random bytes when omitted.
        @param iterations: PBKDF2 rounds, at least L{MIN_ITERATIONS}.
        @raise ValueError: C{iterations} is below L{MIN_ITERATIONS}.
        """
        if iterations < MIN_ITERATIONS:
            raise ValueError(f"iterations must be at least {MIN_ITERATIONS}, not {iterations}")
        if salt is None:
            salt = os.urandom(16)
        salted = saltedPassword(password, salt, iterations)
        storedKey = hashlib.sha256(_hmac(salted, b"Client Key")).digest()
        return cls(salt, iterations, storedKey, _hmac(salted, b"Server Key"))


def decoyVerifier(secret: bytes, username: str, iterations: int | Sequence[int]) -> ScramVerifier:
    """
    A made-up verifier for a user who does not exist, the same for the same name every time.

    Derived by HMACs of C{secret} and the name, so probing one name twice
    shows the same salt (a random one would give the name away).  Nobody
    knows a password that matches it, as long as C{secret} stays secret;
    keep C{secret} the same across restarts and worker processes (a user
    file keeps its own beside it), or a name's salt changes between them.
    Always four HMACs, whatever C{iterations} is, so that a server can make
    one for every name it is asked about, known or not, and do the same
    work for both.

    @param secret: the server's private bytes.
    @param username: the unknown name.
    @param iterations: the iteration count to announce, or the counts real
        users have, one per user (in any fixed order): the name then shows
        one of them, chosen by an HMAC of the name, so across names each
        count shows as often as real users have it.
    """
    name = username.encode("utf-8", "surrogatepass")
    choice = _hmac(secret, b"iterations\0" + name)
    if not isinstance(iterations, int):
        iterations = (
            iterations[int.from_bytes(choice[:8], "big") % len(iterations)] if iterations else DEFAULT_ITERATIONS
        )
    return ScramVerifier(
        salt=_hmac(secret, b"salt\0" + name)[:16],
        iterations=iterations,
        storedKey=_hmac(secret, b"stored-key\0" + name),
        serverKey=_hmac(secret, b"server-key\0" + name),
    )


def serverError(reason: str = "invalid-proof") -> bytes:
    """
    A server-final-message refusing the login, C{e=reason} (RFC 5802 section 7's C{server-error}).

    The default, C{invalid-proof}, is the right answer for a wrong password
    and an unknown user alike: C{unknown-user} would tell who exists.

    @param reason: one of RFC 5802's server-error-values.
    @raise ValueError: C{reason} is not a C{value-safe-char} string (it would break the message).
    """
    if not reason or any(not 0x21 <= ord(c) <= 0x7E or c in ",=" for c in reason):
        raise ValueError(f"not a SCRAM server-error-value: {reason!r}")
    return b"e=" + reason.encode("ascii")


def escapeName(username: str) -> bytes:
    """
    The UTF-8 of C{username} as a SCRAM C{saslname}: C{=} as C{=3D}, C{,} as C{=2C}.

    @raise MalformedMessage: the name is empty, too long, or not encodable as UTF-8.
    """
    try:
        name = username.encode("utf-8")
    except UnicodeEncodeError:
        raise MalformedMessage("the user name is not valid text") from None
    if not name or len(name) > MAX_NAME_BYTES:
        raise MalformedMessage(f"the user name must be 1 to {MAX_NAME_BYTES} bytes")
    return name.replace(b"=", b"=3D").replace(b",", b"=2C")


def unescapeName(saslname: bytes) -> str:
    """
    The user name a C{saslname} spells: the reverse of L{escapeName}.

    @raise MalformedMessage: a bare C{=}, invalid UTF-8, or a name out of bounds.
    """
    if not _SASLNAME.fullmatch(saslname):
        raise MalformedMessage("a user name has an '=' that is not '=2C' or '=3D'")
    name = saslname.replace(b"=2C", b",").replace(b"=3D", b"=")
    if not name or len(name) > MAX_NAME_BYTES:
        raise MalformedMessage(f"the user name must be 1 to {MAX_NAME_BYTES} bytes")
    try:
        return name.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedMessage("the user name is not valid UTF-8") from None


def clientFirstName(clientFirst: bytes) -> str | None:
    """
    The user name a client-first-message claims, or C{None} if it is malformed.

    Read before the exchange starts (the login throttle counts attempts per
    address and name); the exchange itself parses the message again.
    """
    try:
        if clientFirst[:3] not in _GS2_HEADERS:
            return None
        name, _ = _attributes(clientFirst[3:], b"nr")
        return unescapeName(name)
    except ScramError:
        return None


def _attributes(message: bytes, expected: bytes) -> list[bytes]:
    """
    The values of the attributes C{message} must start with, in order; extensions after them are ignored.

    @param expected: the attribute letters, e.g. C{b"rsi"}.
    @raise MalformedMessage: too long, or the attributes are not there in that order.
    """
    if len(message) > MAX_MESSAGE_BYTES:
        raise MalformedMessage(f"a SCRAM message is over {MAX_MESSAGE_BYTES} bytes")
    parts = message.split(b",")
    if len(parts) < len(expected):
        raise MalformedMessage(f"a SCRAM message needs the attributes {expected.decode()}")
    values = []
    for letter, part in zip(expected, parts, strict=False):
        if part[:2] != bytes([letter]) + b"=":
            raise MalformedMessage(f"expected the attribute {chr(letter)}= in a SCRAM message")
        values.append(part[2:])
    for extra in parts[len(expected) :]:
        if len(extra) < 2 or extra[1:2] != b"=" or not extra[:1].isalpha() or extra[:1] == b"m":
            raise MalformedMessage("a SCRAM message has a malformed or mandatory extension")
    return values


def _nonce(value: bytes) -> str:
    """
    C{value} as a nonce: 1 to 200 printable ASCII characters, no comma.

    @raise MalformedMessage: it is not one.
    """
    if not 0 < len(value) <= _MAX_NONCE or any(not 0x21 <= c <= 0x7E or c == 0x2C for c in value):
        raise MalformedMessage("a SCRAM nonce must be 1 to 200 printable characters without a comma")
    return value.decode("ascii")


def _b64decode(value: bytes, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise MalformedMessage(f"the {what} is not valid base64") from None


def _b64(data: bytes) -> bytes:
    return base64.b64encode(data)


def _freshNonce() -> str:
    return base64.b64encode(os.urandom(24)).decode("ascii")


def _authMessage(clientFirstBare: bytes, serverFirst: bytes, clientFinalBare: bytes) -> bytes:
    return clientFirstBare + b"," + serverFirst + b"," + clientFinalBare


def _clientProof(salted: bytes, authMessage: bytes) -> bytes:
    clientKey = _hmac(salted, b"Client Key")
    storedKey = hashlib.sha256(clientKey).digest()
    return _xor(clientKey, _hmac(storedKey, authMessage))


class ScramResponse:
    """
    The proof from one client-final-message, bound to this exchange's messages.

    @ivar username: the UTF-8 user name.
    @ivar authMessage: RFC 5802's AuthMessage: the three messages the proof is bound to.
    @ivar checked: C{True} once L{checkProof} has found the proof good.
    """

    def __init__(self, username: bytes, authMessage: bytes, proof: bytes) -> None:
        """
        @param username: the UTF-8 user name.
        @param authMessage: RFC 5802's AuthMessage for this exchange.
        @param proof: the decoded ClientProof.
        """
        self.username = username
        self.checked = False
        self.authMessage = authMessage
        self._proof = proof

    def checkProof(self, storedKey: bytes) -> bool:
        """
        Recover the ClientKey from the proof and compare its hash with C{storedKey} in constant time.

        @param storedKey: the user's L{ScramVerifier.storedKey}.
        @return: whether the proof is good; a good one sets L{checked}.
        """
        clientKey = _xor(self._proof, _hmac(storedKey, self.authMessage))
        good = hmac.compare_digest(hashlib.sha256(clientKey).digest(), storedKey)
        if good:
            self.checked = True
        return good

    def __repr__(self) -> str:
        return f"<ScramResponse for {self.username!r} checked={self.checked}>"


class ScramClient:
    """
    The client's side of one SCRAM-SHA-256 login: L{first}, then L{final}, then L{verify}.

    The password is dropped once L{final} has used it.
    """

    def __init__(self, username: str, password: bytes, nonce: str | None = None) -> None:
        """
        @param username: the user's name (escaped on the wire as RFC 5802 says).
        @param password: the password's bytes.
        @param nonce: the client nonce; 24 random bytes in base64 when omitted (tests pass their own).
        @raise ScramError: the name or the nonce is unusable.
        """
        nonce = _freshNonce() if nonce is None else nonce
        self._nonce = _nonce(nonce.encode("utf-8", "surrogatepass"))
        self._bare = b"n=" + escapeName(username) + b",r=" + self._nonce.encode("ascii")
        self._password: bytes | None = password
        self._serverSignature: bytes | None = None

    def first(self) -> bytes:
        """The client-first-message: the GS2 header C{n,,}, the name and the client nonce."""
        return b"n,," + self._bare

    def final(self, serverFirst: bytes) -> bytes:
        """
        The client-final-message for C{serverFirst}, with the proof; spends the iteration count's rounds.

        @raise ScramError: C{serverFirst} is malformed, its nonce does not extend
            ours, its iteration count is out of bounds, or this was called twice.
        """
        if self._password is None:
            raise OutOfOrder("the client-final-message was already made")
        nonce, salt, iterations = self._parseServerFirst(serverFirst)
        salted = saltedPassword(self._password, salt, iterations)
        self._password = None
        finalBare = b"c=biws,r=" + nonce
        authMessage = _authMessage(self._bare, serverFirst, finalBare)
        self._serverSignature = _hmac(_hmac(salted, b"Server Key"), authMessage)
        return finalBare + b",p=" + _b64(_clientProof(salted, authMessage))

    def _parseServerFirst(self, serverFirst: bytes) -> tuple[bytes, bytes, int]:
        nonce, salt, count = _attributes(serverFirst, b"rsi")
        if not _nonce(nonce).startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise MalformedMessage("the server nonce does not extend the client's")
        if not count.isdigit() or len(count) > 10:
            raise MalformedMessage("the iteration count is not a number")
        iterations = int(count)
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise MalformedMessage(f"the iteration count {iterations} is outside {MIN_ITERATIONS}..{MAX_ITERATIONS}")
        decoded = _b64decode(salt, "salt")
        if not 0 < len(decoded) <= _MAX_SALT:
            raise MalformedMessage("the salt is empty or too long")
        return nonce, decoded, iterations

    def verify(self, serverFinal: bytes) -> None:
        """
        Check the server-final-message: the server must prove it holds this user's verifier.

        @raise ServerRefused: the server sent C{e=...}.
        @raise ScramError: the message is malformed, the signature does not
            match, or L{final} has not been called.
        """
        if self._serverSignature is None:
            raise OutOfOrder("the server-final-message came before the client-final-message")
        if serverFinal.startswith(b"e="):
            if len(serverFinal) > MAX_MESSAGE_BYTES:
                raise MalformedMessage("the server's error is too long")
            raise ServerRefused(serverFinal[2:].decode("ascii", "replace"))
        (signature,) = _attributes(serverFinal, b"v")[:1]
        if not hmac.compare_digest(_b64decode(signature, "server signature"), self._serverSignature):
            raise BadServerSignature("the server's signature does not match: it does not know this user")


class ScramServer:
    """
    The server's side of one SCRAM-SHA-256 login: L{first}, then L{response}, then L{final}.

    Between L{response} and L{final} the driver hands the L{ScramResponse}
    to a C{twisted.cred} portal, whose checker calls L{ScramResponse.checkProof}.

    @ivar username: the name the client gave, once L{first} has seen it (C{""} before).
    """

    def __init__(
        self,
        lookup: Callable[[str], ScramVerifier | None],
        secret: bytes,
        nonce: str | None = None,
        decoyIterations: int = DEFAULT_ITERATIONS,
    ) -> None:
        """
        @param lookup: the user's verifier by name, or C{None} for an unknown user.
        @param secret: the server's private bytes for L{decoyVerifier}.
        @param nonce: the server's part of the nonce; 24 random bytes in base64 when omitted.
        @param decoyIterations: the iteration count an unknown user is shown: the one real users have.
        """
        self.username = ""
        self._lookup = lookup
        self._secret = secret
        self._serverNonce = _nonce((_freshNonce() if nonce is None else nonce).encode("utf-8", "surrogatepass"))
        self._decoyIterations = decoyIterations
        self._verifier: ScramVerifier | None = None
        self._nonceValue = b""
        self._firstMessages = b""
        self._gs2Header = b""
        self._response: ScramResponse | None = None

    def first(self, clientFirst: bytes) -> bytes:
        """
        The server-first-message answering C{clientFirst}; an unknown user gets a decoy of the same shape.

        @raise ScramError: C{clientFirst} is malformed or asks for channel binding, or this was called twice.
        """
        if self._verifier is not None:
            raise OutOfOrder("the client-first-message was already received")
        if clientFirst[:3] not in _GS2_HEADERS:
            raise MalformedMessage("the GS2 header must be 'n,,' (no channel binding, no authorization identity)")
        name, clientNonce = _attributes(clientFirst[3:], b"nr")
        username = unescapeName(name)
        nonce = (_nonce(clientNonce) + self._serverNonce).encode("ascii")
        verifier = self._lookup(username) or decoyVerifier(self._secret, username, self._decoyIterations)
        serverFirst = b"r=" + nonce + b",s=" + _b64(verifier.salt) + b",i=" + str(verifier.iterations).encode()
        self.username = username
        self._verifier = verifier
        self._nonceValue = nonce
        self._gs2Header = clientFirst[:3]
        self._firstMessages = clientFirst[3:] + b"," + serverFirst
        return serverFirst

    def response(self, clientFinal: bytes) -> ScramResponse:
        """
        The credentials in C{clientFinal}, for C{portal.login}.

        @raise ScramError: C{clientFinal} is malformed, its channel binding or
            nonce is not this exchange's (a replayed message), or it came out of order.
        """
        if self._verifier is None or self._response is not None:
            raise OutOfOrder("a client-final-message must follow one client-first-message")
        if len(clientFinal) > MAX_MESSAGE_BYTES:
            raise MalformedMessage(f"a SCRAM message is over {MAX_MESSAGE_BYTES} bytes")
        cut = clientFinal.rfind(b",p=")
        if cut < 0:
            raise MalformedMessage("the client-final-message has no proof")
        finalBare, proof = clientFinal[:cut], _b64decode(clientFinal[cut + 3 :], "proof")
        channel, nonce = _attributes(finalBare, b"cr")[:2]
        if channel != _b64(self._gs2Header):
            raise MalformedMessage("the channel binding does not repeat the GS2 header")
        if not hmac.compare_digest(nonce, self._nonceValue):
            raise MalformedMessage("the nonce is not this exchange's")
        if len(proof) != _KEY_BYTES:
            raise MalformedMessage("the proof is not 32 bytes")
        authMessage = self._firstMessages + b"," + finalBare
        self._response = ScramResponse(self.username.encode("utf-8"), authMessage, proof)
        return self._response

    def final(self) -> bytes:
        """
        The server-final-message C{v=...}, proving the server holds the verifier.

        @raise Unproven: the client's proof has not been checked and found good.
        """
        if self._response is None or self._verifier is None or not self._response.checked:
            raise Unproven("the client's proof has not been checked")
        return b"v=" + _b64(_hmac(self._verifier.serverKey, self._response.authMessage))
