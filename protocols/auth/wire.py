"""The login message under its old import path: a re-export of L{framing.login.wire}."""

from __future__ import annotations

from framing.login.wire import (
    ACCEPTED,
    ANONYMOUS,
    CERTIFICATE,
    CHALLENGE,
    CONTINUE,
    MAX_MECHANISM,
    MAX_PAYLOAD,
    NAME,
    OPEN_TYPE,
    PRE_LOGIN_LIMITS,
    REFUSED,
    SCRAM,
    START,
    TOKEN,
    VERBS,
    LoginMessage,
    LoginSlicer,
    LoginUnslicer,
    addLoginTypes,
    loginRegistry,
)

__all__ = [
    "ACCEPTED",
    "ANONYMOUS",
    "CERTIFICATE",
    "CHALLENGE",
    "CONTINUE",
    "LoginMessage",
    "LoginSlicer",
    "LoginUnslicer",
    "MAX_MECHANISM",
    "MAX_PAYLOAD",
    "NAME",
    "OPEN_TYPE",
    "PRE_LOGIN_LIMITS",
    "REFUSED",
    "SCRAM",
    "START",
    "TOKEN",
    "VERBS",
    "addLoginTypes",
    "loginRegistry",
]
