# -*- test-case-name: tests.test_exports,tests.protocols.rpc.test_latency,tests.protocols.rpc.test_interfaces -*-
"""Remote calls over chunkwire.

A server exposes a L{Referenceable} whose L{remote} methods clients may
call::

    from protocols import rpc
    from framing.slicing._constraints import Text

    class Greeter(rpc.Referenceable):
        @rpc.remote(args={"name": Text(100)})
        def greet(self, name):
            return f"hello {name}"

    await rpc.serve(reactor, "tcp:8760:interface=127.0.0.1", Greeter())

    root = await rpc.connect(reactor, "tcp:host=127.0.0.1:port=8760")
    assert await root.callRemote("greet", "ada") == "hello ada"

Contract: a call gets its answer or fails (L{RemoteError}, a registered
type, L{DeadReferenceError}, L{CallTimedOut}, L{DeadlineExceeded}, the
reason the connection was lost).  Serving takes a L{ServerOptions},
connecting a L{ClientOptions} (with C{bulk} options, the connection
carries L{protocols.bulk} streams too); per-connection limits are a L{CallLimits};
deadlines and metadata travel in a L{callContext}.  A L{Broker} hands each
message to C{protocols/rpc/_calls.py}, C{protocols/rpc/_answering.py} or
C{protocols/rpc/_tables.py}; streams are C{protocols/rpc/_streams.py}.

Cost: each call and answer is one message in one transport write, O(1) in
the calls in flight and the connection's age.

Design: docs/design/rpc-twisted.md
"""

from framing.rpc._addresses import PICK_FIRST, ROUND_ROBIN, Backoff, NoAddressReady
from framing.rpc._drain import DrainDeadlineExceeded, GoingAway
from framing.rpc._errors import (
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
from framing.rpc._interception import CallTally
from framing.rpc._limits import CLIENT_CALL_LIMITS, SERVER_CALL_LIMITS, CallLimits
from framing.rpc._referenceable import Referenceable
from framing.rpc._signatures import MaxLength, MinLength, Pattern, Range, RemoteMethod, UnsupportedHint, remote

from .._deadline import ConnectTimeout
from .._mismatch import ClosedBeforePreamble, NotTLS, TLSHandshakeFailed
from ..options import ClientOptions
from ._answering import currentBroker
from ._broker import Broker, BrokerFactory
from ._context import CallContext, callContext, currentCall
from ._drain import DEFAULT_GRACE, drainBrokers, drainPort
from ._endpoints import ReconnectingClient, connect, connectURL, login, loginGate, reconnecting, serve, serverFactory
from ._failover import FailoverClient
from ._interceptors import CallInterceptor, ICallRecorder
from ._interfaces import RemoteInterface, TypedReference, deferred, interfaceNamed, referenceOf
from ._listening import ListeningPort
from ._options import ServerOptions
from ._refs import RefOf, RemoteReference
from ._streams import ObjectStream, ObjectStreams, StreamOptions, StreamReader

__all__ = [
    "Backoff",
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
    "CallInterceptor",
    "DEFAULT_GRACE",
    "NotTLS",
    "TLSHandshakeFailed",
    "loginGate",
    "CallTally",
    "ClosedBeforePreamble",
    "ICallRecorder",
]
