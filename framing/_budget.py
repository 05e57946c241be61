# -*- test-case-name: tests.framing.test_costs,tests.protocols.rpc.test_call_ledger -*-
"""ObjectBudget: what one top-level object being decoded may cost.

Contract: the values in a top-level object, and the memory it will hold
beyond its wire bytes, are counted as it is built (each container's own size
from its OPEN, then per item a slot and a small allowance for the item's
object, plus a set's or dict's hash tracker), and the object is over budget
past C{Limits.max_object_items} items or C{Limits.max_object_memory} bytes,
or past a lower allowance its decoder was given for it (L{ObjectBudget.restrict}:
what the connection still has room for).
For the built-in containers the count costs nothing per item: it is settled
at checkpoints (each OPEN and CLOSE, and when a container reaches the cap on
its length that the last checkpoint gave it from what was left of the
budget), so a scalar still costs the decoder one handler call and one
unslicer call.  The children of other unslicers (user types) are counted one
by one on their way in (L{ObjectBudget.receive_counted}), at one more call
each.  Each checkpoint is O(1).  Worst-case costs per wire byte, per type:
C{docs/costs.md}.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from sys import getsizeof
from typing import TYPE_CHECKING, Any

from ._errors import ObjectTooCostly, ResourceExhausted, TooManyItems, Violation

if TYPE_CHECKING:
    from .slicing._registry import Registry
from ._limits import Limits

DEFAULT_OPEN_COST = 64
"""Bytes charged at the OPEN of an unslicer that declares no C{open_cost}."""
DEFAULT_ITEM_COST = 56
"""Bytes charged per child of an unslicer outside the budget."""


class ObjectBudget:
    """
    The running count of one decoder's top-level object.

    @ivar items: items of the object being built, as of the last checkpoint.
    @ivar cost: its estimated bytes beyond its wire bytes, as of the last
        checkpoint.
    @ivar innermost_budgeted: whether the innermost open container keeps the
        count itself (a built-in one, with C{items}, C{cap}, C{settled} and
        C{extra}).
    @ivar limit: C{Limits.max_object_memory}.
    @ivar max_memory: what the object being built may cost: C{limit}, or
        less while an allowance (L{restrict}) bounds it; back to C{limit}
        at the next top-level object.
    """

    __slots__ = ("_stack", "cost", "innermost_budgeted", "items", "limit", "max_items", "max_memory")

    def __init__(self, limits: Limits, stack: list[Any]) -> None:
        self.items = 0
        self.cost = 0
        self.innermost_budgeted = False
        self.max_items = limits.max_object_items
        self.max_memory = self.limit = limits.max_object_memory
        self._stack = stack

    def reset(self) -> None:
        """Nothing is being built any more."""
        self.items = self.cost = 0
        self.innermost_budgeted = False
        self.max_memory = self.limit

    def settled_cost(self) -> int:
        """
        What the object being built costs now: L{cost} with what the
        innermost container gained since its last checkpoint settled.  O(1).
        """
        if self.innermost_budgeted:
            self.settle(self._stack[-1])
        return self.cost

    def restrict(self, allowance: int) -> None:
        """
        Let the object being built cost at most C{allowance} (never more
        than L{limit}) from now until it ends: its innermost container is
        checkpointed now, capped by what is left, so that it is checked
        against the allowance where it is checked against the limit.

        @raise Violation: it costs more already (L{ResourceExhausted}, or
            what L{over_budget} says when a limit is passed).
        """
        self.max_memory = allowance if allowance < self.limit else self.limit
        if self.innermost_budgeted:
            self.checkpoint()
        elif self.cost > self.max_memory:
            raise self.over_budget()

    def top_terms(self, unslicer: Any) -> tuple[int, int]:
        """
        The cost and the cap of a budgeted unslicer's class when it opens a
        top-level object (class attributes: the same for all its instances;
        the decoder charges them at each top-level OPEN).
        """
        cost: int = unslicer.open_cost
        cap = min(self.max_items, (self.limit - cost) // unslicer.worst_item_cost)
        return cost, max(cap, 0)

    def open_nested(self, unslicer: Any, budgeted: bool) -> bool:
        """
        Checkpoint at a nested OPEN: settle the parent (it stops growing
        while this child is open), charge the child's own size and give it a
        cap; return True if the object is now over budget.  (L{settle} and
        C{allow} written out: this runs for every container.)
        """
        items, cost = self.items, self.cost
        if self.innermost_budgeted:
            parent = self._stack[-1]
            length = len(parent.items)
            if length != parent.settled:
                items += length - parent.settled
                cost += (length - parent.settled) * parent.item_cost
                parent.settled = length
            if parent.extra:
                cost += parent.extra
                parent.extra = 0
        if budgeted:
            cost += unslicer.open_cost
            more = (self.max_memory - cost) // unslicer.worst_item_cost
            left = self.max_items - items
            more = left if left < more else more
            if more < unslicer.cap:
                unslicer.cap = more if more > 0 else 0
        else:
            cost += getattr(unslicer, "open_cost", DEFAULT_OPEN_COST)
        self.items, self.cost = items, cost
        self.innermost_budgeted = budgeted
        return items > self.max_items or cost > self.max_memory

    def settle(self, unslicer: Any) -> None:
        """Charge what a built-in container gained since its last checkpoint."""
        length = len(unslicer.items)
        gained = length - unslicer.settled
        if gained:
            unslicer.settled = length
            self.items += gained
            self.cost += gained * unslicer.item_cost
        if unslicer.extra:
            self.cost += unslicer.extra
            unslicer.extra = 0

    def checkpoint(self) -> None:
        """
        Settle the innermost container; give it a cap from what is left of
        the budget.

        @raise Violation: the object is over budget.
        """
        top = self._stack[-1]
        self.settle(top)
        items_left = self.max_items - self.items
        memory_left = self.max_memory - self.cost
        if items_left < 0 or memory_left < 0:
            raise self.over_budget()
        top.allow(items_left, memory_left)

    def recap(self) -> None:
        """
        The innermost container reached its cap: checkpoint, and let it take
        at least one more item (at the memory budget's edge: that one, then
        the next checkpoint), unless the object has all its items already.

        @raise Violation: the object is over budget.
        """
        self.checkpoint()
        top = self._stack[-1]
        if top.cap <= len(top.items):
            if self.items >= self.max_items:
                # The item on its way would be one too many: the count is exact.
                raise TooManyItems(f"object has more than {self.max_items} items in all")
            top.cap = len(top.items) + 1

    def closed_child(self, unslicer: Any, parent: Any, parent_budgeted: bool) -> bool:
        """
        Checkpoint at the CLOSE of a child container: settle it, recap its
        parent (the child spent budget the parent's cap assumed); return
        True if the object is over budget.  (L{settle} and C{allow} written
        out: this runs for every container.)
        """
        items, cost = self.items, self.cost
        try:  # (getattr with a default costs a call)
            budgeted = unslicer.budgeted
        except AttributeError:
            budgeted = False
        if budgeted:
            length = len(unslicer.items)
            items += length - unslicer.settled
            cost += (length - unslicer.settled) * unslicer.item_cost + unslicer.extra
            self.items, self.cost = items, cost
        self.innermost_budgeted = parent_budgeted
        if items > self.max_items or cost > self.max_memory:
            return True
        if parent_budgeted:
            more = (self.max_memory - cost) // parent.worst_item_cost
            left = self.max_items - items
            more = len(parent.items) + (left if left < more else more)
            parent.cap = more if more < parent.max_length else parent.max_length
        return False

    def receive_counted(self, obj: Any) -> None:
        """
        Deliver a child to an unslicer outside the budget (a user type),
        counting it on the way: such unslicers keep no cap.

        @raise Violation: the object is over budget.
        """
        self.items += 1
        self.cost += DEFAULT_ITEM_COST
        if self.items > self.max_items or self.cost > self.max_memory:
            raise self.over_budget()
        self._stack[-1].receive_child(obj)

    def over_budget(self) -> Violation:
        """The refusal of an object over budget: over a limit, or over the allowance below them (L{restrict})."""
        if self.items > self.max_items:
            return TooManyItems(f"object has more than {self.max_items} items in all")
        if self.cost <= self.limit:
            return ResourceExhausted(
                f"object would hold more than the {self.max_memory} bytes beyond its wire bytes (estimated) "
                "its connection has room for now"
            )
        return ObjectTooCostly(f"object would hold more than {self.limit} bytes beyond its wire bytes (estimated)")


_LEAF_SIZE: dict[type, Callable[[Any], int]] = {
    int: int.__sizeof__,
    float: float.__sizeof__,
    bool: bool.__sizeof__,
    type(None): object.__sizeof__,
    complex: complex.__sizeof__,
    str: str.__sizeof__,
    bytes: bytes.__sizeof__,
}
"""Kinds that hold no other object, each with its C{__sizeof__}: all they hold (their C{getsizeof}, as
none is tracked by the collector, called without C{getsizeof}'s lookup, which costs some ten times more)."""
_LEAVES = frozenset(_LEAF_SIZE)
_SEQUENCES = frozenset({list, tuple, set, frozenset})


def held_bytes(values: Iterable[Any], registry: Registry | None = None) -> int:
    """
    An estimate of the memory C{values} hold, for a layer that keeps a
    decoded value (a running call's arguments, a stream's items, a
    service's table) and charges or bounds it by what it holds:
    C{sys.getsizeof} of every object reached (a container's own size with
    its slots, each item's object, a buffer's bytes; an object of a type
    C{registry} sends through a C{to_wire} function, a dataclass, with its
    attribute dict and what that holds).  Any other object (a reference, a
    stream reader: one the connection made and holds, not one the peer's
    value built) is counted by its own size, not walked: what it reaches
    (the broker, the connection) is not held for this value.  Unlike
    L{framing.rpc._streams.leastEncodedLength} (which counts what the wire
    carried, a small int 1) it counts what a value costs here: a list of a
    million ints about 36 MB, not 1 MB.  A value reached twice is counted
    twice (an estimate from above); a container already counted is not
    walked again (no cycle walks for ever).  O(the objects reached), a
    container of leaves (and C{values} all leaves) counted without a Python
    step per item.
    """
    pending = values if type(values) in (list, tuple) else list(values)
    kinds = set(map(type, pending))
    if kinds <= _LEAVES:
        # (values of leaves only, a stream ITEM of small items most often: no Python step per value)
        return _leaf_bytes(pending, kinds)
    total = 0
    pending = list(pending)
    pop, extend = pending.pop, pending.extend
    walked: set[int] = set()
    while pending:
        value = pop()
        kind = type(value)
        if kind in _LEAVES:
            total += _LEAF_SIZE[kind](value)
            continue
        if id(value) in walked:
            continue
        walked.add(id(value))
        total += getsizeof(value)
        if kind in _SEQUENCES:
            kinds = set(map(type, value))
            if kinds <= _LEAVES:
                total += _leaf_bytes(value, kinds)
            else:
                extend(value)
        elif kind is dict:
            extend(value.keys())
            extend(value.values())
        else:
            try:
                with memoryview(value) as view:
                    # (a memoryview's size leaves out what it shows; an array's or bytearray's includes it)
                    if kind is memoryview:
                        total += view.nbytes
                    continue
            except TypeError:
                pass
            if isinstance(value, dict):
                extend(value.keys())
                extend(value.values())
            elif isinstance(value, (list, tuple, set, frozenset)):
                extend(value)
            elif registry is not None and getattr(registry.slicer_for(kind), "to_wire", None) is not None:
                state = getattr(value, "__dict__", None)
                if type(state) is dict:
                    pending.append(state)
                else:  # (slots: the state it sends, which is what they hold)
                    try:
                        pending.append(registry.slicer_for(kind).to_wire(value))
                    except Exception:
                        pass
    return total


def _leaf_bytes(values: Iterable[Any], kinds: set[type]) -> int:
    """What C{values}, all of the leaf C{kinds}, hold: one kind's C{__sizeof__} over them all, else C{getsizeof}."""
    if len(kinds) == 1:
        return sum(map(_LEAF_SIZE[next(iter(kinds))], values))
    return sum(map(getsizeof, values))
