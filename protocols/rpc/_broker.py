# -*- test-case-name: tests.protocols.rpc.test_served_call,tests.protocols.auth.test_login_vectors -*-
"""The Broker: one end of an RPC connection, calling and being called.

Contract: both ends are the same class.  A broker is the L{IObjectReceiver}
of a L{TokenProtocol} it makes itself (C{broker.connection}): the
connection owns framing, the transport and pings; the broker is an
L{framing.rpc._connection.RpcConnection} (C{rpc}, the clients' session's
too: the registry, the call table, the drain, the one dispatch and the
rules of answers, RELEASE and GOAWAY) with Twisted's waiting, routed in
C{_route} to L{OutgoingCalls} (L{protocols.rpc._calls}), L{CallRunner}
(L{protocols.rpc._answering}) and the drain; how the connection ended is
a L{Disconnection}'s.  Extensions (L{IBrokerExtension}, e.g. bulk streams:
C{Broker(bulk=BulkOptions(...))}) are loaded instead of subclassing.  Limits are a L{CallLimits}; refusals
and failures are logged through L{TokenProtocol.logRefusal} and
L{TokenProtocol.logFailure}.  The preamble is held to the end of the
reactor turn, so a call made in that turn leaves in the same write.

Cost: each call is one CALL in one transport write, each answer one ANSWER
or FAIL in one write; dispatch is one index; an extension's objects one
dict lookup, only for objects that are not RPC messages; a refusal one call
to the dispatch.  Nothing refers
back to the broker after the connection is lost, so it is freed without a
garbage collection.

Design: docs/design/rpc-broker.md
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.protocol import Factory, connectionDone
from twisted.logger import LogLevel
from twisted.python.failure import Failure
from zope.interface import implementer

from framing import Limits, Registry, Violation
from framing._errors import short_repr
from framing._outgoing import Outgoing
from framing.login._wire import addLoginTypes
from framing.rpc._connection import RpcConnection, Shell
from framing.rpc._dispatch import Handler
from framing.rpc._errors import NotAnRpcMessage, RuleBroken
from framing.rpc._limits import CLIENT_CALL_LIMITS, CallLimits
from framing.rpc._referenceable import Referenceable
from framing.rpc._wire import Message

from .. import _guard as guarding
from .._base import TokenProtocol
from .._config import ConnectionConfig
from .._guard import ConnectionCounter, GuardPolicy
from .._interfaces import IObjectReceiver
from .._logs import escape
from ..options import ConnectionExtension
from ._answering import CallRunner
from ._calls import OutgoingCalls, callName
from ._disconnection import Disconnection
from ._drain import ConnectionDrain
from ._interceptors import intercept
from ._refs import CallSender, RemoteReference
from ._streams import ObjectStreams
from ._tables import ReferenceTable


@implementer(IObjectReceiver)
class Broker:
    """
    One end of an RPC connection: the L{IObjectReceiver} of its own
    L{TokenProtocol}, C{connection}.

    It exposes C{root} (if given) under export id 0 and every
    L{Referenceable} sent under a fresh id, and turns the peer's exports
    into L{RemoteReference}s.  Tests join two brokers with
    L{protocols.testing.connectedPair}.

    @ivar connection: the L{TokenProtocol} this broker receives from and sends on.
    @ivar rpc: the L{framing.rpc._connection.RpcConnection} it is built on.
    @ivar calls: the L{OutgoingCalls}: calls this side made.
    @ivar incoming: the L{CallRunner}: calls the peer made, run here.
    @ivar references: the L{ReferenceTable}: exports and imports.
    @ivar sender: the L{CallSender} this side's calls go through: C{calls},
        or what stands in front of it (L{sendThrough}); L{RemoteReference}
        calls through it, as L{callRemote} does.
    @ivar root: the L{Referenceable} the peer reaches with L{rootReference}
        on its side, or C{None}.
    @ivar clock: the reactor (an C{IReactorTime}) end-of-turn work is scheduled on.
    @ivar callLimits: the L{CallLimits}.
    @ivar extensions: the L{IBrokerExtension}s loaded, in order.
    @ivar bulk: the bulk channel (L{protocols.bulk.BulkChannel}) of a broker
        made with C{bulk} settings, the last of its C{extensions}; else C{None}.
    @ivar drain: the L{ConnectionDrain} (L{protocols.rpc._drain}).
    @ivar disconnection: the L{Disconnection} (L{protocols.rpc._disconnection}).
    @ivar factory: the L{BrokerFactory} that built this broker, if any.

    Design: docs/design/rpc-broker.md
    """

    factory: Any = None
    bulk: Any = None

    def __init__(
        self,
        root: Referenceable | None = None,
        *,
        clock: Any = None,
        tracebacks: bool = False,
        limits: Limits | None = None,
        registry: Registry | None = None,
        callLimits: CallLimits | None = None,
        extensions: Iterable[Any] = (),
        sendBackPressure: bool | None = None,
        bulk: ConnectionExtension | None = None,
    ) -> None:
        """
        @param root: what the peer may call through its root reference.
        @param clock: an C{IReactorTime}; the global reactor if C{None}.
        @param tracebacks: send tracebacks of failed calls to the peer.
        @param limits: the L{Limits} for what this side receives.
        @param registry: the L{Registry} of the types the application sends
            (its parent is used; this broker adds its own entries to a child).
        @param callLimits: the L{CallLimits}; L{CLIENT_CALL_LIMITS} if C{None}.
        @param extensions: L{IBrokerExtension}s to load: each is installed
            (C{install(broker, registry)}) here, in order, after the
            L{ObjectStreams} every broker loads (unless one is given here).
        @param sendBackPressure: the connection's
            L{TokenProtocol.sendBackPressure}; C{None} for its default (on).
        @param bulk: bulk settings (a L{protocols.bulk.BulkOptions}): the
            connection carries streams, its channel loaded last (L{bulk});
            C{limits} default to the settings' C{connectionLimits()}, and
            C{clock} to the global reactor.  Both ends must carry bulk.
        @raise TypeError: C{root} is not a L{Referenceable}.
        """
        if root is not None and not isinstance(root, Referenceable):
            raise TypeError(f"the root must be a Referenceable, not {type(root).__name__}")
        extensions = tuple(extensions)
        if bulk is not None:
            if clock is None:
                from twisted.internet import reactor as clock
            if limits is None:
                limits = bulk.connectionLimits()
            self.bulk = bulk.brokerExtension(clock)
            extensions = (*extensions, self.bulk)
        self.root = root
        self.clock = clock
        self.callLimits = callLimits = callLimits or CLIENT_CALL_LIMITS
        if not any(isinstance(extension, ObjectStreams) for extension in extensions):
            # Every connection carries streams of objects (protocols.rpc._streams).
            extensions = (ObjectStreams(), *extensions)
        self.extensions = extensions
        self.disconnection = Disconnection()
        # The connection's registry (the RPC messages; the references, sliced against its tables, below), its call
        # table, its drain and its dispatch (_route), built as every RPC connection's are (the client session's too).
        self.rpc: RpcConnection[Any] = RpcConnection(registry, maxPending=callLimits.maxPending, nameOf=callName)
        connectionRegistry = self.rpc.registry
        config = ConnectionConfig(
            limits=limits,
            registry=connectionRegistry,
            holdPreamble=True,
            clock=clock,
            sendBackPressure=sendBackPressure,
        )
        self.connection = connection = TokenProtocol(config=config, receiver=self)
        self.references = ReferenceTable(connection, self, root, callLimits, clock)
        self.incoming = CallRunner(connection, self.references.exports, self, tracebacks, callLimits.maxRunning, clock)
        callSent = [extension.callSent for extension in self.extensions if hasattr(extension, "callSent")]
        self.calls = OutgoingCalls(connection, callLimits, clock, callSent, rpc=self.rpc)
        self.sender: CallSender = self.calls
        self.drain = ConnectionDrain(self, self.rpc.drain)
        self.rpc.carryReferences(self.references, RemoteReference)
        addLoginTypes(connectionRegistry)
        for extension in self.extensions:
            extension.install(self, connectionRegistry)
        self._intercepted = False
        # (the dispatch's own reactions hold the connection, not the broker: no cycle through the dispatch)
        self._reactions = _ConnectionReactions(connection)
        self._route()

    def _route(self, call: Handler | None = None, cancel: Handler | None = None) -> None:
        """
        Route the connection (L{framing.rpc._connection.RpcConnection.route}:
        every RPC connection's one dispatch) to this broker's parts, as its
        L{framing.rpc._connection.Shell} (the peer's calls to L{CallRunner},
        the outcome of the connection's rules for answers to
        L{OutgoingCalls}, GOAWAY's to the drain), and its extensions'
        C{controlTypes}; L{objectReceived} then costs one index per
        message.  C{call} and C{cancel}, if given, stand in front of
        L{CallRunner} (L{interceptCalls}).
        """
        incoming, calls = self.incoming, self.calls
        shell: Shell[Any] = Shell(
            callReceived=call or incoming.callReceived,
            cancelReceived=cancel or incoming.cancelReceived,
            callRefused=incoming.callRefused,
            answered=calls.callAnswered,
            failed=calls.failed,
            ignored=calls.ignored,
            goneAway=self.drain.peerWentAway,
            refused=self._reactions.refused,
            ruleBroken=self._reactions.ruleBroken,
            peerName=self.connection.peerName,
        )
        controls = {
            controlType: extension.controlReceived
            for extension in self.extensions
            for controlType in extension.controlTypes
        }
        rpc = self.rpc
        # (an ANSWER matched in line by the call table's pop, as the session does: one call per answer, as before)
        rpc.route(shell, controls, calls.answerReceived)
        # (read in line by objectReceived: one index per message, as before)
        self._handlers = rpc.messages
        self._controls = rpc.controls

    def interceptCalls(self, call: Handler | None, cancel: Handler) -> None:
        """
        Hand the peer's CALLs to C{call} (C{None}: straight to
        L{CallRunner}, as before) and its CANCELs to C{cancel}, which pass
        them on to C{self.incoming} themselves: the seam of
        L{protocols.rpc._interceptors.Interception}, once per broker, before
        its connection starts.

        @raise RuntimeError: the broker's calls are intercepted already.
        """
        if self._intercepted:
            raise RuntimeError("a broker's calls are intercepted once (one Interception holds all its interceptors)")
        self._intercepted = True
        self._route(call, cancel)

    def sendThrough(self, sender: CallSender) -> CallSender:
        """
        Send this side's calls through C{sender} from now on: the seam of
        L{protocols.rpc._interceptors.Interception}, which passes them on
        (the outgoing twin of L{interceptCalls}; a drain refuses calls in
        the call table, behind it).  Costs a call nothing beyond C{sender}'s own.

        @return: the sender before, which C{sender} passes calls on to if it does.
        """
        previous, self.sender = self.sender, sender
        return previous

    def callRemote(self, target: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Deferred[Any]:
        """
        Call method C{name} of the peer's export C{target} through L{sender}
        (applications call through L{RemoteReference.callRemote}).
        """
        return self.sender.callRemote(target, name, args, kwargs)

    def callRemoteOnly(self, target: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Call method C{name} of the peer's export C{target} for no answer, through L{sender}."""
        self.sender.callRemoteOnly(target, name, args, kwargs)

    # -- the connection's state, for applications and tests ---------------------

    @property
    def transport(self) -> Any:
        """The connection's L{protocols.CoalescingTransport} (C{None} before it is made)."""
        return self.connection.transport

    @property
    def failure(self) -> Failure | None:
        """The L{Failure} of the L{framing.ProtocolError} that dropped the connection, or C{None}."""
        return self.connection.failure

    @property
    def log(self) -> Any:
        """The connection's C{Logger}: refusals, failures and drops are logged there."""
        return self.connection.log

    @property
    def decoder(self) -> Any:
        """The connection's L{framing.Decoder} (made when the connection is)."""
        return self.connection.decoder

    @property
    def bufferedBytes(self) -> int:
        """Received bytes the connection holds (see L{TokenProtocol.bufferedBytes})."""
        return self.connection.bufferedBytes

    def sendObject(self, obj: Any, outgoing: Outgoing | None = None) -> None:
        """Send C{obj} on the connection in one send transaction (see L{TokenProtocol.sendObject})."""
        self.connection.sendObject(obj, outgoing)

    def logRefusal(self, code: str, text: str, template: str | None = None, **fields: Any) -> None:
        """Log a refusal on the connection (see L{TokenProtocol.logRefusal})."""
        self.connection.logRefusal(code, text, template, **fields)

    def logFailure(self, kind: str, template: str, level: LogLevel = LogLevel.info, **fields: Any) -> None:
        """Log a failure on the connection (see L{TokenProtocol.logFailure})."""
        self.connection.logFailure(kind, template, level, **fields)

    # -- introspection (tests, monitoring) ------------------------------------------

    @property
    def exportCount(self) -> int:
        """How many objects this side exports (the root included)."""
        return self.references.exportCount

    @property
    def importCount(self) -> int:
        """How many ids this side holds a live or not yet released L{RemoteReference} for."""
        return self.references.importCount

    @property
    def pendingCount(self) -> int:
        """How many calls this side made that are not answered yet."""
        return self.calls.pendingCount

    @property
    def runningCount(self) -> int:
        """How many calls from the peer are running here (their methods returned a Deferred), for no answer too."""
        return self.incoming.runningCount

    def rootReference(self) -> RemoteReference:
        """The L{RemoteReference} to the peer's root object (export id 0)."""
        return self.references.rootReference()

    # -- connection ----------------------------------------------------------------

    def startReceiving(self, sender: Any) -> None:
        """
        The connection is up (its preamble is held back until something is
        sent or the reactor turn ends, so the first call shares its write):
        start the extensions, then tell the factory.
        """
        self.references.start()
        self.calls.start()
        for extension in self.extensions:
            extension.connectionMade()
        if isinstance(self.factory, BrokerFactory):
            self.factory.brokerConnected(self)

    def isConnected(self) -> bool:
        """Whether calls can be sent: connected, and not lost or closing."""
        return self.calls.open and not self.connection.transport.disconnecting

    def whenDisconnected(self) -> Deferred[BaseException]:
        """
        A L{Deferred} firing with the exception that ended the connection
        (C{ConnectionDone} for a clean close) once it is lost, or at once if
        it was.  It never fails, so waiting on it never logs an error; it
        may be cancelled (then it fails with C{CancelledError}), which
        forgets it at once.
        """
        return self.disconnection.wait()

    def disconnect(self) -> Deferred[BaseException]:
        """Close the connection; the result fires as L{whenDisconnected}'s does."""
        lost = self.whenDisconnected()
        transport = self.connection.transport
        if self.disconnection.reason is None and transport is not None:
            transport.loseConnection()
        return lost

    def connectionDropped(self, reason: Failure) -> None:
        """
        The connection was dropped for C{reason}: fail every pending call
        with it now (later calls fail at once), not when the socket closes,
        which waits for the peer to take what is queued (up to
        C{ConnectionConfig.dropGrace}).  The rest waits for L{stopReceiving}.
        """
        self.calls.connectionLost(reason)

    def stopReceiving(self, reason: Failure = connectionDone) -> None:
        """
        The connection is lost: forget every export and import, drop the
        answers of calls still running here, fail every pending call with
        C{reason}, tell the extensions, and fire L{whenDisconnected}.
        """
        self.disconnection.lost(reason)
        self.incoming.connectionLost()
        self.references.connectionLost()
        self.calls.connectionLost(reason)
        self.drain.connectionLost()
        self.rpc.end()  # (its dispatch holds its own handlers: forgotten, so nothing is left for the GC)
        for extension in self.extensions:
            extension.connectionLost(reason)
        self.disconnection.notify()
        if isinstance(self.factory, BrokerFactory):
            self.factory.brokerDisconnected(self)

    # -- receiving -----------------------------------------------------------------

    def objectReceived(self, obj: Any) -> None:
        """
        Route one object (L{framing.rpc._dispatch.Dispatch}): a message by
        its tag and an extension's object by its type, both in line here;
        anything else through the dispatch, which ends the connection.
        """
        if type(obj) is Message:
            self._handlers[obj[0]](obj)
            return
        control = self._controls.get(type(obj))
        if control is not None:
            control(obj)
            return
        self.rpc.dispatch.received(obj)

    def objectRefused(self, violation: Violation) -> None:
        """
        Route one refusal (L{framing.rpc._dispatch.Dispatch.refused}): a
        refused CALL is answered with its FAIL, a refused answer fails its
        call, a CALL, ANSWER or FAIL refused before its id drops the
        connection (L{framing.rpc._errors.UnreadableRequestId}); any other
        is logged as a refusal.
        """
        self.rpc.dispatch.refused(violation)


class _ConnectionReactions:
    """What a broker does for the routes of its dispatch that are not its parts': a refusal counted, the end."""

    __slots__ = ("_connection",)

    def __init__(self, connection: TokenProtocol) -> None:
        self._connection = connection

    def refused(self, violation: Violation) -> None:
        """A refusal the dispatch only counts: logged (L{TokenProtocol.logRefusal}); the connection stays up."""
        self._connection.logRefusal(violation.code, str(violation))

    def ruleBroken(self, error: RuleBroken, received: Any) -> None:
        """The dispatch ends the connection for C{error}: dropped, an object that is no RPC message logged with it."""
        connection = self._connection
        if isinstance(error, NotAnRpcMessage):
            # Not a peer of this protocol, or a confused one: say why, then close.
            connection.log.warn(
                "{peer} sent {obj} instead of an rpc message; dropping the connection",
                peer=connection.peerName(),
                obj=escape(short_repr(received)),
            )
            connection.dropConnection(error, logged=False)
            return
        connection.dropConnection(error)


class BrokerFactory(Factory):
    """
    Builds one L{Broker} per connection, all exposing the same root, and
    keeps track of the connected ones.

    @ivar brokers: the brokers whose connection is up.
    @ivar sendBackPressure: passed to each broker (see
        L{TokenProtocol.sendBackPressure}): on for servers, off for the
        client helpers, which set it.
    @ivar gate: called with each new broker before its connection starts,
        to put a receiver in front of it (a login: see
        L{protocols.auth._server.Authenticator.guard}), or C{None}.
    @ivar interceptors: the L{protocols.rpc._interceptors.ICallInterceptor}s
        installed on each broker, in order (none: nothing is installed).
    @ivar guardPolicy: the L{protocols._guard.GuardPolicy} each connection
        is guarded with, or C{None} (not guarded: a client's factory, or a
        server's guarded by something else).
    @ivar guardCounter: the L{protocols._guard.ConnectionCounter} its
        guarded connections share (their caps count them there).
    @ivar bulk: the bulk settings each broker carries streams with (see
        L{Broker}), or C{None}.
    """

    sendBackPressure = True

    def __init__(
        self,
        root: Referenceable | None = None,
        *,
        clock: Any = None,
        tracebacks: bool = False,
        limits: Limits | None = None,
        registry: Registry | None = None,
        callLimits: CallLimits | None = None,
        gate: Callable[[Broker], Any] | None = None,
        interceptors: Iterable[Any] = (),
        guard: GuardPolicy | None = None,
        bulk: ConnectionExtension | None = None,
    ) -> None:
        if root is not None and not isinstance(root, Referenceable):
            raise TypeError(f"the root must be a Referenceable, not {type(root).__name__}")
        self.root = root
        self.gate = gate
        self.interceptors = tuple(interceptors)
        self.clock = clock
        self.tracebacks = tracebacks
        self.limits = limits
        self.registry = registry
        self.callLimits = callLimits
        self.brokers: set[Broker] = set()
        self.guardPolicy = guard
        self.guardCounter = ConnectionCounter()
        self.bulk = bulk

    def buildBroker(self) -> Broker:
        """
        Make the L{Broker} of one new connection, with this factory's
        settings (its C{bulk} too).  Override this to make a subclass, or
        one with other extensions.
        """
        return Broker(
            self.root,
            clock=self.clock,
            tracebacks=self.tracebacks,
            limits=self.limits,
            registry=self.registry,
            callLimits=self.callLimits,
            sendBackPressure=self.sendBackPressure,
            bulk=self.bulk,
        )

    def buildProtocol(self, addr: Any) -> TokenProtocol:
        """A new broker's connection (L{buildBroker}); the broker is its C{receiver}."""
        broker = self.buildBroker()
        broker.factory = broker.connection.factory = self
        if self.interceptors:
            intercept(broker, self.interceptors)
        if self.gate is not None:
            self.gate(broker)
        if self.guardPolicy is not None:
            guarding.guard(broker.connection, self.guardPolicy, self.guardCounter, self.clock)
        return broker.connection

    def brokerConnected(self, broker: Broker) -> None:
        """Called by each broker once its connection is made."""
        self.brokers.add(broker)

    def brokerDisconnected(self, broker: Broker) -> None:
        """Called by each broker once its connection is lost."""
        self.brokers.discard(broker)

    def disconnectAll(self) -> Deferred[None]:
        """Close every connection; the result fires once all of them are lost."""
        brokers = list(self.brokers)
        lost = [broker.disconnect() for broker in brokers]
        done: Deferred[None] = gatherResults(lost).addCallback(_nothing)
        return done


def _nothing(_: object) -> None:
    return None
