"""
The compiled reader builds the built-ins around and inside registered
(rebuildable) open types, running their Python unslicers where they sit,
with the pure core's results: the same objects and types, the same
Violations with the same C{where}, limits hit at the same point; and it
runs an unslicer not declared rebuildable only through the pure decoder.

The differential tests' length comes from the environment, as in
L{tests.framing.test_cores}:

    CHUNKWIRE_CORES_EXAMPLES=20000 pytest tests/framing/test_cores_nested.py -k Differential
"""

from __future__ import annotations

import dataclasses
import gc
import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

import framing
from framing import Decoder, Encoder, Limits, Registry, _core, dumps, loads
from framing._errors import InvalidValue
from framing.slicing import _builtin as builtin
from framing.slicing._custom import PartsUnslicer
from framing.slicing._interfaces import NOTHING
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import PREAMBLE, STRING

from .test_cores import (
    COMPILED,
    LEAK_ROUNDS,
    core,
    cut,
    differential,
    feed_all,
    limits,
    mutate,
    needs_compiled,
    outcome,
    scalars,
)


@dataclasses.dataclass
class Thing:
    """A registered type (a dataclass: its fields travel as a dict) whose state holds built-ins."""

    id: Any
    state: Any


class Tagline:
    """A registered type sent as a list, refused on receipt unless it is one."""

    def __init__(self, parts: Any) -> None:
        self.parts = parts

    def __eq__(self, other: object) -> bool:
        return type(other) is Tagline and self.parts == other.parts

    def __repr__(self) -> str:
        return f"Tagline({self.parts!r})"


def tagline_from_wire(state: Any) -> Tagline:
    if type(state) is not list:
        raise InvalidValue(f"a tagline is a list, not {type(state).__name__}")
    return Tagline(state)


class Named(tuple):  # type: ignore[type-arg]
    """A STRING name then any value: a rebuildable unslicer that refuses other kinds at the header."""


class NamedUnslicer(PartsUnslicer):
    open_type = "tests.Named"
    part_kinds = (frozenset({STRING}), None)
    part_types = (str, None)
    rebuildable = True

    def build(self, *parts: Any) -> Any:
        return Named(parts)


class Once:
    """A registered type that counts the objects built from the wire (rebuildable in NESTED, not in STRICT)."""

    built = 0

    def __init__(self, n: Any) -> None:
        self.n = n

    def __eq__(self, other: object) -> bool:
        return type(other) is Once and self.n == other.n

    def __hash__(self) -> int:
        return hash(repr(self.n))

    def __repr__(self) -> str:
        return f"Once({self.n!r})"


def once_from_wire(state: Any) -> Once:
    Once.built += 1
    return Once(state)


class Dropped(builtin.Unslicer):
    """A rebuildable unslicer whose object completes NOTHING (left to the pure decoder)."""

    open_type = "tests.Dropped"
    rebuildable = True

    def receive_child(self, obj: Any) -> None:
        pass

    def finish(self) -> Any:
        return NOTHING


NESTED = Registry(DEFAULT_REGISTRY)
NESTED.register(Thing, "tests.Thing")
NESTED.register(Tagline, "tests.Tagline", lambda t: t.parts, tagline_from_wire)
NESTED.add_unslicer("tests.Named", NamedUnslicer)
NESTED.register(Once, "tests.Once", lambda o: o.n, once_from_wire)
NESTED.add_unslicer("tests.Dropped", Dropped)
# Once is registered by register() (rebuildable); a registry where it is not:
STRICT = Registry(NESTED)
STRICT.add_unslicer("tests.Once", type("OnceUnslicer", (NESTED.unslicer_for("tests.Once"),), {"rebuildable": False}))


def named_tokens(*parts: Any) -> bytes:
    """The tokens of a Named (no slicer is registered for it): OPEN, the parts (a name, a value), CLOSE."""
    encoder = Encoder(NESTED)
    opening = encoder.encode(list(parts))
    return b"\x7btests.Named" + opening[5:]


def records(count: int) -> list[dict[str, Any]]:
    """C{count} records each holding one registered type, its state holding lists and dicts."""
    return [
        {"id": i, "name": f"n{i}", "score": i / 7, "ok": i % 2 == 0, "thing": Thing(i, {"tags": ["a", i], "n": None})}
        for i in range(count)
    ]


@contextmanager
def counting() -> Iterator[dict[str, int]]:
    """Count the calls into the Python list, tuple and dict unslicers and into Thing's from_wire."""
    counts = {"list": 0, "dict": 0, "things": 0}
    list_receive, dict_receive = builtin.ListUnslicer.receive_child, builtin.DictUnslicer.receive_child
    thing_factory = NESTED.unslicer_for("tests.Thing")
    thing_build = thing_factory.build  # type: ignore[union-attr]

    def counted_list(self: Any, obj: Any) -> None:
        counts["list"] += 1
        list_receive(self, obj)

    def counted_dict(self: Any, obj: Any) -> None:
        counts["dict"] += 1
        dict_receive(self, obj)

    def counted_build(self: Any, *parts: Any) -> Any:
        counts["things"] += 1
        return thing_build(self, *parts)

    with (
        mock.patch.object(builtin.ListUnslicer, "receive_child", counted_list),
        mock.patch.object(builtin.DictUnslicer, "receive_child", counted_dict),
        mock.patch.object(thing_factory, "build", counted_build),
    ):
        yield counts


def first_result(data: bytes, limits: Limits | None = None) -> Any:
    """The first object (or Violation) the pure core decodes from C{data}."""
    with core(None):
        return Decoder(limits, NESTED).feed(data)[0]


def both(data: bytes, limits: Limits | None = None, registry: Registry = NESTED) -> list[Any]:
    """What a decoder on each core (pure, then compiled) returns for C{data} fed whole."""
    found = []
    for module in (None, COMPILED):
        with core(module):
            decoder = Decoder(limits, registry)
        found.append(outcome(lambda decoder=decoder: decoder.feed(data)))
    return found


nested_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=6)
        | st.tuples(inner, inner)
        | st.dictionaries(st.one_of(st.text(max_size=4), st.integers(-5, 2**62)), inner, max_size=4)
        | st.builds(Thing, inner, inner)
        | st.builds(Tagline, st.lists(inner, max_size=3))
        | st.builds(Once, inner)
    ),
    max_leaves=25,
)


@needs_compiled
class DifferentialNestedTests(SynchronousTestCase):
    """Both cores on values mixing built-ins and registered types, and on mutations of their streams."""

    @differential
    @given(st.lists(nested_values, min_size=1, max_size=3), st.lists(st.integers(0, 2**16), max_size=6))
    def test_values(self, objects: list[Any], points: list[int]) -> None:
        """Values holding registered types decode to the same objects on both cores, whole and in random chunks."""
        data = PREAMBLE + b"".join(Encoder(NESTED).encode(obj) for obj in objects)
        for chunks in ([data], cut(data, points)):
            for registry in (NESTED, STRICT):
                self.assertEqual(feed_all(None, chunks, None, registry), feed_all(COMPILED, chunks, None, registry))

    @differential
    @given(
        st.lists(nested_values, min_size=1, max_size=3),
        st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2**16), st.integers(0, 255)), max_size=4),
        st.lists(st.integers(0, 2**16), max_size=6),
        limits,
    )
    def test_streams(
        self, objects: list[Any], edits: list[tuple[int, int, int]], points: list[int], limit: Limits | None
    ) -> None:
        """Mutated streams of such values, under small limits, give the same events on both cores."""
        data = mutate(PREAMBLE + b"".join(Encoder(NESTED).encode(obj) for obj in objects), edits)
        chunks = cut(data, points)
        self.assertEqual(feed_all(None, chunks, limit, NESTED), feed_all(COMPILED, chunks, limit, NESTED))


@needs_compiled
class NestedTests(SynchronousTestCase):
    """The compiled reader around and inside registered types."""

    def test_thousand_records(self) -> None:
        """A list of 1000 dicts each holding a registered type decodes alike on both cores, whole and in chunks."""
        data = dumps(records(1000), NESTED)
        rng = random.Random(17)
        for chunks in ([data], *(cut(data, [rng.randrange(len(data)) for _ in range(20)]) for _ in range(3))):
            self.assertEqual(feed_all(None, chunks, None, NESTED), feed_all(COMPILED, chunks, None, NESTED))
        self.assertEqual(loads(data, registry=NESTED), records(1000))

    def test_builtins_built_in_c(self) -> None:
        """Around and inside 1000 registered objects the compiled reader calls no Python list or dict unslicer."""
        data = dumps(records(1000), NESTED)
        with counting() as compiled:
            self.assertEqual(Decoder(registry=NESTED).feed(data), [records(1000)])
        with core(None), counting() as pure:
            self.assertEqual(Decoder(registry=NESTED).feed(data), [records(1000)])
        self.assertEqual(compiled, {"list": 0, "dict": 0, "things": 1000})
        self.assertEqual(pure, {"list": 1000 + 2000, "dict": 1000 * 10 + 1000 * 4 + 1000 * 4, "things": 1000})

    def test_top_level_registered_type(self) -> None:
        """A registered type at the top level is run by the reader too, its state's containers built in C."""
        thing = Thing(1, [{"a": [1, 2]}, (3, "x")])
        with counting() as counts:
            self.assertEqual(loads(dumps(thing, NESTED), registry=NESTED), thing)
            self.assertEqual(Decoder(registry=NESTED).feed(dumps(thing, NESTED)), [thing])
        self.assertEqual(counts, {"list": 0, "dict": 0, "things": 2})

    def test_violation_where(self) -> None:
        """Violations in built-ins around and inside registered types carry the pure core's where on both cores."""
        bad_string = b"\x33\xff\xfe\xfd"
        cases = [
            # (stream, the where the pure core gives)
            (dumps([7, {"thing": Thing(1, ["ok", "Zzz"])}], NESTED).replace(b"\x33Zzz", bad_string), None),
            (dumps([Thing(1, None), "Zzz"], NESTED).replace(b"\x33Zzz", bad_string), "[1]"),
            (dumps([{"a": 1}, Tagline(["x"])], NESTED).replace(b"\x74list\x31x\x80", b"\x31x"), None),
            (dumps({"k": Thing(1, {"z": 1, "y": 2})}, NESTED).replace(b"\x31y", b"\x31z"), None),
            (dumps([Thing(1, [Thing(2, "x")])], NESTED).replace(b"\x31x", b"\x21x"), None),
            (PREAMBLE + b"\x74list" + named_tokens(1, [2]) + b"\x80", "[0]<tests.Named part 0>"),
            (PREAMBLE + b"\x74list" + named_tokens("n", [2, 3]) + b"\x80", None),
            (PREAMBLE + b"\x74list" + named_tokens(b"n", 1) + b"\x80", "[0]<tests.Named part 0>"),
            (PREAMBLE + b"\x74list" + named_tokens("n", 1, "x") + b"\x80", "[0]<tests.Named part 2>"),
            (PREAMBLE + b"\x74list" + named_tokens("n", 1, 2) + b"\x80", "[0]<tests.Named part 2>"),
            (dumps([Thing(1, [1])], NESTED).replace(b"Thing", b"Thinx"), "[0]"),
        ]
        for data, where in cases:
            pure, compiled = both(data)
            self.assertEqual(pure, compiled, data)
            if where is not None:
                self.assertEqual(first_result(data).where, where, data)
            for chunks in (cut(data, [len(data) // 2]), cut(data, list(range(0, len(data), 3)))):
                self.assertEqual(feed_all(None, chunks, None, NESTED), feed_all(COMPILED, chunks, None, NESTED))
        wheres = [getattr(first_result(data), "where", None) for data, _ in cases]
        self.assertEqual(wheres[0], "[1]['thing']<tests.Thing part 0>['state'][1]")
        self.assertEqual(wheres[3], "['k']<tests.Thing part 0>['state']<key 1>")

    def test_check_token_calls(self) -> None:
        """A nested type's check_token is asked about the same headers, in the same order, on both cores."""
        data = PREAMBLE + b"\x74list" + named_tokens("n", [1, {"k": "v"}]) + named_tokens("m", 2.5) + b"\x80"
        calls: dict[Any, list[tuple[int, int]]] = {}
        original = NamedUnslicer.check_token
        for module in (None, COMPILED):
            seen = calls[module] = []

            def recorded(self: Any, kind: int, size: int, seen: list[tuple[int, int]] = seen) -> None:
                seen.append((kind, size))
                original(self, kind, size)

            with core(module), mock.patch.object(NamedUnslicer, "check_token", recorded):
                self.assertEqual(
                    Decoder(registry=NESTED).feed(data), [[Named(("n", [1, {"k": "v"}])), Named(("m", 2.5))]]
                )
        self.assertEqual(calls[None], calls[COMPILED])
        self.assertEqual(calls[None], [(3, 1), (7, 4), (3, 1), (6, 8)])

    def test_limits_same_point(self) -> None:
        """max_object_items, max_object_memory, max_depth and max_items refuse at the same point on both cores."""
        data = dumps(records(3) + [Tagline([1, [2, {"x": Thing(3, [4])}]])], NESTED)
        cases = [Limits(max_object_items=n) for n in range(0, 60)]
        cases += [Limits(max_object_memory=m) for m in range(0, 6000, 53)]
        cases += [Limits(max_depth=d) for d in range(0, 8)] + [Limits(max_items=n) for n in range(0, 8)]
        refused = 0
        for limit in cases:
            pure, compiled = feed_all(None, [data], limit, NESTED), feed_all(COMPILED, [data], limit, NESTED)
            self.assertEqual(pure, compiled, limit)
            refused += isinstance(first_result(data, limit), framing.Violation)
        self.assertGreater(refused, len(cases) // 2)
        self.assertLess(refused, len(cases))

    def test_not_rebuildable_built_once(self) -> None:
        """An unslicer not declared rebuildable builds each of its objects once on both cores, wherever cut."""
        good = dumps([1, Once("a"), {"k": Once([2])}, "Zzz"], STRICT)
        refused = good.replace(b"\x33Zzz", b"\x33\xff\xfe\xfd")
        for data, built in ((good, 2), (refused, 2)):
            for at in range(len(PREAMBLE), len(data) + 1):
                for module in (None, COMPILED):
                    Once.built = 0
                    with core(module):
                        decoder = Decoder(registry=STRICT)
                    decoder.feed(data[:at])
                    decoder.feed(data[at:])
                    self.assertEqual(Once.built, built, (module, at))

    def test_rebuildable_built_once_when_cut(self) -> None:
        """A registered type in an object cut by the end of a feed is built once: the reader first sees it whole."""
        data = dumps([1, Once("a"), {"k": Once([2])}, "tail"], NESTED)
        for at in range(len(PREAMBLE), len(data) + 1):
            Once.built = 0
            decoder = Decoder(registry=NESTED)
            results = decoder.feed(data[:at]) + decoder.feed(data[at:])
            self.assertEqual(results, [[1, Once("a"), {"k": Once([2])}, "tail"]])
            self.assertEqual(Once.built, 2, at)

    def test_registered_key_built_once(self) -> None:
        """A registered type as a dict key (which the reader leaves to Python) is built once, by the pure decoder."""
        data = dumps([1, {"a": Once("v"), Once("k"): [2]}], NESTED)
        for module in (None, COMPILED):
            Once.built = 0
            with core(module):
                self.assertEqual(Decoder(registry=NESTED).feed(data), [[1, {"a": Once("v"), Once("k"): [2]}]])
            self.assertEqual(Once.built, 2, module)

    def test_refused_after_build(self) -> None:
        """An object refused after a registered type in it was built gets the pure core's Violation."""
        data = dumps([Once("a"), "Zzz"], NESTED).replace(b"\x33Zzz", b"\x33\xff\xfe\xfd")
        Once.built = 0
        pure, compiled = both(data)
        self.assertEqual(pure, compiled)
        self.assertLessEqual(Once.built, 3)

    def test_completes_nothing(self) -> None:
        """A rebuildable type whose object completes NOTHING is left to the pure decoder, with its result."""
        inner = PREAMBLE + b"\x74list\x01\x7c\x0dtests.Dropped\x02\x80\x03\x80"
        top = PREAMBLE + b"\x7c\x0dtests.Dropped\x80"
        for data in (inner, top):
            self.assertEqual(feed_all(None, [data], None, NESTED), feed_all(COMPILED, [data], None, NESTED))
        self.assertEqual(Decoder(registry=NESTED).feed(inner), [[1, 3]])

    def test_loads(self) -> None:
        """loads gives the same object or error on both cores for values holding registered types."""
        for data in (dumps(records(5), NESTED), dumps(records(2), NESTED) + b"\x01", dumps(records(2), NESTED)[:-1]):
            found = []
            for module in (None, COMPILED):
                with core(module):
                    found.append(outcome(lambda data=data: loads(data, registry=NESTED)))
            self.assertEqual(found[0], found[1])

    def test_reader_table(self) -> None:
        """The reader runs only rebuildable, unbudgeted unslicers that take no streamed bodies."""
        names = [row[0] for row in _core.nested_types(NESTED)]
        expected = [b"tests.Dropped", b"tests.Named", b"tests.Once", b"tests.Tagline", b"tests.Thing"]
        self.assertEqual(sorted(names), expected)
        self.assertNotIn(b"tests.Once", [row[0] for row in _core.nested_types(STRICT)])
        self.assertEqual(_core.nested_types(DEFAULT_REGISTRY), ())
        self.assertIs(framing.implementation, "compiled")


@needs_compiled
class NestedLeakTests(SynchronousTestCase):
    """Running Python unslicers from the compiled reader keeps no reference it should not."""

    def test_allocated_blocks_return(self) -> None:
        """Registered types decoded where they sit (built, refused, handed back) leave the blocks as they were."""
        streams = [
            dumps(records(20), NESTED),
            dumps([Once("a"), "Zzz"], NESTED).replace(b"\x33Zzz", b"\x33\xff\xfe\xfd"),
            PREAMBLE + b"\x74list" + named_tokens(1, [2]) + b"\x80",
            PREAMBLE + b"\x74list" + named_tokens("n", [2, {"k": 3}]) + b"\x80",
            PREAMBLE + b"\x74list\x01\x7c\x0dtests.Dropped\x02\x80\x03\x80",
            dumps([{"a": 1}, Tagline(["x"])], NESTED).replace(b"\x74list\x31x\x80", b"\x31x"),
        ]

        def once() -> None:
            for stream in streams:
                Decoder(registry=NESTED).feed(stream)
            loads(streams[0], registry=NESTED)

        for _ in range(50):
            once()
        gc.collect()
        before = sys.getallocatedblocks()
        for _ in range(LEAK_ROUNDS // 4):
            once()
        gc.collect()
        self.assertLess(sys.getallocatedblocks() - before, 100)


@needs_compiled
class SetTests(SynchronousTestCase):
    """Sets and frozensets of str, bytes and ints are built by the compiled reader, with the pure core's results."""

    def test_built_in_c(self) -> None:
        """A set or frozenset of plain members calls no Python set unslicer, and equals the pure core's."""
        value = [{1, "a", b"b", -5}, frozenset({"x", 2**60}), {"k": set()}, Thing(1, {3})]
        data = dumps(value, NESTED)
        calls = []
        original = builtin.SetUnslicer.receive_child

        def counted(self: Any, obj: Any) -> None:
            calls.append(obj)
            original(self, obj)

        with mock.patch.object(builtin.SetUnslicer, "receive_child", counted):
            compiled = Decoder(registry=NESTED).feed(data)
            self.assertEqual(calls, [])
            with core(None):
                pure = Decoder(registry=NESTED).feed(data)
            self.assertEqual(len(calls), 7)
        self.assertEqual(compiled, pure)
        self.assertEqual([type(v) for v in compiled[0]], [set, frozenset, dict, Thing])

    def test_refusals_and_hand_backs(self) -> None:
        """Duplicates, unhashable, tracked and too many members give the pure core's results on both cores."""
        cases = [
            dumps({1, 2, 3}).replace(b"\x02", b"\x01"),  # a duplicate member
            dumps({"a", "b"}).replace(b"\x31b", b"\x31a"),
            dumps([{(1, 2), 3}]),  # a container member (tracked)
            dumps({True, 2.5, None, 2**70}),  # members the reader leaves to Python
            dumps([1, {"k": frozenset({1})}]).replace(b"\x01\x80", b"\x74list\x80\x80"),  # unhashable
            dumps([Once("a"), {"s": {(1, 2)}}], NESTED),  # a registered type, then a tracked member
        ]
        for data in cases:
            for limit in (None, Limits(max_items=2), Limits(max_object_memory=300)):
                pure, compiled = feed_all(None, [data], limit, NESTED), feed_all(COMPILED, [data], limit, NESTED)
                self.assertEqual(pure, compiled, (data, limit))
        Once.built = 0
        Decoder(registry=NESTED).feed(cases[-1])
        self.assertEqual(Once.built, 1)

    def test_limits_same_point(self) -> None:
        """Around max_object_items and max_object_memory, sets are kept or refused alike on both cores."""
        data = dumps([set(range(i)) for i in range(8)] + [frozenset("abcdef")])
        for limit in [Limits(max_object_items=n) for n in range(0, 50)] + [
            Limits(max_object_memory=m) for m in range(0, 6000, 41)
        ]:
            self.assertEqual(feed_all(None, [data], limit, NESTED), feed_all(COMPILED, [data], limit, NESTED), limit)

    def test_tracked_members(self) -> None:
        """With hash randomization off, str and bytes members are charged alike by both cores."""
        self.patch(builtin, "_STR", builtin._Never)
        self.patch(builtin, "_BYTES", builtin._Never)
        self.patch(_core, "_RANDOMIZED", False)
        taken = 0
        for count in range(1, 10):
            data = dumps({*(f"m{i}" for i in range(count)), b"b", 7})
            for memory in range(200, 2400, 31):
                limit = Limits(max_object_memory=memory)
                self.assertEqual(feed_all(None, [data], limit, NESTED), feed_all(COMPILED, [data], limit, NESTED))
                taken += _core.reader(limit, NESTED).one(data, len(PREAMBLE)) is not None
        self.assertGreater(taken, 0)


@needs_compiled
class BigIntTests(SynchronousTestCase):
    """BIGINT and BIGNEG are decoded by the compiled reader, canonical ones only, as the pure core takes them."""

    EDGES = (2**64, 2**64 + 1, 2**70, 2**512, -(2**64) - 1, -(2**64) - 2, -(2**100), 2**64 - 1, -(2**64))

    def test_built_in_c(self) -> None:
        """Big ints at and beyond the edges of INT and NEG decode alike, by the reader, in containers too."""
        for value in (*self.EDGES, list(self.EDGES), {"k": Thing(2**80, [-(2**90)])}):
            data = dumps(value, NESTED)
            self.assertEqual(feed_all(None, [data], None, NESTED), feed_all(COMPILED, [data], None, NESTED))
            found = _core.reader(Limits(), NESTED).one(data, len(PREAMBLE))
            self.assertIsNotNone(found, value)
            self.assertEqual(found, (value, len(data)))

    def test_non_canonical_and_limits(self) -> None:
        """Non-canonical magnitudes and bodies over max_bigint_length get the pure core's refusal on both cores."""
        streams = [
            PREAMBLE + b"\x74list\x48" + bytes(8) + b"\x80",  # 0 as a BIGINT
            PREAMBLE + b"\x49\x00" + bytes([1]) + bytes(7),  # a leading zero byte
            PREAMBLE + b"\x59\x01" + bytes(8),  # -(2**64) as a BIGNEG
            PREAMBLE + b"\x42\x01\x02",  # a short BIGINT
            PREAMBLE + b"\x40",  # an empty one
            dumps([2**100, -(2**100)]),
        ]
        for data in streams:
            for limit in (None, Limits(max_bigint_length=9), Limits(max_bigint_length=13)):
                pure, compiled = feed_all(None, [data], limit, NESTED), feed_all(COMPILED, [data], limit, NESTED)
                self.assertEqual(pure, compiled, (data, limit))
