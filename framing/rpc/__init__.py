"""The sans-IO core of chunkwire's RPC: what every client and server shares, whatever it waits with.

L{framing.rpc.wire} is the message table and its shapes (CALL, ANSWER,
FAIL, CANCEL, RELEASE, GOAWAY under the open-type C{"rpc"}), with the
slicer and the checking unslicer; L{framing.rpc.errors} is how a call
fails (each error a class, the registry of exception types that travel as
themselves, a FAIL's description and its rebuilding); L{framing.rpc.calltable}
numbers the calls a side makes and matches their answers;
L{framing.rpc.context} is how a call's deadline and metadata nest and what
a call carries of them;
L{framing.rpc.streams} is the object streams' messages, credit windows and
C{AsyncIterator[T]} constraint, and L{framing.rpc.clientstreams} the
reading of them by the clients without Twisted;
L{framing.rpc.referenceable} says what may be called (L{Referenceable} and
its L{remote} methods), L{framing.rpc.references} how references travel, and
L{framing.rpc.exports} and L{framing.rpc.incoming} keep a connection's
references and serve a client's callbacks.  The Twisted
layer (L{protocols.rpc}) waits for answers with Deferreds on a reactor,
the blocking client (L{protocols.blocking}) with threads on a socket; both
use these modules, so the protocol logic is written once.

Like the rest of L{framing}, nothing here imports Twisted, sockets,
selectors or asyncio, or touches a clock.  Unlike the rest of L{framing},
names here are camelCase: these modules are the RPC layer's own, moved out
of L{protocols.rpc} to be shared, and their names (C{registerError},
C{RemoteError.remoteType}, C{MessageRefused.requestId}) are the public ones
that layer has always had (L{protocols.rpc} exports them unchanged).
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
