"""Interceptors: hooks around each call, on the side that answers it and on the side that makes it.

Contract: an interceptor (L{ICallInterceptor}; subclass L{CallInterceptor}
for no-op defaults) is told when each call starts and when it ends, with a
L{CallInfo}: the method's name, the peer, the avatar (the logged-in root,
on a server with logins), which side this is, the start and end times
(C{time.perf_counter}) and the outcome.  C{callStarted} may refuse the call
by raising: on the answering side the method does not run and the caller
gets that error (a L{framing.Violation} arrives as a
L{protocols.rpc.RemoteViolation}, a registered error as itself); on the
calling side nothing is sent and the call's Deferred fails with it.  Each
call that started ends exactly once, with L{OK}, L{ERROR}, L{REFUSED},
L{CANCELLED}, L{LOST} (the connection ended first) or L{ONE_WAY} (a call
for no answer, ended when its method returned; seen on the answering side
only: the calling side's C{callRemoteOnly} keeps nothing to end).
Interceptors run in the order given at start and in reverse order at end,
like gRPC's.

This is gRPC's interceptor split in its two halves (no continuation, so no
Deferred or closure per call), in Twisted's hook style.  A broker without
interceptors pays nothing: they are installed per connection by its
factory (L{protocols.rpc.BrokerFactory}'s C{interceptors}), replacing the
broker's CALL and CANCEL handlers, its C{callRemote} and its connection's
C{sendObject} with intercepting ones.  An interceptor's own exception in
C{callEnded} or a connection hook is logged, never raised into the
connection.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from twisted.internet.defer import CancelledError, Deferred, fail
from twisted.python.failure import Failure
from zope.interface import Interface, implementer

from framing import Violation

from .errors import NO_SUCH_METHOD, NO_SUCH_OBJECT, VIOLATION, describe
from .wire import ANSWER, CALL, CANCEL, FAIL, NO_ANSWER, Message

SERVER, CLIENT = "server", "client"
"""L{CallInfo.side}: this side answers the call, or makes it."""

OK, ERROR, REFUSED, CANCELLED, LOST, ONE_WAY = "ok", "error", "refused", "cancelled", "lost", "one-way"
"""The outcomes of a call (L{CallInfo.outcome})."""

_REFUSALS = frozenset({VIOLATION, NO_SUCH_METHOD, NO_SUCH_OBJECT})

now = time.perf_counter


class CallInfo:
    """
    One call, as interceptors see it.

    @ivar side: L{SERVER} (this side runs it) or L{CLIENT} (this side made it).
    @ivar method: the method's name, as the caller sent it.
    @ivar peer: the peer's address, as text.
    @ivar avatar: the logged-in root of the connection on a server with
        logins, else C{None}.
    @ivar requestId: the call's request id on its connection (0: no answer).
    @ivar started: C{time.perf_counter()} when it started.
    @ivar ended: the same when it ended, or C{None}.
    @ivar outcome: C{None} until it ends, then L{OK}, L{ERROR}, L{REFUSED},
        L{CANCELLED}, L{LOST} or L{ONE_WAY}.
    @ivar errorType: the wire type name of its failure (C{"KeyError"},
        C{"NoSuchMethod"}, ...), or C{None}.
    @ivar state: free for interceptors (e.g. a tracing span).
    """

    __slots__ = ("side", "method", "peer", "avatar", "requestId", "started", "ended", "outcome", "errorType", "state")

    def __init__(self, side: str, method: str, peer: str, avatar: Any, requestId: int) -> None:
        self.side = side
        self.method = method
        self.peer = peer
        self.avatar = avatar
        self.requestId = requestId
        self.started = now()
        self.ended: float | None = None
        self.outcome: str | None = None
        self.errorType: str | None = None
        self.state: Any = None

    @property
    def duration(self) -> float | None:
        """Seconds from start to end, or C{None} before the end."""
        return None if self.ended is None else self.ended - self.started

    def __repr__(self) -> str:
        return f"<CallInfo {self.side} {self.method!r} {self.peer} {self.outcome or 'running'}>"


class ICallInterceptor(Interface):  # type: ignore[misc]
    """Hooks around each call and each connection (see L{protocols.rpc.interceptors})."""

    def callStarted(call):  # type: ignore[no-untyped-def]
        """A call starts (a L{CallInfo}); raise to refuse it."""

    def callEnded(call):  # type: ignore[no-untyped-def]
        """A call ended: C{call.outcome}, C{call.duration} and C{call.errorType} are set."""

    def connectionMade(broker):  # type: ignore[no-untyped-def]
        """A connection with these interceptors is up (its L{protocols.rpc.Broker})."""

    def connectionLost(broker):  # type: ignore[no-untyped-def]
        """That connection ended."""


@implementer(ICallInterceptor)
class CallInterceptor:
    """An L{ICallInterceptor} that does nothing: subclass it and override what you need."""

    def callStarted(self, call: CallInfo) -> None:
        pass

    def callEnded(self, call: CallInfo) -> None:
        pass

    def connectionMade(self, broker: Any) -> None:
        pass

    def connectionLost(self, broker: Any) -> None:
        pass


class Interception:
    """
    The interceptors of one connection: the L{protocols.interfaces.IBrokerExtension}
    that tells them of its start and end, and the wrappers that tell them of each call.
    """

    controlTypes: tuple[type, ...] = ()

    def __init__(self, broker: Any, interceptors: Sequence[Any]) -> None:
        self.broker = broker
        self.interceptors = tuple(interceptors)
        self._reversed = tuple(reversed(self.interceptors))
        # The hooks bound once, leaving out CallInterceptor's no-ops: a call pays only for hooks that do something.
        self._started = tuple(i.callStarted for i in self.interceptors if _overrides(i, "callStarted"))
        self._ended = tuple(i.callEnded for i in self._reversed if _overrides(i, "callEnded"))
        self._answering: dict[int, CallInfo] = {}
        self._peer: Any = None
        self._avatar: Any = None
        connection = broker.connection
        self._send = connection.sendObject
        connection.sendObject = self._sendObject
        self._call = broker.replaceHandler(CALL, self._callReceived)
        self._cancel = broker.replaceHandler(CANCEL, self._cancelReceived)
        self._callRemote = broker.callRemote
        broker.callRemote = self._intercepted
        broker.extensions = (*broker.extensions, self)

    # -- IBrokerExtension ---------------------------------------------------------------

    def install(self, broker: Any, registry: Any) -> None:
        pass

    def controlReceived(self, obj: Any) -> None:
        pass

    def connectionMade(self) -> None:
        for interceptor in self.interceptors:
            self._safely(interceptor.connectionMade, self.broker)

    def connectionLost(self, reason: Failure) -> None:
        answering, self._answering = self._answering, {}
        for info in answering.values():
            self._end(info, LOST)
        for interceptor in self._reversed:
            self._safely(interceptor.connectionLost, self.broker)

    # -- the answering side ------------------------------------------------------------

    def _info(self, side: str, method: str, requestId: int) -> CallInfo:
        if self._peer is None:
            self._learnPeer()
        return CallInfo(side, method, self._peer, self._avatar, requestId)

    def _learnPeer(self) -> None:
        """At the first call (after any login): the peer's name, and the avatar on a server with logins."""
        broker = self.broker
        self._peer = str(broker.connection.peerName())
        if getattr(broker.factory, "gate", None) is not None:
            root = broker.references.exports.get(0)
            self._avatar = root[0] if root is not None else None

    def _callReceived(self, message: Message) -> None:
        # Runs for every call: _info and _end written out.
        requestId = message[1]
        if self._peer is None:
            self._learnPeer()
        info = CallInfo(SERVER, message[3], self._peer, self._avatar, requestId)
        if self._started:
            try:
                for started in self._started:
                    started(info)
            except Exception as error:
                self._refuse(info, error)
                return
        if requestId == NO_ANSWER:
            self._call(message)
            self._end(info, ONE_WAY)
            return
        self._answering[requestId] = info
        self._call(message)

    def _refuse(self, info: CallInfo, error: Exception) -> None:
        """An interceptor refused the call: answer it with C{error}, without running it."""
        typeName, text, details = describe(error)
        info.errorType = typeName
        if isinstance(error, Violation):
            self.broker.connection.logRefusal(error.code, text)
        if info.requestId != NO_ANSWER:
            self._send(Message((FAIL, info.requestId, typeName, text, None, details)))
        self._end(info, REFUSED)

    def _cancelReceived(self, message: Message) -> None:
        info = self._answering.pop(message[1], None)
        self._cancel(message)
        if info is not None:
            self._end(info, CANCELLED)

    def _sendObject(self, obj: Any, outgoing: Any = None) -> None:
        self._send(obj, outgoing)
        # After sending: an answer that fails to encode is replaced by a FAIL, which ends the call.
        if type(obj) is not Message:
            return
        kind = obj[0]
        if kind == ANSWER:
            info = self._answering.pop(obj[1], None)
            if info is not None:
                info.ended = now()
                info.outcome = OK
                index = 0
                try:
                    for ended in self._ended:
                        ended(info)
                        index += 1
                except Exception:
                    self._endFailed(info, index)
        elif kind == FAIL:
            info = self._answering.pop(obj[1], None)
            if info is not None:
                info.errorType = obj[2]
                self._end(info, REFUSED if obj[2] in _REFUSALS else ERROR)

    # -- the calling side ----------------------------------------------------------------

    def _intercepted(self, target: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Deferred[Any]:
        info = self._info(CLIENT, name, 0)
        try:
            for started in self._started:
                started(info)
        except Exception as error:
            info.errorType = describe(error)[0]
            self._end(info, REFUSED)
            return fail(error)
        call: Deferred[Any] = self._callRemote(target, name, args, kwargs)
        info.requestId = getattr(call, "requestId", 0)
        call.addBoth(self._answered, info)
        return call

    def _answered(self, result: Any, info: CallInfo) -> Any:
        if not isinstance(result, Failure):
            self._end(info, OK)
            return result
        error = result.value
        assert error is not None
        info.errorType = describe(error)[0]
        if isinstance(error, CancelledError):
            self._end(info, CANCELLED)
        else:
            self._end(info, REFUSED if info.errorType in _REFUSALS else ERROR)
        return result

    # -- both ---------------------------------------------------------------------------

    def _end(self, info: CallInfo, outcome: str) -> None:
        info.ended = now()
        info.outcome = outcome
        index = 0
        try:
            for ended in self._ended:
                ended(info)
                index += 1
        except Exception:
            self._endFailed(info, index)

    def _endFailed(self, info: CallInfo, failed: int) -> None:
        """C{callEnded} number C{failed} raised: log it, and tell the interceptors after it (each once)."""
        self.broker.connection.log.failure("an interceptor's callEnded failed for {call}", call=info)
        for ended in self._ended[failed + 1 :]:
            self._safely(ended, info)

    def _safely(self, hook: Any, argument: Any) -> None:
        try:
            hook(argument)
        except Exception:
            self.broker.connection.log.failure("interceptor {hook} failed", hook=hook)


def _overrides(interceptor: Any, name: str) -> bool:
    """Whether C{interceptor}'s hook C{name} is its own, not L{CallInterceptor}'s no-op."""
    return getattr(type(interceptor), name, None) is not getattr(CallInterceptor, name)


def intercept(broker: Any, interceptors: Sequence[Any]) -> Interception | None:
    """Install C{interceptors} on C{broker} (before its connection starts); C{None} if there are none."""
    if not interceptors:
        return None
    return Interception(broker, interceptors)
