# -*- test-case-name: tests.protocols.auth.test_login_vectors -*-
"""The server's login gate: a receiver in front of the broker until the peer has logged in.

Contract: an L{Authenticator} is a server's login configuration (a portal,
a name table, the timeout, the throttle).  For each new connection it puts
a L{ServerLogin} in front of the connection's broker, which until a login
succeeds decodes under L{PRE_LOGIN_LIMITS} with a registry knowing only the
login message, accepts nothing but the login exchange, drops the connection
at the timeout, and refuses at once a login the L{LoginThrottle} holds back.
Every refusal is the same C{"refused"} and closes the connection.  Once a
login succeeds, the avatar is export id 0 and the broker takes over; losing
the connection calls the realm's logout.  Logins, logouts and refusals are
logged in C{chunkwire.auth} (refusals rate-limited by one L{RefusalLog});
no payload is ever logged.

Cost: nothing per message after the login.

Design: docs/design/auth.md
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from twisted.internet.defer import Deferred, maybeDeferred
from twisted.python.failure import Failure
from zope.interface import implementer

from framing import Limits, Violation
from framing._errors import short_repr
from framing.login._errors import LoginTimedOut, NotLoggedIn
from framing.login._wire import (
    ACCEPTED,
    CHALLENGE,
    CONTINUE,
    PRE_LOGIN_LIMITS,
    REFUSED,
    START,
    LoginMessage,
    loginRegistry,
)

from .._interfaces import IObjectReceiver
from .._logs import LogPolicy, NamedLogger, RefusalLog, escape
from .._proxyheader import clientAddress
from ._mechanisms import (
    NAME_MECHANISMS,
    PORTAL_MECHANISMS,
    Accepted,
    Challenge,
    LoginContext,
    Mechanism,
    Refused,
    claimedName,
    describeAvatar,
)
from ._throttle import LoginThrottle

DEFAULT_LOGIN_TIMEOUT = 10.0
"""Seconds a new connection has to log in."""

WANT_START, WANT_RESPONSE, CHECKING, LOGGED_IN, CLOSED = (
    "WANT_START",
    "WANT_RESPONSE",
    "CHECKING",
    "LOGGED_IN",
    "CLOSED",
)
"""The gate's states: waiting for the client's first message, for its
answer to a challenge, for a checker or realm, logged in (the broker
receives), and refused or lost."""


class Authenticator:
    """
    How a server lets connections in: through a C{twisted.cred} portal,
    through a table of object names, or both.

    @ivar portal: the portal (its realm is asked for L{IRemoteRoot}), or C{None}.
    @ivar names: the L{protocols.auth._names.NameTable}, or C{None}.
    @ivar timeout: seconds a connection has to log in.
    @ivar throttle: the L{LoginThrottle} of failed logins per address.
    @ivar limits: what a connection may send before it has logged in.
    @ivar mechanisms: mechanism name to L{Mechanism}.
    @ivar log: where logins, refusals and logouts are logged.
    @ivar refusals: the rate-limited log of refused logins, shared by every
        connection: a flood of refusals writes L{LogPolicy.full} lines per
        interval and then one summary line with the count, not a line each
        (its C{total} counts them all).
    """

    log = NamedLogger(namespace="chunkwire.auth")

    def __init__(
        self,
        portal: Any = None,
        names: Any = None,
        *,
        clock: Any = None,
        timeout: float = DEFAULT_LOGIN_TIMEOUT,
        throttle: LoginThrottle | None = None,
        limits: Limits = PRE_LOGIN_LIMITS,
        mechanisms: Mapping[str, Mechanism] | None = None,
        secret: bytes | None = None,
    ) -> None:
        """
        @param clock: an C{IReactorTime}; the global reactor if C{None}.
        @param mechanisms: the mechanisms offered; by default those of the
            portal (SCRAM-SHA-256, TOKEN, ANONYMOUS, CERTIFICATE) if one is
            given, and NAME if a name table is.
        @param secret: what SCRAM's answers for unknown users derive from;
            random if C{None}.  Give a stored one to keep those answers the
            same across restarts (else an unknown name's salt changes then).
        @raise ValueError: neither a portal nor a name table was given.
        """
        if portal is None and names is None:
            raise ValueError("an Authenticator needs a portal, a name table, or both")
        if clock is None:
            from twisted.internet import reactor as clock
        self.portal = portal
        self.names = names
        self.clock = clock
        self.timeout = timeout
        self.throttle = throttle if throttle is not None else LoginThrottle(clock)
        self.limits = limits
        self.mechanisms: dict[str, Mechanism] = {}
        if mechanisms is not None:
            self.mechanisms.update(mechanisms)
        if mechanisms is None and portal is not None:
            self.mechanisms.update(PORTAL_MECHANISMS)
        if mechanisms is None and names is not None:
            self.mechanisms.update(NAME_MECHANISMS)
        # SCRAM's answers for unknown users derive from this when the checker
        # has no stored secret of its own (a UserFile has); it never leaves the process.
        self.secret = secret or os.urandom(32)
        self.refusals = RefusalLog(LogPolicy(maxRefusals=None), clock.seconds)

    def guard(self, broker: Any) -> ServerLogin:
        """Put a L{ServerLogin} in front of C{broker} (before its connection is made)."""
        return ServerLogin(broker, self)


@implementer(IObjectReceiver)
class ServerLogin:
    """
    The receiver of one connection until it has logged in (see the module
    docstring), then nothing.

    @ivar state: one of L{WANT_START}, L{WANT_RESPONSE}, L{CHECKING},
        L{LOGGED_IN}, L{CLOSED}.
    @ivar avatarId: who logged in (after L{LOGGED_IN}).
    @ivar mechanism: the mechanism the client started, or C{None}.
    @ivar claimed: the user name its first message claimed (SCRAM's), or C{None}.
    """

    def __init__(self, broker: Any, authenticator: Authenticator) -> None:
        self.broker = broker
        self.authenticator = authenticator
        self.connection = connection = broker.connection
        self.state = WANT_START
        self.avatarId: Any = None
        self.mechanism: str | None = None
        self.claimed: str | None = None
        self._respond: Any = None
        self._timeout: Any = None
        self._logout: Any = None
        self._afterLogin: tuple[Limits, Any] | None = None
        connection.receiver = self

    # -- IObjectReceiver -------------------------------------------------------------

    def startReceiving(self, sender: Any) -> None:
        """The connection is up: shrink what it accepts, start the clock, start the broker (it sends nothing yet)."""
        decoder = self.connection.decoder
        self._afterLogin = (decoder.limits, decoder.registry)
        decoder.reconfigure(self.authenticator.limits, loginRegistry())
        self._timeout = self.authenticator.clock.callLater(self.authenticator.timeout, self._timedOut)
        self.broker.startReceiving(sender)

    def stopReceiving(self, reason: Failure) -> None:
        """The connection ended before a login succeeded."""
        self.state = CLOSED
        self._cancelTimeout()
        self.broker.stopReceiving(reason)

    def objectReceived(self, obj: Any) -> None:
        if self.state is LOGGED_IN:
            # Decoded in the same read as the last login message.
            self.broker.objectReceived(obj)
        elif type(obj) is not LoginMessage:
            self._violation(f"sent {short_repr(obj)} before logging in")
        elif self.state is WANT_START and obj.verb == START:
            self._start(obj)
        elif self.state is WANT_RESPONSE and obj.verb == CONTINUE and obj.mechanism == self.mechanism:
            self._check(self._respond, obj.payload)
        else:
            self._violation(f"sent a login {obj.verb!r} out of turn")

    def objectRefused(self, violation: Violation) -> None:
        if self.state is LOGGED_IN:
            # Decoded in the same read as the last login message, so under the
            # login's rules: the client sent it before it could have seen the
            # acceptance, which it must not.  Said and dropped, not lost in silence.
            self._violation(f"sent something before the login was accepted ({violation.code}: {violation})")
        else:
            self._violation(f"sent something refused before logging in ({violation.code}: {violation})")

    # -- the exchange ----------------------------------------------------------------

    @property
    def address(self) -> str:
        """The client's address, as the throttle counts it: the one the guard and the log use too."""
        return clientAddress(self.connection.transport)

    def _start(self, message: LoginMessage) -> None:
        self.mechanism = message.mechanism
        mechanism = self.authenticator.mechanisms.get(message.mechanism)
        self.claimed = claimedName(message.mechanism, message.payload)
        if not self.authenticator.throttle.admit(self.address, self.claimed):
            self._refused(Refused("too many login attempts from this address"))
        elif mechanism is None:
            self._refused(Refused(f"unknown mechanism {escape(message.mechanism)}"))
        else:
            authenticator = self.authenticator
            context = LoginContext(
                authenticator.portal, authenticator.names, self.connection.transport, self.broker, authenticator.secret
            )
            self._check(lambda payload: mechanism(context, payload), message.payload)

    def _check(self, step: Any, payload: bytes) -> None:
        self.state = CHECKING
        checked: Deferred[Any] = maybeDeferred(step, payload)
        checked.addCallback(self._outcome).addErrback(self._failed)

    def _outcome(self, outcome: Any) -> None:
        if self.state is CLOSED:
            if isinstance(outcome, Accepted):
                outcome.logout()
            return
        if isinstance(outcome, Challenge):
            self.state = WANT_RESPONSE
            self._respond = outcome.respond
            self._send(CHALLENGE, outcome.payload)
        else:
            self._accepted(outcome)

    def _failed(self, failure: Failure) -> None:
        if self.state is CLOSED:
            return
        if isinstance(failure.value, Refused):
            self._refused(failure.value)
            return
        self.authenticator.log.failure(
            "login from {peer} failed inside the server", failure, peer=self.connection.peerName()
        )
        self._refused(Refused("the checker or realm failed"))

    def _accepted(self, accepted: Accepted) -> None:
        try:
            self.broker.references.exportRoot(accepted.avatar)
        except TypeError:
            accepted.logout()
            raise
        self._cancelTimeout()
        self.authenticator.throttle.succeeded(self.address, self.claimed)
        self.state = LOGGED_IN
        self.avatarId = accepted.avatarId
        self._logout = accepted.logout
        assert self._afterLogin is not None
        self.connection.decoder.reconfigure(*self._afterLogin)
        self.connection.receiver = self.broker
        self._send(ACCEPTED, accepted.payload)
        self.authenticator.log.info(
            "login: {avatar} from {peer} ({mechanism})",
            avatar=escape(describeAvatar(accepted.avatarId)),
            peer=self.connection.peerName(),
            mechanism=self.mechanism,
            authEvent="login",
            avatarId=accepted.avatarId,
        )
        self.broker.whenDisconnected().addCallback(self._loggedOut)

    def _loggedOut(self, reason: BaseException) -> None:
        logout, self._logout = self._logout, None
        if logout is not None:
            logout()
        self.authenticator.log.info(
            "logout: {avatar} from {peer}",
            avatar=escape(describeAvatar(self.avatarId)),
            peer=self.connection.peerName(),
            authEvent="logout",
            avatarId=self.avatarId,
        )

    def _refused(self, refusal: Refused) -> None:
        self.state = CLOSED
        self._cancelTimeout()
        authenticator = self.authenticator
        authenticator.refusals.refusal(
            authenticator.log,
            self.connection.peerName(),
            "login-refused",
            refusal.reason,
            "login refused: {avatar} from {peer} ({mechanism}): {violation}",
            avatar=escape(describeAvatar(refusal.avatarId)) if refusal.avatarId is not None else "?",
            mechanism=escape(self.mechanism),
            authEvent="refused",
            avatarId=refusal.avatarId,
        )
        self._send(REFUSED, b"")
        self.connection.transport.loseConnection()

    def _violation(self, text: str) -> None:
        self.state = CLOSED
        self._cancelTimeout()
        self.connection.failConnection(NotLoggedIn(text))

    def _timedOut(self) -> None:
        self._timeout = None
        if self.state is not LOGGED_IN and self.state is not CLOSED:
            self.state = CLOSED
            self.connection.failConnection(LoginTimedOut(f"no login within {self.authenticator.timeout:g} s"))

    def _cancelTimeout(self) -> None:
        timeout, self._timeout = self._timeout, None
        if timeout is not None and timeout.active():
            timeout.cancel()

    def _send(self, verb: str, payload: bytes) -> None:
        self.connection.sendObject(LoginMessage.of(verb, self.mechanism or "", payload))
