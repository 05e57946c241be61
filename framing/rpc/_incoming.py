# -*- test-case-name: tests.framing.rpc.test_incoming,tests.protocols.rpc.test_call_ledger -*-
"""The server's calls to a client's exports, sans-IO: found, checked, handed to the I/O layer to run, answered.

Contract: L{IncomingCalls} (the clients without Twisted; the Twisted
broker runs its calls at once, L{protocols.rpc._answering.CallRunner}, and
shares the rules of answering below: L{resultRefused}, L{failure},
L{withoutDetails}) finds the exported object
(L{framing.rpc._errors.NoSuchObject}) and the L{framing.rpc._signatures.remote}
method (L{framing.rpc._errors.NoSuchMethod}) and checks the arguments (the
L{framing.Violation}); a refused call is answered with its FAIL at once.
A call that passes waits in L{IncomingCalls.waiting} for the I/O layer to
run it where it may block, and to settle it (L{IncomingCalls.settle}: one
ANSWER, checked, or one FAIL).  A CANCEL drops the answer.  At most
C{maxRunning} wait or run (L{TooManyRunningCalls}).  A call's arguments are
charged to the ledger (L{CALLS_ACCOUNT}, by L{callBytes}) until it is
settled or the connection ends.

Cost: one dict lookup for the object, one for the method, the argument
check, and L{callBytes} (O(the arguments)).

Design: docs/design/rpc-core.md
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from framing import Registry, Violation
from framing._budget import held_bytes
from framing._ledger import Ledger
from framing.slicing._constraints import Constraint

from ._errors import TooManyRunningCalls, describe, noSuchMethod, noSuchObject
from ._exports import ExportTable
from ._signatures import RemoteMethod
from ._wire import ANSWER, FAIL, NO_ANSWER, Message

DEFAULT_MAX_RUNNING = 100
"""Most of the server's calls a client keeps waiting or running at once (a client serves callbacks, not crowds)."""

CALLS_ACCOUNT = "calls"
"""
The ledger account (L{framing._ledger.Ledger}) of the peer's calls held
here, waiting to run or running: what their arguments and the metadata
kept with them hold, and the call's own state (L{callBytes}).  The Twisted broker
(L{protocols.rpc._answering.CallRunner}) and the clients without Twisted (L{IncomingCalls}) charge it alike.
"""


RUNNING_CALL_BYTES = 3072
"""
What a call held here holds besides its arguments: its Deferred, a
coroutine method's frame and Twisted's inline-callbacks state, the table
entries that find it, and the storage call or Deferred it awaits: 2.3 kB
for a coroutine method awaiting a Deferred, by tracemalloc
(tests/protocols/rpc/test_call_ledger.py C{RunningCallStateTests}, which
fails if a call holds more).
"""


def callBytes(
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None,
    metadata: Mapping[str, str] | None = None,
    registry: Registry | None = None,
) -> int:
    """
    The bytes a call held here is charged by (L{CALLS_ACCOUNT}): its own
    state (L{RUNNING_CALL_BYTES}) and the memory its positional arguments,
    keyword arguments and C{metadata} hold, by
    L{framing._budget.held_bytes} (every object's C{getsizeof}; an
    object of a type C{registry} sends by its state, any other by its own
    size: a stream reader or a reference among them is not walked into the
    connection it belongs to).
    Not the count of the CALL's bodies (L{framing.rpc._streams.leastEncodedLength},
    which stream windows use, as the wire does): a 4 MiB CALL of a list of
    small ints holds about 36 MB while its bodies count 1 MB, and a pool
    of connections whose calls hold such arguments is bounded only if each
    is charged what it holds.  O(the arguments), which the decoder has just
    paid for building them, and only for the calls held.
    """
    return RUNNING_CALL_BYTES + held_bytes((args, kwargs, metadata), registry)


class IncomingCall:
    """
    One call of the server's to an object this side exports, found and its
    arguments checked: the I/O layer runs it (L{run}) and settles it.

    @ivar requestId: the server's request id (L{NO_ANSWER}: no answer is sent).
    @ivar name: the method's name.
    @ivar method: the L{RemoteMethod} called.
    @ivar cancelled: the server sent CANCEL for it: its answer will not be sent.
    @ivar held: the bytes its arguments are charged to the ledger (L{callBytes}) until it is settled; 0 once released.
    """

    __slots__ = ("requestId", "name", "method", "_obj", "_args", "_kwargs", "cancelled", "held")

    def __init__(
        self, requestId: int, obj: Any, method: RemoteMethod, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        self.requestId = requestId
        self.name = method.name
        self.method = method
        self._obj = obj
        self._args = args
        self._kwargs = kwargs
        self.cancelled = False
        self.held = 0

    def run(self) -> Any:
        """Call the method: its result (maybe a coroutine, for the I/O layer to await), or its exception raised."""
        return self.method.function(self._obj, *self._args, **self._kwargs)

    def __repr__(self) -> str:
        return f"<IncomingCall {self.requestId} of {self.name!r}>"


class IncomingCalls:
    """
    The server's calls to this side's exports on one connection (see the module docstring).

    @ivar waiting: the calls received and not yet taken by the I/O layer (L{take}), in order.
    @ivar ledger: where the calls waiting or running are charged (L{CALLS_ACCOUNT}), or C{None}.
    @ivar registry: the connection's registry, which L{callBytes} asks about registered types.
    """

    def __init__(self, exports: ExportTable, maxRunning: int | None = DEFAULT_MAX_RUNNING) -> None:
        """
        @param exports: this side's exports, only read here.
        @param maxRunning: most calls waiting or running at once (C{None}: no bound).
        """
        self._exports = exports
        self._maxRunning = maxRunning
        self.waiting: list[IncomingCall] = []
        self._running: dict[int, IncomingCall] = {}
        self._unanswered = 0
        self.ledger: Ledger | None = None
        self.registry: Registry | None = None

    @property
    def runningCount(self) -> int:
        """How many of the server's calls wait or run here (for no answer too)."""
        return len(self._running) + self._unanswered

    def received(self, message: Message) -> Exception | None:
        """
        A CALL from the server: C{None} if it waits to be run (in
        L{waiting}); else why it is refused (L{NoSuchObject},
        L{NoSuchMethod}, a L{framing.Violation}), for the caller to answer
        with a FAIL.
        """
        # (A call context's deadline and metadata, if any, are read past: a server whose call has a
        # deadline CANCELs it when the deadline passes, which drops its answer here.)
        _, requestId, target, name, args, kwargs = message if len(message) == 6 else message[:6]
        entry = self._exports.exports.get(target)
        if entry is None:
            return noSuchObject(target)
        obj = entry[0]
        methods = getattr(obj, "remoteMethods", {})
        method = methods.get(name)
        if method is None:
            return noSuchMethod(name, methods)
        if self._maxRunning is not None and self.runningCount >= self._maxRunning:
            return TooManyRunningCalls(self._maxRunning)
        if requestId != NO_ANSWER and requestId in self._running:
            return Violation(f"call {requestId} reuses the request id of a call still running here")
        kwargs = kwargs or {}
        try:
            if method.checkArguments is not None:
                method.checkArguments(args, kwargs)
        except Violation as violation:
            return violation
        call = IncomingCall(requestId, obj, method, tuple(args), kwargs)
        if requestId == NO_ANSWER:
            self._unanswered += 1
        else:
            self._running[requestId] = call
        self.waiting.append(call)
        ledger = self.ledger
        if ledger is not None:
            # Charged last: an I/O layer that ends the session past the budget (told here) finds it waiting, and
            # the end drops it.  (A call context's metadata is not kept with the call here: not charged.)
            call.held = callBytes(args, kwargs, None, self.registry)
            ledger.charge(CALLS_ACCOUNT, call.held)
        return None

    def take(self) -> list[IncomingCall]:
        """The calls waiting to be run, in order (they run or wait on the I/O layer's side from now)."""
        waiting, self.waiting = self.waiting, []
        return waiting

    def cancelled(self, requestId: int) -> IncomingCall | None:
        """A CANCEL from the server: the call it names, if it still runs (its answer will not be sent)."""
        call = self._running.pop(requestId, None)
        if call is not None:
            call.cancelled = True
        return call

    def settle(self, call: IncomingCall, result: Any, error: BaseException | None) -> Message | None:
        """
        C{call} ended with C{result}, or C{error}: the ANSWER or FAIL to send
        (C{None} for a call for no answer, or one cancelled or forgotten).
        A result the method's result constraint refuses is a FAIL carrying
        the L{framing.Violation}, at C{"result..."}.  What its arguments
        were charged is released.
        """
        held = call.held
        if held:
            call.held = 0
            if self.ledger is not None:
                self.ledger.release(CALLS_ACCOUNT, held)
        requestId = call.requestId
        if requestId == NO_ANSWER:
            self._unanswered -= 1
            return None
        if self._running.pop(requestId, None) is not call:
            return None
        if error is None:
            constraint = call.method.result
            if constraint is None:
                return Message((ANSWER, requestId, result))
            error = resultRefused(constraint, result)
            if error is None:
                return Message((ANSWER, requestId, result))
        return failure(requestId, error)

    def end(self) -> None:
        """The connection is over: nothing waits, nothing will be answered (the closed ledger let go of it all)."""
        self.waiting.clear()
        self._running.clear()
        self._unanswered = 0


def resultRefused(constraint: Constraint, result: Any) -> Violation | None:
    """
    The L{framing.Violation} a method's C{result} breaks its result
    C{constraint} with, at C{"result..."}, or C{None} if it passes: such a
    call is answered with that FAIL, not its ANSWER (every shell alike).
    """
    try:
        constraint.validate(result)
    except Violation as violation:
        violation.where = "result" + violation.where
        return violation
    return None


def failure(requestId: int, error: BaseException, remoteTraceback: str | None = None) -> Message:
    """
    The FAIL of call C{requestId} for C{error} (described as
    L{framing.rpc._errors.describe} does), with C{remoteTraceback} if the
    answering side sends its tracebacks.
    """
    typeName, text, details = describe(error)
    return Message((FAIL, requestId, typeName, text, remoteTraceback, details))


def withoutDetails(message: Message) -> Message:
    """
    The FAIL C{message} without its details, for when they cannot be
    encoded (a registered exception whose arguments cannot be sent): its
    type and text still go.
    """
    return Message((*message[:5], None))
