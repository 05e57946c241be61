# -*- test-case-name: tests.attack.test_auth,tests.test_exports,tests.attack.test_round3_auth -*-
"""Who may call what: logins, client certificates and self-authenticating object URLs.

Contract: a server configured with a C{twisted.cred} portal (or a table of
object names) gives a new connection nothing but the login exchange, under
tiny limits and a timeout; once a login succeeds the connection's RPC root
is the avatar the realm returned for it, and logging out or losing the
connection calls the realm's logout.  No secret, and nothing replayable,
crosses the wire or reaches a log.

The mechanisms are small sans-IO modules, each one job:
C{framing/login/_scram.py} (SCRAM-SHA-256 password logins),
C{protocols/auth/_users.py} (the salted-verifier user file, its checker and
C{IScramResponse}),
C{protocols/auth/_tokens.py} (bearer tokens), C{protocols/auth/_certificates.py}
(TLS client certificates to avatar ids), C{protocols/auth/_tlsendpoints.py}
(the C{chunkwire-tls:} server endpoint, TLS over TCP or UNIX with client
certificates), C{protocols/auth/_identity.py} (a
server's persistent TLS key), C{protocols/auth/_urls.py} and
C{protocols/auth/_names.py} (self-authenticating object URLs).
L{portal} makes the C{twisted.cred} portal a server takes, checked when it
is made (C{protocols/auth/_portals.py}).
"""

from framing.login._errors import (
    LoginFailed,
    LoginRefused,
    LoginTimedOut,
    NotLoggedIn,
    ServerNotVerified,
    UnsupportedCredentials,
)
from framing.login._wire import PRE_LOGIN_LIMITS

from ._certificates import CertificateChecker, requireClientCertificates
from ._client import ClientCertificate, ClientLogin, ObjectName
from ._identity import ServerIdentity
from ._interfaces import IRemoteRoot
from ._names import NameFileError, NameTable
from ._portals import portal
from ._realms import OPEN, ClientCertificatesNeedTLS, DirectoryRealm, ServiceLogins, SharedRootRealm
from ._secretfiles import SecretFileError, replaceEntry
from ._server import DEFAULT_LOGIN_TIMEOUT, Authenticator, ServerLogin
from ._throttle import LoginThrottle, ThrottleStateError
from ._tlsendpoints import joinDescription, splitDescription
from ._tokens import BearerToken, TokenChecker, tokenDigest
from ._users import UserFile, addUser

__all__ = [
    "DEFAULT_LOGIN_TIMEOUT",
    "PRE_LOGIN_LIMITS",
    "Authenticator",
    "ClientCertificate",
    "ClientLogin",
    "IRemoteRoot",
    "LoginFailed",
    "LoginRefused",
    "LoginThrottle",
    "LoginTimedOut",
    "NotLoggedIn",
    "ObjectName",
    "ServerLogin",
    "ServerNotVerified",
    "UnsupportedCredentials",
    "portal",
    "BearerToken",
    "ClientCertificatesNeedTLS",
    "DirectoryRealm",
    "NameTable",
    "OPEN",
    "SecretFileError",
    "ServerIdentity",
    "ServiceLogins",
    "SharedRootRealm",
    "ThrottleStateError",
    "TokenChecker",
    "UserFile",
    "addUser",
    "joinDescription",
    "replaceEntry",
    "requireClientCertificates",
    "splitDescription",
    "tokenDigest",
    "CertificateChecker",
    "NameFileError",
]
