# -*- test-case-name: tests.framing.test_hooks,tests.framing.test_reconfigure,tests.framing.test_held_tail -*-
"""Unslicers for the built-in containers.

Contract: each container unslicer holds at most C{Limits.max_items} items and
refuses the item past that at its arrival; dict keys and set members must be
hashable and unique.  Members whose hash a peer can choose (anything but
str, bytes and small ints) are counted by full hash, and a container whose
equality probes pass C{Limits.max_hash_collisions} is refused with
L{HashCollisions}.  Each container takes part in the decoder's per-object
budget through its C{cap}, raising L{CapReached} when it is reached.

Cost: O(1) per item, and building a set or dict is O(n) for n wire bytes,
never O(n**2); a tracked key holds about 112 bytes, charged to the object.

Design: docs/design/containers.md
"""

from __future__ import annotations

import sys
from typing import Any, ClassVar

from zope.interface import implementer

from .._errors import HashCollisions, InvalidValue, TooManyItems, Violation, short_repr
from .._limits import Limits
from ._interfaces import IReportsViolations, IUnslicer

_MODULUS = sys.hash_info.modulus
TRACKED_KEY_COST = 112
"""Bytes the hash tracker holds per tracked key (an int and a dict entry)."""
_RANDOMIZED = bool(sys.flags.hash_randomization)
"""str and bytes hashes are unpredictable to a peer only when hash
randomization is on (it is, unless PYTHONHASHSEED=0)."""


class _Never:
    """Stands for str and bytes when their hashes are not randomized: no value has this type."""


_STR: type = str if _RANDOMIZED else _Never
_BYTES: type = bytes if _RANDOMIZED else _Never
VALUE_ALLOWANCE = 40
"""Bytes charged for an item's own object beyond its wire bytes (an int
above 255 takes 28-36, a float 24, a bytes 33 plus its body, an ASCII str 49
plus its body less its header)."""


class CapReached(Exception):
    """
    A built-in container reached the cap the decoder gave it: the decoder
    settles its budget and delivers the item again (never seen outside).
    """


@implementer(IUnslicer, IReportsViolations)
class Unslicer:
    """
    A base for unslicers: accepts every token kind and builds nothing.

    @ivar limits: the decoder's L{Limits}.
    @cvar open_cost: bytes the decoder charges the object when this
        container opens (the built container's own size).
    @cvar slot_cost: bytes it charges per item (the container's slot for it).
    """

    open_type: ClassVar[str] = ""
    checks_tokens: ClassVar[bool] = False
    """Set for subclasses that override L{check_token}, so the decoder can
    skip the call for the many that do not."""
    open_cost: ClassVar[int] = 64
    slot_cost: ClassVar[int] = 16
    budgeted: ClassVar[bool] = False
    """True for unslicers that keep C{items}, C{cap}, C{settled}, C{extra}
    and raise L{CapReached} at their cap (the built-in containers; a subclass
    that overrides C{receive_child} must keep the cap check); the decoder
    counts the children of any other unslicer one by one on their way in."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.checks_tokens = cls.check_token is not Unslicer.check_token

    def __init__(self, limits: Limits) -> None:
        self.limits = limits

    def check_token(self, kind: int, size: int) -> None:
        """Accept every token; subclasses refuse by raising L{framing.Violation}."""

    def receive_child(self, obj: Any) -> None:
        raise NotImplementedError

    def finish(self) -> Any:
        raise NotImplementedError

    def child_where(self) -> str:
        return ""

    def report_violation(self, violation: Violation) -> Violation:
        """The object this unslicer opened at the top level was refused: deliver C{violation} as it is."""
        return violation


class BudgetedUnslicer(Unslicer):
    """
    The budget bookkeeping shared by the built-in containers, and by any
    container-like unslicer that keeps its children in C{items} and calls
    L{full} when C{len(items)} reaches C{cap} (the RPC message does):
    its children then cost the decoder nothing one by one.

    @ivar cap: the length at which the next item raises L{CapReached}.
    @ivar settled: the length the decoder has already charged for.
    @ivar extra: bytes held beyond the per-item estimate, not yet charged.
    @cvar item_cost: estimated bytes per item: its slot and L{VALUE_ALLOWANCE}.
    @cvar worst_item_cost: the most one item may cost (with a hash tracker's share).
    """

    budgeted = True
    item_cost: ClassVar[int] = 16 + VALUE_ALLOWANCE
    worst_item_cost: ClassVar[int] = 16 + VALUE_ALLOWANCE
    items: Any

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.item_cost = cls.slot_cost + VALUE_ALLOWANCE
        cls.worst_item_cost = max(cls.worst_item_cost, cls.item_cost)

    def __init__(self, limits: Limits) -> None:
        # Every attribute set here, in one order, so that all instances
        # share one key layout (CPython's fast attribute access).
        self.limits = limits
        self.max_length = self.cap = limits.max_items
        self.settled = self.extra = 0
        self._counter: _HashCounter | None = None

    def allow(self, items: int, memory: int) -> None:
        """Let at most C{items} more items, estimated at C{memory} bytes, arrive before L{CapReached}."""
        more = min(items, memory // self.worst_item_cost)
        self.cap = min(self.max_length, len(self.items) + max(more, 0))

    def _track(self, obj: Any, what: str) -> None:
        """Count the equality probes C{obj}'s hash will cost (for a member whose hash a peer can choose)."""
        if self._counter is None:
            self._counter = _HashCounter(self.limits.max_hash_collisions, what)
        self.extra += self._counter.count(obj)

    def full(self) -> None:
        """The length reached the cap: refuse past C{max_items}, else ask for more."""
        if len(self.items) >= self.max_length:
            raise TooManyItems(f"{self.open_type} has more than {self.max_length} items")
        raise CapReached()


class ListUnslicer(BudgetedUnslicer):
    """Builds a C{list}."""

    open_type = "list"
    open_cost = 56
    slot_cost = 10  # 8 bytes a pointer, plus the list's over-allocation

    def __init__(self, limits: Limits) -> None:
        self.items: list[Any] = []
        super().__init__(limits)

    def receive_child(self, obj: Any) -> None:
        items = self.items
        if len(items) >= self.cap:
            self.full()
        items.append(obj)

    def finish(self) -> Any:
        return self.items

    def child_where(self) -> str:
        return f"[{len(self.items)}]"


class TupleUnslicer(ListUnslicer):
    """Builds a C{tuple}."""

    open_type = "tuple"
    open_cost = 96  # the list it is built in, then the tuple
    slot_cost = 18

    def finish(self) -> Any:
        return tuple(self.items)


class _HashCounter:
    """
    Counts the equality probes that members with colliding hashes will cost
    a set or dict, and refuses past the limit.

    @ivar probes: earlier members sharing a full hash with each new one, summed.
    """

    __slots__ = ("_hashes", "_max", "_what", "probes")

    def __init__(self, limit: int, what: str) -> None:
        self._hashes: dict[int, int] = {}
        self._max = limit
        self._what = what
        self.probes = 0

    def count(self, obj: Any) -> int:
        """Note C{obj}'s hash; return the bytes the tracker now holds for it."""
        try:
            value = hash(obj)
        except TypeError:
            return 0  # the container refuses it in its own words
        hashes = self._hashes
        earlier = hashes.get(value, 0)
        hashes[value] = earlier + 1
        if earlier:
            self.probes += earlier
            if self.probes > self._max:
                raise HashCollisions(
                    f"{self._what}s share hashes: more than {self._max} equality probes"
                    f" (the last shares its hash with {earlier} others)"
                )
        return TRACKED_KEY_COST


class SetUnslicer(BudgetedUnslicer):
    """Builds a C{set}; members must be hashable and distinct."""

    open_type = "set"
    _build: ClassVar[type] = set
    open_cost = 216
    slot_cost = 56  # a 16-byte table entry, tables kept under 60% full and grown 4x
    worst_item_cost = 56 + VALUE_ALLOWANCE + TRACKED_KEY_COST

    def __init__(self, limits: Limits) -> None:
        self.items: set[Any] = set()
        super().__init__(limits)

    def receive_child(self, obj: Any) -> None:
        items = self.items
        if len(items) >= self.cap:
            self.full()
        kind = type(obj)
        if kind is not _STR and kind is not _BYTES and (kind is not int or not -_MODULUS < obj < _MODULUS):
            self._track(obj, f"{self.open_type} member")
        try:
            size = len(items)
            items.add(obj)
        except TypeError:
            raise InvalidValue(f"unhashable {type(obj).__name__} in a {self.open_type}") from None
        if len(items) == size:
            raise InvalidValue(f"duplicate member in a {self.open_type}")

    def finish(self) -> Any:
        return self._build(self.items)

    def child_where(self) -> str:
        return f"<member {len(self.items)}>"


class FrozenSetUnslicer(SetUnslicer):
    """Builds a C{frozenset}."""

    open_type = "frozenset"
    _build = frozenset
    open_cost = 432  # the set it is built in, then the frozenset
    slot_cost = 112
    worst_item_cost = 112 + VALUE_ALLOWANCE + TRACKED_KEY_COST


_NO_KEY = object()


class DictUnslicer(BudgetedUnslicer):
    """Builds a C{dict} from alternating keys and values; keys are hashable and distinct."""

    open_type = "dict"
    open_cost = 224  # with its first table
    # per entry: a 24-byte entry and its index in tables grown 3x, and a
    # second value's allowance
    slot_cost = 64 + VALUE_ALLOWANCE
    worst_item_cost = 64 + 2 * VALUE_ALLOWANCE + TRACKED_KEY_COST

    def __init__(self, limits: Limits) -> None:
        self.items: dict[Any, Any] = {}
        super().__init__(limits)
        self._key: Any = _NO_KEY

    def full(self) -> None:
        if len(self.items) >= self.max_length:
            raise TooManyItems(f"dict has more than {self.max_length} keys")
        raise CapReached()

    def receive_child(self, obj: Any) -> None:
        key = self._key
        if key is not _NO_KEY:
            self.items[key] = obj
            self._key = _NO_KEY
            return
        kind = type(obj)
        if kind is not _STR and kind is not _BYTES and (kind is not int or not -_MODULUS < obj < _MODULUS):
            self._track(obj, "dict key")
        try:
            present = obj in self.items
        except TypeError:
            raise InvalidValue(f"unhashable dict key of type {type(obj).__name__}") from None
        if present:
            raise InvalidValue(f"duplicate dict key {short_repr(obj)}")
        if len(self.items) >= self.cap:
            self.full()
        self._key = obj

    def expecting_key(self) -> bool:
        """True when the next child is a key (constraints pick key or value rules by this)."""
        return self._key is _NO_KEY

    def finish(self) -> Any:
        if self._key is not _NO_KEY:
            raise InvalidValue(f"dict closed after key {short_repr(self._key)} with no value")
        return self.items

    def child_where(self) -> str:
        if self._key is _NO_KEY:
            return f"<key {len(self.items)}>"
        return f"[{short_repr(self._key)}]"


BUILTIN_UNSLICERS: tuple[type[Unslicer], ...] = (
    ListUnslicer,
    TupleUnslicer,
    SetUnslicer,
    FrozenSetUnslicer,
    DictUnslicer,
)
