# -*- test-case-name: tests.protocols.auth.test_realms,tests.examples.test_logins -*-
"""The realms of chunkwire's services, and the portal and endpoints their command lines configure.

Contract: L{SharedRootRealm} gives every avatar the same root (the kv
store, shared by all users).  L{DirectoryRealm} gives each avatar the root
made for its own directory, C{base / avatarId}; an avatar id that is not
one safe path component is refused (L{UnsafeAvatarId}) before any path is
built, so no login reaches a parent, a sibling or the base itself.  One
root is made per directory and kept for the realm's life (a user's several
connections, e.g. a striped transfer, share it): memory grows with the
number of distinct users who logged in, which the checkers bound.  Both
realms answer only L{IRemoteRoot}.

L{servicePortal} turns the services' C{--users} and C{--client-ca} (and
C{--tokens}) into a portal, or C{None} (an open service) when none is given;
L{listenDescriptions} makes every C{--listen} description require client
certificates when C{--client-ca} is given, and refuses a non-TLS one;
L{ServiceLogins} holds the three options (and C{--throttle-db}, where
worker processes share their login throttle) and says which way is in use.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from twisted.cred.error import UnauthorizedLogin
from twisted.cred.portal import IRealm, Portal
from zope.interface import implementer

from ._interfaces import IRemoteRoot
from ._mechanisms import Refused

MAX_COMPONENT_BYTES = 255
"""The longest file name most file systems allow, in bytes."""


class UnsafeAvatarId(Refused, UnauthorizedLogin):
    """
    An avatar id that is not one safe path component: the login is refused.

    A L{Refused} too, so that the login gate logs it as a refusal (with the
    claimed id, escaped) rather than as a failure inside the server.
    """


class ClientCertificatesNeedTLS(ValueError):
    """C{--client-ca} was given with an endpoint that is not TLS: client certificates exist only in TLS."""


def _nothing() -> None:
    return None


def _refuseOthers(interfaces: Sequence[Any]) -> None:
    if IRemoteRoot not in interfaces:
        raise NotImplementedError(f"this realm only makes IRemoteRoot avatars, not {list(interfaces)!r}")


@implementer(IRealm)
class SharedRootRealm:
    """
    Every avatar gets the same root.

    @ivar root: the L{protocols.rpc.Referenceable} every logged-in client sees.
    """

    def __init__(self, root: Any) -> None:
        self.root = root

    def requestAvatar(self, avatarId: Any, mind: Any, *interfaces: Any) -> tuple[Any, Any, Callable[[], None]]:
        """C{(IRemoteRoot, root, logout)} for anyone the checkers let in."""
        _refuseOthers(interfaces)
        return IRemoteRoot, self.root, _nothing


def pathComponent(avatarId: Any) -> str:
    """
    C{avatarId} as one path component: UTF-8 text of 1 to 255 bytes,
    printable, not starting with C{.} (so neither C{.} nor C{..}, nor a
    hidden name), without C{/}, C{\\} or NUL.

    @raise UnsafeAvatarId: it is anything else (including an anonymous C{()}).
    """
    if isinstance(avatarId, str):
        text, raw = avatarId, avatarId.encode("utf-8", "surrogatepass")
    elif isinstance(avatarId, bytes):
        raw = avatarId
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise UnsafeAvatarId("the avatar id is not UTF-8", avatarId) from None
    else:
        raise UnsafeAvatarId(f"the avatar id is not a name ({type(avatarId).__name__})", avatarId)
    if not 0 < len(raw) <= MAX_COMPONENT_BYTES:
        raise UnsafeAvatarId(f"the avatar id is empty or longer than {MAX_COMPONENT_BYTES} bytes", avatarId)
    if text.startswith(".") or any(c in text for c in "/\\\0") or not text.isprintable():
        raise UnsafeAvatarId("the avatar id is not a safe directory name", avatarId)
    return text


@implementer(IRealm)
class DirectoryRealm:
    """
    Each avatar gets the root made for its own directory under C{base}.

    @ivar base: the directory holding one directory per user (made 0700 if missing).
    @ivar makeRoot: makes the root of one user's directory, given its C{Path}.
    @ivar roots: the roots made so far, by directory name.
    """

    def __init__(self, base: str | os.PathLike[str], makeRoot: Callable[[Path], Any]) -> None:
        self.base = Path(base)
        self.base.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.makeRoot = makeRoot
        self.roots: dict[str, Any] = {}

    def requestAvatar(self, avatarId: Any, mind: Any, *interfaces: Any) -> tuple[Any, Any, Callable[[], None]]:
        """
        C{(IRemoteRoot, the root of base/avatarId, logout)}; the directory is made 0700 if missing.

        @raise UnsafeAvatarId: the avatar id is not one safe path component (L{pathComponent}).
        """
        _refuseOthers(interfaces)
        name = pathComponent(avatarId)
        root = self.roots.get(name)
        if root is None:
            directory = self.base / name
            directory.mkdir(mode=0o700, exist_ok=True)
            root = self.roots[name] = self.makeRoot(directory)
        return IRemoteRoot, root, _nothing


def servicePortal(
    realm: Any,
    users: str | os.PathLike[str] | None = None,
    clientCA: str | os.PathLike[str] | None = None,
    tokens: str | os.PathLike[str] | None = None,
) -> Portal | None:
    """
    The portal of a service's command line, or C{None} for an open service.

    @param users: a user file (L{protocols.auth._users.UserFile}): SCRAM password logins.
    @param clientCA: a directory of CA certificates: logins as the TLS
        client certificate (L{protocols.auth._certificates.CertificateChecker},
        the certificate's common name is the avatar id).
    @param tokens: a token file (L{protocols.auth._tokens.TokenChecker}): bearer-token logins.
    @return: C{None} when none is given (the owner configured no logins).
    @raise protocols.auth._secretfiles.SecretFileError: a file is missing or malformed.
    """
    if users is None and clientCA is None and tokens is None:
        return None
    checkers: list[Any] = []
    if users is not None:
        from ._users import UserFile

        checkers.append(UserFile(users))
    if tokens is not None:
        from ._tokens import TokenChecker

        checkers.append(TokenChecker.fromFile(tokens))
    if clientCA is not None:
        from ._certificates import CertificateChecker

        checkers.append(CertificateChecker())
    return Portal(realm, checkers)


@dataclass(frozen=True)
class ServiceLogins:
    """
    What a service's command line says about logins; all C{None} is an open
    service (its owner configured no logins).

    @ivar users: C{--users}, a user file.
    @ivar clientCA: C{--client-ca}, a directory of CA certificates.
    @ivar tokens: C{--tokens}, a token file.
    @ivar throttleDB: C{--throttle-db}, the SQLite file of the login throttle
        shared by worker processes, or C{None} (each process keeps its own).
    @ivar names: C{--names}, the name table's file of a service served by
        an object URL (L{protocols.auth._publishing}), or C{None}.
    """

    users: str | None = None
    clientCA: str | None = None
    tokens: str | None = None
    throttleDB: str | None = None
    names: str | None = None

    def sharedThrottlePath(self) -> str | None:
        """
        Where worker processes share their login throttle: C{--throttle-db}
        if given, else beside the user file (C{USERS.throttle}), else beside
        the token file; C{None} for certificate logins alone (only a
        certificate a CA issued gets past the TLS handshake to a login).
        """
        if self.throttleDB is not None:
            return self.throttleDB
        beside = self.users if self.users is not None else self.tokens
        return None if beside is None else beside + ".throttle"

    def throttle(self, clock: Any) -> Any:
        """
        The L{protocols.auth._throttle.LoginThrottle} of C{--throttle-db}: its
        counts in that SQLite file, shared with every process that names it;
        C{None} without it (the gate keeps one in this process).

        @raise protocols.auth._throttle.ThrottleStateError: the file cannot be opened.
        """
        if self.throttleDB is None:
            return None
        from ._sharedthrottle import SQLiteThrottleState
        from ._throttle import LoginThrottle

        return LoginThrottle(clock, state=SQLiteThrottleState(self.throttleDB))

    @property
    def required(self) -> bool:
        """Whether clients must log in."""
        return any(where is not None for where in (self.users, self.clientCA, self.tokens, self.names))

    def portal(self, realm: Any) -> Portal | None:
        """L{servicePortal} for C{realm}."""
        return servicePortal(realm, self.users, self.clientCA, self.tokens)

    def listen(self, descriptions: Sequence[str]) -> list[str]:
        """L{listenDescriptions} for C{descriptions}."""
        return listenDescriptions(descriptions, self.clientCA)

    def notice(self) -> str:
        """The line a server prints at start saying whether (and how) clients must log in."""
        if not self.required:
            return (
                "logins: not required, anyone who can connect is served"
                " (give --users, --client-ca or --tokens to require them)"
            )
        ways = [
            f"{what} {where}"
            for what, where in (
                ("passwords of the users in", self.users),
                ("client certificates from the CAs in", self.clientCA),
                ("bearer tokens in", self.tokens),
                ("the object URL whose name is kept in", self.names),
            )
            if where is not None
        ]
        return "logins: required (" + "; ".join(ways) + ")"


OPEN = ServiceLogins()
"""No login options: an open service."""


def listenDescriptions(descriptions: Sequence[str], clientCA: str | os.PathLike[str] | None) -> list[str]:
    """
    The server endpoint descriptions to listen on: with C{clientCA}, each
    C{ssl:} (or C{chunkwire-tls:}) description becomes one that finishes a
    handshake only with a client certificate issued by a CA in that
    directory (L{protocols.auth._certificates.requireClientCertificates});
    without it, the descriptions as given.

    @raise ClientCertificatesNeedTLS: C{clientCA} is given and a description is not TLS.
    @raise ValueError: an C{ssl:} description uses an option client certificates do not support.
    """
    if clientCA is None:
        return list(descriptions)
    from ._certificates import requireClientCertificates
    from ._tlsendpoints import PREFIX, splitDescription

    for description in descriptions:
        if splitDescription(description)[0].lower() not in ("ssl", PREFIX):
            raise ClientCertificatesNeedTLS(
                f"--client-ca needs TLS: {description} is not an ssl: endpoint"
                " (client certificates exist only in TLS; listen on ssl:PORT:privateKey=server.pem)"
            )
    return [requireClientCertificates(description, os.fspath(clientCA)) for description in descriptions]
