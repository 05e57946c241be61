"""
Tests for constraints: what a receiver accepts at each position, refused at
the header (before a body byte is kept) whenever the header can tell, with
C{Violation.where} naming the position.
"""

from __future__ import annotations

import array
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, Violation, dumps
from framing._errors import BodyTooLarge, InvalidValue, KindRefused, TooManyItems
from framing._limits import MiB
from framing.slicing._constraints import (
    ANY,
    Boolean,
    ByteString,
    Constraint,
    DictOf,
    Float,
    Integer,
    ListOf,
    Optional,
    SetOf,
    Text,
    TupleOf,
)
from framing.wire import BYTES, CLOSE, OPEN, PREAMBLE, STRING, encode_header

from .test_slicing import container, encoded, same, text, token

CHUNK = 64 * 1024
_ZEROS = bytes(CHUNK)


def decode(constraint: Constraint, *objs: Any) -> list[Any]:
    """Decode C{objs}, each encoded normally, under C{constraint}."""
    return Decoder(constraint=constraint).feed(PREAMBLE + b"".join(encoded(o) for o in objs))


class ConstraintTestCase(SynchronousTestCase):
    def assertAccepts(self, constraint: Constraint, *objs: Any) -> None:
        for obj in objs:
            self.assertTrue(same(decode(constraint, obj), [obj]), obj)

    def assertRefuses(
        self, constraint: Constraint, obj: Any, kind: type[Violation] = Violation, where: str = ""
    ) -> None:
        """C{obj} is refused with C{kind} at C{where}."""
        results = Decoder(constraint=constraint).feed(dumps(obj))
        self.assertEqual(len(results), 1, repr(obj))
        self.assertIsInstance(results[0], kind, repr(obj))
        self.assertEqual(results[0].where, where, repr(obj))


class ScalarConstraintTests(ConstraintTestCase):
    """Each scalar constraint accepts its type and refuses others."""

    def test_bytestring(self) -> None:
        """ByteString(n) accepts bytes up to n long; longer bytes, text, ints and bytearrays are refused."""
        self.assertAccepts(ByteString(100), b"", b"x" * 100)
        self.assertRefuses(ByteString(100), b"x" * 101, BodyTooLarge)
        self.assertRefuses(ByteString(100), "text", KindRefused)
        self.assertRefuses(ByteString(100), 5, KindRefused)
        self.assertRefuses(ByteString(100), None, KindRefused)
        self.assertRefuses(ByteString(100), bytearray(b"x"), KindRefused)
        self.assertRefuses(ByteString(100), [b"x"], KindRefused)

    def test_text(self) -> None:
        """Text(n) accepts str of at most n UTF-8 bytes; longer text and other kinds are refused."""
        self.assertAccepts(Text(6), "", "abcdef", "\u20ac\u20ac", "\U0001f600")
        self.assertRefuses(Text(6), "\u20ac\u20ac\u20ac", BodyTooLarge)
        self.assertRefuses(Text(6), "abcdefg", BodyTooLarge)
        self.assertRefuses(Text(6), b"abc", KindRefused)
        self.assertRefuses(Text(6), 1, KindRefused)

    def test_integer(self) -> None:
        """Integer accepts ints in range; bools, floats, out-of-range and oversized ints are refused."""
        self.assertAccepts(Integer(), 0, -1, 2**64, -(2**70))
        self.assertAccepts(Integer(-5, 5), -5, 5)
        self.assertRefuses(Integer(-5, 5), 6, InvalidValue)
        self.assertRefuses(Integer(-5, 5), -6, InvalidValue)
        self.assertRefuses(Integer(minimum=0), -(2**80), InvalidValue)
        self.assertRefuses(Integer(), True, KindRefused)
        self.assertRefuses(Integer(), 1.0, KindRefused)
        self.assertRefuses(Integer(), "1", KindRefused)
        self.assertRefuses(Integer(max_bytes=9), 2**72, BodyTooLarge)
        self.assertAccepts(Integer(max_bytes=9), 2**71)

    def test_float(self) -> None:
        """Float accepts floats only."""
        self.assertAccepts(Float(), 1.5, float("inf"), -0.0)
        self.assertRefuses(Float(), 1, KindRefused)
        self.assertRefuses(Float(), "1.5", KindRefused)

    def test_boolean(self) -> None:
        """Boolean accepts True and False only."""
        self.assertAccepts(Boolean(), True, False)
        self.assertRefuses(Boolean(), 1, KindRefused)
        self.assertRefuses(Boolean(), None, KindRefused)
        self.assertRefuses(Boolean(), "true", KindRefused)
        self.assertRefuses(Boolean(), [True], KindRefused)

    def test_optional(self) -> None:
        """Optional(c) accepts None and whatever c accepts."""
        self.assertAccepts(Optional(Integer(0, 9)), None, 3)
        self.assertRefuses(Optional(Integer(0, 9)), 10, InvalidValue)
        self.assertRefuses(Optional(Text(3)), "long", BodyTooLarge)
        self.assertAccepts(Optional(ListOf(Integer())), None, [], [1, 2])
        self.assertRefuses(Optional(ListOf(Integer())), [1, "x"], KindRefused, "[1]")

    def test_any(self) -> None:
        """The base Constraint accepts everything the limits accept, at any position."""
        obj = {"a": [1, (2.5, None)], b"k": {frozenset({1})}, "arr": array.array("H", [1])}
        self.assertAccepts(ANY, obj)
        self.assertAccepts(ListOf(ANY), [obj, 1, "x"])


class ContainerConstraintTests(ConstraintTestCase):
    """Container constraints check the container's type, its item count and each position."""

    def test_listof(self) -> None:
        """ListOf checks each item and the count; tuples and sets are refused."""
        c = ListOf(Integer(0, 9), max_items=3)
        self.assertAccepts(c, [], [1, 2, 3])
        self.assertRefuses(c, [1, 2, 3, 4], TooManyItems, "[3]")
        self.assertRefuses(c, [1, 20], InvalidValue, "[1]")
        self.assertRefuses(c, (1,), KindRefused)
        self.assertRefuses(c, {1}, KindRefused)
        self.assertRefuses(c, b"[1]", KindRefused)
        self.assertRefuses(c, "[1]", KindRefused)

    def test_setof(self) -> None:
        """SetOf accepts sets and frozensets of accepted members up to the count; lists are refused."""
        c = SetOf(Text(5), max_items=2)
        self.assertAccepts(c, set(), {"a", "b"}, frozenset({"c"}))
        self.assertRefuses(c, {"a", "b", "c"}, TooManyItems, "<member 2>")
        self.assertRefuses(c, {"toolong"}, BodyTooLarge, "<member 0>")
        self.assertRefuses(c, ["a"], KindRefused)

    def test_tupleof(self) -> None:
        """TupleOf checks each position against its own constraint and the exact length."""
        c = TupleOf(Integer(), Text(10), Optional(Float()))
        self.assertAccepts(c, (1, "a", None), (1, "a", 2.5))
        self.assertRefuses(c, ("a", "a", None), KindRefused, "[0]")
        self.assertRefuses(c, (1, 2, None), KindRefused, "[1]")
        self.assertRefuses(c, (1, "a", "x"), KindRefused, "[2]")
        self.assertRefuses(c, (1, "a"), InvalidValue)
        self.assertRefuses(c, (1, "a", None, 4), TooManyItems, "[3]")
        self.assertRefuses(c, [1, "a", None], KindRefused)

    def test_dictof(self) -> None:
        """DictOf checks keys and values with their own constraints and counts keys."""
        c = DictOf(Text(8), Integer(), max_items=2)
        self.assertAccepts(c, {}, {"a": 1, "b": 2})
        self.assertRefuses(c, {"a": 1, "b": 2, "c": 3}, TooManyItems, "<key 2>")
        self.assertRefuses(c, {"a": "1"}, KindRefused, "['a']")
        self.assertRefuses(c, {1: 1}, KindRefused, "<key 0>")
        self.assertRefuses(c, {"much too long": 1}, BodyTooLarge, "<key 0>")
        self.assertRefuses(c, [("a", 1)], KindRefused)

    def test_container_constraints_refuse_scalars(self) -> None:
        """ListOf, SetOf, TupleOf and DictOf refuse an int, None or a bool in their position."""
        for c in (ListOf(Integer()), SetOf(Integer()), DictOf(Text(5), Integer()), TupleOf(Integer())):
            for obj in (1, -1, None, True):
                results = Decoder(constraint=c).feed(dumps(obj) + encoded("next"))
                self.assertIsInstance(results[0], KindRefused, f"{type(c).__name__} accepted {obj!r}")
        results = decode(DictOf(Text(5), ListOf(Integer())), {"a": None})
        self.assertIsInstance(results[0], KindRefused)
        self.assertEqual(results[0].where, "['a']")

    def test_tupleof_given_an_int_does_not_wedge_the_decoder(self) -> None:
        """An int where TupleOf is expected is a Violation, not a TypeError that leaves the token unconsumed."""
        decoder = Decoder(constraint=TupleOf(Integer()))
        first: list[Any] = []
        try:
            first = decoder.feed(dumps(5))
        except TypeError:
            pass
        self.assertEqual(len(first), 1)
        self.assertIsInstance(first[0], Violation)
        self.assertEqual(decoder.feed(encoded((1,))), [(1,)])

    def test_nested_where(self) -> None:
        """A refusal deep inside nested containers names its position, e.g. ['a'][3]."""
        c = DictOf(Text(10), ListOf(Integer(0, 10)))
        self.assertAccepts(c, {"a": [1, 2, 3, 4], "b": []})
        self.assertRefuses(c, {"a": [1, 2, 3, 99]}, InvalidValue, "['a'][3]")
        self.assertRefuses(c, {"ok": [], "a": [1, 2, 3, b"x"]}, KindRefused, "['a'][3]")
        deep = ListOf(DictOf(Text(5), TupleOf(Integer(), SetOf(Integer()))))
        self.assertAccepts(deep, [{"k": (1, {2, 3})}])
        self.assertRefuses(deep, [{"k": (1, {2})}, {"k": (1, {"x"})}], KindRefused, "[1]['k'][1]<member 0>")

    def test_constraint_applies_to_every_top_level_object(self) -> None:
        """Each top-level object is checked; a refused one does not stop the next."""
        results = decode(ListOf(Integer()), [1], ["x"], [2], "nope", [3])
        self.assertEqual(results[0], [1])
        self.assertIsInstance(results[1], KindRefused)
        self.assertEqual(results[1].where, "[0]")
        self.assertEqual(results[2], [2])
        self.assertIsInstance(results[3], KindRefused)
        self.assertEqual(results[4], [3])

    def test_constraints_are_shareable(self) -> None:
        """One constraint object serves several decoders, interleaved, without interference."""
        c = DictOf(Text(5), ListOf(Integer(), max_items=2))
        one, two = Decoder(constraint=c), Decoder(constraint=c)
        a, b = dumps({"x": [1, 2]}), dumps({"y": [1, 2, 3]})
        results_one: list[Any] = []
        results_two: list[Any] = []
        for i in range(max(len(a), len(b))):
            results_one += one.feed(a[i : i + 1])
            results_two += two.feed(b[i : i + 1])
        self.assertEqual(results_one, [{"x": [1, 2]}])
        self.assertIsInstance(results_two[0], TooManyItems)


class RefusedAtTheHeaderTests(SynchronousTestCase):
    """A refused body is skipped as it arrives, never buffered."""

    def stream_huge(self, decoder: Decoder, prefix: bytes, announced: int, suffix: bytes) -> tuple[list[Any], int]:
        """Feed C{prefix}, then C{announced} zero bytes in 64 KiB chunks, then C{suffix}; track buffered."""
        results = decoder.feed(prefix)
        most = decoder.buffered
        for _ in range(announced // CHUNK):
            results += decoder.feed(_ZEROS)
            most = max(most, decoder.buffered)
        results += decoder.feed(suffix)
        return results, max(most, decoder.buffered)

    def test_top_level_refused_before_any_body(self) -> None:
        """A top-level 64 MiB BYTES where ByteString(100) is expected is refused as soon as its header arrives."""
        decoder = Decoder(constraint=ByteString(100))
        results = decoder.feed(PREAMBLE + encode_header(BYTES, 64 * MiB))
        self.assertEqual(len(results), 1)
        self.assertIsInstance(results[0], BodyTooLarge)
        results, most = self.stream_huge(decoder, b"", 64 * MiB, encoded(b"ok"))
        self.assertEqual(results, [b"ok"])
        self.assertLessEqual(most, 16)

    def test_nested_huge_body_never_buffered(self) -> None:
        """A 64 MiB body at a ByteString(100) position inside a dict is skipped with buffered staying tiny."""
        decoder = Decoder(constraint=DictOf(Text(10), ByteString(100)))
        prefix = PREAMBLE + token(OPEN, b"dict") + text("a") + encode_header(BYTES, 64 * MiB)
        suffix = token(CLOSE) + encoded({"a": b"next"})
        results, most = self.stream_huge(decoder, prefix, 64 * MiB, suffix)
        self.assertEqual(len(results), 2)
        self.assertIsInstance(results[0], BodyTooLarge)
        self.assertEqual(results[0].where, "['a']")
        self.assertEqual(results[1], {"a": b"next"})
        self.assertLessEqual(most, 16)

    def test_item_count_refused_at_the_header(self) -> None:
        """An item past ListOf's max_items is refused at its header, so its large body is never kept."""
        decoder = Decoder(constraint=ListOf(ByteString(128 * MiB), max_items=1))
        prefix = PREAMBLE + token(OPEN, b"list") + token(BYTES, b"first") + encode_header(BYTES, 32 * MiB)
        results, most = self.stream_huge(decoder, prefix, 32 * MiB, token(CLOSE) + encoded([b"ok"]))
        self.assertIsInstance(results[0], TooManyItems)
        self.assertEqual(results[0].where, "[1]")
        self.assertEqual(results[1:], [[b"ok"]])
        self.assertLessEqual(most, 16)

    def test_wrong_kind_refused_at_the_header(self) -> None:
        """A 16 MiB STRING where Integer is expected is refused at its header and skipped."""
        decoder = Decoder(constraint=DictOf(Text(10), Integer()))
        prefix = PREAMBLE + token(OPEN, b"dict") + text("n") + encode_header(STRING, 16 * MiB)
        results, most = self.stream_huge(decoder, prefix, 16 * MiB, token(CLOSE) + encoded({"n": 1}))
        self.assertIsInstance(results[0], KindRefused)
        self.assertEqual(results[0].where, "['n']")
        self.assertEqual(results[1:], [{"n": 1}])
        self.assertLessEqual(most, 16)

    def test_wrong_container_skipped_whole(self) -> None:
        """A container refused by its OPEN (a list where Text is expected) is skipped with all its contents."""
        decoder = Decoder(constraint=DictOf(Text(10), Text(10)))
        inner = container("list", *[token(BYTES, b"x" * 1000)] * 1000, container("dict", encoded(1), encoded(2)))
        data = PREAMBLE + container("dict", text("k"), inner) + encoded({"k": "v"})
        results = decoder.feed(data)
        self.assertIsInstance(results[0], KindRefused)
        self.assertEqual(results[0].where, "['k']")
        self.assertEqual(results[1:], [{"k": "v"}])

    def test_accepted_body_at_the_limit(self) -> None:
        """A body exactly at ByteString's limit, fed in pieces, is accepted and buffered only once."""
        decoder = Decoder(constraint=ByteString(4 * CHUNK))
        results = decoder.feed(PREAMBLE + encode_header(BYTES, 4 * CHUNK))
        for _ in range(4):
            results += decoder.feed(_ZEROS)
            self.assertLessEqual(decoder.buffered, 4 * CHUNK)
        self.assertEqual(results, [bytes(4 * CHUNK)])
