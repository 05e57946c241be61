"""Login failures under their old import path: a re-export of L{framing.login.errors}."""

from __future__ import annotations

from framing.login.errors import (
    LoginBroken,
    LoginFailed,
    LoginRefused,
    LoginRefusedByServer,
    LoginTimedOut,
    NotLoggedIn,
    ServerNotVerified,
    UnsupportedCredentials,
)

__all__ = [
    "LoginBroken",
    "LoginFailed",
    "LoginRefused",
    "LoginRefusedByServer",
    "LoginTimedOut",
    "NotLoggedIn",
    "ServerNotVerified",
    "UnsupportedCredentials",
]
