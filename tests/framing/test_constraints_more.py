"""
Tests for the constraints added for typed RPC: L{ChoiceOf}, L{OneOf},
L{IsNone}, L{InstanceOf}, L{SequenceOf}, minimum lengths, patterns on text
and float ranges, each refused where its docstring says (at the header when
the header can tell).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import framing
from framing import Decoder
from framing._errors import BodyTooLarge, InvalidValue, KindRefused, TooManyItems
from framing._limits import MiB
from framing.slicing._constraints import (
    ByteString,
    ChoiceOf,
    DictOf,
    Float,
    InstanceOf,
    Integer,
    IsNone,
    ListOf,
    OneOf,
    SequenceOf,
    SetOf,
    Text,
)
from framing.slicing._registry import DEFAULT_REGISTRY, Registry
from framing.wire import BYTES, PREAMBLE, STRING, encode_header

from .test_constraints import ConstraintTestCase


def refused_at_header(constraint: Any, kind: int, size: int) -> list[Any]:
    """Feed only a header of C{size} announced bytes; what the decoder says before any body byte."""
    return Decoder(constraint=constraint).feed(PREAMBLE + encode_header(kind, size))


class MinimumLengthTests(ConstraintTestCase):
    """Minimum lengths of bytes and text are checked at the header; of containers at the CLOSE."""

    def test_bytes_minimum(self) -> None:
        """ByteString(max, min) refuses shorter bytes with InvalidValue and accepts the bounds."""
        self.assertAccepts(ByteString(5, min_length=2), b"ab", b"abcde")
        self.assertRefuses(ByteString(5, min_length=2), b"a", InvalidValue)

    def test_text_maximum_validated_in_utf8_bytes(self) -> None:
        """Text(max).validate (what checks an RPC argument) counts UTF-8 bytes as the header does, not characters."""
        self.assertRaises(BodyTooLarge, Text(6).validate, "\u20ac\u20ac\u20ac")
        self.assertRaises(BodyTooLarge, Text(6).validate, "abcdefg")
        self.assertRaises(BodyTooLarge, Text(1024).validate, "\u00e9" * 1000)
        Text(6).validate("\u20ac\u20ac")
        Text(6).validate("\U0001f600")

    def test_text_minimum_counts_utf8_bytes(self) -> None:
        """Text(max, min) counts UTF-8 bytes, as the header does: one euro sign is three bytes."""
        self.assertAccepts(Text(10, min_length=3), "abc", "\u20ac")
        self.assertRefuses(Text(10, min_length=3), "ab", InvalidValue)
        self.assertRaises(InvalidValue, Text(10, min_length=3).validate, "ab")
        Text(10, min_length=3).validate("\u20ac")

    def test_short_body_refused_at_header(self) -> None:
        """A too-short string or bytes is refused when its header arrives, before its body."""
        for constraint, kind in ((Text(10, min_length=4), STRING), (ByteString(10, min_length=4), BYTES)):
            results = refused_at_header(constraint, kind, 3)
            self.assertEqual(len(results), 1)
            self.assertIsInstance(results[0], InvalidValue)

    def test_container_minimum(self) -> None:
        """ListOf, SetOf, SequenceOf and DictOf refuse fewer than min_items items."""
        self.assertAccepts(ListOf(Integer(), min_items=2), [1, 2])
        self.assertRefuses(ListOf(Integer(), min_items=2), [1], InvalidValue)
        self.assertRefuses(SetOf(Integer(), min_items=1), set(), InvalidValue)
        self.assertRefuses(SequenceOf(Integer(), min_items=1), (), InvalidValue)
        self.assertRefuses(DictOf(Text(5), Integer(), min_items=1), {}, InvalidValue)


class SequenceOfTests(ConstraintTestCase):
    """SequenceOf is a tuple of any length."""

    def test_sequence(self) -> None:
        """SequenceOf(Integer()) takes tuples of ints of any length, and refuses lists and bad items."""
        self.assertAccepts(SequenceOf(Integer()), (), (1, 2, 3))
        self.assertRefuses(SequenceOf(Integer()), [1], KindRefused)
        self.assertRefuses(SequenceOf(Integer()), (1, "x"), KindRefused, "[1]")
        self.assertRefuses(SequenceOf(Integer(), max_items=2), (1, 2, 3), TooManyItems, "[2]")


class PatternTests(ConstraintTestCase):
    """Text's pattern must match the whole decoded string."""

    def test_pattern(self) -> None:
        """Text(n, pattern=...) accepts full matches only, from the wire and in validate."""
        constraint = Text(20, pattern=r"[a-z]+")
        self.assertAccepts(constraint, "abc")
        self.assertRefuses(constraint, "abc1", InvalidValue)
        self.assertRefuses(constraint, "", InvalidValue)
        self.assertRaises(InvalidValue, constraint.validate, "ABC")

    def test_length_checked_before_pattern(self) -> None:
        """A string over the limit is refused at its header even if the pattern would match it."""
        results = refused_at_header(Text(4, pattern=r".*"), STRING, 64 * MiB)
        self.assertIsInstance(results[0], BodyTooLarge)


class FloatRangeTests(ConstraintTestCase):
    """Float's range is checked once the value is decoded."""

    def test_range(self) -> None:
        """Float(0.0, 1.0) accepts the bounds and refuses values outside them, and NaN."""
        self.assertAccepts(Float(0.0, 1.0), 0.0, 0.5, 1.0)
        self.assertRefuses(Float(0.0, 1.0), 1.5, InvalidValue)
        self.assertRefuses(Float(minimum=0.0), -0.5, InvalidValue)
        self.assertRefuses(Float(maximum=0.0), float("nan"), InvalidValue)
        self.assertRefuses(Float(0.0, 1.0), 1, KindRefused)

    def test_no_bounds_accept_nan(self) -> None:
        """An unbounded Float still accepts NaN and infinities."""
        self.assertEqual(len(Decoder(constraint=Float()).feed(framing.dumps(float("nan")))), 1)
        self.assertAccepts(Float(), float("inf"))


class OneOfTests(ConstraintTestCase):
    """OneOf is a Literal: one of the given values, of the same type."""

    def test_values(self) -> None:
        """OneOf accepts its values and refuses others, including equal values of another type."""
        constraint = OneOf("get", "put", 1, None)
        self.assertAccepts(constraint, "get", "put", 1, None)
        self.assertRefuses(constraint, "pot", InvalidValue)
        self.assertRefuses(constraint, True, InvalidValue)
        self.assertRefuses(constraint, 1.0, KindRefused)
        self.assertRefuses(constraint, [1], KindRefused)

    def test_long_body_refused_at_header(self) -> None:
        """A string longer than every allowed value is refused at its header."""
        results = refused_at_header(OneOf("get", "put"), STRING, 64 * MiB)
        self.assertIsInstance(results[0], BodyTooLarge)

    def test_bad_values(self) -> None:
        """OneOf refuses to be made with no values or a value that is not an atom."""
        self.assertRaises(ValueError, OneOf)
        self.assertRaises(TypeError, OneOf, (1, 2))


class IsNoneTests(ConstraintTestCase):
    """IsNone accepts None only."""

    def test_none(self) -> None:
        """IsNone accepts None and refuses 0, strings (at their header) and lists."""
        self.assertAccepts(IsNone(), None)
        self.assertRefuses(IsNone(), 0, KindRefused)
        self.assertRefuses(IsNone(), "x", KindRefused)
        self.assertRefuses(IsNone(), [], KindRefused)


@dataclasses.dataclass
class Point:
    x: int
    y: int


class InstanceOfTests(ConstraintTestCase):
    """InstanceOf checks a registered type's class and fields."""

    def decode(self, constraint: Any, obj: Any) -> list[Any]:
        registry = Registry(DEFAULT_REGISTRY)
        registry.register(Point, "test.point")
        data = framing.Encoder(registry=registry).encode(obj)
        return Decoder(constraint=constraint, registry=registry).feed(PREAMBLE + data)

    def test_instance_and_fields(self) -> None:
        """A Point passes InstanceOf(Point); a field its constraint refuses is named in where; ints are refused."""
        self.assertEqual(self.decode(InstanceOf(Point), Point(1, 2)), [Point(1, 2)])
        [refused] = self.decode(InstanceOf(Point, {"x": Integer(0, 9)}), Point(10, 2))
        self.assertIsInstance(refused, InvalidValue)
        self.assertEqual(refused.where, ".x")
        [refused] = self.decode(InstanceOf(Point), 5)
        self.assertIsInstance(refused, KindRefused)


class ChoiceOfTests(ConstraintTestCase):
    """ChoiceOf is a union: whatever one alternative accepts."""

    def test_scalars(self) -> None:
        """ChoiceOf(Integer, Text) accepts ints and strings, refuses bytes and floats."""
        constraint = ChoiceOf(Integer(), Text(5))
        self.assertAccepts(constraint, 1, "abc")
        self.assertRefuses(constraint, b"x", KindRefused)
        self.assertRefuses(constraint, 1.5, KindRefused)

    def test_most_telling_refusal(self) -> None:
        """When one alternative takes the kind but not the size, that refusal is the one reported, at the header."""
        results = refused_at_header(ChoiceOf(Integer(), Text(5)), STRING, 64 * MiB)
        self.assertIsInstance(results[0], BodyTooLarge)

    def test_containers_of_different_types(self) -> None:
        """ChoiceOf(ListOf(Integer), DictOf(Text, Text)) checks each container's children by its own alternative."""
        constraint = ChoiceOf(ListOf(Integer()), DictOf(Text(5), Text(5)))
        self.assertAccepts(constraint, [1, 2], {"a": "b"})
        self.assertRefuses(constraint, [1, "a"], KindRefused, "[1]")
        self.assertRefuses(constraint, {"a": 1}, KindRefused, "['a']")
        self.assertRefuses(constraint, (1,), KindRefused)

    def test_same_container_type(self) -> None:
        """ChoiceOf(ListOf(Integer), ListOf(Text)) accepts all-int and all-str lists and refuses a mixed one."""
        constraint = ChoiceOf(ListOf(Integer()), ListOf(Text(5)))
        self.assertAccepts(constraint, [1, 2], ["a", "b"], [])
        self.assertRefuses(constraint, [1, "a"], KindRefused, "[1]")

    def test_same_container_type_one_failing_its_count(self) -> None:
        """A mixed list is refused even when the one alternative whose check_value passes does not fit its items."""
        constraint = ChoiceOf(ListOf(Integer(), min_items=5), ListOf(Text(5)))
        self.assertRefuses(constraint, [1, "a"])

    def test_validate(self) -> None:
        """ChoiceOf.validate accepts an object one alternative validates and refuses others."""
        constraint = ChoiceOf(ListOf(Integer()), ListOf(Text(5)))
        constraint.validate([1])
        constraint.validate(["a"])
        self.assertRaises(KindRefused, constraint.validate, [1, "a"])

    def test_needs_an_alternative(self) -> None:
        """ChoiceOf() with no alternative is a ValueError."""
        self.assertRaises(ValueError, ChoiceOf)
