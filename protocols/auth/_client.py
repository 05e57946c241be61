# -*- test-case-name: tests.protocols.auth.test_login_vectors -*-
"""The client's side of a login on Twisted: a receiver in front of its broker until the server accepts.

Contract: L{ClientLogin} starts the exchange as soon as the connection is
up, answers the server's challenges, and on C{"accepted"} checks what the
mechanism must check (SCRAM's server signature) before it hands the
connection to the broker and fires L{ClientLogin.done} with the server's
root for this login.  A refusal, a failed check, anything but the login
exchange from the server, or the connection ending first fails C{done}
(L{LoginRefused}, L{ServerNotVerified}, L{LoginBroken}, or the
connection's reason), and the connection is closed.  The exchange itself
is sans-IO, L{framing.login._exchange.ClientExchange}, the one the blocking
client drives too; this module only carries its messages.  Which mechanism
runs is chosen by the credentials' type (L{mechanismFor}).
"""

from __future__ import annotations

from typing import Any

from twisted.cred.credentials import IAnonymous, IUsernamePassword
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure
from zope.interface import implementer

from framing import Violation
from framing.login._errors import LoginBroken, LoginFailed, NotLoggedIn
from framing.login._exchange import FAILED, LOGGED_IN, WANT_ANSWER, ClientExchange, OneMessage, clientMechanism
from framing.login._exchange import ClientCertificate as ClientCertificate
from framing.login._exchange import ClientMechanism as ClientMechanism
from framing.login._exchange import ObjectName as ObjectName
from framing.login._exchange import ScramMechanism as ScramMechanism
from framing.login._wire import ANONYMOUS, TOKEN

from .._interfaces import IObjectReceiver


def mechanismFor(credentials: Any) -> ClientMechanism:
    """
    The client mechanism for C{credentials}: C{twisted.cred}'s
    C{UsernamePassword} (SCRAM) or C{Anonymous},
    L{protocols.auth._tokens.BearerToken}, or any credentials
    L{framing.login._exchange.clientMechanism} takes (L{ClientCertificate},
    L{ObjectName}, and the Twisted-free C{Password} and C{Token}).

    @raise UnsupportedCredentials: none of those.
    """
    if IUsernamePassword.providedBy(credentials):
        return ScramMechanism(credentials.username, credentials.password)
    if IAnonymous.providedBy(credentials):
        return OneMessage(ANONYMOUS)
    from ._tokens import IBearerToken

    if IBearerToken.providedBy(credentials):
        return OneMessage(TOKEN, credentials.token)
    return clientMechanism(credentials)


@implementer(IObjectReceiver)
class ClientLogin:
    """
    The receiver of a client connection until its login is accepted.

    @ivar done: fires with the server's root (a L{protocols.rpc.RemoteReference}) once logged in.
    @ivar exchange: the sans-IO L{ClientExchange}; its C{state} is L{WANT_ANSWER}, L{LOGGED_IN} or L{FAILED}.
    """

    def __init__(self, broker: Any, mechanism: ClientMechanism) -> None:
        self.broker = broker
        self.connection = broker.connection
        self.mechanism = mechanism
        self.exchange = ClientExchange(mechanism)
        self.done: Deferred[Any] = Deferred()
        self.connection.receiver = self

    @property
    def state(self) -> str:
        """L{WANT_ANSWER}, L{LOGGED_IN} or L{FAILED}: the exchange's."""
        return self.exchange.state

    def startReceiving(self, sender: Any) -> None:
        self.broker.startReceiving(sender)
        self.connection.sendObject(self.exchange.start())

    def stopReceiving(self, reason: Failure) -> None:
        self._fail(reason)
        self.broker.stopReceiving(reason)

    def objectReceived(self, obj: Any) -> None:
        state = self.exchange.state
        if state is LOGGED_IN:
            self.broker.objectReceived(obj)
        elif state is WANT_ANSWER:
            try:
                reply = self.exchange.receive(obj)
            except LoginFailed as error:
                self._failed(error)
                return
            if reply is not None:
                self.connection.sendObject(reply)
            else:
                self.connection.receiver = self.broker
                self.done.callback(self.broker.rootReference())

    def objectRefused(self, violation: Violation) -> None:
        state = self.exchange.state
        if state is LOGGED_IN:
            self.broker.objectRefused(violation)
        elif state is WANT_ANSWER:
            try:
                self.exchange.refused(violation)
            except LoginFailed as error:
                self._failed(error)

    def _failed(self, error: LoginFailed) -> None:
        """The exchange failed: fail C{done}, and end the connection (as broken, if the server broke the rules)."""
        self.done.errback(_failure(error))
        if isinstance(error, LoginBroken):
            self.connection.failConnection(NotLoggedIn(str(error)))
        else:
            self.connection.transport.loseConnection()

    def _fail(self, failure: Failure) -> None:
        if self.exchange.state is WANT_ANSWER:
            self.exchange.state = FAILED
            self.done.errback(failure)


def _failure(error: BaseException) -> Failure:
    return Failure(error)  # type: ignore[no-untyped-call]
