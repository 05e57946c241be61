"""Remote calls over chunkwire.

A server exposes a L{Referenceable} whose L{remote} methods clients may
call::

    from protocols import rpc
    from framing.slicing.constraints import Text

    class Greeter(rpc.Referenceable):
        @rpc.remote(args={"name": Text(100)})
        def greet(self, name):
            return f"hello {name}"

        @rpc.remote
        async def slow(self, seconds):
            await deferLater(reactor, seconds)
            return "done"

    await rpc.serve(reactor, "tcp:8760:interface=127.0.0.1", Greeter())

    root = await rpc.connect(reactor, "tcp:host=127.0.0.1:port=8760")
    assert await root.callRemote("greet", "ada") == "hello ada"

Contract: each call and each answer is one message in one transport write;
per-call cost is O(1) in the calls in flight and the connection's age.  A
call either gets its answer or fails (L{RemoteError} and its subclasses, a
registered exception type, L{DeadReferenceError}, L{TooManyPendingCalls},
L{CallTimedOut}, L{DeadlineExceeded}, C{CancelledError}, the reason the
connection was lost).  Deadlines and metadata travel with the calls made in
a L{callContext}; a method reads its own with L{currentCall}
(L{protocols.rpc.context}).
How a server serves is one L{ServerOptions} (C{serve(reactor, description,
root, options=ServerOptions(...))}), how a client connects one
L{ClientOptions} (every C{connect}, Twisted's and the clients' without it).
Per-connection limits (references held, calls waiting, call timeout) are a
L{CallLimits}, in L{framing.rpc.limits}.  The message table is in
L{framing.rpc.wire}; a L{Broker} (L{protocols.rpc.broker}) is the receiver
of one connection and hands each message to its job: the calls this side
makes (L{protocols.rpc.calls}), the calls it answers
(L{protocols.rpc.answering}), the reference tables and RELEASE
(L{protocols.rpc.tables}).  The exposure rule is in
L{framing.rpc.referenceable}.  A method may return or take a stream of
objects (an async generator, read as a L{StreamReader}), under flow
control: L{protocols.rpc.streams}.
"""

from framing.rpc.addresses import PICK_FIRST, ROUND_ROBIN, NoAddressReady
from framing.rpc.errors import (
    CallTimedOut,
    DeadlineExceeded,
    DeadReferenceError,
    NoSuchMethod,
    NoSuchObject,
    RemoteError,
    RemoteViolation,
    TooManyPendingCalls,
    TooManyReferences,
    UnexpectedAnswer,
    register_error,
    registerError,
)
from framing.rpc.limits import CLIENT_CALL_LIMITS, SERVER_CALL_LIMITS, CallLimits
from framing.rpc.referenceable import Referenceable
from framing.rpc.signatures import MaxLength, MinLength, Pattern, Range, RemoteMethod, UnsupportedHint, remote

from ..deadline import ConnectTimeout
from ..options import ClientOptions
from .broker import Broker, BrokerFactory, currentBroker
from .context import CallContext, callContext, currentCall
from .drain import DrainDeadlineExceeded, GoingAway, drainBrokers, drainPort
from .endpoints import ReconnectingClient, connect, connectURL, login, reconnecting, serve, serverFactory
from .failover import FailoverClient
from .interfaces import RemoteInterface, TypedReference, deferred, interfaceNamed, referenceOf
from .listening import ListeningPort
from .options import ServerOptions
from .refs import RefOf, RemoteReference
from .streams import ObjectStream, ObjectStreams, StreamOptions, StreamReader

__all__ = [
    "CLIENT_CALL_LIMITS",
    "SERVER_CALL_LIMITS",
    "Broker",
    "BrokerFactory",
    "CallContext",
    "CallLimits",
    "CallTimedOut",
    "ClientOptions",
    "ConnectTimeout",
    "DeadReferenceError",
    "DeadlineExceeded",
    "DrainDeadlineExceeded",
    "FailoverClient",
    "GoingAway",
    "ListeningPort",
    "ObjectStream",
    "ObjectStreams",
    "StreamOptions",
    "StreamReader",
    "UnexpectedAnswer",
    "MaxLength",
    "NoAddressReady",
    "PICK_FIRST",
    "ROUND_ROBIN",
    "MinLength",
    "NoSuchMethod",
    "NoSuchObject",
    "Pattern",
    "Range",
    "ReconnectingClient",
    "RefOf",
    "ServerOptions",
    "Referenceable",
    "RemoteError",
    "RemoteInterface",
    "RemoteMethod",
    "RemoteReference",
    "RemoteViolation",
    "TooManyPendingCalls",
    "TooManyReferences",
    "TypedReference",
    "UnsupportedHint",
    "callContext",
    "connect",
    "connectURL",
    "login",
    "currentBroker",
    "currentCall",
    "deferred",
    "drainBrokers",
    "drainPort",
    "interfaceNamed",
    "reconnecting",
    "referenceOf",
    "registerError",
    "register_error",
    "remote",
    "serve",
    "serverFactory",
]
