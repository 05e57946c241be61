# -*- test-case-name: tests.protocols.rpc.test_streams,tests.attack.test_streams -*-
"""Object streams in RPC calls, sans-IO: the messages, the credit windows and the C{AsyncIterator[T]} constraint.

Contract: a stream travels in a call's arguments or result as an
announcement (OPEN C{"rpc.stream"}, its id, CLOSE); its items and control
messages are top-level C{"rpc.flow"} objects: ITEM, END and ERROR from the
sender, CREDIT and CANCEL from the receiver.  Ids are the sender's.  A
CREDIT grants items and states the byte window; an ITEM sent while the
items in flight held it is refused (L{ByteCreditExceeded}).  The
specification is section 14 of C{docs/wire-format.md}.  L{ReceiveWindow}
and L{SendWindow} are the two sides' bookkeeping; L{StreamOf} is the
constraint C{AsyncIterator[T]} means, checking each item.

Cost: O(1) per item.

Design: docs/design/rpc-streams.md
"""

from __future__ import annotations

import collections
import collections.abc
import types
import weakref
from collections.abc import Callable
from typing import Any

from zope.interface import implementer

from framing import Limits, Registry, Violation
from framing._budget import held_bytes
from framing._errors import InvalidValue, KindRefused, TooManyItems, short_repr
from framing._ledger import Ledger
from framing.slicing._builtin import BudgetedUnslicer
from framing.slicing._constraints import Constraint
from framing.slicing._custom import PartsUnslicer
from framing.slicing._interfaces import ISlicer
from framing.wire import INT, KIND_NAMES, OPEN, STRING

from ._errors import RuleBroken, isTypeName
from ._signatures import registerGenericHint

ANNOUNCE_OPEN_TYPE = "rpc.stream"
"""The open-type of a stream's announcement in a call's arguments or result."""

FLOW_OPEN_TYPE = "rpc.flow"
"""The open-type of every item and control message of a stream."""

ITEM, CREDIT, END, ERROR, CANCEL = range(5)
"""The tags of the flow messages."""

FLOW_NAMES = ("item", "credit", "end", "error", "cancel")

DEFAULT_WINDOW = 256
"""Items a receiver lets a stream have in flight by default: enough that a
stream of small items is never idle waiting for credit on a local path."""

DEFAULT_WINDOW_BYTES = 1 << 20
"""Bytes of encoded items a receiver lets a stream have in flight by default (1 MiB)."""

_INT_END = 1 << 64


class FlowMessage(tuple):  # type: ignore[type-arg]
    """One item or control message of an object stream, as sent and as received."""

    __slots__ = ()


@implementer(ISlicer)
class FlowSlicer:
    """Writes a L{FlowMessage} as OPEN C{"rpc.flow"}, its fields, CLOSE."""

    record_name = FLOW_OPEN_TYPE

    def slice(self, obj: Any, encoder: Any) -> None:
        encoder.write_container(FLOW_OPEN_TYPE, obj, obj)


def _streamId(value: Any) -> bool:
    return type(value) is int and 1 <= value < _INT_END


def _count(value: Any) -> bool:
    return type(value) is int and 0 <= value < _INT_END


def _text(value: Any) -> bool:
    return type(value) is str


def _details(value: Any) -> bool:
    return value is None or type(value) is tuple


def _any(value: Any) -> bool:
    return True


_FIELDS: tuple[tuple[Callable[[Any], bool], ...], ...] = (
    (_streamId, _any),  # ITEM
    (_streamId, _count, _count),  # CREDIT
    (_streamId, _count),  # END
    (_streamId, isTypeName, _text, _details),  # ERROR
    (_streamId,),  # CANCEL
)
_NO_BODY: frozenset[int] = frozenset()
_BODIES: tuple[tuple[frozenset[int] | None, ...], ...] = (
    (_NO_BODY, None),
    (_NO_BODY, _NO_BODY, _NO_BODY),
    (_NO_BODY, _NO_BODY),
    (_NO_BODY, frozenset({STRING}), frozenset({STRING}), frozenset({OPEN})),
    (_NO_BODY,),
)
_FIELD_NAMES = (
    ("id", "item"),
    ("id", "objects", "bytes"),
    ("id", "count"),
    ("id", "type", "message", "details"),
    ("id",),
)


def buildFlow(items: list[Any]) -> FlowMessage | None:
    """
    The L{FlowMessage} L{FlowUnslicer} finishes with, given its fields, or
    C{None} wherever it would refuse them (the compiled core's record
    builder; the pure decoder then refuses them in its own words).
    """
    if not items:
        return None
    tag = items[0]
    if tag == ITEM:
        # The commonest message, its checks written out (its item count is bounded by the decoder).
        if len(items) < 3:
            return None
        streamId = items[1]
        return FlowMessage(items) if type(streamId) is int and 1 <= streamId < _INT_END else None
    if type(tag) is not int or not 0 <= tag < len(_FIELDS):
        return None
    checks = _FIELDS[tag]
    if len(items) != len(checks) + 1:
        return None
    for index, check in enumerate(checks, 1):
        if not check(items[index]):
            return None
    return FlowMessage(items)


class FlowUnslicer(BudgetedUnslicer):
    """Builds a L{FlowMessage}, checking each field as it arrives (an item's value is the receiver's to check)."""

    open_type = FLOW_OPEN_TYPE
    record_builder = staticmethod(buildFlow)
    record_extra_items = 2

    def __init__(self, limits: Limits) -> None:
        # An ITEM holds up to max_items items after its tag and id.
        self.limits = limits
        self.max_length = self.cap = limits.max_items + 2
        self.settled = self.extra = 0
        self._counter = None
        self.items: list[Any] = []

    def check_token(self, kind: int, size: int) -> None:
        items = self.items
        if not items:
            if kind != INT:
                raise KindRefused(f"an rpc.flow tag cannot be {KIND_NAMES.get(kind, kind)}")
            return
        bodies = _BODIES[items[0]]
        index = len(items) - 1
        if items[0] == ITEM and index >= 1:
            return  # an item: any kind
        if index >= len(bodies):
            raise TooManyItems(f"an rpc.flow {FLOW_NAMES[items[0]]} has {len(bodies)} fields")
        allowed = bodies[index]
        if allowed is not None and kind not in allowed:
            raise KindRefused(f"an rpc.flow field cannot be {KIND_NAMES.get(kind, kind)}")

    def receive_child(self, obj: Any) -> None:
        items = self.items
        if len(items) >= self.cap:
            self.full()
        if not items:
            if type(obj) is not int or not 0 <= obj < len(_FIELDS):
                raise InvalidValue(f"unknown rpc.flow tag {short_repr(obj)}")
        elif items[0] == ITEM and len(items) >= 2:
            pass  # an item: the receiver's to check
        else:
            checks = _FIELDS[items[0]]
            index = len(items) - 1
            if index >= len(checks):
                raise TooManyItems(f"an rpc.flow {FLOW_NAMES[items[0]]} has {len(checks)} fields")
            if not checks[index](obj):
                raise InvalidValue(f"bad {_FIELD_NAMES[items[0]][index]} in an rpc.flow message: {short_repr(obj)}")
        items.append(obj)

    def finish(self) -> FlowMessage:
        items = self.items
        if items and items[0] == ITEM and len(items) >= 3:
            return FlowMessage(items)
        if not items or len(items) != len(_FIELDS[items[0]]) + 1:
            raise InvalidValue("an rpc.flow message is missing fields")
        return FlowMessage(items)

    def child_where(self) -> str:
        items = self.items
        if not items:
            return "<rpc.flow>"
        names = _FIELD_NAMES[items[0]]
        index = len(items) - 1
        if items[0] == ITEM and index >= 1:
            return f"item[{index - 1}]"
        return names[index] if index < len(names) else "?"


class Announcement(tuple):  # type: ignore[type-arg]
    """What a stream in an argument or result is decoded as before its connection resolves it: C{(streamId,)}."""

    __slots__ = ()


class AnnouncementUnslicer(PartsUnslicer):
    """Reads OPEN C{"rpc.stream"} INT CLOSE; C{resolve} turns the id into the receiving side's stream."""

    open_type = ANNOUNCE_OPEN_TYPE
    part_kinds = (_NO_BODY,)
    part_types = (int,)

    def __init__(self, limits: Limits, resolve: Callable[[Announcement], Any]) -> None:
        super().__init__(limits)
        self._resolve = resolve

    def build(self, streamId: Any) -> Any:
        if not _streamId(streamId):
            raise InvalidValue(f"an rpc.stream id is an integer from 1 to 2**64 - 1, got {short_repr(streamId)}")
        return self._resolve(Announcement((streamId,)))


def addFlowTypes(registry: Registry) -> None:
    """Make C{registry} send L{FlowMessage}s and build them from OPEN C{"rpc.flow"}."""
    registry.add_slicer(FlowMessage, FlowSlicer())
    registry.add_unslicer(FLOW_OPEN_TYPE, FlowUnslicer)


# -- flow control ------------------------------------------------------------------


class ItemCreditExceeded(RuleBroken):
    """A peer sent a stream more items than it was granted: it breaks flow control, the connection is dropped."""

    code = "stream-credit-exceeded"


class ObjectStreamIdReused(RuleBroken):
    """A peer announced a stream under an id not above its last one: a stream could be orphaned."""

    code = "stream-id-reused"


class TooManyObjectStreams(RuleBroken):
    """A peer announced more streams at once than this side takes (L{ReceiveWindow}'s owner's limit)."""

    code = "too-many-streams"


class ByteCreditExceeded(ItemCreditExceeded):
    """
    A peer sent a stream an ITEM while the items it had in flight already
    held the whole byte window (as this side counts them: L{leastItemLength}):
    it breaks flow control as surely as too many items do, the connection is
    dropped (the same code).
    """


class EndCountMismatch(Violation):
    """
    A stream's END counts other than the items that arrived for it (section
    14.4: END carries the count of items sent, not of ITEM messages): items
    were lost or made up on the way, so the consumer gets the items that
    arrived and then this error instead of a clean end.  The stream alone
    fails; the connection and its other calls go on.
    """

    code = "end-count-mismatch"


ITEM_FRAMING_BYTES = 12
"""The fewest encoded bytes of an ITEM besides its items: OPEN C{"rpc.flow"}
(a 1-byte header and 8 bytes of name), the tag, the stream id, CLOSE (1 each)."""

HELD_ACCOUNT = "stream-items"
"""The ledger account (L{framing._ledger.Ledger}) of the items a stream's receiver holds, received and not yet taken."""

_CONTAINERS = (list, tuple, set, frozenset)
_SCALARS = frozenset({int, float, bool, type(None)})
_FLAT_SIZED = frozenset({str, bytes})


def _isAscii(value: str | bytes) -> bool:
    return value.isascii()


def _textLength(value: str) -> int:
    """The UTF-8 length of C{value}: its length if it is ASCII (known at once), else that of its encoding."""
    return len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))


def leastEncodedLength(values: collections.abc.Sequence[Any], registry: Registry | None = None) -> int:
    """
    A count of the encoded bytes of C{values} that is never more than their
    encoding, and counts every body they hold by its length, so that a
    receiver holds a sender to its byte window by the bytes the items hold
    without the decoder measuring each message: a string 1 plus its UTF-8
    length; a byte string (C{bytes}, C{bytearray}) and any other value with
    a buffer (a C{memoryview}, an C{array.array}, a numpy array: one BYTES
    body each) 1 plus its length in bytes; a list, tuple, set, frozenset or
    dict 2 plus its contents (at least an OPEN and a CLOSE); an object of a
    type C{registry} sends through a C{to_wire} function (a type registered
    with L{framing.Registry.register}, a dataclass) 2 plus the count of the
    state C{to_wire} gives; anything else (a number, C{None}, an object of
    a type with a slicer of its own) 1.  O(the values and everything in the
    containers and states among them, and the characters of non-ASCII
    text), which the decoder has just paid for building them; a run of
    numbers (or of ASCII strings) is counted without a Python step per value.
    """
    kinds = set(map(type, values))
    if kinds <= _SCALARS:
        return len(values)
    if kinds <= _FLAT_SIZED and (str not in kinds or all(map(_isAscii, values))):
        return len(values) + sum(map(len, values))
    total = 0
    pending = list(values)
    pop, extend = pending.pop, pending.extend
    while pending:
        value = pop()
        kind = type(value)
        if kind is int:
            total += 1
        elif kind is bytes or kind is bytearray:
            total += 1 + len(value)
        elif kind is str:
            total += 1 + _textLength(value)
        elif kind is dict:
            total += 2
            extend(value.keys())
            extend(value.values())
        elif kind in _CONTAINERS:
            total += 2
            extend(value)
        elif kind in _SCALARS:
            total += 1
        elif isinstance(value, str):
            total += 1 + _textLength(value)
        elif isinstance(value, dict):
            total += 2
            extend(value.keys())
            extend(value.values())
        elif isinstance(value, _CONTAINERS):
            total += 2
            extend(value)
        else:
            total += _otherLength(value, registry, pending)
    return total


def _otherLength(value: Any, registry: Registry | None, pending: list[Any]) -> int:
    """
    L{leastEncodedLength}'s count of a value of no built-in kind: a buffer's
    bytes, or a registered type's state (put in C{pending} to be counted),
    else 1.
    """
    try:
        with memoryview(value) as view:
            return 1 + view.nbytes
    except TypeError:
        pass
    toWire = getattr(registry.slicer_for(type(value)), "to_wire", None) if registry is not None else None
    if toWire is None:
        return 1
    try:
        state = toWire(value)
    except Exception:
        return 1
    pending.append(state)
    return 2


def leastItemLength(message: FlowMessage, registry: Registry | None = None) -> int:
    """L{leastEncodedLength} of a whole ITEM: its items' and L{ITEM_FRAMING_BYTES}."""
    return ITEM_FRAMING_BYTES + leastEncodedLength(message[2:], registry)


class ReceiveWindow:
    """The receiver's side of one stream: its credit, its item check, and
    what its items hold.

    Contract: it grants C{window} items, then more as the consumer takes
    them, and holds the sender to the byte window (an ITEM arriving while
    the items in flight hold it is refused), so the items held never count
    more than the byte window plus one ITEM.  L{arrived} is an ITEM's whole
    arrival for every reader: counted, each item checked (L{constrain}),
    and the memory held (L{framing._budget.held_bytes}) charged to
    C{ledger} (L{HELD_ACCOUNT}) until the consumer took every item of it,
    or L{dropHeld}.

    Design: docs/design/rpc-streams.md

    @ivar window: the items in flight allowed.
    @ivar windowBytes: the encoded bytes of items in flight allowed.
    @ivar buffered: items received and not yet taken.
    @ivar bytesInFlight: the bytes counted of the items received and not yet given back by credit.
    @ivar heldBytes: the bytes charged for the ITEMs whose items are not all taken yet.
    @ivar ledger: where the items held are charged, or C{None}.
    @ivar registry: the connection's registry, which L{leastItemLength} asks about registered types.
    @ivar constraint: the check of each item as it arrives, or C{None}.
    @ivar where: the stream's name in a refused item's C{where} (C{"result"}, C{"args[0]"}).
    """

    __slots__ = (
        "window",
        "windowBytes",
        "buffered",
        "bytesInFlight",
        "heldBytes",
        "ledger",
        "registry",
        "constraint",
        "where",
        "arrivedItems",
        "_owed",
        "_step",
        "_outstanding",
        "_shares",
        "_held",
    )

    def __init__(
        self,
        window: int = DEFAULT_WINDOW,
        windowBytes: int = DEFAULT_WINDOW_BYTES,
        ledger: Ledger | None = None,
        registry: Registry | None = None,
    ) -> None:
        if window < 1 or windowBytes < 1:
            raise ValueError("a stream's window must allow at least one item and one byte")
        self.window = window
        self.windowBytes = windowBytes
        self.buffered = 0
        self.bytesInFlight = 0
        self.heldBytes = 0
        self.ledger = ledger
        self.registry = registry
        self.constraint: Constraint | None = None
        self.where = "result"
        self.arrivedItems = 0
        self._owed = 0
        self._step = max(1, window // 4)
        self._outstanding = 0
        # Per ITEM in flight, oldest first: [items not given back, share of each, the last one's extra].
        self._shares: collections.deque[list[int]] = collections.deque()
        # Per ITEM with items held, oldest first: [items not taken, bytes charged].
        self._held: collections.deque[list[int]] = collections.deque()

    def first(self) -> tuple[int, int]:
        """The first CREDIT's C{(objects, bytes)}: the whole window."""
        self._outstanding = self.window
        return self.window, self.windowBytes

    def constrain(self, constraint: Constraint, where: str) -> None:
        """Check each item from now on as it arrives against C{constraint}, a refused one named C{where[index]}."""
        self.constraint = constraint
        self.where = where

    def arrived(self, message: FlowMessage) -> tuple[tuple[Any, ...], Violation | None]:
        """
        An ITEM for a reader that holds its items: counted against both
        windows, its items checked (if the stream is typed), and those kept
        charged to the ledger.  O(its items and what they hold), once.

        @return: the items to hold (all of them, or those before the first
            refused), and the refusal (the stream is to end with it after
            those items), or C{None}.
        @raise ItemCreditExceeded: more items than were granted.
        @raise ByteCreditExceeded: the items in flight already held the byte window.
        """
        items: tuple[Any, ...] = message[2:]
        count = len(items)
        size = ITEM_FRAMING_BYTES + leastEncodedLength(items, self.registry)
        self.received(count, size)
        refused = None
        constraint = self.constraint
        if constraint is not None:
            index = self.arrivedItems
            for offset, item in enumerate(items):
                try:
                    checkItem(constraint, item, self.where, index + offset)
                except Violation as violation:
                    refused = violation
                    items = items[:offset]
                    break
        self.arrivedItems += count
        kept = len(items)
        if kept < count:
            self.buffered -= count - kept
        if kept:
            # Charged what the items hold here (a list of small ints some 36 bytes an int), not the count
            # the byte window keeps (its bodies: 1 an int), so that a pool of connections is bounded in memory.
            charge = ITEM_FRAMING_BYTES + held_bytes(items, self.registry)
            self._held.append([kept, charge])
            self.heldBytes += charge
            if self.ledger is not None:
                self.ledger.charge(HELD_ACCOUNT, charge)
        return items, refused

    def discarded(self, message: FlowMessage) -> None:
        """An ITEM for a stream whose reader holds nothing more (it is over here): its credit counted, nothing held."""
        count = len(message) - 2
        self.received(count, ITEM_FRAMING_BYTES + leastEncodedLength(message[2:], self.registry))
        self.arrivedItems += count
        self.buffered -= count

    def dropHeld(self) -> None:
        """The items held are let go without being taken (cancelled, refused, dropped): their bytes are released."""
        self.buffered = 0
        self._held.clear()
        held, self.heldBytes = self.heldBytes, 0
        if held and self.ledger is not None:
            self.ledger.release(HELD_ACCOUNT, held)

    def endProblem(self, count: int) -> EndCountMismatch | None:
        """
        What is wrong with the producer's END of C{count} items sent, or
        C{None}: it must count every item that arrived for the stream (taken,
        held or discarded), L{arrivedItems}.  Costs one comparison.
        """
        if count == self.arrivedItems:
            return None
        return EndCountMismatch(
            f"the stream's END counts {count} items sent, but {self.arrivedItems} arrived", self.where
        )

    def received(self, count: int = 1, size: int = 0) -> None:
        """
        An ITEM of C{count} items and C{size} bytes (L{leastItemLength}) arrived.

        @raise ItemCreditExceeded: more items than were granted.
        @raise ByteCreditExceeded: the items in flight already held the byte window.
        """
        if count > self._outstanding:
            raise ItemCreditExceeded(f"a stream sent more than the {self.window} items it was granted")
        if self.bytesInFlight >= self.windowBytes:
            raise ByteCreditExceeded(
                f"a stream sent an ITEM while its items in flight held {self.bytesInFlight} bytes,"
                f" its byte window being {self.windowBytes}"
            )
        self._outstanding -= count
        self.buffered += count
        if size:
            self.bytesInFlight += size
            share, extra = divmod(size, count)
            self._shares.append([count, share, extra])

    def taken(self) -> int:
        """
        The consumer took one item: the objects to grant now (0: not yet a
        step's worth, and items still held).  Once the consumer has taken
        every item received, what it owes is granted whatever its count: a
        sender held back by the byte window may have fewer than a step in
        flight.  The last item taken of an ITEM releases that ITEM's bytes.
        """
        held = self._held
        if held:
            entry = held[0]
            entry[0] -= 1
            if not entry[0]:
                held.popleft()
                self.heldBytes -= entry[1]
                if self.ledger is not None:
                    self.ledger.release(HELD_ACCOUNT, entry[1])
        self.buffered -= 1
        self._owed += 1
        if self._owed < self._step and self.buffered:
            return 0
        owed, self._owed = self._owed, 0
        self._outstanding += owed
        self._giveBack(owed)
        return owed

    def _giveBack(self, count: int) -> None:
        """The first C{count} items in flight are given back (their CREDIT is sent): their bytes count no more."""
        shares = self._shares
        while count and shares:
            entry = shares[0]
            items, share, extra = entry
            if items <= count:
                self.bytesInFlight -= items * share + extra
                count -= items
                shares.popleft()
            else:
                self.bytesInFlight -= count * share
                entry[0] = items - count
                count = 0


class SendWindow:
    """
    The sender's side of one stream's credit: items granted and not yet
    sent, the receiver's byte window, and the sizes of the items sent and
    not yet given back by credit (in order), whose sum it keeps.

    @ivar objects: items it may still send.
    @ivar windowBytes: the receiver's byte window (from its last CREDIT).
    @ivar inFlightBytes: encoded bytes of the items not yet given back.
    """

    __slots__ = ("objects", "windowBytes", "inFlightBytes", "_sizes")

    def __init__(self) -> None:
        self.objects = 0
        self.windowBytes = 0
        self.inFlightBytes = 0
        self._sizes: collections.deque[int] = collections.deque()

    def granted(self, objects: int, windowBytes: int) -> None:
        """A CREDIT: C{objects} more items; the first C{objects} items in flight are given back."""
        self.objects += objects
        self.windowBytes = windowBytes
        sizes = self._sizes
        for _ in range(min(objects, len(sizes))):
            self.inFlightBytes -= sizes.popleft()

    def open(self) -> bool:
        """Whether one more item may be taken from the source now."""
        return self.objects > 0 and self.inFlightBytes < self.windowBytes

    def taken(self) -> None:
        """One item was taken from the source, to be sent (it counts against the objects granted at once)."""
        self.objects -= 1

    def sent(self, count: int, size: int) -> None:
        """An ITEM of C{count} items (taken before) and C{size} encoded bytes was sent: each item holds its share."""
        self.inFlightBytes += size
        share, extra = divmod(size, count)
        sizes = self._sizes
        sizes.append(share + extra)
        for _ in range(count - 1):
            sizes.append(share)


# -- typed streams -------------------------------------------------------------------


_SEND_CHECKS: weakref.WeakKeyDictionary[Any, tuple[Constraint, str]] = weakref.WeakKeyDictionary()


def streamable(value: Any) -> bool:
    """Whether C{value} is sent as a stream: an async iterable, a generator, or a received stream."""
    return (
        isinstance(value, (collections.abc.AsyncIterable, types.GeneratorType))
        or getattr(value, "isObjectStream", False) is True
    )


def itemCheckFor(source: Any) -> tuple[Constraint, str] | None:
    """The item constraint (and the name of the stream in C{where}) a L{StreamOf} recorded for C{source}, if any."""
    try:
        return _SEND_CHECKS.get(source)
    except TypeError:
        return None


class StreamOf(Constraint):
    """
    A stream of items each accepted by C{item}: what C{AsyncIterator[T]}
    means.  It accepts an announcement at the header, and any stream in
    memory: a received one is told C{item} (its C{constrainItems}) the
    first time, as it arrives; one about to be sent (a source, or a received
    stream checked again: a method returning the stream it was given) is
    recorded so that each item is checked before it goes (L{itemCheckFor}),
    the received stream's own check staying as it was.

    @ivar item: the constraint of each item.
    """

    def __init__(self, item: Constraint) -> None:
        self.item = item

    def check_header(self, kind: int, size: int) -> None:
        if kind != OPEN:
            raise KindRefused(f"expected a stream of objects, got a token of kind {kind}")

    def check_open(self, name: str) -> None:
        if name != ANNOUNCE_OPEN_TYPE:
            raise KindRefused(f"expected a stream of objects, got {name!r}")

    def check_value(self, obj: Any) -> None:
        self.validateAt(obj, "result")

    def validateAt(self, obj: Any, where: str) -> None:
        """Accept C{obj} as a stream named C{where} in a refused item's C{where} (C{"args[0]"})."""
        constrain = getattr(obj, "constrainItems", None)
        if constrain is not None and constrain(self.item, where):
            return
        if not streamable(obj):
            raise KindRefused(f"expected a stream of objects (an async iterable or a generator), got {short_repr(obj)}")
        try:
            _SEND_CHECKS[obj] = (self.item, where)
        except TypeError:
            pass  # not weakly referenceable: checked by the receiver alone

    def __repr__(self) -> str:
        return f"StreamOf({self.item!r})"


def checkItem(constraint: Constraint, item: Any, where: str, index: int) -> None:
    """
    Check the item at C{index} of the stream named C{where}.

    @raise framing.Violation: refused, at C{f"{where}[{index}]..."}.
    """
    try:
        constraint.validate(item)
    except Violation as violation:
        violation.where = f"{where}[{index}]{violation.where}"
        raise


for _origin in (
    collections.abc.AsyncIterator,
    collections.abc.AsyncIterable,
    collections.abc.AsyncGenerator,
    # A remote method returning a generator: its caller reads a stream (an async one).
    collections.abc.Iterator,
    collections.abc.Generator,
):
    registerGenericHint(_origin, StreamOf)
