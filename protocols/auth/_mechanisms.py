# -*- test-case-name: tests.protocols.auth.test_realms,tests.protocols.auth.test_login_vectors -*-
"""The server's side of each login mechanism, as small functions the gate drives.

Contract: a mechanism is a callable C{(context, payload) -> Deferred}
firing with a L{Challenge} (send its payload, then call C{respond} with
the client's answer) or an L{Accepted}, or failing with L{Refused}.  Each
one turns what the client sent into C{twisted.cred} credentials and logs in
through the portal, so a realm serves password, token, certificate and
anonymous users alike; object names (self-authenticating URLs) are looked
up in a L{protocols.auth._names.NameTable} instead.  No mechanism keeps
anything the client sent beyond the exchange, and none puts a secret in a
L{Refused} reason (reasons are logged, never sent).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from twisted.cred.credentials import Anonymous
from twisted.cred.error import UnauthorizedLogin, UnhandledCredentials
from twisted.internet.defer import Deferred, fail, maybeDeferred, succeed
from twisted.python.failure import Failure

from framing.login._wire import ANONYMOUS, CERTIFICATE, NAME, SCRAM, TOKEN

from ._interfaces import IRemoteRoot


@dataclass(frozen=True)
class Challenge:
    """Send C{payload} to the client; call C{respond} with its answer."""

    payload: bytes
    respond: Callable[[bytes], Deferred[Any]]


@dataclass(frozen=True)
class Accepted:
    """
    A login succeeded.

    @ivar avatarId: who logged in, as the checker named them (bytes, or
        C{()} for an anonymous login); a label for an object name.
    @ivar avatar: the L{Referenceable} the client now sees as its root.
    @ivar logout: called once when the connection ends.
    @ivar payload: the last message for the client (SCRAM's server signature).
    """

    avatarId: Any
    avatar: Any
    logout: Callable[[], None]
    payload: bytes = b""


class Refused(Exception):
    """A login was refused; C{reason} is for the server's log only, C{avatarId} who was claimed, if known."""

    def __init__(self, reason: str, avatarId: Any = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.avatarId = avatarId


@dataclass(frozen=True)
class LoginContext:
    """
    What a mechanism may use for one connection.

    @ivar portal: the C{twisted.cred} portal, or C{None}.
    @ivar names: the L{protocols.auth._names.NameTable}, or C{None}.
    @ivar transport: the connection's transport (for the TLS peer certificate).
    @ivar mind: passed to the realm: the connection's L{protocols.rpc.Broker}.
    @ivar secret: the server's random secret, for SCRAM's decoy verifiers.
    """

    portal: Any
    names: Any
    transport: Any
    mind: Any
    secret: bytes


Mechanism = Callable[[LoginContext, bytes], Deferred[Any]]


def _nothing() -> None:
    return None


def describeAvatar(avatarId: Any) -> str:
    """An avatar id as text for logs (C{()} is the anonymous id)."""
    if avatarId == ():
        return "<anonymous>"
    if isinstance(avatarId, bytes):
        return avatarId.decode("utf-8", "replace")
    return str(avatarId)


def portalLogin(context: LoginContext, credentials: Any) -> Deferred[Accepted]:
    """
    Check C{credentials} with the portal's checker for them, then ask the
    realm for the avatar as L{IRemoteRoot}.  (The portal's own C{login}
    does the same but does not say who logged in, which the log needs.)
    """
    portal = context.portal
    checker = None if portal is None else _checkerFor(portal.checkers, credentials)
    if checker is None:
        return fail(Refused("the server accepts no such credentials"))
    checked: Deferred[Any] = maybeDeferred(checker.requestAvatarId, credentials)
    return checked.addCallbacks(_askRealm, _checkFailed, callbackArgs=(context,), errbackArgs=(credentials,))


def _checkerFor(checkers: Mapping[Any, Any], credentials: Any) -> Any:
    for interface, checker in checkers.items():
        if interface.providedBy(credentials):
            return checker
    return None


def _checkFailed(failure: Failure, credentials: Any) -> Failure:
    claimed = getattr(credentials, "username", None)
    if isinstance(failure.value, (UnauthorizedLogin, UnhandledCredentials)):
        raise Refused("wrong credentials", claimed)
    return failure


def _askRealm(avatarId: Any, context: LoginContext) -> Deferred[Accepted]:
    asked: Deferred[Any] = maybeDeferred(context.portal.realm.requestAvatar, avatarId, context.mind, IRemoteRoot)
    return asked.addCallback(_accepted, avatarId)


def _accepted(result: Any, avatarId: Any) -> Accepted:
    interface, avatar, logout = result
    if interface is not IRemoteRoot:
        raise TypeError(f"the realm must answer for IRemoteRoot, not {interface!r}")
    return Accepted(avatarId, avatar, logout or _nothing)


# -- the mechanisms --------------------------------------------------------------


def scramLogin(context: LoginContext, payload: bytes, *, nonce: str | None = None) -> Deferred[Any]:
    """
    SCRAM-SHA-256: the client's first message in; the server's first out; then the proof.

    @param nonce: the server's part of the nonce; fresh random when omitted
        (the login vectors bind a fixed one with C{functools.partial}).
    """
    from framing.login._scram import ScramError, ScramServer

    from ._users import IScramResponse

    portal = context.portal
    checker = None if portal is None else portal.checkers.get(IScramResponse)
    if checker is None:
        return fail(Refused("the server has no SCRAM user file"))
    # A checker with its own decoys (a UserFile) shows every name a verifier, known or not, after the same
    # work; another is asked for real ones only, and unknown names get the server's decoys.
    shown = getattr(checker, "scramVerifier", None)
    if shown is not None:
        server = ScramServer(shown, context.secret, nonce)
    else:
        decoy = getattr(checker, "decoyIterations", None)
        server = ScramServer(checker.verifier, context.secret, nonce, **({"decoyIterations": decoy()} if decoy else {}))
    try:
        serverFirst = server.first(payload)
    except ScramError as error:
        return fail(Refused(f"a malformed SCRAM first message: {error}"))

    def respond(clientFinal: bytes) -> Deferred[Any]:
        try:
            credentials = server.response(clientFinal)
        except ScramError as error:
            return fail(Refused(f"a malformed or replayed SCRAM final message: {error}", server.username))
        checked = portalLogin(context, credentials)
        return checked.addCallback(lambda accepted: replace(accepted, payload=server.final()))

    return succeed(Challenge(serverFirst, respond))


def tokenLogin(context: LoginContext, payload: bytes) -> Deferred[Any]:
    """A bearer token: one message, checked in constant time by the portal's token checker."""
    from ._tokens import BearerToken

    return portalLogin(context, BearerToken(payload))


def anonymousLogin(context: LoginContext, payload: bytes) -> Deferred[Any]:
    """No credentials: accepted only if the portal has a checker for C{IAnonymous}."""
    return portalLogin(context, Anonymous())


def certificateLogin(context: LoginContext, payload: bytes) -> Deferred[Any]:
    """The client certificate TLS already verified, mapped to an avatar id by the portal's checker."""
    from ._certificates import peerCertificateOf

    credentials = peerCertificateOf(context.transport)
    if credentials is None:
        return fail(Refused("no verified client certificate"))
    return portalLogin(context, credentials)


def nameLogin(context: LoginContext, payload: bytes) -> Deferred[Any]:
    """
    An object name from a self-authenticating URL: the object registered
    under it becomes the root.  Unknown, wrong and revoked names are
    refused alike, after the same lookup.
    """
    found = None
    if context.names is not None:
        try:
            found = context.names.lookup(payload.decode("ascii"))
        except UnicodeDecodeError:
            found = context.names.lookup("")
    if found is None:
        return fail(Refused("no object under that name"))
    obj, label = found
    return succeed(Accepted(label.encode("utf-8"), obj, _nothing))


PORTAL_MECHANISMS: Mapping[str, Mechanism] = {
    SCRAM: scramLogin,
    TOKEN: tokenLogin,
    ANONYMOUS: anonymousLogin,
    CERTIFICATE: certificateLogin,
}
"""The mechanisms a server with a portal offers (each refuses when the portal has no checker for it)."""

NAME_MECHANISMS: Mapping[str, Mechanism] = {NAME: nameLogin}
"""The mechanism a server with a name table offers."""


def claimedName(mechanism: str | None, payload: bytes) -> str | None:
    """
    The user name the first message of C{mechanism} claims, before anything is checked; C{None} if it names nobody.

    Only SCRAM names its user up front (bearer tokens, certificates and
    object names are their own credentials): the login throttle counts its
    attempts per address and name as well as per address.
    """
    if mechanism != SCRAM:
        return None
    from framing.login._scram import clientFirstName

    return clientFirstName(payload)
