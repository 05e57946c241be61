"""Constraints: what a receiver accepts at each position of an object.

Contract: a constraint refuses a token at its header (C{check_header}, before
any body byte is kept) whenever the header alone proves it unacceptable:
the wrong kind, a body longer than allowed, a container of the wrong type.
What only the finished value can show (an int's range) is checked by
C{check_value}.  Containers hand each child position its own constraint, so
refusals say exactly where (C{"[3]['name']"}).  Constraints are immutable and
can be shared between decoders; a decoder keeps its position among them in a
L{ConstraintPath} (O(1) per token).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..errors import BodyTooLarge, InvalidValue, KindRefused, TooManyItems, Violation, short_repr
from ..wire import BIGINT, BIGNEG, BYTES, FLOAT, KIND_NAMES, OPEN, STRING


class Constraint:
    """Accepts anything the decoder's L{Limits} accept; the base of all constraints."""

    def check_header(self, kind: int, size: int) -> None:
        """Refuse, by raising a L{framing.Violation}, a body or OPEN header at this position."""

    def check_open(self, name: str) -> None:
        """Refuse a container of open-type C{name} at this position."""

    def child(self, unslicer: Any) -> Constraint:
        """The constraint for the next child of a container built under this one."""
        return ANY

    def check_value(self, obj: Any) -> None:
        """Refuse a finished value at this position."""

    def validate(self, obj: Any) -> None:
        """
        Check an object already in memory (an RPC argument, a result about
        to be sent) against this constraint, raising the L{framing.Violation}
        a decoder would have raised, with C{where} set.
        """
        self.check_value(obj)


ANY = Constraint()


def _refuse_kind(kind: int, wanted: str) -> KindRefused:
    return KindRefused(f"expected {wanted}, got a {KIND_NAMES.get(kind, kind)} token")


class ByteString(Constraint):
    """A C{bytes} value of at most C{max_length} bytes."""

    def __init__(self, max_length: int) -> None:
        self.max_length = max_length

    def check_header(self, kind: int, size: int) -> None:
        if kind != BYTES:
            raise _refuse_kind(kind, "bytes")
        if size > self.max_length:
            raise BodyTooLarge(f"bytes of {size} bytes, the limit here is {self.max_length}")

    def check_value(self, obj: Any) -> None:
        if type(obj) is not bytes:
            raise KindRefused(f"expected bytes, got {type(obj).__name__}")
        if len(obj) > self.max_length:
            raise BodyTooLarge(f"bytes of {len(obj)} bytes, the limit here is {self.max_length}")


class Text(Constraint):
    """A C{str} whose UTF-8 encoding is at most C{max_length} bytes."""

    def __init__(self, max_length: int) -> None:
        self.max_length = max_length

    def check_header(self, kind: int, size: int) -> None:
        if kind != STRING:
            raise _refuse_kind(kind, "a string")
        if size > self.max_length:
            raise BodyTooLarge(f"string of {size} bytes, the limit here is {self.max_length}")

    def check_value(self, obj: Any) -> None:
        if type(obj) is not str:
            raise KindRefused(f"expected a string, got {type(obj).__name__}")
        if len(obj) > self.max_length and len(obj.encode("utf-8", "surrogatepass")) > self.max_length:
            raise BodyTooLarge(f"string of more than {self.max_length} bytes")


class Integer(Constraint):
    """An C{int} (not a bool) between C{minimum} and C{maximum} inclusive."""

    def __init__(self, minimum: int | None = None, maximum: int | None = None, max_bytes: int = 64) -> None:
        self.minimum = minimum
        self.maximum = maximum
        self.max_bytes = max_bytes

    def check_header(self, kind: int, size: int) -> None:
        if kind not in (BIGINT, BIGNEG):
            raise _refuse_kind(kind, "an integer")
        if size > self.max_bytes:
            raise BodyTooLarge(f"integer of {size} bytes, the limit here is {self.max_bytes}")

    def check_value(self, obj: Any) -> None:
        if type(obj) is not int:
            raise KindRefused(f"expected an integer, got {type(obj).__name__}")
        if (self.minimum is not None and obj < self.minimum) or (self.maximum is not None and obj > self.maximum):
            raise InvalidValue(f"integer out of range [{self.minimum}, {self.maximum}]")


class Float(Constraint):
    """A C{float}."""

    def check_header(self, kind: int, size: int) -> None:
        if kind != FLOAT:
            raise _refuse_kind(kind, "a float")

    def check_value(self, obj: Any) -> None:
        if type(obj) is not float:
            raise KindRefused(f"expected a float, got {type(obj).__name__}")


class Boolean(Constraint):
    """C{True} or C{False}."""

    def check_header(self, kind: int, size: int) -> None:
        raise _refuse_kind(kind, "a bool")

    def check_value(self, obj: Any) -> None:
        if type(obj) is not bool:
            raise KindRefused(f"expected a bool, got {type(obj).__name__}")


class Optional(Constraint):
    """C{None} or whatever C{inner} accepts."""

    def __init__(self, inner: Constraint) -> None:
        self.inner = inner

    def check_header(self, kind: int, size: int) -> None:
        self.inner.check_header(kind, size)

    def check_open(self, name: str) -> None:
        self.inner.check_open(name)

    def child(self, unslicer: Any) -> Constraint:
        return self.inner.child(unslicer)

    def check_value(self, obj: Any) -> None:
        if obj is not None:
            self.inner.check_value(obj)

    def validate(self, obj: Any) -> None:
        if obj is not None:
            self.inner.validate(obj)


class _Container(Constraint):
    open_types: tuple[str, ...] = ()
    python_types: tuple[type, ...] = ()

    def __init__(self, max_items: int) -> None:
        self.max_items = max_items

    def check_header(self, kind: int, size: int) -> None:
        if kind != OPEN:
            raise _refuse_kind(kind, " or ".join(self.open_types))

    def check_open(self, name: str) -> None:
        if name not in self.open_types:
            raise KindRefused(f"expected {' or '.join(self.open_types)}, got {name!r}")

    def check_value(self, obj: Any) -> None:
        # Value tokens (ints, None, bools) have no header to refuse early.
        if type(obj) not in self.python_types:
            raise KindRefused(f"expected {' or '.join(self.open_types)}, got {type(obj).__name__}")

    def validate(self, obj: Any) -> None:
        self.check_value(obj)
        if len(obj) > self.max_items:
            raise TooManyItems(f"more than {self.max_items} items here")
        for where, child, item in self._children(obj):
            try:
                child.validate(item)
            except Violation as violation:
                violation.where = where + violation.where
                raise

    def _children(self, obj: Any) -> Iterator[tuple[str, Constraint, Any]]:
        raise NotImplementedError

    def _check_count(self, count: int) -> None:
        if count >= self.max_items:
            raise TooManyItems(f"more than {self.max_items} items here")


class ListOf(_Container):
    """A C{list} of at most C{max_items} items, each accepted by C{item}."""

    open_types: tuple[str, ...] = ("list",)
    python_types: tuple[type, ...] = (list,)

    def __init__(self, item: Constraint, max_items: int = 1024) -> None:
        super().__init__(max_items)
        self.item = item

    def child(self, unslicer: Any) -> Constraint:
        self._check_count(len(unslicer.items))
        return self.item

    def _children(self, obj: Any) -> Iterator[tuple[str, Constraint, Any]]:
        for index, item in enumerate(obj):
            yield f"[{index}]", self.item, item


class SetOf(ListOf):
    """A C{set} or C{frozenset} of at most C{max_items} members, each accepted by C{item}."""

    open_types = ("set", "frozenset")
    python_types = (set, frozenset)


class TupleOf(_Container):
    """A C{tuple} with exactly one item per given constraint."""

    open_types = ("tuple",)
    python_types = (tuple,)

    def __init__(self, *items: Constraint) -> None:
        super().__init__(len(items))
        self.items = items

    def child(self, unslicer: Any) -> Constraint:
        index = len(unslicer.items)
        self._check_count(index)
        return self.items[index]

    def _children(self, obj: Any) -> Iterator[tuple[str, Constraint, Any]]:
        for index, (constraint, item) in enumerate(zip(self.items, obj, strict=True)):
            yield f"[{index}]", constraint, item

    def check_value(self, obj: Any) -> None:
        super().check_value(obj)
        if len(obj) != len(self.items):
            raise InvalidValue(f"expected a tuple of {len(self.items)} items, got {len(obj)}")


class DictOf(_Container):
    """A C{dict} of at most C{max_items} keys; keys accepted by C{key}, values by C{value}."""

    open_types = ("dict",)
    python_types = (dict,)

    def __init__(self, key: Constraint, value: Constraint, max_items: int = 1024) -> None:
        super().__init__(max_items)
        self.key = key
        self.value = value

    def child(self, unslicer: Any) -> Constraint:
        if unslicer.expecting_key():
            self._check_count(len(unslicer.items))
            return self.key
        return self.value

    def _children(self, obj: Any) -> Iterator[tuple[str, Constraint, Any]]:
        for key, item in obj.items():
            yield f"<key {short_repr(key)}>", self.key, key
            yield f"[{short_repr(key)}]", self.value, item


class ConstraintPath:
    """
    The constraints in force along the open containers of the object a
    decoder is building: the root one for a top-level value, then each open
    container's constraint, which hands its next child a constraint of its
    own.  (Constraints are immutable; this is one decoder's position.)

    @ivar root: what each top-level object must satisfy.
    """

    def __init__(self, root: Constraint) -> None:
        self.root = root
        self._open: list[Constraint] = []
        self._opening: Constraint | None = None

    def next(self, stack: list[Any]) -> Constraint:
        """The constraint of the next child of C{stack}'s innermost unslicer (or of the next top-level object)."""
        if not stack:
            return self.root
        return self._open[-1].child(stack[-1])

    def check_header(self, kind: int, size: int, stack: list[Any]) -> None:
        """Check a body or OPEN header at the next position; an OPEN's constraint waits for its name."""
        constraint = self.next(stack)
        constraint.check_header(kind, size)
        if kind == OPEN:
            self._opening = constraint

    def check_value(self, obj: Any, stack: list[Any]) -> None:
        """Check a finished value at the next position."""
        self.next(stack).check_value(obj)

    def opened(self, name: str) -> None:
        """The OPEN whose header was checked names C{name}: check it, and make its constraint the innermost."""
        opening = self._opening
        if opening is not None:
            opening.check_open(name)
            self._open.append(opening)
            self._opening = None

    def closed(self) -> None:
        """The innermost container closed."""
        if self._open:
            self._open.pop()

    def reset(self) -> None:
        """The object being built was dropped."""
        self._open.clear()
        self._opening = None
