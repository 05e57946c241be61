# -*- test-case-name: tests.test_exports -*-
"""The sans-IO core of chunkwire's RPC: what every client and server shares, whatever it waits with.

C{framing/rpc/_wire.py} is the message table; C{framing/rpc/_errors.py} how a call
fails; C{framing/rpc/_calltable.py} numbers calls and matches answers;
C{framing/rpc/_context.py} carries deadlines and metadata;
C{framing/rpc/_streams.py} and C{framing/rpc/_clientstreams.py} are the object
streams; C{framing/rpc/_referenceable.py} says what may be called,
C{framing/rpc/_references.py} how references travel, C{framing/rpc/_exports.py}
and C{framing/rpc/_incoming.py} keep a connection's references and serve a
client's callbacks.  L{protocols.rpc}, L{protocols.blocking} and
L{protocols.asyncioclient} wait around these, so the protocol logic is
written once.

Nothing here imports Twisted, sockets, selectors or asyncio, or touches a
clock.  Names are camelCase: they are the public names L{protocols.rpc}
has always had.

Design: docs/design/rpc-core.md
"""

from __future__ import annotations

from ._addresses import Backoff
from ._calltable import CallTable
from ._errors import (
    ERRORS,
    CallLost,
    CallTimedOut,
    ClosedBeforePreamble,
    DeadlineExceeded,
    DeadReferenceError,
    NoSuchMethod,
    NoSuchObject,
    RemoteError,
    RemoteViolation,
    TooManyPendingCalls,
    UnexpectedAnswer,
    registerError,
)
from ._interfaces import RemoteInterface
from ._limits import CLIENT_CALL_LIMITS, SERVER_CALL_LIMITS, CallLimits
from ._referenceable import Referenceable
from ._signatures import MaxLength, MinLength, Pattern, Range, registerHint, remote
from ._streams import (
    EndCountMismatch,
    StreamOf,  # (importing it makes AsyncIterator[T] hints mean StreamOf)
)
from ._wire import MESSAGES, Message

__all__ = [
    "MESSAGES",
    "CallTable",
    "CallTimedOut",
    "DeadlineExceeded",
    "DeadReferenceError",
    "Message",
    "NoSuchMethod",
    "NoSuchObject",
    "Referenceable",
    "RemoteError",
    "RemoteViolation",
    "StreamOf",
    "TooManyPendingCalls",
    "UnexpectedAnswer",
    "registerError",
    "remote",
    "CLIENT_CALL_LIMITS",
    "CallLimits",
    "CallLost",
    "ERRORS",
    "MaxLength",
    "MinLength",
    "Pattern",
    "Range",
    "RemoteInterface",
    "SERVER_CALL_LIMITS",
    "ClosedBeforePreamble",
    "EndCountMismatch",
    "registerHint",
    "Backoff",
]
