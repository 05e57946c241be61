# -*- test-case-name: tests.framing.rpc.test_incoming,tests.protocols.rpc.test_call_ledger -*-
"""The peer's calls to this side's exports, sans-IO: admitted or refused; a client's run by its I/O layer, answered.

Contract: L{CallAdmission.admit} is the one rule that admits the peer's
CALL before its method runs, for every shell: the Twisted broker's
L{protocols.rpc._answering.CallRunner} (which runs its calls at once) and
L{IncomingCalls} (the clients without Twisted) are both one.  Its
refusals are listed on it in order: a reused running request id drops
the connection, each other gets its FAIL (L{failure}), counted when
L{refusalCode} names one.  L{IncomingCalls} keeps a call that passes in
L{IncomingCalls.waiting} for the I/O layer to run where it may block, and
to settle (L{IncomingCalls.settle}: one ANSWER, checked by
L{resultRefused}, or one FAIL).  A CANCEL drops the answer; a deadline
passing while the call runs answers it with L{overDeadline}'s FAIL
(L{IncomingCalls.expired}, wire format 12.7); either stops the work
through L{IncomingCall.stop} if it can.  A call's
arguments are charged to the ledger (L{CALLS_ACCOUNT}, by L{callBytes}) until it is settled or the
connection ends.

Cost: L{CallAdmission.admit} is one Python call, plus one for the
method's constraints if it has any; its lookups are subscripts.
L{callBytes} is O(the arguments), for held calls only.

Design: docs/design/rpc-core.md
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from framing import Registry, Violation
from framing._budget import held_bytes
from framing._ledger import Ledger
from framing.slicing._constraints import Constraint

from ._errors import (
    DeadlineExceeded,
    DuplicateRequestId,
    NoSuchMethod,
    NoSuchObject,
    TooManyRunningCalls,
    describe,
    noSuchMethod,
    noSuchObject,
)
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


_Running = TypeVar("_Running")


class CallAdmission(Generic[_Running]):
    """
    The rule that admits the peer's CALL, or refuses it, before its method
    runs (see the module docstring): the base of the Twisted broker's
    L{protocols.rpc._answering.CallRunner} and of L{IncomingCalls}, which
    keep the calls it counts.

    @ivar maxRunning: most calls running (or waiting) here at once, with or
        without an answer (C{None}: no bound).
    @ivar _running: the calls to be answered that run (or wait) here, by
        request id; kept by the subclass, read by L{admit}.
    @ivar _unanswered: how many calls for no answer run (or wait) here;
        kept by the subclass.
    """

    def __init__(self, exports: dict[int, list[Any]], maxRunning: int | None) -> None:
        """
        @param exports: this side's exports (export id to C{[object, count]},
            L{framing.rpc._exports.ExportTable.exports}), only read here.
        @param maxRunning: most calls running here at once (C{None}: no bound).
        """
        self._exports = exports
        self.maxRunning = maxRunning
        self._running: dict[int, _Running] = {}
        self._unanswered = 0

    @property
    def runningCount(self) -> int:
        """How many of the peer's calls run (or wait) here, for no answer too."""
        return len(self._running) + self._unanswered

    def admit(
        self,
        requestId: int,
        target: int,
        name: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any] | None,
        milliseconds: int | None = None,
    ) -> tuple[Any, RemoteMethod]:
        """
        The CALL C{requestId} of method C{name} of export C{target} with
        C{args} and C{kwargs} (and its call context's C{milliseconds} left,
        if any): the exported object and the L{RemoteMethod} to run; or
        raises why it is refused, in this order:

          - L{DuplicateRequestId}: C{requestId} names a call still running
            here (wire format 12.3).  First, because a FAIL of that id
            would be taken for the running call's answer: the shell drops
            the connection, nothing is answered;
          - L{DeadlineExceeded}: its deadline had passed (0 ms left, 12.7);
          - L{NoSuchObject}, L{NoSuchMethod} (a method not L{remote}, or
            an object with no remote methods);
          - L{TooManyRunningCalls}: C{maxRunning} calls run here already;
          - what the method's argument check raises: a L{framing.Violation}
            (the arguments refused), or another exception (the check's own
            bug, which the peer is answered with too).

        The caller catches C{Exception} around it: every refusal is one.
        Cost: one Python call, and one for the constraints' check if the
        method has one (a call by position within the method's counts,
        L{RemoteMethod.fewest}, skips the signature's); the lookups are
        subscripts (an admitted call raises nothing, so its C{try} costs
        nothing), the refusals built only when refused.
        """
        running = self._running
        if requestId in running:
            raise DuplicateRequestId(f"call {requestId} reuses the request id of a call still running here")
        if milliseconds is not None and milliseconds == 0:
            raise DeadlineExceeded(f"the deadline of {name!r} passed before it ran", name)
        try:
            obj = self._exports[target][0]
        except KeyError:
            raise noSuchObject(target) from None
        try:
            method: RemoteMethod = obj.remoteMethods[name]
        except (KeyError, AttributeError):
            raise noSuchMethod(name, getattr(obj, "remoteMethods", ())) from None
        maxRunning = self.maxRunning
        if maxRunning is not None and len(running) + self._unanswered >= maxRunning:
            raise TooManyRunningCalls(maxRunning)
        check = method.checkValues
        if kwargs or not method.fewest <= len(args) <= method.most:
            check = method.checkArguments  # (the signature's check first: it binds the arguments)
        if check is not None:
            check(args, kwargs)
        return obj, method


def overDeadline(name: str) -> DeadlineExceeded:
    """
    Why a call of method C{name} whose deadline passed while it ran is
    answered with a FAIL (wire format 12.7): the one text of every shell
    (L{IncomingCalls.expired}, L{protocols.rpc._answering.CallRunner}).
    """
    return DeadlineExceeded(f"{name!r} did not finish within its deadline", name)


def refusalCode(error: BaseException) -> str | None:
    """
    The code a CALL refused with C{error} (by L{CallAdmission.admit}, or
    while it was decoded) counts as a refusal of the peer's under (logged
    so, and counted against the connection: a peer refused too often is
    dropped); C{None} for an error that is not the peer's fault, answered
    but not counted: L{DeadlineExceeded} (its time ran out on the way), or
    an argument check's own bug.
    """
    if isinstance(error, Violation):
        return error.code
    if isinstance(error, NoSuchObject):
        return "no-such-object"
    if isinstance(error, NoSuchMethod):
        return "no-such-method"
    return None


class IncomingCall:
    """
    One call of the server's to an object this side exports, found and its
    arguments checked: the I/O layer runs it (L{run}) and settles it.

    @ivar requestId: the server's request id (L{NO_ANSWER}: no answer is sent).
    @ivar name: the method's name.
    @ivar method: the L{RemoteMethod} called.
    @ivar cancelled: the server sent CANCEL for it, or its deadline passed
        (L{IncomingCalls.expired}): its answer will not be sent.
    @ivar held: the bytes its arguments are charged to the ledger (L{callBytes}) until it is settled; 0 once released.
    @ivar milliseconds: the milliseconds its call context's deadline left
        when it was read (the I/O layer's clock then, plus these, is its
        deadline), or C{None}: no deadline.
    @ivar metadata: the metadata its call context carried (its method's
        C{currentCall} reads it), or C{None}.
    @ivar stop: what stops its work once it is cancelled or past its
        deadline (set by the I/O layer that can stop it: an asyncio task's
        C{cancel}), called once then; C{None}: it runs to its end.
    """

    __slots__ = (
        "requestId",
        "name",
        "method",
        "_obj",
        "_args",
        "_kwargs",
        "cancelled",
        "held",
        "milliseconds",
        "metadata",
        "stop",
    )

    def __init__(
        self,
        requestId: int,
        obj: Any,
        method: RemoteMethod,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        milliseconds: int | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        self.requestId = requestId
        self.name = method.name
        self.method = method
        self._obj = obj
        self._args = args
        self._kwargs = kwargs
        self.cancelled = False
        self.held = 0
        self.milliseconds = milliseconds
        self.metadata = metadata
        self.stop: Callable[[], Any] | None = None

    def run(self) -> Any:
        """Call the method: its result (maybe a coroutine, for the I/O layer to await), or its exception raised."""
        return self.method.function(self._obj, *self._args, **self._kwargs)

    def __repr__(self) -> str:
        return f"<IncomingCall {self.requestId} of {self.name!r}>"


class IncomingCalls(CallAdmission[IncomingCall]):
    """
    The server's calls to this side's exports on one connection (see the
    module docstring), admitted by L{CallAdmission.admit}.

    @ivar waiting: the calls received and not yet taken by the I/O layer (L{take}), in order.
    @ivar ledger: where the calls waiting or running are charged (L{CALLS_ACCOUNT}), or C{None}.
    @ivar registry: the connection's registry, which L{callBytes} asks about registered types.
    """

    def __init__(self, exports: ExportTable, maxRunning: int | None = DEFAULT_MAX_RUNNING) -> None:
        """
        @param exports: this side's exports, only read here.
        @param maxRunning: most calls waiting or running at once (C{None}: no bound).
        """
        super().__init__(exports.exports, maxRunning)
        self.waiting: list[IncomingCall] = []
        self.ledger: Ledger | None = None
        self.registry: Registry | None = None

    def received(self, message: Message) -> Exception | None:
        """
        A CALL from the server: C{None} if it waits to be run (in
        L{waiting}); else why it is refused (L{CallAdmission.admit}), for
        the caller to answer with a FAIL, or to end the session for
        (L{framing.rpc._errors.DuplicateRequestId}).
        """
        if len(message) == 6:
            _, requestId, target, name, args, kwargs = message
            milliseconds = metadata = None
        else:
            _, requestId, target, name, args, kwargs, milliseconds, metadata = message
        try:
            obj, method = self.admit(requestId, target, name, args, kwargs, milliseconds)
        except Exception as refused:
            return refused
        kwargs = kwargs or {}
        call = IncomingCall(requestId, obj, method, tuple(args), kwargs, milliseconds, metadata or None)
        if requestId == NO_ANSWER:
            self._unanswered += 1
        else:
            self._running[requestId] = call
        self.waiting.append(call)
        ledger = self.ledger
        if ledger is not None:
            # Charged last: an I/O layer that ends the session past the budget (told here) finds it waiting, and
            # the end drops it.  The metadata kept with it (for its method's currentCall) is charged with it.
            call.held = callBytes(args, kwargs, call.metadata, self.registry)
            ledger.charge(CALLS_ACCOUNT, call.held)
        return None

    def take(self) -> list[IncomingCall]:
        """The calls waiting to be run, in order (they run or wait on the I/O layer's side from now)."""
        waiting, self.waiting = self.waiting, []
        return waiting

    def cancelled(self, requestId: int) -> IncomingCall | None:
        """
        A CANCEL from the server: the call it names, if it still runs (its
        answer will not be sent; its work stopped, L{IncomingCall.stop}).
        A call still in L{waiting} (its CALL came in the same read) leaves
        it, and what it held is released: its method never runs.  Costs a
        scan of L{waiting} (at most C{maxRunning} calls) then.
        """
        call = self._running.pop(requestId, None)
        if call is not None:
            _stopped(call)
            if call in self.waiting:
                self.waiting.remove(call)
                self._release(call)
        return call

    def expired(self, call: IncomingCall) -> Message | None:
        """
        C{call}'s deadline passed while it ran (the I/O layer's clock says
        so): the FAIL to send now (L{overDeadline}), its work stopped
        (L{IncomingCall.stop}) and nothing sent for it afterwards, as after
        a CANCEL (wire format 12.7); C{None} if it was answered, cancelled
        or forgotten already.  (L{settle} still releases what it holds.)
        """
        requestId = call.requestId
        if requestId == NO_ANSWER or self._running.get(requestId) is not call:
            return None
        del self._running[requestId]
        _stopped(call)
        return failure(requestId, overDeadline(call.name))

    def settle(self, call: IncomingCall, result: Any, error: BaseException | None) -> Message | None:
        """
        C{call} ended with C{result}, or C{error}: the ANSWER or FAIL to send
        (C{None} for a call for no answer, or one cancelled or forgotten).
        A result the method's result constraint refuses is a FAIL carrying
        the L{framing.Violation}, at C{"result..."}.  What its arguments
        were charged is released.
        """
        self._release(call)
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

    def _release(self, call: IncomingCall) -> None:
        """Release what C{call}'s arguments were charged to the ledger (once)."""
        held = call.held
        if held:
            call.held = 0
            if self.ledger is not None:
                self.ledger.release(CALLS_ACCOUNT, held)

    def end(self) -> None:
        """The connection is over: nothing waits, nothing will be answered (the closed ledger let go of it all)."""
        self.waiting.clear()
        self._running.clear()
        self._unanswered = 0


def _stopped(call: IncomingCall) -> None:
    """C{call} will not be answered: marked so, and its work stopped if the I/O layer can (once)."""
    call.cancelled = True
    stop, call.stop = call.stop, None
    if stop is not None:
        stop()


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
