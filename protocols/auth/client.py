"""The client's side of a login: a receiver in front of its broker until the server accepts.

Contract: L{ClientLogin} starts the exchange as soon as the connection is
up, answers the server's challenges, and on C{"accepted"} checks what the
mechanism must check (SCRAM's server signature) before it hands the
connection to the broker and fires L{ClientLogin.done} with the server's
root for this login.  A refusal, a failed check, anything but the login
exchange from the server, or the connection ending first fails C{done}
(L{LoginRefused}, L{ServerNotVerified}, or the connection's reason), and
the connection is closed.  Which mechanism runs is chosen by the
credentials' type (L{mechanismFor}).
"""

from __future__ import annotations

from typing import Any, Protocol

from twisted.cred.credentials import IAnonymous, IUsernamePassword
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure
from zope.interface import implementer

from framing import Violation
from framing.errors import short_repr

from ..interfaces import IObjectReceiver
from .errors import LoginFailed, LoginRefused, NotLoggedIn, ServerNotVerified, UnsupportedCredentials
from .wire import (
    ACCEPTED,
    ANONYMOUS,
    CERTIFICATE,
    CHALLENGE,
    CONTINUE,
    NAME,
    REFUSED,
    SCRAM,
    START,
    TOKEN,
    LoginMessage,
)

WANT_ANSWER, LOGGED_IN, FAILED = "WANT_ANSWER", "LOGGED_IN", "FAILED"
"""The client's states: waiting for the server, logged in, failed or lost."""


class ClientCertificate:
    """Log in as the client certificate this connection's TLS presented (an C{ssl:} endpoint with C{certKey=})."""


class ObjectName:
    """Log in by an object's name from a self-authenticating URL (what L{protocols.rpc.connectURL} sends)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return "ObjectName(<hidden>)"


class ClientMechanism(Protocol):
    """One login's client side: its name, its first message, its answers, and its last check."""

    name: str

    def first(self) -> bytes: ...

    def respond(self, challenge: bytes) -> bytes: ...

    def verify(self, final: bytes) -> None: ...


class _OneMessage:
    """A mechanism that says everything in its first message (token, anonymous, certificate, name)."""

    def __init__(self, name: str, payload: bytes = b"") -> None:
        self.name = name
        self._payload = payload

    def first(self) -> bytes:
        return self._payload

    def respond(self, challenge: bytes) -> bytes:
        raise LoginFailed(f"the server challenged a {self.name} login, which takes no challenge")

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
            vectors pass a fixed one: see L{protocols.auth.scram.ScramClient}).
        """
        from .scram import ScramClient

        self._client = ScramClient(username.decode("utf-8"), password, nonce)

    def first(self) -> bytes:
        first: bytes = self._client.first()
        return first

    def respond(self, challenge: bytes) -> bytes:
        from .scram import ScramError

        try:
            final: bytes = self._client.final(challenge)
            return final
        except ScramError as error:
            raise ServerNotVerified(f"the server's SCRAM challenge was not acceptable: {error}") from None

    def verify(self, final: bytes) -> None:
        from .scram import ScramError

        try:
            self._client.verify(final)
        except ScramError as error:
            raise ServerNotVerified(f"the server did not prove it knows the password: {error}") from None


def mechanismFor(credentials: Any) -> ClientMechanism:
    """
    The client mechanism for C{credentials}: C{UsernamePassword} (SCRAM),
    L{protocols.auth.tokens.BearerToken}, C{Anonymous}, L{ClientCertificate}
    or L{ObjectName}.

    @raise UnsupportedCredentials: none of those.
    """
    if IUsernamePassword.providedBy(credentials):
        return ScramMechanism(credentials.username, credentials.password)
    if IAnonymous.providedBy(credentials):
        return _OneMessage(ANONYMOUS)
    if isinstance(credentials, ClientCertificate):
        return _OneMessage(CERTIFICATE)
    if isinstance(credentials, ObjectName):
        return _OneMessage(NAME, credentials.name.encode("ascii"))
    from .tokens import IBearerToken

    if IBearerToken.providedBy(credentials):
        return _OneMessage(TOKEN, credentials.token)
    raise UnsupportedCredentials(f"no login mechanism for {type(credentials).__name__} credentials")


@implementer(IObjectReceiver)
class ClientLogin:
    """
    The receiver of a client connection until its login is accepted.

    @ivar done: fires with the server's root (a L{protocols.rpc.RemoteReference}) once logged in.
    @ivar state: L{WANT_ANSWER}, L{LOGGED_IN} or L{FAILED}.
    """

    def __init__(self, broker: Any, mechanism: ClientMechanism) -> None:
        self.broker = broker
        self.connection = broker.connection
        self.mechanism = mechanism
        self.state = WANT_ANSWER
        self.done: Deferred[Any] = Deferred()
        self.connection.receiver = self

    def startReceiving(self, sender: Any) -> None:
        self.broker.startReceiving(sender)
        self._send(START, self.mechanism.first())

    def stopReceiving(self, reason: Failure) -> None:
        self._fail(reason)
        self.broker.stopReceiving(reason)

    def objectReceived(self, obj: Any) -> None:
        if self.state is LOGGED_IN:
            self.broker.objectReceived(obj)
        elif self.state is FAILED:
            return
        elif type(obj) is not LoginMessage or obj.mechanism != self.mechanism.name:
            self._violation(f"the server sent {short_repr(obj)} during the login")
        elif obj.verb == CHALLENGE:
            self._step(self._challenged, obj.payload)
        elif obj.verb == ACCEPTED:
            self._step(self._accepted, obj.payload)
        elif obj.verb == REFUSED:
            self._fail(_failure(LoginRefused("the server refused the login")))
            self.connection.transport.loseConnection()
        else:
            self._violation(f"the server sent a login {obj.verb!r}")

    def objectRefused(self, violation: Violation) -> None:
        if self.state is LOGGED_IN:
            self.broker.objectRefused(violation)
        elif self.state is WANT_ANSWER:
            self._violation(f"the server sent something refused during the login ({violation})")

    def _step(self, step: Any, payload: bytes) -> None:
        try:
            step(payload)
        except LoginFailed as error:
            self._fail(_failure(error))
            self.connection.transport.loseConnection()

    def _challenged(self, challenge: bytes) -> None:
        self._send(CONTINUE, self.mechanism.respond(challenge))

    def _accepted(self, final: bytes) -> None:
        self.mechanism.verify(final)
        self.state = LOGGED_IN
        self.connection.receiver = self.broker
        self.done.callback(self.broker.rootReference())

    def _violation(self, text: str) -> None:
        error = NotLoggedIn(text)
        self._fail(_failure(LoginFailed(text)))
        self.connection.failConnection(error)

    def _fail(self, failure: Failure) -> None:
        if self.state is WANT_ANSWER:
            self.state = FAILED
            self.done.errback(failure)

    def _send(self, verb: str, payload: bytes) -> None:
        self.connection.sendObject(LoginMessage.of(verb, self.mechanism.name, payload))


def _failure(error: BaseException) -> Failure:
    return Failure(error)  # type: ignore[no-untyped-call]
