# -*- test-case-name: tests.framing.login.test_exchange,tests.protocols.test_asyncioclient_logins -*-
"""The client's side of a login, sans-IO: which messages to send, and what the server's answers mean.

Contract: a L{ClientExchange} runs one login with one L{ClientMechanism}.
L{ClientExchange.start} gives the first message to send; each message
from the server goes to L{ClientExchange.receive}, which returns the next
message to send, or C{None} once the server accepted and the mechanism's
last check passed (SCRAM's server signature; L{ClientExchange.state} is then L{LOGGED_IN}).  Anything
else raises, and the exchange is L{FAILED} from then on: L{LoginRefused}
(the same for every reason), L{ServerNotVerified}, or L{LoginBroken} (a message or
verb out of turn; L{ClientExchange.refused} for a message the decoder refused).  The Twisted,
blocking and asyncio clients all drive this class, the last two through
L{ByteExchange}, which also encodes and decodes the messages.  The steps are
those of docs/wire-format.md, section 13.

The credentials (L{clientMechanism} picks the mechanism): L{Password}
(SCRAM-SHA-256: the password never leaves), L{Token} (a bearer token),
L{ClientCertificate} (the TLS client certificate speaks), L{ObjectName}
(the name from a self-authenticating URL), L{Anonymous}.  None of them
shows its secret in its C{repr}.
"""

from __future__ import annotations

from typing import Any, Protocol

from framing import Decoder, Encoder, Violation
from framing._errors import short_repr

from ._errors import LoginBroken, LoginFailed, LoginRefused, ServerNotVerified, UnsupportedCredentials
from ._scram import ScramClient, ScramError
from ._wire import (
    ACCEPTED,
    ANONYMOUS,
    CERTIFICATE,
    CHALLENGE,
    CONTINUE,
    NAME,
    PRE_LOGIN_LIMITS,
    REFUSED,
    SCRAM,
    START,
    TOKEN,
    LoginMessage,
    loginRegistry,
)

WANT_ANSWER, LOGGED_IN, FAILED = "WANT_ANSWER", "LOGGED_IN", "FAILED"
"""An exchange's states: waiting for the server, logged in, failed (for good)."""


# -- credentials -----------------------------------------------------------------------


class Password:
    """Log in as C{username} with C{password}, by SCRAM-SHA-256: the password never crosses the wire."""

    def __init__(self, username: str, password: str | bytes) -> None:
        """
        @param username: the user's name.
        @param password: the password (text is sent as its UTF-8, as C{chunkwire-adduser} stores it).
        """
        self.username = username
        self.password = password.encode("utf-8") if isinstance(password, str) else password

    def __repr__(self) -> str:
        return f"Password({self.username!r}, <hidden>)"


class Token:
    """Log in with a bearer token (as C{chunkwire-token} issues them)."""

    def __init__(self, token: str | bytes) -> None:
        self.token = token.encode("ascii") if isinstance(token, str) else token

    def __repr__(self) -> str:
        return "Token(<hidden>)"


class ClientCertificate:
    """Log in as the client certificate this connection's TLS presented."""


class ObjectName:
    """Log in by an object's name from a self-authenticating URL (what C{connectURL} sends)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return "ObjectName(<hidden>)"


class Anonymous:
    """Log in as nobody in particular, where the server allows it."""


# -- mechanisms ------------------------------------------------------------------------


class ClientMechanism(Protocol):
    """One login's client side: its name, its first message, its answers, and its last check."""

    name: str

    def first(self) -> bytes:
        """The payload of the C{"start"} message."""

    def respond(self, challenge: bytes) -> bytes:
        """
        The payload of the C{"continue"} answering C{challenge}.

        @raise LoginFailed: the challenge is not acceptable.
        """

    def verify(self, final: bytes) -> None:
        """
        Check the C{"accepted"} message's payload.

        @raise LoginFailed: the server did not prove what it must.
        """


class OneMessage:
    """A mechanism that says everything in its first message (token, anonymous, certificate, name)."""

    def __init__(self, name: str, payload: bytes = b"") -> None:
        self.name = name
        self._payload = payload

    def first(self) -> bytes:
        return self._payload

    def respond(self, challenge: bytes) -> bytes:
        raise LoginBroken(f"the server challenged a {self.name} login, which takes no challenge")

    def verify(self, final: bytes) -> None:
        return None


class ScramMechanism:
    """SCRAM-SHA-256: the password never leaves; the server proves it knows the verifier."""

    name = SCRAM

    def __init__(self, username: bytes, password: bytes, nonce: str | None = None) -> None:
        """
        @param username: the user name's UTF-8.
        @param password: the password's bytes.
        @param nonce: the client nonce; fresh random when omitted (the login
            vectors pass a fixed one: see L{framing.login._scram.ScramClient}).
        """
        self._client = ScramClient(username.decode("utf-8"), password, nonce)

    def first(self) -> bytes:
        return self._client.first()

    def respond(self, challenge: bytes) -> bytes:
        try:
            return self._client.final(challenge)
        except ScramError as error:
            raise ServerNotVerified(f"the server's SCRAM challenge was not acceptable: {error}") from None

    def verify(self, final: bytes) -> None:
        try:
            self._client.verify(final)
        except ScramError as error:
            raise ServerNotVerified(f"the server did not prove it knows the password: {error}") from None


def clientMechanism(credentials: Any) -> ClientMechanism:
    """
    The client mechanism for C{credentials}: L{Password} (SCRAM), L{Token},
    L{ClientCertificate}, L{ObjectName} or L{Anonymous}.

    @raise UnsupportedCredentials: none of those.
    """
    if isinstance(credentials, Password):
        return ScramMechanism(credentials.username.encode("utf-8"), credentials.password)
    if isinstance(credentials, Token):
        return OneMessage(TOKEN, credentials.token)
    if isinstance(credentials, ClientCertificate):
        return OneMessage(CERTIFICATE)
    if isinstance(credentials, ObjectName):
        return OneMessage(NAME, credentials.name.encode("ascii"))
    if isinstance(credentials, Anonymous):
        return OneMessage(ANONYMOUS)
    raise UnsupportedCredentials(f"no login mechanism for {type(credentials).__name__} credentials")


# -- the exchange ----------------------------------------------------------------------


class ClientExchange:
    """
    One login, from the client's side (see the module docstring).

    @ivar mechanism: the L{ClientMechanism}.
    @ivar state: L{WANT_ANSWER}, L{LOGGED_IN} or L{FAILED}.
    """

    def __init__(self, mechanism: ClientMechanism) -> None:
        self.mechanism = mechanism
        self.state = WANT_ANSWER

    def start(self) -> LoginMessage:
        """The first message to send: C{"start"} with the mechanism's first payload."""
        return LoginMessage.of(START, self.mechanism.name, self.mechanism.first())

    def receive(self, obj: Any) -> LoginMessage | None:
        """
        Take one object the server sent during the login.

        @return: the message to send next, or C{None}: logged in.
        @raise LoginFailed: the login failed (see the module docstring for which); the state is L{FAILED}.
        """
        if self.state is not WANT_ANSWER:
            raise LoginBroken(f"the server sent {short_repr(obj)} after the login was over")
        try:
            return self._step(obj)
        except LoginFailed:
            self.state = FAILED
            raise

    def refused(self, violation: Violation) -> None:
        """
        The decoder refused what the server sent during the login.

        @raise LoginBroken: always; the state is L{FAILED}.
        """
        self.state = FAILED
        raise LoginBroken(f"the server sent something refused during the login ({violation})")

    def _step(self, obj: Any) -> LoginMessage | None:
        if type(obj) is not LoginMessage or obj.mechanism != self.mechanism.name:
            raise LoginBroken(f"the server sent {short_repr(obj)} during the login")
        verb = obj.verb
        if verb == CHALLENGE:
            return LoginMessage.of(CONTINUE, self.mechanism.name, self.mechanism.respond(obj.payload))
        if verb == ACCEPTED:
            self.mechanism.verify(obj.payload)
            self.state = LOGGED_IN
            return None
        if verb == REFUSED:
            raise LoginRefused("the server refused the login")
        raise LoginBroken(f"the server sent a login {verb!r}")


# -- the exchange as bytes ---------------------------------------------------------------


class ByteExchange:
    """
    A L{ClientExchange} carried as bytes, for the clients that read and
    write a stream themselves (L{protocols.blocking} and
    L{protocols.asyncioclient}): the encoding, the decoding and the
    judging of a login are all here, so each of them only moves bytes and
    waits.  The login messages have a registry and limits of their own
    (L{loginRegistry}, L{PRE_LOGIN_LIMITS}: those of a server before a
    login), so what comes before the login never reaches the RPC decoder.

    Use: send L{start}'s bytes; give each chunk read to L{receive} and send
    what it returns, until L{done}.

    @ivar exchange: the L{ClientExchange}.
    """

    readSize = PRE_LOGIN_LIMITS.max_buffered_bytes
    """Bytes worth asking of one read during a login: no more can be buffered."""

    def __init__(self, credentials: Any) -> None:
        """
        @raise UnsupportedCredentials: no mechanism takes C{credentials}.
        """
        self.exchange = ClientExchange(clientMechanism(credentials))
        registry = loginRegistry()
        self._encoder = Encoder(registry)
        self._decoder = Decoder(PRE_LOGIN_LIMITS, registry, preamble=False)

    @property
    def done(self) -> bool:
        """Logged in: the server accepted, and the mechanism's last check passed."""
        return self.exchange.state is LOGGED_IN

    def start(self) -> bytes:
        """The bytes of the first login message."""
        return self._encoder.encode(self.exchange.start())

    def receive(self, chunk: bytes) -> bytes:
        """
        Take C{chunk}, read from the server.

        @return: the bytes to send in reply (maybe none).
        @raise LoginFailed: the login failed (see the module docstring for which).
        """
        replies = []
        for obj in self._decoder.feed(chunk):
            if isinstance(obj, Violation):
                self.exchange.refused(obj)
            reply = self.exchange.receive(obj)
            if reply is not None:
                replies.append(self._encoder.encode(reply))
        self._decoder.control_events.clear()  # a PING during a login: the answer to the login is answer enough
        return b"".join(replies)
