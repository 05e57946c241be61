# -*- test-case-name: tests.framing.login.test_exchange,tests.examples.test_logins,tests.protocols.auth.test_login -*-
"""What goes wrong in a login, as classes.

Contract: the server's connection-level errors are L{framing.ProtocolError}s
(the connection is dropped, with a logged reason); the client's are
L{LoginFailed} and its subclasses, which C{rpc.login} and C{rpc.connectURL}
fail with.  A refusal never says why on the wire: a wrong password, an
unknown user, a revoked name and a throttled address look the same.
"""

from __future__ import annotations

from framing import ProtocolError


class NotLoggedIn(ProtocolError):
    """The peer sent something other than the login exchange before logging in."""

    code = "not-logged-in"


class LoginTimedOut(ProtocolError):
    """The peer did not finish logging in within the login timeout."""

    code = "login-timeout"


class LoginRefusedByServer(ProtocolError):
    """The server refused the login; the connection is closed (the client's record of it)."""

    code = "login-refused"


class LoginFailed(Exception):
    """A client's login did not succeed."""


class LoginRefused(LoginFailed):
    """The server refused the credentials (or the object name).  The same for every reason, by design."""


class ServerNotVerified(LoginFailed):
    """The server could not prove it knows the password (SCRAM's server signature did not match)."""


class UnsupportedCredentials(LoginFailed, TypeError):
    """C{rpc.login} was given credentials it has no mechanism for."""


class LoginBroken(LoginFailed):
    """
    The server broke the login exchange: it sent something other than a
    login message of this login's mechanism, or a verb out of turn.  The
    client drops the connection (the Twisted client with L{NotLoggedIn}).
    """
