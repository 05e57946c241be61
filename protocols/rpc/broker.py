"""The Broker: one end of an RPC connection, calling and being called.

Contract: both ends are the same class.  Each call is one CALL message in one
transport write; each answer one ANSWER or FAIL in one write.  Calls in
flight live in a dict keyed by request id, so sending, answering, failing and
cancelling a call are O(1) whatever is in flight and however old the
connection is, and answers may come in any order.  A call either gets its
answer or errbacks: when the connection is lost every pending call errbacks
at once with the reason.  An answer to a call this side gave up on
(cancelled, or timed out) is ignored and logged at debug level; one answer per such call
is expected, and any other answer to an id that is not pending (a call never
made, or answered twice) drops the connection with L{UnexpectedAnswer}, so a
peer cannot flood this side with answers it never asked for.  Calls from the
peer still running here when the connection is lost are left to finish (they
may have side effects half done); their answers are dropped.

Limits (L{CallLimits}): at most C{max_pending} calls wait on the peer
(C{callRemote} past it fails at once with L{TooManyPendingCalls}), at most
C{max_imports} of the peer's references are held (a message past it is
refused), and with C{call_timeout} each call has a timer, stopped when it is
answered.  Refusals (a call refused, to an unknown object or method, or by
a method raising a L{framing.Violation}) and failures are logged through
L{TokenProtocol.logRefusal} and L{TokenProtocol.logFailure}: at a bounded
rate, peer text escaped, and a connection refused too often dropped.  On
connection loss the broker drops its bound methods and its registry (whose
slicers refer to it), so it is freed without a garbage collection.

References: an exported object lives in C{exports} (id to C{[object,
count]}), counting how many times its id was sent.  The receiving side
counts how many times it received the id for its live L{RemoteReference};
when that reference dies it sends RELEASE(id, count) and the exporter
subtracts, forgetting the object at zero.  A reference sent again while a
RELEASE is in flight is therefore never forgotten too early, and ids are
never reused.  RELEASEs are queued by the weakref callback (which may run in
the middle of an encode, so it must not write) and sent together, in one
write, on the next reactor turn.

The preamble is held back until the end of the reactor turn in which the
connection is made, so a call made in that turn (from C{connect}'s callback,
C{ClientService.whenConnected} or C{connectionMade}) leaves in the same write
as the preamble.  Nothing waits for the peer's preamble.
"""

from __future__ import annotations

import itertools
import traceback
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from operator import attrgetter
from types import CoroutineType
from typing import Any

from twisted.internet.defer import Deferred, fail, gatherResults, succeed
from twisted.internet.protocol import Factory, connectionDone
from twisted.logger import LogLevel
from twisted.python.failure import Failure
from zope.interface import implementer

from framing import Limits, Registry, Violation
from framing.errors import InvalidValue, short_repr
from framing.outgoing import Outgoing
from framing.slicing.registry import DEFAULT_REGISTRY

from ..base import TokenProtocol
from ..config import ConnectionConfig
from ..interfaces import IObjectReceiver
from ..logs import escape
from .errors import (
    CallTimedOut,
    DeadReferenceError,
    MessageRefused,
    TooManyPendingCalls,
    TooManyReferences,
    UnexpectedAnswer,
    clipTraceback,
    describe,
    noSuchMethod,
    noSuchObject,
    rebuild,
)
from .limits import CLIENT_CALL_LIMITS, CallLimits
from .referenceable import Referenceable, RemoteMethod
from .refs import (
    REF_OPEN_TYPE,
    YOURREF_OPEN_TYPE,
    ImportRecord,
    ReferenceableSlicer,
    ReferenceUnslicer,
    RemoteReference,
    RemoteReferenceSlicer,
    YourReferenceUnslicer,
)
from .wire import (
    ANSWER,
    CALL,
    CANCEL,
    FAIL,
    MESSAGES,
    OPEN_TYPE,
    RELEASE,
    ROOT_ID,
    Message,
    MessageSlicer,
    MessageUnslicer,
)

_MESSAGE_SLICER = MessageSlicer()


class _Call(Deferred[Any]):
    """
    The caller's L{Deferred} for one call; it knows its request id so that
    cancelling it is O(1), and its timeout's delayed call, if it has one.
    """

    __slots__ = ("requestId", "timer")

    def __init__(self, canceller: Callable[[Deferred[Any]], None], requestId: int) -> None:
        super().__init__(canceller)
        self.requestId = requestId
        self.timer: Any = None


def _callsGone(call: Deferred[Any]) -> None:
    """The canceller of calls made after the connection was lost: nothing is pending any more."""


def _ignoreMessage(message: Message) -> None:
    """The handler of every message a broker receives after its connection was lost."""


_LOST_HANDLERS = (_ignoreMessage,) * len(MESSAGES)

_calling: ContextVar[Broker | None] = ContextVar("chunkwire.rpc.calling", default=None)


def currentBroker() -> Broker | None:
    """
    The L{Broker} whose peer called the remote method now running (in its
    synchronous part, or anywhere in a coroutine method, which keeps the
    context it started in), or C{None} outside a remote call.  Extensions
    use it to find the connection a call arrived on.
    """
    return _calling.get()


@implementer(IObjectReceiver)
class Broker:
    """
    One end of an RPC connection: the L{IObjectReceiver} of its own
    L{TokenProtocol}, C{connection}.

    It exposes C{root} (if given) to the peer under export id 0, and every
    L{Referenceable} sent in an argument or a result under a fresh id; it
    turns what the peer exports into L{RemoteReference}s.  A factory's
    C{buildProtocol} returns C{broker.connection}; tests join two brokers
    with L{protocols.testing.connectedPair}.

    @ivar connection: the L{TokenProtocol} this broker receives from and
        sends on (made by the broker, with a registry of its own).
    @ivar root: the L{Referenceable} the peer reaches with L{rootReference}
        on its side, or C{None}.
    @ivar clock: the reactor (an C{IReactorTime}) that end-of-turn work is
        scheduled on: the held preamble and queued RELEASEs.
    @ivar tracebacks: whether FAIL messages carry the local traceback.
    @ivar callLimits: the L{CallLimits}: references the peer may make this
        side hold, calls waiting on the peer, and how long each may wait.
    @ivar extensions: the L{IBrokerExtension}s loaded, in order.
    @ivar factory: the L{BrokerFactory} that built this broker, if any.
    """

    factory: Any = None

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
            (C{install(broker, registry)}) here, in order.
        @param sendBackPressure: the connection's
            L{TokenProtocol.sendBackPressure}; C{None} for its default (on).
        @raise TypeError: C{root} is not a L{Referenceable}.
        """
        if root is not None and not isinstance(root, Referenceable):
            raise TypeError(f"the root must be a Referenceable, not {type(root).__name__}")
        self.root = root
        self.clock = clock
        self.tracebacks = tracebacks
        self.callLimits = callLimits or CLIENT_CALL_LIMITS
        self._up = False
        self._lost: Failure | None = None
        self._requestIds = itertools.count(1)
        self._lastRequestId = 0
        # Answers still expected for calls given up on: one per cancelled call.
        self._lateAnswers = 0
        self._exportCounter = itertools.count(ROOT_ID + 1)
        self._pending: dict[int, _Call] = {}
        self._running: dict[int, Deferred[Any]] = {}
        self._exports: dict[int, list[Any]] = {}
        self._exportIds: dict[int, int] = {}
        self._imports: dict[int, ImportRecord] = {}
        self._releases: list[Message] = []
        self._releaseCall: Any = None  # an IDelayedCall
        self._disconnectWaiters: list[Deferred[BaseException]] = []
        self._cancelCall = self._cancel  # bound once: one canceller for every call
        # The message table's handlers, bound once: one index per message.
        self._handlers = tuple(attrgetter(kind.handler)(self) for kind in MESSAGES)
        self._refusedHandlers = tuple(
            None if kind.refused is None else attrgetter(kind.refused)(self) for kind in MESSAGES
        )
        if root is not None:
            self._exports[ROOT_ID] = [root, 0]
            self._exportIds[id(root)] = ROOT_ID
        connectionRegistry = self._connectionRegistry(registry)
        self.extensions = tuple(extensions)
        self._controls: dict[type, Any] = {}
        for extension in self.extensions:
            extension.install(self, connectionRegistry)
            for controlType in extension.controlTypes:
                self._controls[controlType] = extension
        self._callSentHooks = tuple(
            extension.callSent for extension in self.extensions if getattr(extension, "callSent", None) is not None
        )
        config = ConnectionConfig(
            limits=limits,
            registry=connectionRegistry,
            holdPreamble=True,
            clock=clock,
            sendBackPressure=sendBackPressure,
        )
        self.connection = TokenProtocol(config=config, receiver=self)

    def _connectionRegistry(self, registry: Registry | None) -> Registry:
        """A registry for this connection only: references are sliced against this broker's tables."""
        connection = Registry(registry if registry is not None else DEFAULT_REGISTRY)
        connection.add_slicer(Message, _MESSAGE_SLICER)
        connection.add_unslicer(OPEN_TYPE, MessageUnslicer)
        connection.add_slicer(Referenceable, ReferenceableSlicer(self))
        connection.add_slicer(RemoteReference, RemoteReferenceSlicer(self))
        connection.add_unslicer(REF_OPEN_TYPE, lambda limits: ReferenceUnslicer(limits, self))
        connection.add_unslicer(YOURREF_OPEN_TYPE, lambda limits: YourReferenceUnslicer(limits, self))
        return connection

    def _reactor(self) -> Any:
        if self.clock is None:
            from twisted.internet import reactor

            self.clock = reactor
        return self.clock

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

    def logRefusal(self, code: str, text: str, template: str | None = None, **fields: Any) -> None:
        """Log a refusal on the connection (see L{TokenProtocol.logRefusal})."""
        self.connection.logRefusal(code, text, template, **fields)

    def logFailure(self, kind: str, template: str, level: LogLevel = LogLevel.info, **fields: Any) -> None:
        """Log a failure on the connection (see L{TokenProtocol.logFailure})."""
        self.connection.logFailure(kind, template, level, **fields)

    def sendObject(self, obj: Any, outgoing: Outgoing | None = None) -> None:
        """Send C{obj} on the connection in one send transaction (see L{TokenProtocol.sendObject})."""
        self.connection.sendObject(obj, outgoing)

    # -- connection --------------------------------------------------------------

    def startReceiving(self, sender: Any) -> None:
        """
        The connection is up (its preamble is held back until something is
        sent or the reactor turn ends, so the first call shares its write):
        start the extensions, then tell the factory.
        """
        self._up = True
        for extension in self.extensions:
            extension.connectionMade()
        if isinstance(self.factory, BrokerFactory):
            self.factory.brokerConnected(self)

    def isConnected(self) -> bool:
        """Whether calls can be sent: connected, and not lost or closing."""
        return self._up and not self.connection.transport.disconnecting

    def whenDisconnected(self) -> Deferred[BaseException]:
        """
        A L{Deferred} firing with the exception that ended the connection
        (C{ConnectionDone} for a clean close) once it is lost, or at once if
        it was.  It never fails, so waiting on it never logs an error.
        """
        if self._lost is not None:
            return succeed(self._lostReason())
        waiter: Deferred[BaseException] = Deferred()
        self._disconnectWaiters.append(waiter)
        return waiter

    def disconnect(self) -> Deferred[BaseException]:
        """Close the connection; the result fires as L{whenDisconnected}'s does."""
        lost = self.whenDisconnected()
        transport = self.connection.transport
        if self._lost is None and transport is not None:
            transport.loseConnection()
        return lost

    def _lostReason(self) -> BaseException:
        assert self._lost is not None
        reason = self._lost.value
        assert reason is not None
        return reason

    def rootReference(self) -> RemoteReference:
        """The L{RemoteReference} to the peer's root object (export id 0)."""
        record = self._imports.get(ROOT_ID)
        ref = record() if record is not None else None
        if ref is None:
            # Not counted: nobody sent it, and the root is never released.
            ref = self._newImport(ROOT_ID, 0)
        return ref

    def stopReceiving(self, reason: Failure = connectionDone) -> None:
        """
        The connection is lost: fail every pending call with C{reason},
        forget every export and import, drop the answers of calls still
        running here, tell the extensions, and fire L{whenDisconnected}.
        """
        self._up = False
        self._lost = reason
        self._cancelDelayed()
        pending, self._pending = self._pending, {}
        self._running.clear()
        self._exports.clear()
        self._exportIds.clear()
        self._imports.clear()
        self._releases.clear()
        self._breakCycles()
        for call in pending.values():
            if call.timer is not None:
                call.timer.cancel()
                call.timer = None
            call.errback(reason)
        for extension in self.extensions:
            extension.connectionLost(reason)
        waiters, self._disconnectWaiters = self._disconnectWaiters, []
        for waiter in waiters:
            waiter.callback(self._lostReason())
        if isinstance(self.factory, BrokerFactory):
            self.factory.brokerDisconnected(self)

    def _breakCycles(self) -> None:
        """Drop what refers back to this broker (bound methods): it is freed without a GC."""
        self._handlers = _LOST_HANDLERS
        self._refusedHandlers = (None,) * len(MESSAGES)
        self._cancelCall = _callsGone
        self._controls = {}
        self._callSentHooks = ()

    def _cancelDelayed(self) -> None:
        release = self._releaseCall
        self._releaseCall = None
        if release is not None and release.active():
            release.cancel()

    # -- introspection (tests, monitoring) ----------------------------------------------

    @property
    def exportCount(self) -> int:
        """How many objects this side exports (the root included)."""
        return len(self._exports)

    @property
    def importCount(self) -> int:
        """How many ids this side holds a live or not yet released L{RemoteReference} for."""
        return len(self._imports)

    @property
    def pendingCount(self) -> int:
        """How many calls this side made that are not answered yet."""
        return len(self._pending)

    @property
    def runningCount(self) -> int:
        """How many calls from the peer are running here (their methods returned a Deferred)."""
        return len(self._running)

    # -- calling -------------------------------------------------------------------------

    def callRemote(self, target: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Deferred[Any]:
        """
        Call method C{name} of the peer's export C{target}; see
        L{RemoteReference.callRemote}, which is how applications call.
        """
        if not self._up or self.connection.transport.disconnecting:
            return fail(DeadReferenceError(f"cannot call {name!r}: the connection is not up"))
        if type(name) is not str:
            return fail(TypeError(f"a method name is a str, not {type(name).__name__}"))
        limits = self.callLimits
        if limits.max_pending is not None and len(self._pending) >= limits.max_pending:
            waiting = len(self._pending)
            return fail(TooManyPendingCalls(f"cannot call {name!r}: {waiting} calls already wait for answers"))
        request_id = self._lastRequestId = next(self._requestIds)
        call = _Call(self._cancelCall, request_id)
        # Pending before sending: a synchronous transport may answer at once.
        self._pending[request_id] = call
        outgoing = Outgoing()
        if self._callSentHooks:
            for hook in self._callSentHooks:
                hook(call, outgoing)
        try:
            self._send(Message((CALL, request_id, target, name, kwargs or None, *args)), outgoing)
        except Exception:
            del self._pending[request_id]
            return fail()
        if limits.call_timeout is not None and request_id in self._pending:
            call.timer = self._reactor().callLater(limits.call_timeout, self._timedOut, request_id, name)
        return call

    def _timedOut(self, request_id: int, name: str) -> None:
        """A call's timeout passed: forget it, tell the peer, and fail it with L{CallTimedOut}."""
        call = self._pending.pop(request_id, None)
        if call is None:
            return
        call.timer = None
        seconds = self.callLimits.call_timeout or 0.0
        if self._up and self.connection.failure is None:
            self._lateAnswers += 1  # given up on, as if cancelled: its answer may still come, once
            self._send(Message((CANCEL, request_id)))
        call.errback(CallTimedOut(name, seconds))

    def _cancel(self, call: Deferred[Any]) -> None:
        """The canceller of every call: forget it and tell the peer; the Deferred then fails with CancelledError."""
        request_id = call.requestId  # type: ignore[attr-defined]
        if self._pending.pop(request_id, None) is not None and self._up:
            if call.timer is not None:  # type: ignore[attr-defined]
                call.timer.cancel()  # type: ignore[attr-defined]
                call.timer = None  # type: ignore[attr-defined]
            self._lateAnswers += 1
            self._send(Message((CANCEL, request_id)))

    def _send(self, message: Message, outgoing: Outgoing | None = None) -> None:
        """
        Send one message in one send transaction (L{TokenProtocol.sendObject}):
        if it cannot be encoded, the exports its encoding counted are taken
        back by the rollback their slicer registered, since the peer never
        saw them.
        """
        self.connection.sendObject(message, outgoing)

    # -- receiving -----------------------------------------------------------------------

    def objectReceived(self, obj: Any) -> None:
        """Dispatch one message by its tag; an extension's control object to that extension."""
        if type(obj) is not Message:
            extension = self._controls.get(type(obj))
            if extension is not None:
                extension.controlReceived(obj)
                return
            self.connection.log.warn(
                "{peer} sent {obj} instead of an rpc message; dropping the connection",
                peer=self.connection.peerName(),
                obj=escape(short_repr(obj)),
            )
            self.connection.transport.loseConnection()
            return
        self._handlers[obj[0]](obj)

    def objectRefused(self, violation: Violation) -> None:
        """
        A message was refused: hand the refusal to its kind's refusal
        handler (L{MESSAGES}), which fails or refuses the call by the id the
        unslicer reported (a L{MessageRefused}; see L{protocols.rpc.wire}).
        Anything else is logged as a refusal.  The connection stays up.
        """
        handler = self._refusedHandlers[violation.tag] if type(violation) is MessageRefused else None
        if handler is None:
            self.connection.logRefusal(violation.code, str(violation))
            return
        handler(violation)

    def callRefused(self, refused: MessageRefused) -> None:
        """A CALL was refused: answer it with a FAIL (see L{MESSAGES})."""
        self._callRefused(refused.requestId, refused.violation)

    def answerRefused(self, refused: MessageRefused) -> None:
        """An ANSWER or FAIL was refused: fail the local call with the violation (see L{MESSAGES})."""
        call = self._answered(refused.requestId, "a refused answer")
        if call is not None:
            call.errback(refused.violation)

    def _callRefused(self, request_id: int, violation: Violation) -> None:
        self._refuseCall(request_id, violation, violation.code)

    def _refuseCall(self, request_id: int, error: Exception, code: str) -> None:
        """Answer a call this side refuses with a FAIL, and count it as a refusal (see L{TokenProtocol.logRefusal})."""
        self.connection.logRefusal(
            code, str(error), "Refused call {id} from {peer}: {code}: {violation}", id=request_id
        )
        self._sendFailure(request_id, error)

    def answerReceived(self, message: Message) -> None:
        _, request_id, result = message
        # (L{_answered} written out: this runs for every call.)
        call = self._pending.pop(request_id, None)
        if call is None:
            self._notPending(request_id, "an answer")
            return
        if call.timer is not None:
            call.timer.cancel()
            call.timer = None
        call.callback(result)

    def failReceived(self, message: Message) -> None:
        _, request_id, type_name, text, remote_traceback, details = message
        call = self._answered(request_id, "a failure")
        if call is not None:
            call.errback(rebuild(type_name, text, remote_traceback, details))

    def _answered(self, request_id: int, what: str) -> _Call | None:
        """
        The pending call C{request_id}, now answered (forgotten, its timer
        stopped); C{None} if it is not pending (see L{_notPending}).
        """
        call = self._pending.pop(request_id, None)
        if call is None:
            self._notPending(request_id, what)
            return None
        if call.timer is not None:
            call.timer.cancel()
            call.timer = None
        return call

    def _notPending(self, request_id: int, what: str) -> None:
        """
        The peer answered C{request_id}, which is not pending: expected once
        per cancelled or timed-out call (ignored, logged at debug level within
        the log rate); otherwise a call never made or answered twice.
        """
        if self._lateAnswers and 0 < request_id <= self._lastRequestId:
            self._lateAnswers -= 1
            template = "{peer}: ignoring {what} to request {id}, which is not pending: it was cancelled or timed out"
            self.connection.logFailure("not-pending", template, LogLevel.debug, what=what, id=request_id)
            return
        made = "was answered already" if 0 < request_id <= self._lastRequestId else "was never made"
        self.connection.failConnection(UnexpectedAnswer(f"{what} to request {request_id}, which {made}"))

    def cancelReceived(self, message: Message) -> None:
        running = self._running.pop(message[1], None)
        if running is None:
            template = "{peer}: ignoring a cancel of call {id}, not running"
            self.connection.logFailure("not-running", template, LogLevel.debug, id=message[1])
            return
        try:
            running.cancel()
        except Exception:
            # A canceller's bug must not reach dataReceived and drop the connection.
            self.connection.log.failure(
                "Cancelling request {id} failed", id=message[1]
            )  # our bug, not the peer's: in full

    def releaseReceived(self, message: Message) -> None:
        _, export_id, count = message
        if export_id != ROOT_ID and not self.releaseExport(export_id, count):
            template = "{peer}: ignoring the release of {id}, which is not exported"
            self.connection.logFailure("not-exported", template, LogLevel.debug, id=export_id)

    # -- being called --------------------------------------------------------------------

    def callReceived(self, message: Message) -> None:
        # currentBroker() names this broker while the method runs (and in
        # its coroutine, which copies the context when it is started here).
        token = _calling.set(self)
        try:
            self._dispatchCall(message)
        finally:
            _calling.reset(token)

    def _dispatchCall(self, message: Message) -> None:
        _, request_id, target, name, args, kwargs = message
        entry = self._exports.get(target)
        if entry is None:
            self._refuseCall(request_id, noSuchObject(target), "no-such-object")
            return
        obj = entry[0]
        method = obj.remoteMethods.get(name)
        if method is None:
            self._refuseCall(request_id, noSuchMethod(name, obj.remoteMethods), "no-such-method")
            return
        check = method.checkArguments
        if check is not None:
            try:
                check(args, kwargs)
            except Violation as violation:
                self._callRefused(request_id, violation)
                return
        try:
            result = method.function(obj, *args, **kwargs)
        except Violation as violation:
            # The method refused the call (a cap it keeps, a value it checks).
            self._callRefused(request_id, violation)
            return
        except Exception as error:
            self._methodFailed(method, error)
            self._sendFailure(request_id, error, self._tracebackText())
            return
        if isinstance(result, Deferred):
            self._answerLater(request_id, result, method)
        elif type(result) is CoroutineType:
            self._answerLater(request_id, Deferred.fromCoroutine(result), method)
        else:
            self._sendAnswer(request_id, result, method)

    def _answerLater(self, request_id: int, running: Deferred[Any], method: RemoteMethod) -> None:
        # Registered before the callbacks are added: an already-fired
        # Deferred answers (and unregisters) at once.
        self._running[request_id] = running
        running.addCallbacks(
            self._deferredAnswered,
            self._deferredFailed,
            callbackArgs=(request_id, method),
            errbackArgs=(request_id, method),
        )

    def _deferredAnswered(self, result: Any, request_id: int, method: RemoteMethod) -> None:
        if self._running.pop(request_id, None) is not None:
            self._sendAnswer(request_id, result, method)

    def _deferredFailed(self, failure: Failure, request_id: int, method: RemoteMethod) -> None:
        # Popped already: cancelled by the peer, or the connection is gone.
        # Either way nobody waits for this failure; it is consumed here.
        if self._running.pop(request_id, None) is None:
            return
        error = failure.value
        assert error is not None
        if isinstance(error, Violation):
            self._callRefused(request_id, error)
            return
        self._methodFailed(method, error)
        remote_traceback = failure.getTraceback() if self.tracebacks else None
        self._sendFailure(request_id, error, remote_traceback)

    def _sendAnswer(self, request_id: int, result: Any, method: RemoteMethod) -> None:
        if self._lost is not None or self.connection.failure is not None:
            return
        if method.result is not None:
            try:
                method.result.validate(result)
            except Violation as violation:
                violation.where = "result" + violation.where
                self._callRefused(request_id, violation)
                return
        try:
            self._send(Message((ANSWER, request_id, result)))
        except Exception as error:
            if isinstance(error, Violation):
                error.where = "result" + error.where
            self._sendFailure(request_id, error, self._tracebackText())

    def _sendFailure(self, request_id: int, error: BaseException, remote_traceback: str | None = None) -> None:
        if self._lost is not None or self.connection.failure is not None:
            return
        type_name, text, details = describe(error)
        remote_traceback = clipTraceback(remote_traceback) if self.tracebacks else None
        try:
            self._send(Message((FAIL, request_id, type_name, text, remote_traceback, details)))
        except Exception:
            # A registered exception whose args cannot be sent: send the rest.
            self._send(Message((FAIL, request_id, type_name, text, remote_traceback, None)))

    def _tracebackText(self) -> str | None:
        return traceback.format_exc() if self.tracebacks else None

    def _methodFailed(self, method: RemoteMethod, error: BaseException) -> None:
        """Log a remote method's exception (the caller gets it too), without a traceback, within the log rate."""
        self.connection.logFailure(
            "method-failed",
            "{peer}: remote method {name} raised {error}",
            name=method.name,
            error=escape(f"{type(error).__name__}: {short_repr(error, 200)}"),
        )

    # -- exports ------------------------------------------------------------------------------

    def exportFor(self, obj: Any) -> int:
        """
        The export id under which C{obj} is being sent (a new id the first
        time), counting one more sending of it.  Called while encoding.
        """
        key = id(obj)
        export_id = self._exportIds.get(key)
        if export_id is None:
            export_id = next(self._exportCounter)
            self._exportIds[key] = export_id
            self._exports[export_id] = [obj, 1]
        else:
            self._exports[export_id][1] += 1
        return export_id

    def localObject(self, export_id: int) -> Any:
        """
        The object this side exports as C{export_id} (a reference coming home).

        @raise InvalidValue: nothing is exported under C{export_id}.
        """
        entry = self._exports.get(export_id)
        if entry is None:
            raise InvalidValue(f"no object is exported as {export_id} on this connection")
        return entry[0]

    def releaseExport(self, export_id: int, count: int) -> bool:
        """Count C{count} sendings of C{export_id} as released; forget it at zero.  False if unknown."""
        entry = self._exports.get(export_id)
        if entry is None:
            return False
        entry[1] -= count
        if entry[1] <= 0 and export_id != ROOT_ID:
            del self._exports[export_id]
            del self._exportIds[id(entry[0])]
        return True

    # -- imports --------------------------------------------------------------------------------

    def importReference(self, export_id: int) -> RemoteReference:
        """The L{RemoteReference} for the peer's C{export_id}, just received once more.  Called while decoding."""
        record = self._imports.get(export_id)
        if record is not None:
            ref = record()
            if ref is not None:
                record.count += 1
                return ref
        limit = self.callLimits.max_imports
        if limit is not None and len(self._imports) >= limit and record is None:
            raise TooManyReferences(f"this side already holds {len(self._imports)} references of the peer, the limit")
        return self._newImport(export_id, 1)

    def _newImport(self, export_id: int, count: int) -> RemoteReference:
        ref = RemoteReference(self, export_id)
        # A dead record still waiting for its callback is replaced; the
        # callback still releases what that record counted.
        self._imports[export_id] = ImportRecord(ref, self._referenceDied, export_id, count)
        return ref

    def _referenceDied(self, record: ImportRecord) -> None:
        """Weakref callback: queue the RELEASE (it may run inside an encode, so it must not write)."""
        export_id = record.exportId
        if self._imports.get(export_id) is record:
            del self._imports[export_id]
        if not record.count or export_id == ROOT_ID or not self._up:
            return
        self._releases.append(Message((RELEASE, export_id, record.count)))
        if self._releaseCall is None:
            self._releaseCall = self._reactor().callLater(0, self._sendReleases)

    def _sendReleases(self) -> None:
        """Send every queued RELEASE, each its own send transaction, all in one write."""
        self._releaseCall = None
        releases, self._releases = self._releases, []
        if not releases or not self._up:
            return
        transport, send = self.connection.transport, self.connection.sendObject
        transport.hold()
        try:
            for message in releases:
                send(message)
        finally:
            transport.release()


class BrokerFactory(Factory):
    """
    Builds one L{Broker} per connection, all exposing the same root, and
    keeps track of the connected ones.

    @ivar brokers: the brokers whose connection is up.
    @ivar sendBackPressure: passed to each broker (see
        L{TokenProtocol.sendBackPressure}): on for servers, off for the
        client helpers, which set it.
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
    ) -> None:
        if root is not None and not isinstance(root, Referenceable):
            raise TypeError(f"the root must be a Referenceable, not {type(root).__name__}")
        self.root = root
        self.clock = clock
        self.tracebacks = tracebacks
        self.limits = limits
        self.registry = registry
        self.callLimits = callLimits
        self.brokers: set[Broker] = set()

    def buildBroker(self) -> Broker:
        """
        Make the L{Broker} of one new connection.  Override this to make a
        subclass, or one with extensions, with this factory's settings.
        """
        return Broker(
            self.root,
            clock=self.clock,
            tracebacks=self.tracebacks,
            limits=self.limits,
            registry=self.registry,
            callLimits=self.callLimits,
            sendBackPressure=self.sendBackPressure,
        )

    def buildProtocol(self, addr: Any) -> TokenProtocol:
        """A new broker's connection (L{buildBroker}); the broker is its C{receiver}."""
        broker = self.buildBroker()
        broker.factory = broker.connection.factory = self
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
