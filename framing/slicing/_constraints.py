# -*- test-case-name: tests.framing.test_constraints,tests.framing.test_constraints_more,tests.framing.test_recovery -*-
"""Constraints: what a receiver accepts at each position of an object.

Contract: a constraint refuses a token at its header (C{check_header}, before
any body byte is kept) whenever the header alone proves it unacceptable:
the wrong kind, a body longer than allowed, a container of the wrong type.
What only the finished value can show (an int's range, a float's range, a
pattern on text, a container's minimum item count) is checked by
C{check_value}, once the value is built.  Each class's docstring says which
of its checks happen where.  Containers hand each child position its own constraint, so
refusals say exactly where (C{"[3]['name']"}).  Constraints are immutable and
can be shared between decoders; a decoder keeps its position among them in a
L{ConstraintPath} (O(1) per token).
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterator, Mapping
from typing import Any

from .._errors import BodyTooLarge, InvalidValue, KindRefused, TooManyItems, Violation, short_repr
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


def _too_short(what: str, size: int, min_length: int) -> InvalidValue:
    return InvalidValue(f"{what} of {size} bytes, at least {min_length} are needed here")


class ByteString(Constraint):
    """
    A C{bytes} value of C{min_length} to C{max_length} bytes.

    Both lengths are checked at the BYTES header, before any body byte is
    kept.
    """

    def __init__(self, max_length: int, min_length: int = 0) -> None:
        self.max_length = max_length
        self.min_length = min_length

    def check_header(self, kind: int, size: int) -> None:
        if kind != BYTES:
            raise _refuse_kind(kind, "bytes")
        if size > self.max_length:
            raise BodyTooLarge(f"bytes of {size} bytes, the limit here is {self.max_length}")
        if size < self.min_length:
            raise _too_short("bytes", size, self.min_length)

    def check_value(self, obj: Any) -> None:
        if type(obj) is not bytes:
            raise KindRefused(f"expected bytes, got {type(obj).__name__}")
        if len(obj) > self.max_length:
            raise BodyTooLarge(f"bytes of {len(obj)} bytes, the limit here is {self.max_length}")
        if len(obj) < self.min_length:
            raise _too_short("bytes", len(obj), self.min_length)


class Text(Constraint):
    """
    A C{str} whose UTF-8 encoding is C{min_length} to C{max_length} bytes,
    and, given a C{pattern}, that the regular expression matches whole
    (C{re.fullmatch}).

    Both lengths are checked at the STRING header, before any body byte is
    kept (they count UTF-8 bytes, which is what the header carries); the
    pattern is matched once the string is decoded.
    """

    def __init__(self, max_length: int, min_length: int = 0, pattern: str | re.Pattern[str] | None = None) -> None:
        self.max_length = max_length
        self.min_length = min_length
        self.pattern = re.compile(pattern) if isinstance(pattern, str) else pattern

    def check_header(self, kind: int, size: int) -> None:
        if kind != STRING:
            raise _refuse_kind(kind, "a string")
        if size > self.max_length:
            raise BodyTooLarge(f"string of {size} bytes, the limit here is {self.max_length}")
        if size < self.min_length:
            raise _too_short("string", size, self.min_length)

    def check_value(self, obj: Any) -> None:
        if type(obj) is not str:
            raise KindRefused(f"expected a string, got {type(obj).__name__}")
        # A character is one to four UTF-8 bytes: only non-ASCII text of a quarter to all of
        # max_length characters needs encoding (isascii reads a flag CPython keeps: O(1), no copy).
        size, most = len(obj), self.max_length
        if size > most or (size * 4 > most and not obj.isascii() and len(obj.encode("utf-8", "surrogatepass")) > most):
            raise BodyTooLarge(f"string of more than {self.max_length} bytes")
        # A character is at least one UTF-8 byte: only short strings need encoding.
        if len(obj) < self.min_length:
            size = len(obj.encode("utf-8", "surrogatepass"))
            if size < self.min_length:
                raise _too_short("string", size, self.min_length)
        if self.pattern is not None and self.pattern.fullmatch(obj) is None:
            raise InvalidValue(f"string {short_repr(obj)} does not match {short_repr(self.pattern.pattern)}")


class Integer(Constraint):
    """
    An C{int} (not a bool) between C{minimum} and C{maximum} inclusive.

    A big integer's kind and size (C{max_bytes}) are checked at its header,
    before its body is kept; a small one is a value token, with no header;
    the range is checked once the value is decoded.
    """

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
    """
    A C{float} between C{minimum} and C{maximum} inclusive (either may be
    C{None}: no bound).  With a bound, NaN is refused (it is in no range).

    The kind is checked at the FLOAT header; the range once its 8-byte body
    is decoded (the header carries no value).
    """

    def __init__(self, minimum: float | None = None, maximum: float | None = None) -> None:
        self.minimum = minimum
        self.maximum = maximum

    def check_header(self, kind: int, size: int) -> None:
        if kind != FLOAT:
            raise _refuse_kind(kind, "a float")

    def check_value(self, obj: Any) -> None:
        if type(obj) is not float:
            raise KindRefused(f"expected a float, got {type(obj).__name__}")
        low, high = self.minimum, self.maximum
        if (low is not None and not obj >= low) or (high is not None and not obj <= high):
            raise InvalidValue(f"float {obj!r} out of range [{low}, {high}]")


class Boolean(Constraint):
    """
    C{True} or C{False}: value tokens, which have no header, so any header
    at this position is refused at once.
    """

    def check_header(self, kind: int, size: int) -> None:
        raise _refuse_kind(kind, "a bool")

    def check_value(self, obj: Any) -> None:
        if type(obj) is not bool:
            raise KindRefused(f"expected a bool, got {type(obj).__name__}")


class Optional(Constraint):
    """
    C{None} or whatever C{inner} accepts, checked where C{inner} checks it
    (C{None} is a value token, with no header).
    """

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

    def __init__(self, max_items: int, min_items: int = 0) -> None:
        self.max_items = max_items
        self.min_items = min_items

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
        if len(obj) < self.min_items:
            raise InvalidValue(f"{len(obj)} items, at least {self.min_items} are needed here")

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
    """
    A C{list} of C{min_items} to C{max_items} items, each accepted by C{item}.

    The kind is checked at the OPEN header, each item past C{max_items} at
    its own header (before its body is kept), C{min_items} at the CLOSE.
    """

    open_types: tuple[str, ...] = ("list",)
    python_types: tuple[type, ...] = (list,)

    def __init__(self, item: Constraint, max_items: int = 1024, min_items: int = 0) -> None:
        super().__init__(max_items, min_items)
        self.item = item

    def child(self, unslicer: Any) -> Constraint:
        self._check_count(len(unslicer.items))
        return self.item

    def _children(self, obj: Any) -> Iterator[tuple[str, Constraint, Any]]:
        for index, item in enumerate(obj):
            yield f"[{index}]", self.item, item


class SetOf(ListOf):
    """
    A C{set} or C{frozenset} of C{min_items} to C{max_items} members, each
    accepted by C{item}; checked as L{ListOf}.
    """

    open_types = ("set", "frozenset")
    python_types = (set, frozenset)


class SequenceOf(ListOf):
    """
    A C{tuple} of any length from C{min_items} to C{max_items}, each item
    accepted by C{item} (C{tuple[int, ...]}); checked as L{ListOf}.  For a
    tuple with one constraint per position, use L{TupleOf}.
    """

    open_types = ("tuple",)
    python_types = (tuple,)


class TupleOf(_Container):
    """
    A C{tuple} with exactly one item per given constraint.

    The kind is checked at the OPEN header, an item past the last
    constraint at its own header, too few items at the CLOSE.
    """

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
    """
    A C{dict} of C{min_items} to C{max_items} keys; keys accepted by C{key},
    values by C{value}; checked as L{ListOf}.
    """

    open_types = ("dict",)
    python_types = (dict,)

    def __init__(self, key: Constraint, value: Constraint, max_items: int = 1024, min_items: int = 0) -> None:
        super().__init__(max_items, min_items)
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


class IsNone(Constraint):
    """
    C{None} only (a method's C{-> None}).  None is a value token with no
    header of its own, so any header at this position is refused at once.
    """

    def check_header(self, kind: int, size: int) -> None:
        raise _refuse_kind(kind, "None")

    def check_value(self, obj: Any) -> None:
        if obj is not None:
            raise KindRefused(f"expected None, got {type(obj).__name__}")


_KIND_OF_VALUE: dict[type, tuple[int, ...]] = {
    str: (STRING,),
    bytes: (BYTES,),
    float: (FLOAT,),
    int: (BIGINT, BIGNEG),  # small ints and bools are value tokens: no header
    bool: (),
    type(None): (),
}


class OneOf(Constraint):
    """
    One of the given values (C{Literal["get", "put"]}), of the same type as
    the value it equals (so C{1} does not pass for C{True}).  Values are
    C{str}, C{bytes}, C{int}, C{float}, C{bool} or C{None}.

    The kind and the longest allowed body are checked at the header; the
    value itself once decoded.
    """

    def __init__(self, *values: Hashable) -> None:
        if not values:
            raise ValueError("OneOf needs at least one value")
        sizes: dict[int, int] = {}
        for value in values:
            kinds = _KIND_OF_VALUE.get(type(value))
            if kinds is None:
                raise TypeError(f"OneOf takes str, bytes, int, float, bool or None values, not {type(value).__name__}")
            size = len(value.encode("utf-8", "surrogatepass")) if isinstance(value, str) else 8
            if isinstance(value, bytes):
                size = len(value)
            elif isinstance(value, int):
                size = (abs(value).bit_length() + 7) // 8
            for kind in kinds:
                sizes[kind] = max(sizes.get(kind, 0), size)
        self.values = values
        self._members = frozenset((type(value), value) for value in values)
        self._sizes = sizes

    def check_header(self, kind: int, size: int) -> None:
        longest = self._sizes.get(kind)
        if longest is None:
            raise _refuse_kind(kind, f"one of {short_repr(self.values)}")
        if size > longest:
            raise BodyTooLarge(f"a body of {size} bytes, none of {short_repr(self.values)} is that long")

    def check_value(self, obj: Any) -> None:
        try:
            found = (type(obj), obj) in self._members
        except TypeError:  # unhashable: a container
            found = False
        if not found:
            raise InvalidValue(f"{short_repr(obj)} is not one of {short_repr(self.values)}")


class InstanceOf(Constraint):
    """
    An instance of C{cls}, a type sent as an open type of its own (see
    L{framing.register}), whose attributes named in C{fields} satisfy their
    constraints (a dataclass's fields).

    At the header only the kind is checked (a registered type is always an
    OPEN); the class and the fields once the object is built.
    """

    def __init__(self, cls: type, fields: Mapping[str, Constraint] | None = None) -> None:
        self.cls = cls
        self.fields = dict(fields or {})

    def check_header(self, kind: int, size: int) -> None:
        if kind != OPEN:
            raise _refuse_kind(kind, self.cls.__name__)

    def check_value(self, obj: Any) -> None:
        if not isinstance(obj, self.cls):
            raise KindRefused(f"expected {self.cls.__name__}, got {type(obj).__name__}")
        for name, constraint in self.fields.items():
            try:
                constraint.validate(getattr(obj, name))
            except Violation as violation:
                violation.where = f".{name}{violation.where}"
                raise


def _best(errors: list[Violation]) -> Violation:
    """Of several alternatives' refusals, the one that says most: a wrong kind says least."""
    for error in errors:
        if not isinstance(error, KindRefused):
            return error
    return errors[0]


class ChoiceOf(Constraint):
    """
    Whatever one of the C{alternatives} accepts (a union, C{int | str}).

    At each header, the header is refused only if every alternative refuses
    it; inside a container, each child is checked against the alternatives
    that accepted the container's open type.  Once the value is built it
    must pass one alternative's C{check_value}; when several alternatives
    took the same open type (C{list[int] | list[str]}), their children were
    checked against any of them, so the finished container is validated
    whole against each until one accepts it.  An unambiguous union costs one
    check per alternative per position.
    """

    def __init__(self, *alternatives: Constraint) -> None:
        if not alternatives:
            raise ValueError("ChoiceOf needs at least one alternative")
        self.alternatives = alternatives

    def check_header(self, kind: int, size: int) -> None:
        errors: list[Violation] = []
        for alternative in self.alternatives:
            try:
                alternative.check_header(kind, size)
                return
            except Violation as error:
                errors.append(error)
        raise _best(errors)

    def _opening(self, name: str | None) -> tuple[list[Constraint], list[Violation]]:
        accepted: list[Constraint] = []
        errors: list[Violation] = []
        for alternative in self.alternatives:
            try:
                alternative.check_header(OPEN, 0)
                if name is not None:
                    alternative.check_open(name)
            except Violation as error:
                errors.append(error)
            else:
                accepted.append(alternative)
        return accepted, errors

    def check_open(self, name: str) -> None:
        accepted, errors = self._opening(name)
        if not accepted:
            raise _best(errors)

    def child(self, unslicer: Any) -> Constraint:
        accepted, errors = self._opening(getattr(unslicer, "open_type", None))
        children: list[Constraint] = []
        for alternative in accepted:
            try:
                children.append(alternative.child(unslicer))
            except Violation as error:
                errors.append(error)
        if not children:
            raise _best(errors)
        return children[0] if len(children) == 1 else ChoiceOf(*children)

    def check_value(self, obj: Any) -> None:
        passing = 0
        typed = 0  # alternatives that took the value's type, whether or not they passed it
        errors: list[Violation] = []
        for alternative in self.alternatives:
            try:
                alternative.check_value(obj)
            except Violation as error:
                errors.append(error)
                typed += not isinstance(error, KindRefused)
            else:
                passing += 1
                typed += 1
        if not passing:
            raise _best(errors)
        if typed > 1 and isinstance(obj, (list, tuple, dict, set, frozenset)):
            # Its children were checked against any of these alternatives.
            self.validate(obj)

    def validate(self, obj: Any) -> None:
        errors: list[Violation] = []
        for alternative in self.alternatives:
            try:
                alternative.validate(obj)
                return
            except Violation as error:
                errors.append(error)
        raise _best(errors)


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
