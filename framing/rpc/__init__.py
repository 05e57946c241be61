# -*- test-case-name: tests.test_exports -*-
"""The sans-IO core of chunkwire's RPC: what every client and server shares, whatever it waits with.

L{framing.rpc.wire} is the message table; L{framing.rpc.errors} how a call
fails; L{framing.rpc.calltable} numbers calls and matches answers;
L{framing.rpc.context} carries deadlines and metadata;
L{framing.rpc.streams} and L{framing.rpc.clientstreams} are the object
streams; L{framing.rpc.referenceable} says what may be called,
L{framing.rpc.references} how references travel, L{framing.rpc.exports}
and L{framing.rpc.incoming} keep a connection's references and serve a
client's callbacks.  L{protocols.rpc}, L{protocols.blocking} and
L{protocols.asyncioclient} wait around these, so the protocol logic is
written once.

Nothing here imports Twisted, sockets, selectors or asyncio, or touches a
clock.  Names are camelCase: they are the public names L{protocols.rpc}
has always had.

Design: docs/design/rpc-core.md
"""

from __future__ import annotations

from .calltable import CallTable
from .errors import (
    CallTimedOut,
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
from .referenceable import Referenceable
from .signatures import remote
from .streams import StreamOf  # (importing it makes AsyncIterator[T] hints mean StreamOf)
from .wire import MESSAGES, Message

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
]
