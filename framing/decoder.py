"""Decoder: tokens to objects, one top-level object at a time.

Contract: C{feed(data)} returns, in order, every top-level object that
C{data} completed; a refused object appears in that list as its
L{Violation} (returned, never raised), so one bad object never hides its
neighbours.  After a refusal the rest of the object's tokens are skipped
(their bodies are dropped as they arrive, never buffered) up to its CLOSE.
A L{ProtocolError} is raised, and the decoder then refuses all input.
Per-token cost is O(1): one handler call, one unslicer call.

Cost budget: the values in a top-level object, and the memory it will hold
beyond its wire bytes, are counted as it is built (each container's own size
from its OPEN, then per item a slot and a small allowance for the item's
object, plus a set's or dict's hash tracker), and the object is refused with
L{TooManyItems} past C{Limits.max_object_items} or L{ObjectTooCostly} past
C{Limits.max_object_memory}.  For the built-in containers the count costs
nothing per item: it is settled at checkpoints (each OPEN and CLOSE, and
when a container reaches the cap on its length that the last checkpoint gave
it from what was left of the budget), so a scalar still costs one handler
call and one unslicer call.  The children of other unslicers (user types,
RPC messages) are counted one by one on their way in, at one more call
each.  Worst-case costs per wire byte, per type: C{docs/costs.md}.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import (
    Aborted,
    ChunkwireError,
    InvalidValue,
    ObjectTooCostly,
    PeerError,
    ProtocolError,
    TooDeep,
    TooManyItems,
    TruncatedStream,
    UnexpectedToken,
    UnknownType,
    Violation,
    short_repr,
)
from .limits import DEFAULT_LIMITS, Limits
from .scanner import BODY_SKIP, BODY_WHOLE, WANT_PREAMBLE, TokenScanner
from .slicing.builtin import CapReached
from .slicing.constraints import Constraint
from .slicing.interfaces import NOTHING
from .slicing.registry import DEFAULT_REGISTRY, Registry, UnslicerFactory
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
    SIMPLE,
    STRING,
)

_SIMPLE_VALUES = (None, False, True)
_UNPACK_FLOAT = struct.Struct(">d").unpack
_BIG = 1 << 64

DEFAULT_OPEN_COST = 64
"""Bytes charged at the OPEN of an unslicer that declares no C{open_cost}."""
DEFAULT_ITEM_COST = 56
"""Bytes charged per child of an unslicer outside the budget."""


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
        for anything the limits allow (see L{framing.slicing.constraints}).
    @ivar control_events: L{Ping} and L{Pong} events received, in order,
        for the connection layer to act on and clear.
    @ivar handlers: per token kind, what the scanner calls; swapped between
        the building table and the discarding table (the decoder's two
        states).
    """

    _items = 0
    """Items of the top-level object being built, as of the last checkpoint."""
    _cost = 0
    """Its estimated bytes beyond its wire bytes, as of the last checkpoint."""
    _top_budgeted = False
    """Whether the innermost open container keeps the budget itself (a built-in one)."""

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
        self._constraints: list[Constraint] = []
        self._opening: Constraint | None = None
        self._factories: dict[bytes, UnslicerFactory] = {}
        self._kinds: dict[type, tuple[bool, bool, int, int]] = {}
        self._reporters: dict[type, Callable[[Any, Violation], Violation] | None] = {}
        if constraint is not None:
            # Constrained decoding checks each value; unconstrained keeps the
            # one-call fast path.
            self._deliver = self._deliver_checked  # type: ignore[method-assign]
        self.control_events: list[Ping | Pong] = []
        self._results: list[Any] = []
        self._stack: list[Any] = []
        self._receive: Callable[[Any], None] = self._results.append
        self._violation: Violation | None = None
        self._discard_depth = 0
        self._building = self._building_handlers()
        self._discarding = self._discarding_handlers()
        self.handlers = list(self._building)
        self._max_object_items = self.limits.max_object_items
        self._max_object_memory = self.limits.max_object_memory
        self.accepts_all = constraint is None
        self._scanner = TokenScanner(self, self.limits, preamble)

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
        """
        Estimated bytes held by the top-level object being built beyond its
        wire bytes, as of the last checkpoint (0 between objects).
        """
        return self._cost if self._stack else 0

    @property
    def at_boundary(self) -> bool:
        """True when everything fed so far formed whole top-level objects."""
        return self._scanner.at_boundary and not self._stack and self._violation is None

    def feed(self, data: bytes) -> list[Any]:
        """
        Decode C{data}; return the top-level objects (or L{Violation}s) it completed.

        @raise ProtocolError: the stream is broken; drop the connection.  The
            objects this C{data} completed before the break are on the
            error's C{results}.
        """
        try:
            self._scanner.feed(data)
        except ProtocolError as error:
            if self._results:
                error.results = self._results.copy()
                self._results.clear()
            raise
        if not self._results:
            return []
        results = self._results.copy()
        self._results.clear()
        return results

    def close(self) -> None:
        """
        Declare the end of input.

        @raise TruncatedStream: if the input ended inside a token or object.
        """
        self._scanner.close()
        if not self.at_boundary:
            self._scanner.fail(TruncatedStream("input ended inside an unfinished object"))

    # -- the scanner's sink interface ------------------------------------

    def accept_body(self, kind: int, length: int) -> int:
        """Decide, at its header, whether a body is kept or skipped."""
        if kind == ERROR:
            # The peer's last words are read whatever object is in progress.
            return BODY_WHOLE
        if self._violation is not None:
            if kind == OPEN:
                self._discard_depth += 1
            return BODY_SKIP
        if self.accepts_all and len(self._stack) < self.limits.max_depth:
            return BODY_WHOLE  # an OPEN where nothing else needs checking
        try:
            self._check_body(kind, length)
        except ProtocolError:
            raise
        except Violation as violation:
            self._refuse(violation, opened=kind == OPEN)
            return BODY_SKIP
        except Exception as error:  # a user unslicer's bug refuses the object, not the stream
            self._refuse(_unslicer_failed(error), opened=kind == OPEN)
            return BODY_SKIP
        return BODY_WHOLE

    def _check_body(self, kind: int, length: int) -> None:
        stack = self._stack
        if stack:
            stack[-1].check_token(kind, length)
        if self.constraint is not None:
            self._check_header(kind, length)
        if kind == OPEN and len(stack) >= self.limits.max_depth:
            raise TooDeep(f"containers nested deeper than {self.limits.max_depth}")

    def refused(self, kind: int, length: int, violation: Violation) -> None:
        """The scanner refused a body at its header (over a size limit)."""
        if self._violation is not None:
            if kind == OPEN:
                self._discard_depth += 1
            return
        self._refuse(violation, opened=kind == OPEN)

    def body_in_place(self, kind: int, chunk: bytes, start: int, stop: int) -> None:
        """
        A large body lying whole in one received chunk: an unslicer with a
        C{receive_buffer} method gets a view of it (copied once, by the
        unslicer); anything else gets C{bytes} as usual.
        """
        take = getattr(self._stack[-1], "receive_buffer", None) if self._stack and kind == BYTES else None
        if take is None or self.constraint is not None:
            self.handlers[kind](chunk[start:stop])
            return
        try:
            take(memoryview(chunk)[start:stop])
        except ProtocolError:
            raise
        except Violation as violation:
            self._refuse(violation)
        except Exception as error:  # a user unslicer's bug refuses the object, not the stream
            self._refuse(_unslicer_failed(error))

    def body_chunk(self, kind: int, data: bytes) -> None:
        raise ProtocolError("streamed bodies are not accepted by this decoder")

    def body_end(self, kind: int) -> None:
        raise ProtocolError("streamed bodies are not accepted by this decoder")

    # -- building --------------------------------------------------------

    def _building_handlers(self) -> list[Callable[[Any], None]]:
        table: list[Callable[[Any], None]] = [self._unexpected] * 16
        table[INT] = self._deliver
        table[NEG] = self._on_neg
        table[BYTES] = self._deliver
        table[STRING] = self._on_string
        table[BIGINT] = self._on_bigint
        table[BIGNEG] = self._on_bigneg
        table[FLOAT] = self._on_float
        table[SIMPLE] = self._on_simple
        table[OPEN] = self._on_open
        table[CLOSE] = self._on_close
        table[ABORT] = self._on_abort
        table[ERROR] = self._on_error
        table[PING] = self._on_ping
        table[PONG] = self._on_pong
        return table

    def _next_constraint(self) -> Constraint:
        if not self._stack:
            assert self.constraint is not None
            return self.constraint
        return self._constraints[-1].child(self._stack[-1])

    def _check_header(self, kind: int, length: int) -> None:
        constraint = self._next_constraint()
        constraint.check_header(kind, length)
        if kind == OPEN:
            self._opening = constraint

    def _deliver_checked(self, obj: Any) -> None:
        try:
            self._next_constraint().check_value(obj)
        except ProtocolError:
            raise
        except Violation as violation:
            self._refuse(violation)
            return
        except Exception as error:  # a user constraint's bug refuses the object, not the stream
            self._refuse(InvalidValue(f"constraint failed: {type(error).__name__}: {error}"))
            return
        Decoder._deliver(self, obj)

    def _deliver(self, obj: Any) -> None:
        try:
            self._receive(obj)
        except ProtocolError:
            raise
        except Violation as violation:
            self._refuse(violation)
        except CapReached:
            self._cap_reached(obj)
        except Exception as error:  # a user unslicer's bug refuses the object, not the stream
            self._refuse(_unslicer_failed(error))

    def _cap_reached(self, obj: Any) -> None:
        """The innermost container reached its cap: checkpoint, then deliver C{obj} again or refuse."""
        try:
            self._checkpoint()
        except Violation as violation:
            self._refuse(violation)
            return
        top = self._stack[-1]
        if top.cap <= len(top.items):
            top.cap = len(top.items) + 1  # at the budget's edge: this one, then the next checkpoint
        Decoder._deliver(self, obj)

    def _on_neg(self, value: int) -> None:
        self._deliver(-1 - value)

    def _on_string(self, body: bytes) -> None:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as error:
            self._refuse(InvalidValue(f"STRING body is not valid UTF-8: {error.reason} at byte {error.start}"))
            return
        self._deliver(text)

    def _on_bigint(self, body: bytes) -> None:
        magnitude = int.from_bytes(body, "big")
        if magnitude < _BIG or body[0] == 0:
            self._refuse(InvalidValue("non-canonical BIGINT: use INT below 2**64, no leading zero bytes"))
            return
        self._deliver(magnitude)

    def _on_bigneg(self, body: bytes) -> None:
        magnitude = int.from_bytes(body, "big")
        if magnitude <= _BIG or body[0] == 0:
            self._refuse(InvalidValue("non-canonical BIGNEG: use NEG above -(2**64) - 1, no leading zero bytes"))
            return
        self._deliver(-magnitude)

    def _on_float(self, body: bytes) -> None:
        self._deliver(_UNPACK_FLOAT(body)[0])

    def _on_simple(self, value: int) -> None:
        if value >= len(_SIMPLE_VALUES):
            self._refuse(InvalidValue(f"unknown SIMPLE value {value}"))
            return
        self._deliver(_SIMPLE_VALUES[value])

    def _on_open(self, body: bytes) -> None:
        factory = self._factories.get(body)
        if factory is None:
            factory = self._lookup(body)
            if factory is None:
                return
        if self._opening is not None:
            try:
                self._opening.check_open(body.decode("ascii", "backslashreplace"))
            except Violation as violation:
                self._refuse(violation, opened=True)
                return
            self._constraints.append(self._opening)
            self._opening = None
        try:
            unslicer = factory(self.limits)
        except Exception as error:
            self._refuse(_unslicer_failed(error), opened=True)
            return
        kind = type(unslicer)
        known = self._kinds.get(kind)
        if known is None:
            known = self._kinds[kind] = self._describe(unslicer)
        budgeted, checks_tokens, top_cost, top_cap = known
        stack = self._stack
        if stack:
            over = self._open_budget(unslicer, budgeted)
        else:
            # A top-level container (every RPC message): its cap and cost
            # are its class's, worked out once.
            if budgeted and top_cap < unslicer.cap:
                unslicer.cap = top_cap
            self._items, self._cost = 0, top_cost
            over = top_cost > self._max_object_memory
        stack.append(unslicer)
        self._top_budgeted = budgeted
        self._receive = unslicer.receive_child if budgeted else self._receive_counted
        self.accepts_all = self.constraint is None and not checks_tokens
        if over:
            self._refuse(self._over_budget())

    def _describe(self, unslicer: Any) -> tuple[bool, bool, int, int]:
        """
        What the budget needs of an unslicer's class (class attributes, so
        the same for all its instances): whether it is budgeted, whether it
        checks tokens, and its cost and cap when it opens a top-level object.
        """
        budgeted = bool(getattr(unslicer, "budgeted", False))
        checks_tokens = bool(getattr(unslicer, "checks_tokens", True))
        if not budgeted:
            return budgeted, checks_tokens, getattr(unslicer, "open_cost", DEFAULT_OPEN_COST), 0
        cost: int = unslicer.open_cost
        cap = min(self._max_object_items, (self._max_object_memory - cost) // unslicer.worst_item_cost)
        return budgeted, checks_tokens, cost, max(cap, 0)

    # -- the per-object budget --------------------------------------------

    def _open_budget(self, unslicer: Any, budgeted: bool) -> bool:
        """
        Checkpoint at an OPEN: settle the parent (it stops growing while
        this child is open), charge the child's own size and give it a cap;
        return True if the object is now over budget.  (L{_settle} and
        C{allow} written out: this runs for every container.)
        """
        if self._stack:
            items, cost = self._items, self._cost
            parent = self._stack[-1]
            if self._top_budgeted:
                length = len(parent.items)
                if length != parent.settled:
                    items += length - parent.settled
                    cost += (length - parent.settled) * parent.item_cost
                    parent.settled = length
                if parent.extra:
                    cost += parent.extra
                    parent.extra = 0
        else:
            items = cost = 0
        if budgeted:
            cost += unslicer.open_cost
            more = (self._max_object_memory - cost) // unslicer.worst_item_cost
            left = self._max_object_items - items
            more = left if left < more else more
            if more < unslicer.cap:
                unslicer.cap = more if more > 0 else 0
        else:
            cost += getattr(unslicer, "open_cost", DEFAULT_OPEN_COST)
        self._items, self._cost = items, cost
        return items > self._max_object_items or cost > self._max_object_memory

    def _settle(self, unslicer: Any) -> None:
        """Charge what a built-in container gained since its last checkpoint."""
        length = len(unslicer.items)
        gained = length - unslicer.settled
        if gained:
            unslicer.settled = length
            self._items += gained
            self._cost += gained * unslicer.item_cost
        if unslicer.extra:
            self._cost += unslicer.extra
            unslicer.extra = 0

    def _checkpoint(self) -> None:
        """
        Settle the innermost container; give it a cap from what is left of
        the budget.

        @raise Violation: the object is over budget.
        """
        top = self._stack[-1]
        self._settle(top)
        items_left = self._max_object_items - self._items
        memory_left = self._max_object_memory - self._cost
        if items_left < 0 or memory_left < 0:
            raise self._over_budget()
        top.allow(items_left, memory_left)

    def _receive_counted(self, obj: Any) -> None:
        """
        Deliver a child to an unslicer outside the budget (a user type, an
        RPC message), counting it on the way: such unslicers keep no cap.
        """
        self._items += 1
        self._cost += DEFAULT_ITEM_COST
        if self._items > self._max_object_items or self._cost > self._max_object_memory:
            raise self._over_budget()
        self._stack[-1].receive_child(obj)

    def _over_budget(self) -> Violation:
        if self._items > self._max_object_items:
            return TooManyItems(f"object has more than {self._max_object_items} items in all")
        return ObjectTooCostly(
            f"object would hold more than {self._max_object_memory} bytes beyond its wire bytes (estimated)"
        )

    def _lookup(self, body: bytes) -> UnslicerFactory | None:
        """Find the unslicer for an OPEN's name; refuse the object if there is none."""
        name = body.decode("ascii", "backslashreplace")
        factory = self.registry.unslicer_for(name)
        if factory is None:
            self._refuse(UnknownType(f"no unslicer is registered for open-type {name!r}"), opened=True)
            return None
        # Remember hits only: a name unknown now may be registered later.
        self._factories[body] = factory
        return factory

    def _on_close(self, value: int) -> None:
        stack = self._stack
        if value or not stack:
            raise UnexpectedToken("CLOSE with no open container" if not stack else f"CLOSE with value {value}")
        unslicer = stack.pop()
        if self._constraints:
            self._constraints.pop()
        if not stack:
            self._receive = self._results.append
            self._top_budgeted = False
            self._update_accepts_all()
        else:
            parent = stack[-1]
            try:  # (getattr with a default costs a call: this runs for every container)
                budgeted = parent.budgeted
            except AttributeError:
                budgeted = False
            self._receive = parent.receive_child if budgeted else self._receive_counted
            self._top_budgeted = budgeted
            self._update_accepts_all()
            if self._closed_over_budget(unslicer, parent, budgeted):
                return
        try:
            obj = unslicer.finish()
        except ProtocolError:
            raise
        except Violation as violation:
            self._refuse(violation)
            return
        except Exception as error:  # a user unslicer's bug refuses the object, not the stream
            self._refuse(_unslicer_failed(error))
            return
        if obj is not NOTHING:
            self._deliver(obj)

    def _closed_over_budget(self, unslicer: Any, parent: Any, parent_budgeted: bool) -> bool:
        """
        Checkpoint at the CLOSE of a child container: settle it, recap its
        parent (the child spent budget the parent's cap assumed); refuse the
        object and return True if it is over budget.  (L{_settle} and
        C{allow} written out: this runs for every container.)
        """
        items, cost = self._items, self._cost
        try:
            budgeted = unslicer.budgeted
        except AttributeError:
            budgeted = False
        if budgeted:
            length = len(unslicer.items)
            items += length - unslicer.settled
            cost += (length - unslicer.settled) * unslicer.item_cost + unslicer.extra
            self._items, self._cost = items, cost
        if items > self._max_object_items or cost > self._max_object_memory:
            self._refuse(self._over_budget())
            return True
        if parent_budgeted:
            more = (self._max_object_memory - cost) // parent.worst_item_cost
            left = self._max_object_items - items
            more = len(parent.items) + (left if left < more else more)
            parent.cap = more if more < parent.max_length else parent.max_length
        return False

    def _on_abort(self, value: int) -> None:
        if value:
            raise UnexpectedToken(f"ABORT with value {value}")
        if self._stack:
            # Nothing more of an abandoned object follows: report it now.
            violation = self._reported(Aborted("the sender abandoned this object", self._where()))
            self._drop_object()
            self._results.append(violation)

    def _on_error(self, body: bytes) -> None:
        raise PeerError("the peer reported: " + body.decode("utf-8", "replace"))

    def _on_ping(self, value: int) -> None:
        self.control_events.append(Ping(value))

    def _on_pong(self, value: int) -> None:
        self.control_events.append(Pong(value))

    def _unexpected(self, value: Any) -> None:
        raise UnexpectedToken(f"unexpected token with value {short_repr(value, 40)}")

    # -- discarding ------------------------------------------------------

    def _refuse(self, violation: Violation, opened: bool = False) -> None:
        """Drop the top-level object being built; skip its tokens up to its CLOSE."""
        violation.where = self._where() + violation.where
        if self._stack:
            violation = self._reported(violation)
        depth = len(self._stack) + opened
        self._drop_object()
        if not depth:
            self._results.append(violation)
            return
        self._violation = violation
        self._discard_depth = depth
        self.handlers[:] = self._discarding
        self.accepts_all = False

    def _reported(self, violation: Violation) -> Violation:
        """
        What the top-level unslicer makes of its object's refusal (its
        C{report_violation}, looked up once per class): C{violation} itself
        if it has no such method or the method fails.
        """
        top = self._stack[0]
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

    def _drop_object(self) -> None:
        """Forget the top-level object being built."""
        self._stack.clear()
        self._constraints.clear()
        self._opening = None
        self._receive = self._results.append
        self._items = self._cost = 0
        self._top_budgeted = False
        self._update_accepts_all()

    def _update_accepts_all(self) -> None:
        stack = self._stack
        self.accepts_all = (
            self._violation is None
            and self.constraint is None
            and (not stack or not getattr(stack[-1], "checks_tokens", True))
        )

    def _where(self) -> str:
        return "".join(unslicer.child_where() for unslicer in self._stack)

    def _discarding_handlers(self) -> list[Callable[[Any], None]]:
        table: list[Callable[[Any], None]] = [self._ignore] * 16
        table[CLOSE] = self._discard_close
        table[ABORT] = self._discard_abort
        table[ERROR] = self._on_error
        table[PING] = self._on_ping
        table[PONG] = self._on_pong
        table[14] = table[15] = self._unexpected
        return table

    def _ignore(self, value: Any) -> None:
        pass

    def _discard_close(self, value: int) -> None:
        if value:
            raise UnexpectedToken(f"CLOSE with value {value}")
        self._discard_depth -= 1
        if not self._discard_depth:
            self._end_discard()

    def _discard_abort(self, value: int) -> None:
        if value:
            raise UnexpectedToken(f"ABORT with value {value}")
        self._end_discard()

    def _end_discard(self) -> None:
        violation = self._violation
        assert violation is not None
        self._violation = None
        self._discard_depth = 0
        self._results.append(violation)
        self.handlers[:] = self._building
        self._update_accepts_all()


def _unslicer_failed(error: Exception) -> Violation:
    return InvalidValue(f"unslicer failed: {type(error).__name__}: {error}")


def loads(data: bytes, limits: Limits | None = None, registry: Registry | None = None) -> Any:
    """
    Decode exactly one object from a complete stream (preamble included).

    @raise Violation: the object was refused.
    @raise ProtocolError: the bytes are not a valid stream, are truncated, or
        hold anything after the object.
    """
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
