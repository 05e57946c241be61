"""How a remote call fails: the names as the Twisted layer has always imported them.

The error classes, the error registry and the FAIL descriptions live in the
sans-IO RPC core, L{framing.rpc.errors}, which every client shares (the
Twisted broker and the blocking client); this
module re-exports them unchanged, so C{protocols.rpc.errors.X is
framing.rpc.errors.X} for every name.
"""

from __future__ import annotations

from framing.rpc.errors import (
    ERRORS,
    NO_SUCH_METHOD,
    NO_SUCH_OBJECT,
    VIOLATION,
    CallLost,
    CallTimedOut,
    DeadlineExceeded,
    DeadReferenceError,
    DuplicateRequestId,
    ErrorRegistry,
    MessageRefused,
    MessageWithoutId,
    NoSuchMethod,
    NoSuchObject,
    NotAnRpcMessage,
    RemoteError,
    RemoteViolation,
    RuleBroken,
    TooManyPendingCalls,
    TooManyReferences,
    UnexpectedAnswer,
    UnreadableRequestId,
    WrongArguments,
    callLost,
    clipTraceback,
    describe,
    noSuchMethod,
    noSuchObject,
    qualifiedName,
    rebuild,
    register_error,
    registerError,
)

__all__ = [
    "ERRORS",
    "NO_SUCH_METHOD",
    "NO_SUCH_OBJECT",
    "VIOLATION",
    "CallLost",
    "CallTimedOut",
    "DeadlineExceeded",
    "DeadReferenceError",
    "DuplicateRequestId",
    "ErrorRegistry",
    "MessageRefused",
    "MessageWithoutId",
    "NoSuchMethod",
    "NoSuchObject",
    "NotAnRpcMessage",
    "RemoteError",
    "RemoteViolation",
    "RuleBroken",
    "TooManyPendingCalls",
    "TooManyReferences",
    "UnexpectedAnswer",
    "UnreadableRequestId",
    "WrongArguments",
    "callLost",
    "clipTraceback",
    "describe",
    "noSuchMethod",
    "noSuchObject",
    "qualifiedName",
    "rebuild",
    "registerError",
    "register_error",
]
