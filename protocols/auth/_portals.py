# -*- test-case-name: tests.protocols.auth.test_portals -*-
"""L{portal}: a C{twisted.cred} portal made from a realm and checkers, checked when it is made.

Contract: L{portal} returns an ordinary C{twisted.cred.portal.Portal}, the
same as C{Portal(realm, checkers)}, after checking that C{realm} provides
C{IRealm} and each checker C{ICredentialsChecker}: a wrong object is a
C{TypeError} naming it when the server starts, not a failure at the first
login.

Why it exists: a realm or a checker is a class declared with
C{@implementer(...)}, and mypy understands that declaration only through
the mypy-zope plugin.  Without it, C{Portal(MyRealm(), [UserFile(path)])}
is a type error in code checked with C{mypy --strict} (neither argument is
a subclass of the interface it expects), and needs a C{type: ignore}.
L{portal} takes any objects and makes the check mypy cannot make without
the plugin at run time, once.
"""

from __future__ import annotations

from collections.abc import Iterable

from twisted.cred.checkers import ICredentialsChecker
from twisted.cred.portal import IRealm, Portal


def portal(realm: object, checkers: Iterable[object] = ()) -> Portal:
    """
    A C{Portal} of C{realm} and C{checkers}, as C{ServerOptions(portal=...)} takes.

    @param realm: an object providing C{IRealm} (declared with
        C{@implementer(IRealm)}): it is asked for each logged-in client's
        root (L{protocols.auth.IRemoteRoot}).
    @param checkers: objects providing C{ICredentialsChecker}, such as
        L{protocols.auth._users.UserFile} or
        L{protocols.auth._tokens.TokenChecker}.
    @raise TypeError: C{realm} does not provide C{IRealm}, or a checker
        does not provide C{ICredentialsChecker}.
    """
    if not IRealm.providedBy(realm):
        raise TypeError(f"{realm!r} does not provide IRealm (declare its class with @implementer(IRealm))")
    checked = list(checkers)
    for checker in checked:
        if not ICredentialsChecker.providedBy(checker):
            raise TypeError(f"{checker!r} does not provide ICredentialsChecker")
    return Portal(realm, checked)  # type: ignore[arg-type]  # checked above; mypy cannot see @implementer
