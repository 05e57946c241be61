# -*- test-case-name: tests.framing.test_decoding_charge,tests.framing.test_cores_frames,tests.framing.test_hooks -*-
"""Decoder: tokens to objects, one top-level object at a time.

Contract: C{feed(data)} returns, in order, every top-level object that
C{data} completed; a refused object appears in that list as its
L{Violation} (returned, never raised), so one bad object never hides its
neighbours.  After a refusal the rest of the object's tokens are skipped
(their bodies are dropped as they arrive, never buffered) up to its CLOSE.
A L{ProtocolError} is raised, and the decoder then refuses all input.
Per-token cost is O(1): one handler call, one unslicer call.

The decoder is in one of two named states, each with its handler table:
L{BUILDING} (tokens build objects through the unslicer stack) and
L{DISCARDING} (the rest of a refused object is skipped, L{_Discarding}).
What a top-level object may cost is counted by its L{ObjectBudget}
(C{framing/_budget.py}).

What a decoder holds between reads (the object part-way built, the bytes
of its tokens not yet complete) may be charged to a connection's
L{framing._ledger.Ledger} (L{Decoder.charge_to}, account L{DECODING}),
judged after each read that leaves an object in progress: an object that
would hold more than the ledger and its pool have room for is refused
(L{ResourceExhausted}), what was built of it let go and the rest of its
bytes skipped, as an object over C{Limits.max_object_memory} is; one
that fits may grow, until the next read ends, only as far as that room
(its budget's allowance, L{ObjectBudget.restrict}).  The decoder never
stops reading for it, so a full ledger never leaves an object half read.
A read that ends between objects with nothing charged costs one test.

Unslicers are called through one guard: a L{Violation} they raise refuses
their top-level object, any other exception (a bug) refuses it as an
L{InvalidValue}, and a L{ProtocolError} passes through.  The optional hooks
(L{framing.slicing._interfaces}) are looked up once per unslicer class:
C{report_violation} on the top-level unslicer of a refused object chooses
the Violation delivered; C{begin_body} on the innermost unslicer takes a
BYTES body piece by piece as it comes off the wire (the scanner's
L{BODY_VIEWS} mode: nothing of it is collected or copied by the decoder);
a C{finish} that returns L{NOTHING} completes an object delivered nowhere.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import _core
from ._budget import DEFAULT_ITEM_COST, DEFAULT_OPEN_COST, ObjectBudget
from ._errors import (
    Aborted,
    ChunkwireError,
    InvalidValue,
    PeerError,
    ProtocolError,
    ResourceExhausted,
    TooDeep,
    TruncatedStream,
    UnexpectedToken,
    UnknownType,
    Violation,
    short_repr,
)
from ._limits import DEFAULT_LIMITS, Limits
from ._scanner import BODY_SKIP, BODY_VIEWS, BODY_WHOLE, WANT_PREAMBLE, TokenScanner
from .slicing._builtin import CapReached
from .slicing._constraints import Constraint, ConstraintPath
from .slicing._interfaces import NOTHING
from .slicing._registry import DEFAULT_REGISTRY, Registry, UnslicerFactory

if TYPE_CHECKING:
    from ._ledger import Ledger
from .wire import (
    ABORT,
    BIGINT,
    BIGNEG,
    BYTES,
    CLOSE,
    ERROR,
    FLOAT,
    INT,
    NEG,
    OPEN,
    PING,
    PONG,
    PREAMBLE,
    SIMPLE,
    STRING,
)

DECODING = "decoding"
"""
The ledger account of what a decoder holds between reads (L{Decoder.charge_to}):
the object being built, by its budget's estimate (L{Decoder.held_cost}) plus
its bytes read so far, or the bytes of a token not yet complete.
"""
BUILDING = "BUILDING"
"""Tokens build the object in progress (or start the next one)."""
DISCARDING = "DISCARDING"
"""The object in progress was refused: its tokens are skipped up to its CLOSE."""

_SIMPLE_VALUES = (None, False, True)
_UNPACK_FLOAT = struct.Struct(">d").unpack
_BIG = 1 << 64
_KINDS: dict[tuple[int, int], dict[type, tuple[bool, bool, int, int, bool, int | None]]] = {}
"""L{_Unslicers.kinds}, per C{(max_object_items, max_object_memory)}."""
_REFUSED: Any = object()
"""What L{Decoder._guarded} returns when the call refused the object."""
_UNSEEN: Any = object()


@dataclass(frozen=True)
class Ping:
    """The peer sent PING C{id}; answer it with a PONG of the same id."""

    id: int


@dataclass(frozen=True)
class Pong:
    """The peer answered our PING C{id}."""

    id: int


class Decoder:
    """
    Turns a chunkwire byte stream into Python objects.

    @ivar limits: the L{Limits} in force.
    @ivar registry: where open-type names are looked up.
    @ivar constraint: what each top-level object must satisfy, or C{None}
        for anything the limits allow (see L{framing.slicing._constraints}).
    @ivar control_events: L{Ping} and L{Pong} events received, in order,
        for the connection layer to act on and clear.
    @ivar at_boundary: whether everything fed so far formed whole top-level
        objects; set by each C{feed} and C{close}, so that reading it (a
        guard does, per read) calls nothing.
    @ivar objects_completed: top-level objects completed so far (delivered,
        refused, or completing L{NOTHING}), counted by the end of each C{feed}.
    @ivar state: L{BUILDING} or L{DISCARDING}.
    @ivar handlers: per token kind, what the scanner calls (the state's table).
    @ivar fast_reader: the compiled core's reader for this decoder, or C{None}
        (its C{read} is C{fast_objects}, see L{framing._scanner.TokenSink}).
    @ivar charged: what this decoder has charged to its ledger (account
        L{DECODING}) as of the last read; 0 without one.
    """

    def __init__(
        self,
        limits: Limits | None = None,
        registry: Registry | None = None,
        preamble: bool = True,
        constraint: Constraint | None = None,
    ) -> None:
        self.limits = limits or DEFAULT_LIMITS
        self.registry = registry or DEFAULT_REGISTRY
        self.constraint = constraint
        self._path = ConstraintPath(constraint) if constraint is not None else None
        # Where each value built goes: constrained decoding checks it first; unconstrained keeps the one-call path.
        self._accept: Callable[[Any], None] = self._deliver if constraint is None else self._deliver_checked
        self.control_events: list[Ping | Pong] = []
        self.objects_completed = 0
        self.charged = 0
        self._ledger: Ledger | None = None
        self._object_bytes = 0
        self._results: list[Any] = []
        self._stack: list[Any] = []
        self._configure()
        self._receive: Callable[[Any], None] = self._results.append
        self._bodies = _BodyStreams(self._guarded, self._refuse_for)
        # The scanner's streamed-body calls go straight to the unslicer's hooks.
        self.body_chunk = self._bodies.piece
        self.body_end = self._bodies.end
        self.state = BUILDING
        self._building = _building_table(self)
        self._discarding: _Discarding  # (and its table: made at the first refusal)
        self._discarding_table: list[Callable[[Any], None]] | None = None
        self.handlers = list(self._building)
        self.accepts_all = constraint is None
        self._scanner = TokenScanner(self, self.limits, preamble)
        self._take_body = self._scanner.take_body
        self.at_boundary = self._boundary()

    def reconfigure(self, limits: Limits | None = None, registry: Registry | None = None) -> None:
        """
        Decode later top-level objects under C{limits} and C{registry} (C{None}:
        keep it), as after a login.  @raise ValueError: called mid-object.
        """
        if self._stack or self._scanner.holding:
            raise ValueError("the decoder can change its limits or registry only between top-level objects")
        self.limits = limits or self.limits
        self.registry = registry or self.registry
        self._configure()
        self._scanner.reconfigure(self.limits)

    def _configure(self) -> None:
        self._budget = ObjectBudget(self.limits, self._stack)
        self._unslicers = _Unslicers(self.registry, self._budget)
        self._factories = self._unslicers.factories  # (caches read on every OPEN and CLOSE)
        self._kinds = self._unslicers.kinds
        self._max_depth = self.limits.max_depth
        self.fast_reader = _core.reader(self.limits, self.registry, self._results, self._stack)
        self.fast_objects = self._fast = None if self.fast_reader is None else self.fast_reader.read
        # (the scanner forgets them too: see reconfigure)
        self._frame_types: dict[bytes, tuple[UnslicerFactory, Any, int] | None] = {}

    @property
    def buffered(self) -> int:
        """Bytes held for tokens not yet complete (the receive chain plus a partial body)."""
        return self._scanner.buffered

    @property
    def nothing_received(self) -> bool:
        """True until the first byte of the preamble is fed (always False for a decoder made without one)."""
        return self._scanner.state == WANT_PREAMBLE and not self._scanner.buffered

    @property
    def held_cost(self) -> int:
        """Estimated bytes the object being built holds beyond its wire bytes, at the last checkpoint (0 between)."""
        return self._budget.cost if self._stack else 0

    def charge_to(self, ledger: Ledger) -> None:
        """
        Charge what this decoder holds between reads to C{ledger} (account
        L{DECODING}) from the next read on, and refuse an object in progress
        that would hold more than C{ledger} (and its pool) has room for: see
        the module's contract.  A connection's shell calls this once, when
        it makes the two.
        """
        self._ledger = ledger

    def _boundary(self) -> bool:
        # (the stack first: while a frame or any object is open, the scanner is not asked)
        return not self._stack and self.state is BUILDING and self._scanner.at_boundary

    def feed(self, data: bytes) -> list[Any]:
        """
        Decode C{data}; return the top-level objects (or L{Violation}s) it
        completed, in a new list (the caller's to keep or change).

        @raise ProtocolError: the stream is broken; drop the connection.  The
            objects this C{data} completed before the break are on the
            error's C{results}.
        """
        # (between top-level objects no body is in progress: nothing to take, and the commonest read asks nothing)
        if not self.at_boundary and self._take_body(data):
            # The middle of a long whole body: one copy, the whole per-chunk cost of a large value.
            self.at_boundary = False
            if self._ledger is None:
                return []
            self._object_bytes += len(data)
            self._judge_held()
        else:
            between, completed = self.at_boundary, self.objects_completed
            self._bodies.streamed = 0
            try:
                # (read whole by the compiled reader: then between objects with nothing held, without asking)
                self.at_boundary = self._scanner.feed(data) or self._boundary()
            except ProtocolError as error:
                self.at_boundary = self._boundary()
                if self._results:
                    error.results = self._results.copy()
                    self._results.clear()
                    self.objects_completed += len(error.results)
                raise
            if (not self.at_boundary or self.charged) and self._ledger is not None:
                # (the object in progress began in this read, after what it completed: at most all of it)
                # (less what was streamed to an unslicer: not held here)
                fresh = between or self._results or completed != self.objects_completed
                read = len(data) - self._bodies.streamed
                self._object_bytes = read if fresh else self._object_bytes + read
                self._judge_held()
        pending = self._results
        if not pending:
            return []
        results = pending.copy()
        pending.clear()
        self.objects_completed += len(results)  # counted per feed: a result costs one append
        return results

    def close(self) -> None:
        """
        Declare the end of input.

        @raise TruncatedStream: if the input ended inside a token or object.
        """
        try:
            self._scanner.close()
        finally:
            self.at_boundary = self._boundary()
        if not self.at_boundary:
            self._scanner.fail(TruncatedStream("input ended inside an unfinished object"))

    # -- what is held between reads -------------------------------------

    def _holding(self) -> int:
        """
        What this decoder holds now: the object being built (its budget's
        estimate, settled now, plus its bytes read so far: what its bodies
        hold) and the bytes of a token not yet complete.  O(1).
        """
        buffered = self._scanner.buffered
        if self.state is DISCARDING or not (self._stack or self._scanner.in_whole_body):
            return buffered
        built = self._budget.settled_cost() if self._stack else 0
        return built + (self._object_bytes if self._object_bytes > buffered else buffered)

    def _judge_held(self) -> None:
        """
        After a read: charge what this decoder holds to its ledger, refusing
        the object in progress if that is more than the ledger has room for
        (L{ResourceExhausted}), else bounding the object's growth until the
        next read to that room.  An object is refused only for growing: one
        that holds no more than it was charged for keeps its charge.
        """
        ledger = self._ledger
        assert ledger is not None
        # (L{_holding} written out: this runs after every read that leaves an object open)
        scanner, stack = self._scanner, self._stack
        held, charged = scanner.buffered, self.charged
        if self.state is BUILDING and (stack or scanner.in_whole_body):
            if held < self._object_bytes:
                held = self._object_bytes
            if stack:
                held += self._budget.settled_cost()
        spare = ledger.spare()
        if spare is not None and self.state is BUILDING:
            room = charged + spare
            if held > charged and held > room and (stack or scanner.in_whole_body):
                # (the body in progress, an OPEN's, is a container to skip the rest of)
                opened = scanner.drop_body()
                self._refuse(
                    ResourceExhausted(
                        f"object would hold {held} bytes while it arrives, more than the {max(room, 0)} "
                        "its connection has room for now"
                    ),
                    opened,
                )
                held = self._holding()
            elif stack:
                budget = self._budget
                allowance = room - (held - budget.cost)
                try:  # (the guard written out: this runs after every read that leaves an object open)
                    budget.restrict(allowance if allowance > budget.cost else budget.cost)
                except Exception as error:
                    self._refuse_for(error)
        if held != charged:
            self.charged = held
            if held > charged:
                ledger.charge(DECODING, held - charged)
            else:
                ledger.release(DECODING, charged - held)

    # -- the scanner's sink interface ------------------------------------

    def accept_body(self, kind: int, length: int) -> int:
        """Decide, at its header, whether a body is kept, streamed to its unslicer or skipped."""
        if kind == ERROR:
            # The peer's last words are read whatever object is in progress.
            return BODY_WHOLE
        if self.state is DISCARDING:
            self._discarding.skipped(kind)
            return BODY_SKIP
        stack = self._stack
        if self.accepts_all and len(stack) < self._max_depth:
            return BODY_WHOLE  # an OPEN where nothing else needs checking
        try:
            if stack:
                stack[-1].check_token(kind, length)
            if self._path is not None:
                self._path.check_header(kind, length, stack)
            if kind == OPEN and len(stack) >= self._max_depth:
                raise TooDeep(f"containers nested deeper than {self._max_depth}")
        except Exception as error:
            self._refuse_for(error, opened=kind == OPEN)
            return BODY_SKIP
        if kind == BYTES and stack and self._path is None and self._kinds[type(stack[-1])][4]:
            return self._bodies.start(stack[-1], length)
        return BODY_WHOLE

    def open_frame(self, name: bytes, values: tuple[int, ...], length: int) -> int | None:
        """
        The scanner found a whole frame's headers (C{framing._scanner.FrameHeaders}):
        OPEN C{name}, the INT C{values}, a BYTES body of C{length} bytes.
        At the top level, take them at once as their tokens would be taken
        (the OPEN as L{_on_open} takes it, the values and the body's header
        by one C{begin_frame} of its unslicer) and return the body's mode
        (a refusal on the way skips it); nested, return C{None}, having
        taken nothing.
        """
        learnt = self._frame_types.get(name)
        if learnt is None or self._stack:
            return None
        factory, kind, cost = learnt
        try:
            unslicer: Any = factory(self.limits)
        except Exception as error:
            self._refuse_for(error, opened=True)
            return BODY_SKIP
        if type(unslicer) is not kind:
            return self._open_unlearnt(unslicer, values, length)
        # (L{_on_open} at the top level, then L{ObjectBudget.receive_counted} for each value, written out for
        # the class learnt, not budgeted, which asks about its tokens and whose frame fits the budget:
        # this runs for every frame)
        budget = self._budget
        budget.items, budget.cost, budget.innermost_budgeted, budget.max_memory = len(values), cost, False, budget.limit
        self.fast_objects = None
        self._stack.append(unslicer)
        self._receive = budget.receive_counted
        self.accepts_all = False
        try:
            started = unslicer.begin_frame(values, length)
        except Exception as error:
            self._refuse_for(error)
            return BODY_SKIP
        if not started:
            return BODY_WHOLE
        self._bodies.receiver = unslicer
        return BODY_VIEWS

    def _open_unlearnt(self, unslicer: Any, values: tuple[int, ...], length: int) -> int:
        """
        L{open_frame} for an unslicer its type's factory made of another
        class than the one learnt: the OPEN as L{_on_open} takes it, then
        the values and the body's header as their tokens.
        """
        budgeted, asks, top_cost, top_cap, _, _ = self._kinds.get(type(unslicer)) or self._unslicers.describe(unslicer)
        budget = self._budget
        if budgeted and top_cap < unslicer.cap:
            unslicer.cap = top_cap
        budget.items, budget.cost, budget.innermost_budgeted = 0, top_cost, budgeted
        budget.max_memory = budget.limit
        self.fast_objects = None
        self._stack.append(unslicer)
        self._receive = unslicer.receive_child if budgeted else budget.receive_counted
        self.accepts_all = not asks
        if top_cost > budget.max_memory:
            self._refuse(budget.over_budget())
            return BODY_SKIP
        for value in values:
            self.handlers[INT](value)
        return self.accept_body(BYTES, length)

    @property
    def frame_opened(self) -> bool:
        """After L{open_frame} raised: whether it had taken the frame's OPEN (an object is open)."""
        return bool(self._stack)

    def _learn_frame(self, name: bytes, factory: UnslicerFactory, unslicer: Any, values: int, cost: int) -> None:
        """
        The top-level object C{factory} opened as C{name} is a frame: its
        unslicer (not budgeted, costing C{cost} at its OPEN) takes
        C{values} INTs and its body at once.  Have the scanner find the
        next ones whole (L{open_frame}), if it can and if such a frame
        fits the object budget (else their tokens word the refusal).
        """
        cost += values * DEFAULT_ITEM_COST
        budget = self._budget
        fits = values <= budget.max_items and cost <= budget.limit
        learnt = fits and self._scanner.learn_frame(name, values)
        self._frame_types[name] = (factory, type(unslicer), cost) if learnt else None

    def refused(self, kind: int, length: int, violation: Violation) -> None:
        """The scanner refused a body at its header (over a size limit)."""
        if self.state is DISCARDING:
            self._discarding.skipped(kind)
            return
        self._refuse(violation, opened=kind == OPEN)

    # -- building --------------------------------------------------------

    def _deliver_checked(self, obj: Any) -> None:
        assert self._path is not None
        if self._guarded(self._path.check_value, obj, self._stack, failing="constraint") is not _REFUSED:
            self._deliver(obj)

    def _deliver(self, obj: Any) -> None:
        try:
            self._receive(obj)
        except CapReached:
            # The innermost container reached its cap: checkpoint, then
            # deliver again (or refuse, over budget).
            if self._guarded(self._budget.recap) is not _REFUSED:
                self._deliver(obj)
        except Exception as error:
            self._refuse_for(error)

    def _on_open(self, body: bytes) -> None:
        factory = self._factories.get(body) or self._guarded(self._unslicers.lookup, body, opened=True)
        if factory is _REFUSED:
            return
        stack = self._stack
        if stack:
            # A parent may build a child of its own kind (an RPC CALL's context, refusing its metadata at the header).
            picks = getattr(stack[-1], "child_factory", None)
            if picks is not None:
                factory = picks(body, factory)
        if self._path is not None:
            name = body.decode("ascii", "backslashreplace")
            if self._guarded(self._path.opened, name, opened=True) is _REFUSED:
                return
        try:
            unslicer = factory(self.limits)
        except Exception as error:
            self._refuse_for(error, opened=True)
            return
        known = self._kinds.get(type(unslicer)) or self._unslicers.describe(unslicer)
        budgeted, asks, top_cost, top_cap, _, frame = known
        budget = self._budget
        if stack:
            over = budget.open_nested(unslicer, budgeted)
        else:
            # A top-level container (every RPC message): its cap and cost
            # are its class's, worked out once (L{ObjectBudget.open_top}
            # written out: this runs for every message).
            if budgeted and top_cap < unslicer.cap:
                unslicer.cap = top_cap
            budget.items, budget.cost, budget.innermost_budgeted = 0, top_cost, budgeted
            budget.max_memory = budget.limit  # (an allowance bounded only the object it was given for)
            self.fast_objects = None  # (until the object is complete: see _end_object)
            over = top_cost > budget.max_memory
            if frame is not None and body not in self._frame_types:
                self._learn_frame(body, factory, unslicer, frame, top_cost)
        stack.append(unslicer)
        self._receive = unslicer.receive_child if budgeted else self._budget.receive_counted
        self.accepts_all = self.constraint is None and not asks
        if over:
            self._refuse(self._budget.over_budget())

    def _on_close(self, value: int) -> None:
        stack = self._stack
        if value or not stack:
            raise UnexpectedToken("CLOSE with no open container" if not stack else f"CLOSE with value {value}")
        unslicer = stack.pop()
        if self._path is not None:
            self._path.closed()
        if not stack:
            self._end_object()
        else:
            parent = stack[-1]
            budgeted, asks, _, _, _, _ = self._kinds[type(parent)]
            self._receive = parent.receive_child if budgeted else self._budget.receive_counted
            self.accepts_all = self.constraint is None and not asks
            if self._budget.closed_child(unslicer, parent, budgeted):
                self._refuse(self._budget.over_budget())
                return
        try:
            obj = unslicer.finish()
        except Exception as error:
            if stack:
                self._refuse_for(error)
            else:
                # The top-level unslicer refused its own object at its CLOSE:
                # popped already, it is still the one told (report_violation).
                self._refuse(self._unslicers.reported(unslicer, _as_violation(error, "unslicer")))
            return
        if obj is not NOTHING:
            self._accept(obj)
        elif not stack:
            self.objects_completed += 1

    def _on_abort(self, value: int) -> None:
        if value:
            raise UnexpectedToken(f"ABORT with value {value}")
        if self._stack:
            # Nothing more of an abandoned object follows: report it now.
            self._refuse(Aborted("the sender abandoned this object"))
            self._discarding.end()

    # -- refusing --------------------------------------------------------

    def _guarded(self, call: Callable[..., Any], *args: Any, opened: bool = False, failing: str = "unslicer") -> Any:
        """
        Call an unslicer's (or a constraint's) method and return its result,
        or L{_REFUSED} if it refused the object (see L{_refuse_for}).
        """
        try:
            return call(*args)
        except Exception as error:
            self._refuse_for(error, opened, failing)
            return _REFUSED

    def _refuse_for(self, error: Exception, opened: bool = False, failing: str = "unslicer") -> None:
        """Refuse the object for what an unslicer (or constraint) raised (see L{_as_violation})."""
        self._refuse(_as_violation(error, failing), opened)

    def _refuse(self, violation: Violation, opened: bool = False) -> None:
        """Drop the top-level object being built; skip its tokens up to its CLOSE."""
        stack = self._stack
        violation.where = "".join(unslicer.child_where() for unslicer in stack) + violation.where
        if stack:
            violation = self._unslicers.reported(stack[0], violation)
        depth = len(stack) + opened
        stack.clear()
        if self._path is not None:
            self._path.reset()
        self._bodies.receiver = None
        self._receive = self._results.append
        self._budget.reset()
        if not depth:
            self._results.append(violation)
            return
        self.state = DISCARDING
        if self._discarding_table is None:
            self._discarding = _Discarding(self._end_object)
            self._discarding_table = self._discarding.table(self._building)
        self._discarding.start(violation, depth)
        self.handlers[:] = self._discarding_table
        self.accepts_all = False

    def _end_object(self, refused: Violation | None = None) -> None:
        """Between top-level objects again (after a refused one's CLOSE or ABORT: back to building)."""
        if refused is not None:
            self.state = BUILDING
            self.handlers[:] = self._building
            self._results.append(refused)
        self._receive = self._results.append
        self._budget.innermost_budgeted = False
        self.accepts_all = self.constraint is None
        self.fast_objects = self._fast if self.accepts_all else None


def _as_violation(error: Exception, failing: str) -> Violation:
    """
    What an unslicer (or constraint, C{failing}) raised, as the Violation
    that refuses its object: a L{Violation} as it is, any other exception (a
    bug) as an L{InvalidValue}; a L{ProtocolError} is raised again.
    """
    if isinstance(error, ProtocolError):
        raise error
    if isinstance(error, Violation):
        return error
    return InvalidValue(f"{failing} failed: {type(error).__name__}: {error}")


def _building_table(decoder: Decoder) -> list[Callable[[Any], None]]:
    """The handler of each token kind while a decoder builds objects."""
    table: list[Callable[[Any], None]] = [_unexpected] * 16
    _ValueTokens(decoder._accept, decoder._refuse, decoder.control_events).fill(table)
    table[INT] = table[BYTES] = decoder._accept
    table[OPEN], table[CLOSE], table[ABORT] = decoder._on_open, decoder._on_close, decoder._on_abort
    return table


class _Unslicers:
    """
    What a decoder learns once and keeps: the unslicer factory of each
    open-type name (hits only: a name unknown now may be registered later),
    and per unslicer class what the budget and the scanner need of it and
    its C{report_violation} hook (class attributes, the same for all its
    instances).

    @ivar factories: the OPEN's body (the name) to the factory.
    @ivar kinds: unslicer class to C{(budgeted, asks, top-level cost,
        top-level cap, streams, frame)}, where C{streams} means it has
        C{begin_body}, C{asks} that the decoder must be asked about its
        bodies (it checks tokens or streams bodies), and C{frame} is its
        C{frame_values} if it takes frames (C{begin_frame}), else C{None}.
    """

    __slots__ = ("_budget", "_registry", "_reporters", "factories", "kinds")

    def __init__(self, registry: Registry, budget: ObjectBudget) -> None:
        self.factories: dict[bytes, UnslicerFactory] = {}
        # What a class needs depends only on it and the budget's two limits:
        # learnt once per process, not once per decoder (loads makes one per call).
        self.kinds = _KINDS.setdefault((budget.max_items, budget.limit), {})
        self._reporters: dict[type, Callable[[Any, Violation], Violation] | None] = {}
        self._registry = registry
        self._budget = budget

    def lookup(self, body: bytes) -> UnslicerFactory:
        """
        The factory for an OPEN's name.

        @raise UnknownType: no unslicer is registered for it.
        """
        name = body.decode("ascii", "backslashreplace")
        factory = self._registry.unslicer_for(name)
        if factory is None:
            raise UnknownType(f"no unslicer is registered for open-type {name!r}")
        self.factories[body] = factory
        return factory

    def describe(self, unslicer: Any) -> tuple[bool, bool, int, int, bool, int | None]:
        """Learn C{unslicer}'s class: its entry in L{kinds}."""
        budgeted = bool(getattr(unslicer, "budgeted", False))
        streams = getattr(unslicer, "begin_body", None) is not None
        asks = bool(getattr(unslicer, "checks_tokens", True)) or streams
        frame = getattr(unslicer, "frame_values", None) if streams and not budgeted else None
        if frame is not None and getattr(unslicer, "begin_frame", None) is None:
            frame = None
        known: tuple[bool, bool, int, int, bool, int | None]
        if budgeted:
            known = (budgeted, asks, *self._budget.top_terms(unslicer), streams, frame)
        else:
            known = (budgeted, asks, getattr(unslicer, "open_cost", DEFAULT_OPEN_COST), 0, streams, frame)
        self.kinds[type(unslicer)] = known
        return known

    def reported(self, top: Any, violation: Violation) -> Violation:
        """
        What the top-level unslicer C{top} makes of its object's refusal
        (its class's C{report_violation}): C{violation} itself if it has no
        such method or the method fails.
        """
        kind = type(top)
        try:
            report = self._reporters[kind]
        except KeyError:
            report = self._reporters[kind] = getattr(kind, "report_violation", None)
        if report is None:
            return violation
        try:
            reported = report(top, violation)
        except ProtocolError:
            raise
        except Exception:  # a buggy hook must not hide the refusal it was told of
            return violation
        return reported if isinstance(reported, Violation) else violation


class _BodyStreams:
    """
    Streams a BYTES body to the innermost unslicer when it asks (it has a
    C{begin_body}, known once per class, and that returns true): each piece goes
    to its C{body_piece} as it comes off the wire, then C{end_body} is
    called.  Every hook is called through the decoder's guard.

    @ivar receiver: the unslicer receiving the body in progress, or C{None}
        (none, or it was refused meanwhile: the rest of its body is dropped).
    @ivar streamed: bytes of bodies streamed in the current read (the
        decoder counts an object's bytes as held, less these).
    """

    __slots__ = ("_guarded", "_refuse_for", "receiver", "streamed")

    def __init__(self, guarded: Callable[..., Any], refuse_for: Callable[[Exception], None]) -> None:
        self.receiver: Any = None
        self.streamed = 0
        self._guarded = guarded
        self._refuse_for = refuse_for

    def start(self, top: Any, length: int) -> int:
        """How a BYTES body for C{top} is read: streamed if its C{begin_body} says so, else whole (or skipped)."""
        started = self._guarded(top.begin_body, length)
        if started is _REFUSED:
            return BODY_SKIP
        if not started:
            return BODY_WHOLE
        self.receiver = top
        return BODY_VIEWS

    def piece(self, kind: int, data: bytes | memoryview) -> None:
        """The next piece of the body (the scanner's C{body_chunk}); counted in C{streamed}, as none is held here."""
        self.streamed += len(data)
        receiver = self.receiver
        if receiver is not None:
            try:  # (the guard written out: this runs for every piece)
                receiver.body_piece(data)
            except Exception as error:
                self._refuse_for(error)

    def end(self, kind: int) -> None:
        """The body is complete (the scanner's C{body_end})."""
        receiver, self.receiver = self.receiver, None
        if receiver is not None:
            self._guarded(receiver.end_body)


class _Discarding:
    """
    The L{DISCARDING} state's handler table: skips a refused object's
    tokens (its bodies are skipped by the scanner as they arrive), keeping
    only the count of its open containers, then hands its Violation back.

    @ivar depth: containers of the refused object still open.
    """

    __slots__ = ("_end", "_violation", "depth")

    def __init__(self, end: Callable[[Violation], None]) -> None:
        self.depth = 0
        self._violation: Violation | None = None
        self._end = end

    def table(self, building: list[Callable[[Any], None]]) -> list[Callable[[Any], None]]:
        """
        The state's handler table, for the decoder to keep (not kept here:
        a table of this object's own methods would make it a cycle).
        """
        table: list[Callable[[Any], None]] = [self._ignore] * 16
        table[CLOSE] = self._close
        table[ABORT] = self._abort
        for kind in (ERROR, PING, PONG, 14, 15):
            table[kind] = building[kind]  # the peer's last words, control tokens, reserved kinds
        return table

    def skipped(self, kind: int) -> None:
        """A body of the refused object is skipped at its header: an OPEN's adds a container to skip."""
        if kind == OPEN:
            self.depth += 1

    def start(self, violation: Violation, depth: int) -> None:
        """Skip the rest of the object refused with C{violation}, C{depth} containers deep."""
        self._violation = violation
        self.depth = depth

    def _ignore(self, value: Any) -> None:
        pass

    def _close(self, value: int) -> None:
        if value:
            raise UnexpectedToken(f"CLOSE with value {value}")
        self.depth -= 1
        if not self.depth:
            self.end()

    def _abort(self, value: int) -> None:
        if value:
            raise UnexpectedToken(f"ABORT with value {value}")
        self.end()

    def end(self) -> None:
        """The refused object is over (its CLOSE, or an ABORT): hand its Violation back."""
        violation = self._violation
        assert violation is not None
        self._violation = None
        self.depth = 0
        self._end(violation)


def _unexpected(value: Any) -> None:
    raise UnexpectedToken(f"unexpected token with value {short_repr(value, 40)}")


class _ValueTokens:
    """
    The building state's handlers of the tokens whose value needs decoding
    or checking, and of those that act whatever the state: the peer's
    ERROR, PING and PONG.
    """

    __slots__ = ("_deliver", "_events", "_refuse")

    def __init__(
        self, deliver: Callable[[Any], None], refuse: Callable[[Violation], None], events: list[Ping | Pong]
    ) -> None:
        self._deliver = deliver
        self._refuse = refuse
        self._events = events

    def fill(self, table: list[Callable[[Any], None]]) -> None:
        """Put the handlers in C{table}."""
        table[NEG], table[STRING], table[FLOAT], table[SIMPLE] = self.neg, self.string, self.float, self.simple
        table[BIGINT], table[BIGNEG] = self.bigint, self.bigneg
        table[ERROR], table[PING], table[PONG] = self.error, self.ping, self.pong

    def neg(self, value: int) -> None:
        self._deliver(-1 - value)

    def string(self, body: bytes) -> None:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as error:
            self._refuse(InvalidValue(f"STRING body is not valid UTF-8: {error.reason} at byte {error.start}"))
            return
        self._deliver(text)

    def bigint(self, body: bytes) -> None:
        magnitude = int.from_bytes(body, "big")
        if magnitude < _BIG or body[0] == 0:
            self._refuse(InvalidValue("non-canonical BIGINT: use INT below 2**64, no leading zero bytes"))
            return
        self._deliver(magnitude)

    def bigneg(self, body: bytes) -> None:
        magnitude = int.from_bytes(body, "big")
        if magnitude <= _BIG or body[0] == 0:
            self._refuse(InvalidValue("non-canonical BIGNEG: use NEG above -(2**64) - 1, no leading zero bytes"))
            return
        self._deliver(-magnitude)

    def float(self, body: bytes) -> None:
        self._deliver(_UNPACK_FLOAT(body)[0])

    def simple(self, value: int) -> None:
        if value >= len(_SIMPLE_VALUES):
            self._refuse(InvalidValue(f"unknown SIMPLE value {value}"))
            return
        self._deliver(_SIMPLE_VALUES[value])

    def error(self, body: bytes) -> None:
        raise PeerError("the peer reported: " + body.decode("utf-8", "replace"))

    def ping(self, value: int) -> None:
        self._events.append(Ping(value))

    def pong(self, value: int) -> None:
        self._events.append(Pong(value))


def loads(data: bytes, limits: Limits | None = None, registry: Registry | None = None) -> Any:
    """
    Decode exactly one object from a complete stream (preamble included).

    @raise Violation: the object was refused.
    @raise ProtocolError: the bytes are not a valid stream, are truncated, or
        hold anything after the object.
    """
    fast = _core.loads_reader(limits, registry)
    if fast is not None and data[: len(PREAMBLE)] == PREAMBLE:
        found = fast(data, len(PREAMBLE))
        if found is not None and found[1] == len(data):
            return found[0]
    decoder = Decoder(limits, registry)
    results = decoder.feed(data)
    decoder.close()
    if len(results) != 1 or decoder.control_events:
        raise ProtocolError(
            f"expected exactly one object, found {len(results)} and {len(decoder.control_events)} control tokens"
        )
    result = results[0]
    if isinstance(result, ChunkwireError):
        raise result
    return result
