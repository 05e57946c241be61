"""
The two codec cores, compiled and pure-Python, behave as one: the same
bytes out of the encoder, the same objects (types included) out of the
decoder, and the same Violations and ProtocolErrors with the same C{where},
for generated values and for mutated, truncated and random streams fed in
random chunkings; the wire vectors pass on the pure core here (the rest of
the suite runs on whichever core the process chose; C{CHUNKWIRE_PURE=1}
runs it all on the pure core).

The default run is short (about 5 s); the full campaign sets its length
from the environment:

    CHUNKWIRE_CORES_EXAMPLES=100000 pytest tests/framing/test_cores.py -k test_values
    CHUNKWIRE_CORES_EXAMPLES=50000 pytest tests/framing/test_cores.py -k "test_streams or test_random_bytes"
    CHUNKWIRE_CORES_FUZZ_RUNS=1000000 CHUNKWIRE_CORES_LEAK_ROUNDS=20000 python3 dev.py asan tests/framing/test_cores.py

(hypothesis examples per differential test; mutated streams; rounds of the
allocated-blocks check, which counts only without C{dev.py asan}'s
C{PYTHONMALLOC=malloc}).
"""

from __future__ import annotations

import array
import dataclasses
import gc
import os
import random
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest import skipIf

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

import framing
from framing import Decoder, Encoder, ISlicer, Limits, Registry, _core, dumps, loads
from framing._errors import ChunkwireError
from framing.slicing import _builtin as builtin
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import PREAMBLE

from . import test_vectors

ROOT = Path(__file__).resolve().parents[2]
COMPILED = _core.speedups
"""The compiled module, or None when it was not built or CHUNKWIRE_PURE is set."""
EXAMPLES = int(os.environ.get("CHUNKWIRE_CORES_EXAMPLES", "150"))
needs_compiled = skipIf(COMPILED is None, "the compiled core is not built (or CHUNKWIRE_PURE is set)")


@contextmanager
def core(module: ModuleType | None) -> Iterator[None]:
    """Make decoders and encoders (and dumps and loads) use C{module}'s fast path, or none."""
    saved = _core.speedups
    _core.speedups = module
    try:
        yield
    finally:
        _core.speedups = saved


@dataclasses.dataclass(frozen=True)
class Point:
    x: Any
    y: Any


@dataclasses.dataclass
class Box:
    items: list[Any]


class Tagged(tuple):  # type: ignore[type-arg]
    """A tuple subclass sent as its items (as an RPC message is)."""


class Reversed(Tagged):
    """...iterated backwards, which the encoder must honour."""

    def __iter__(self) -> Iterator[Any]:
        return reversed(tuple(super().__iter__()))


@implementer(ISlicer)
class TaggedSlicer:
    def slice(self, obj: Any, encoder: Any) -> None:
        encoder.write_container("tests.Tagged", obj, obj)


class Pair(tuple):  # type: ignore[type-arg]
    """An int and anything, or an int and two things: a record the compiled reader builds through a builder."""


def build_pair(items: list[Any]) -> Pair | None:
    """PairUnslicer's record builder: the Pair it would finish with, or None where it would refuse."""
    if len(items) not in (2, 3) or type(items[0]) is not int:
        return None
    return Pair(items)


class PairUnslicer(builtin.BudgetedUnslicer):
    """Refuses a first item that is not an int, and finishes only with 2 or 3 items (one past max_items allowed)."""

    open_type = "tests.Pair"
    record_builder = staticmethod(build_pair)
    record_extra_items = 1

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self.items: list[Any] = []
        self.max_length = self.cap = limits.max_items + 1

    def receive_child(self, obj: Any) -> None:
        if len(self.items) >= self.cap:
            self.full()
        if not self.items and type(obj) is not int:
            raise framing.Violation(f"a pair starts with an int, not {type(obj).__name__}")
        self.items.append(obj)

    def finish(self) -> Any:
        if len(self.items) not in (2, 3):
            raise framing.Violation(f"a pair has 2 or 3 items, not {len(self.items)}")
        return Pair(self.items)

    def child_where(self) -> str:
        return f"<{len(self.items)}>"


def counting_pairs(made: list[PairUnslicer]) -> type[PairUnslicer]:
    """A PairUnslicer that notes each instance made in C{made} (the reader builds records without making any)."""

    class Counting(PairUnslicer):
        def __init__(self, limits: Limits) -> None:
            made.append(self)
            super().__init__(limits)

    return Counting


@implementer(ISlicer)
class PairSlicer:
    record_name = "tests.Pair"

    def slice(self, obj: Any, encoder: Any) -> None:
        encoder.write_container("tests.Pair", obj, obj)


USER_TYPES = Registry(DEFAULT_REGISTRY)
USER_TYPES.register(Point, "tests.Point")
USER_TYPES.register(Box, "tests.Box")
USER_TYPES.add_slicer(Tagged, TaggedSlicer())
USER_TYPES.add_slicer(Pair, PairSlicer())
USER_TYPES.add_unslicer("tests.Pair", PairUnslicer)


def canonical(value: Any) -> Any:
    """C{value} as nested tuples that compare equal only for equal values of equal types (float bits, dict order)."""
    kind = type(value)
    if kind is float:
        return ("float", struct.pack(">d", value))
    if kind in (list, tuple):
        return (kind.__name__, *map(canonical, value))
    if kind is dict:
        return ("dict", *((canonical(k), canonical(v)) for k, v in value.items()))
    if kind in (set, frozenset):
        return (kind.__name__, frozenset(map(canonical, value)))
    if isinstance(value, ChunkwireError):
        return (kind.__name__, value.message, value.where, canonical(list(getattr(value, "results", ()))))
    if kind in (bytearray, memoryview):
        return (kind.__name__, bytes(value))
    if kind is array.array:
        return ("array", value.typecode, value.tobytes())
    if kind is Point:
        return ("Point", canonical(value.x), canonical(value.y))
    if kind is Pair:
        return ("Pair", *map(canonical, value))
    if isinstance(value, tuple):
        # A tuple subclass (an RPC Message): its items compared as values, not by repr, whose order of
        # a set's members follows their hashes (a NaN's is its object's identity, new in each decode).
        return (kind.__name__, *map(canonical, value))
    return (kind.__name__, repr(value))


def outcome(action: Callable[[], Any]) -> Any:
    """What C{action} returned, or what it raised (type, message, C{where}), comparably."""
    try:
        return ("returned", canonical(action()))
    except Exception as error:
        return ("raised", canonical(error) if isinstance(error, ChunkwireError) else (type(error).__name__, str(error)))


def feed_all(module: ModuleType | None, chunks: list[bytes], limits: Limits | None, registry: Registry) -> list[Any]:
    """Everything a decoder made under C{module}'s core says about C{chunks}, fed one by one, then closed."""
    with core(module):
        decoder = Decoder(limits, registry)
    events: list[Any] = []
    for chunk in chunks:
        step = outcome(lambda chunk=chunk: decoder.feed(chunk))
        events.append((step, [canonical(event) for event in decoder.control_events], decoder.at_boundary))
        # (at_boundary is set by each feed, on the compiled reader's whole read without asking: it is the state's)
        assert decoder.at_boundary == decoder._boundary(), (chunk, decoder.at_boundary)
        if step[0] == "raised":
            break
    else:
        events.append(outcome(decoder.close))
        assert decoder.at_boundary == decoder._boundary()
    events.append((decoder.objects_completed, decoder.at_boundary, decoder.buffered, decoder.held_cost))
    return events


def cut(data: bytes, points: list[int]) -> list[bytes]:
    """C{data} cut at C{points} (any order, repeats allowed: empty chunks are fed too)."""
    edges = [0, *sorted(p % (len(data) + 1) for p in points), len(data)]
    return [data[a:b] for a, b in zip(edges, edges[1:], strict=False)]


def mutate(data: bytes, edits: list[tuple[int, int, int]]) -> bytes:
    """Apply C{(how, where, what)} edits: overwrite a byte, delete a run, insert bytes, truncate."""
    buf = bytearray(data)
    for how, where, what in edits:
        at = where % (len(buf) + 1)
        if how == 0 and at < len(buf):
            buf[at] = what & 0xFF
        elif how == 1:
            del buf[at : at + 1 + what % 9]
        elif how == 2:
            buf[at:at] = bytes([what & 0xFF]) * (1 + what % 3)
        elif how == 3:
            del buf[at:]
    return bytes(buf)


scalars = st.one_of(
    st.integers(min_value=-(2**64) - 2, max_value=2**64 + 1),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=-20, max_value=300),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.binary(max_size=20),
    st.none(),
    st.booleans(),
)
hashables = st.recursive(
    scalars, lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3), max_leaves=5
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=8)
        | st.tuples(inner, inner)
        | st.dictionaries(st.one_of(st.text(max_size=6), st.integers(-5, 2**62), hashables), inner, max_size=6)
        | st.sets(hashables, max_size=4)
        | st.builds(Point, inner, inner)
        | st.builds(
            lambda first, rest: Pair((first, *rest)), st.integers(-5, 300), st.lists(inner, min_size=1, max_size=2)
        )
    ),
    max_leaves=30,
)
limits = st.one_of(
    st.none(),
    st.builds(
        Limits,
        max_header_length=st.integers(1, 9),
        max_bytes_length=st.integers(0, 40),
        max_string_length=st.integers(0, 40),
        max_open_name_length=st.integers(0, 12),
        max_depth=st.integers(0, 6),
        max_items=st.integers(0, 10),
        max_object_items=st.integers(0, 30),
        max_object_memory=st.integers(0, 3000),
    ),
)
differential = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


class ImplementationTests(SynchronousTestCase):
    def test_names_the_core(self) -> None:
        """framing.implementation says "compiled" when the extension is in use and "pure" otherwise."""
        self.assertEqual(framing.implementation, "pure" if COMPILED is None else "compiled")

    def test_pure_forced(self) -> None:
        """CHUNKWIRE_PURE=1 makes a process choose the pure-Python core."""
        env = {**os.environ, "CHUNKWIRE_PURE": "1", "PYTHONPATH": str(ROOT)}
        found = subprocess.run(
            [sys.executable, "-c", "import framing; print(framing.implementation)"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        self.assertEqual(found.stdout.strip(), "pure")


@needs_compiled
class DifferentialTests(SynchronousTestCase):
    """Both cores, side by side on the same inputs."""

    @differential
    @given(values)
    def test_values(self, value: Any) -> None:
        """Encoding gives the same bytes or the same error on both cores, and decoding those bytes the same object."""
        encoded = {}
        for module in (None, COMPILED):
            with core(module):
                encoded[module] = (
                    outcome(lambda: dumps(value, USER_TYPES)),
                    outcome(lambda: Encoder(USER_TYPES).encode(value)),
                )
        self.assertEqual(encoded[None], encoded[COMPILED])
        if encoded[None][0][0] == "returned":
            data = dumps(value, USER_TYPES)
            decoded = [outcome(lambda m=m: _loads_with(m, data)) for m in (None, COMPILED)]
            self.assertEqual(decoded[0], decoded[1])
            self.assertEqual(decoded[0][0], "returned")

    @differential
    @given(
        st.lists(values, min_size=1, max_size=3),
        st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2**16), st.integers(0, 255)), max_size=4),
        st.lists(st.integers(0, 2**16), max_size=6),
        limits,
        st.booleans(),
    )
    def test_streams(
        self, objects: list[Any], edits: list[tuple[int, int, int]], points: list[int], limit: Limits | None, ping: bool
    ) -> None:
        """Mutated and truncated streams fed in random chunks give the same objects, Violations and errors."""
        tokens = []
        for obj in objects:
            try:
                tokens.append(Encoder(USER_TYPES).encode(obj))
            except ChunkwireError:
                continue
            if ping:
                tokens.append(bytes([0xC5]))
        data = mutate(PREAMBLE + b"".join(tokens), edits)
        chunks = cut(data, points)
        self.assertEqual(feed_all(None, chunks, limit, USER_TYPES), feed_all(COMPILED, chunks, limit, USER_TYPES))

    @differential
    @given(st.binary(max_size=200), st.lists(st.integers(0, 2**16), max_size=4), limits)
    def test_random_bytes(self, data: bytes, points: list[int], limit: Limits | None) -> None:
        """Random bytes after a preamble get the same treatment from both cores."""
        chunks = cut(PREAMBLE + data, points)
        self.assertEqual(feed_all(None, chunks, limit, USER_TYPES), feed_all(COMPILED, chunks, limit, USER_TYPES))


def _loads_with(module: ModuleType | None, data: bytes) -> Any:
    with core(module):
        return loads(data, registry=USER_TYPES)


@needs_compiled
class HandBackTests(SynchronousTestCase):
    """The compiled reader hands back to the Python decoder at the right point, committing nothing."""

    def test_object_split_across_feeds(self) -> None:
        """An object cut anywhere decodes the same as whole, and the ones after it still go through the fast path."""
        data = dumps([{"k": i, "v": [1.5, "x" * i]} for i in range(5)]) + dumps({"a": 1})[len(PREAMBLE) :]
        expected = [loads(dumps([{"k": i, "v": [1.5, "x" * i]} for i in range(5)])), {"a": 1}]
        for at in range(1, len(data)):
            decoder = Decoder()
            results = decoder.feed(data[:at]) + decoder.feed(data[at:])
            self.assertEqual(results, expected, at)

    def test_chunk_of_whole_objects_read_without_scan(self) -> None:
        """
        A chunk holding only whole objects of built-in kinds (a small RPC message, say) is read by the reader
        alone: no scan of the chunk is set up.  A chunk with more (here an object cut at its end) is scanned
        from where the reader stopped, and the cut object is completed by the next chunk.
        """
        decoder = Decoder()
        decoder.feed(PREAMBLE)
        scanner = decoder._scanner
        scans: list[int] = []
        scanChunk = scanner._scan_chunk

        def counted(buf: bytes, pos: int, *args: Any, **kwargs: Any) -> int:
            scans.append(pos)
            return scanChunk(buf, pos, *args, **kwargs)

        scanner._scan_chunk = counted  # type: ignore[method-assign]
        whole = b"".join(dumps(value)[len(PREAMBLE) :] for value in ([1, "a"], {"k": 2.5}, 42))
        self.assertEqual(decoder.feed(whole), [[1, "a"], {"k": 2.5}, 42])
        self.assertEqual(scans, [])
        first, second = (dumps(value)[len(PREAMBLE) :] for value in ([1], ["b" * 10, 3]))
        cut = len(second) // 2
        self.assertEqual(decoder.feed(first + second[:cut]), [[1]])
        self.assertEqual(scans, [len(first)])
        self.assertEqual(decoder.feed(second[cut:]), [["b" * 10, 3]])

    def test_user_type_inside(self) -> None:
        """An open type the reader does not build, deep in a list, is left to its unslicer with the list around it."""
        value = [1, [2, Point(3, [4])], {"k": Point("a", None)}]
        self.assertEqual(loads(dumps(value, USER_TYPES), registry=USER_TYPES), value)

    def test_violation_where(self) -> None:
        """A Violation inside an object the reader began carries the pure core's where."""
        bad = dumps([1, {"a": [2, "x"]}]).replace(b"\x31x", b"\x31\xff")
        results = [Decoder().feed(bad)]
        with core(None):
            results.append(Decoder().feed(bad))
        self.assertEqual(results[0], results[1])
        self.assertEqual(results[0][0].where, "[1]['a'][1]")

    def test_slicer_parts(self) -> None:
        """A slicer's container is written by the compiled core when its parts are built-ins, else by Python."""
        box = Box([1, "x", (2.5, None)])
        cyclic = Box([1])
        cyclic.items.append([cyclic])
        deep = Box([[[[1]]]])
        tagged = [Tagged((1, "a", [2])), Reversed((1, "a", [2])), Tagged((1, Point(2, 3)))]
        cases = [(box, None), (Box([box]), None), *((t, None) for t in tagged), (cyclic, None)]
        for value, limits in (*cases, (deep, Limits(max_depth=4))):
            found = []
            for module in (None, COMPILED):
                with core(module):
                    found.append(outcome(lambda value=value, limits=limits: Encoder(USER_TYPES, limits).encode(value)))
            self.assertEqual(found[0], found[1], value)
        self.assertEqual(found[0][1][0], "EncodingError")
        self.assertEqual(loads(dumps(Box([box]), USER_TYPES), registry=USER_TYPES), Box([box]))

    def test_registry_overrides_builtin(self) -> None:
        """A registry that builds "list" with its own unslicer is obeyed: the reader leaves lists to it."""
        registry = Registry(DEFAULT_REGISTRY)
        registry.register(Point, "list", lambda p: {"x": p.x, "y": p.y}, lambda state: Point(**state))
        self.assertEqual(loads(dumps([{"x": 1, "y": 2}]), registry=registry), Point(1, 2))

    def test_constraint_keeps_python_path(self) -> None:
        """A decoder with a constraint never uses the reader (every value is checked in Python)."""
        from framing.slicing._constraints import Integer, ListOf

        decoder = Decoder(constraint=ListOf(Integer()))
        results = decoder.feed(dumps([1, 2]) + dumps([3, "x"])[len(PREAMBLE) :])
        self.assertEqual(results[0], [1, 2])
        self.assertEqual((type(results[1]).__name__, results[1].where), ("KindRefused", "[1]"))

    def test_records_built_in_c(self) -> None:
        """A record of built-in values is built by the reader through its builder: its unslicer is never made."""
        made: list[PairUnslicer] = []
        Counting = counting_pairs(made)
        registry = Registry(USER_TYPES)
        registry.add_unslicer("tests.Pair", Counting)
        good = dumps([Pair((1, "a")), Pair((2, [3], None))], USER_TYPES)
        self.assertEqual(Decoder(registry=registry).feed(good), [[Pair((1, "a")), Pair((2, [3], None))]])
        self.assertEqual(made, [])
        refused = Decoder(registry=registry).feed(dumps(Pair(("x", 1)), USER_TYPES))
        self.assertEqual((type(refused[0]).__name__, refused[0].where), ("Violation", "<0>"))
        self.assertEqual(len(made), 1)
        self.assertEqual(
            Decoder(registry=registry).feed(dumps(Pair((1, Point(2, 3))), USER_TYPES)), [Pair((1, Point(2, 3)))]
        )
        self.assertEqual(len(made), 1)  # (a registered type inside is run where it sits: no hand-back)

    def test_decoder_follows_registry(self) -> None:
        """A decoder made after a registration reads the new record in C (a reader's makings are kept per registry)."""
        made: list[PairUnslicer] = []
        Counting = counting_pairs(made)
        registry = Registry(DEFAULT_REGISTRY)
        data = dumps(Pair((1, 2)), USER_TYPES)
        self.assertIsInstance(Decoder(registry=registry).feed(data)[0], framing.Violation)
        registry.add_unslicer("tests.Pair", Counting)
        self.assertEqual(Decoder(registry=registry).feed(data), [Pair((1, 2))])
        self.assertEqual(made, [])
        limits = Limits(max_items=1)
        self.assertIsInstance(Decoder(limits, registry).feed(dumps([1, 2]))[0], framing.Violation)
        self.assertEqual(Decoder(registry=registry).feed(dumps([1, 2])), [[1, 2]])

    def test_record_registered_late(self) -> None:
        """loads follows the registry: an unslicer registered after a first loads is used by the next one."""
        registry = Registry(DEFAULT_REGISTRY)
        data = dumps(Pair((1, 2)), USER_TYPES)
        with self.assertRaises(framing.Violation):
            loads(data, registry=registry)
        registry.add_unslicer("tests.Pair", PairUnslicer)
        self.assertEqual(loads(data, registry=registry), Pair((1, 2)))

    def test_encoder_tokens(self) -> None:
        """Encoder.tokens gives the bytes encode writes for records and built-in containers, and None for the rest."""
        encoder = Encoder(USER_TYPES)
        for value in ([1, "a"], (2.5, None), {"k": b"v"}, Pair((1, [2, "x"])), Tagged((1, 2))):
            tokens = encoder.tokens(value)
            if type(value) is Tagged:
                self.assertIsNone(tokens)  # its slicer declares no record_name
            else:
                self.assertEqual(tokens, encoder.encode(value), value)
        for value in (Pair((1, Point(2, 3))), Point(1, 2), 7, [2**70]):
            self.assertIsNone(encoder.tokens(value), value)
        with core(None):
            self.assertIsNone(Encoder(USER_TYPES).tokens([1, 2]))

    def test_encoder_tokens_follow_registry(self) -> None:
        """A slicer registered after Encoder.tokens first saw a type is obeyed from then on."""
        registry = Registry(USER_TYPES)
        encoder = Encoder(registry)
        self.assertIsNotNone(encoder.tokens(Pair((1, 2))))
        registry.add_slicer(Pair, TaggedSlicer())
        self.assertIsNone(encoder.tokens(Pair((1, 2))))

    def test_pure_forced_in_process(self) -> None:
        """A decoder made while the pure core is chosen has no compiled reader."""
        with core(None):
            self.assertIsNone(Decoder().fast_objects)
        self.assertIsNotNone(Decoder().fast_objects)


FUZZ_RUNS = int(os.environ.get("CHUNKWIRE_CORES_FUZZ_RUNS", "2000"))
"""Executions of L{MutationFuzzTests} (10^6 for the campaign, under C{dev.py asan} too)."""


def seed_streams() -> list[bytes]:
    """Streams to mutate: every wire vector, the decoder fuzz corpus and the bodies of a few objects."""
    seeds = [bytes.fromhex(v["hex"]) for name in test_vectors.ALL_FILES for v in test_vectors.load_vectors(name)]
    corpus = ROOT / "fuzz" / "corpus" / "decoder"
    if corpus.is_dir():
        for path in sorted(corpus.iterdir())[:400]:
            data = path.read_bytes()
            seeds.append(data[1 + 2 * (data[0] % 8) :] if data else b"")
    objects = [[1, 2.5, "é", b"x", None, True, (3, [])], {"id": 1, "m": "get", "a": [{"k": -(2**40)}]}, list(range(40))]
    seeds += [dumps(obj) for obj in objects] + [dumps(Point(1, [2]), USER_TYPES)]
    seeds += [dumps(Pair((1, "x", [2.5])), USER_TYPES), dumps([Pair((-3, {"k": b"v"}))], USER_TYPES)]
    return [seed for seed in seeds if seed]


@needs_compiled
class MutationFuzzTests(SynchronousTestCase):
    """Random mutations of real streams, in random chunks, against both cores."""

    def test_mutations(self) -> None:
        """Every mutated stream gives the same events on both cores (a seeded random campaign, FUZZ_RUNS long)."""
        rng = random.Random(int(os.environ.get("CHUNKWIRE_CORES_SEED", "17")))
        seeds = seed_streams()
        small = Limits(max_items=6, max_object_items=20, max_object_memory=2000, max_depth=4, max_string_length=30)
        for run in range(FUZZ_RUNS):
            data = bytearray(rng.choice(seeds))
            if rng.random() < 0.5:
                data += rng.choice(seeds)[len(PREAMBLE) :]
            for _ in range(rng.randrange(4)):
                at = rng.randrange(len(data) + 1)
                how = rng.randrange(4)
                if how == 0 and at < len(data):
                    data[at] = rng.randrange(256)
                elif how == 1:
                    del data[at : at + rng.randrange(1, 9)]
                elif how == 2:
                    data[at:at] = rng.randbytes(rng.randrange(1, 4))
                elif how == 3 and rng.random() < 0.3:
                    del data[at:]
            chunks = cut(bytes(data), [rng.randrange(len(data) + 1) for _ in range(rng.randrange(5))])
            limit = small if run % 3 == 0 else None
            self.assertEqual(
                feed_all(None, chunks, limit, USER_TYPES), feed_all(COMPILED, chunks, limit, USER_TYPES), bytes(data)
            )


@needs_compiled
class TrackedKeyTests(SynchronousTestCase):
    """With hash randomization off, str and bytes dict keys are charged alike by both cores."""

    def setUp(self) -> None:
        # What PYTHONHASHSEED=0 makes of both cores (the hashes themselves stay randomized).
        self.patch(builtin, "_STR", builtin._Never)
        self.patch(builtin, "_BYTES", builtin._Never)
        self.patch(_core, "_RANDOMIZED", False)

    def test_budget_edge(self) -> None:
        """Around max_object_memory, dicts of str and bytes keys are kept or refused alike, the kept ones in C."""
        taken = 0
        for keys in range(1, 12):
            value = {**{f"k{i}": i for i in range(keys)}, b"b": [1.5]}
            data = dumps(value)
            for memory in range(200, 2600, 37):
                limits = Limits(max_object_memory=memory)
                found = [outcome(lambda m=m, d=data, lim=limits: _loads_limited(m, d, lim)) for m in (None, COMPILED)]
                self.assertEqual(found[0], found[1], (keys, memory))
                taken += _core.reader(limits, DEFAULT_REGISTRY).one(data, len(PREAMBLE)) is not None
        self.assertGreater(taken, 0)


def _loads_limited(module: ModuleType | None, data: bytes, limits: Limits) -> Any:
    with core(module):
        return loads(data, limits)


LEAK_ROUNDS = int(os.environ.get("CHUNKWIRE_CORES_LEAK_ROUNDS", "2000"))
"""Rounds of L{LeakTests}; each decodes and encodes about 50 objects (20000: 10^6 objects)."""


@needs_compiled
class LeakTests(SynchronousTestCase):
    """The compiled core keeps no reference it should not: memory returns to where it was."""

    def test_allocated_blocks_return(self) -> None:
        """Decoding and encoding many objects (handed back, refused, long) leaves the blocks as they were."""
        value = {"id": 7, "xs": [1, -2, 2**63, -(2**63) - 1, 1.5, None, True], "s": "é" * 3, "b": b"x", "t": (1, [])}
        streams = [
            dumps(value),
            dumps([1, "x"]).replace(b"\x31x", b"\x31\xff"),  # refused: invalid UTF-8
            dumps([1, {"k": Point(1, 2)}], USER_TYPES),  # a registered type, run where it sits
            dumps([Point(1, [2]), "x"], USER_TYPES).replace(b"\x31x", b"\x31\xff"),  # refused after one
            dumps([Box([1]), {"k": 2}], USER_TYPES)[:-2],  # cut: handed back before Box's unslicer runs
            dumps({Point(1, 2): 3}, USER_TYPES),  # handed back at a key the reader does not take
            dumps({"a": 1, "b": [2, 3]})[:-3],  # handed back at the end of the buffer
            dumps({(1, 2): 3}),  # handed back at a key whose hash is tracked
            dumps([Pair((1, "x", [2.5]))], USER_TYPES),  # a record, built through its builder
            dumps(Pair(("x", 1)), USER_TYPES),  # a record its builder hands back (then refused)
        ]

        def once() -> None:
            dumps(value)
            Encoder(USER_TYPES).encode([value, Point(1, [2])])
            Encoder(USER_TYPES).tokens(Pair((1, value)))
            for stream in streams:
                decoder = Decoder(registry=USER_TYPES)
                decoder.feed(stream)
            loads(streams[0])
            decoder = Decoder()
            for at in range(0, len(long), 4096):  # a long body, taken chunk by chunk
                decoder.feed(long[at : at + 4096])
            Decoder().feed(long[:50_000])  # dropped in the middle of its body

        long = dumps(b"y" * 100_000)
        for _ in range(100):
            once()
        gc.collect()
        before = sys.getallocatedblocks()
        for _ in range(LEAK_ROUNDS):
            once()
        gc.collect()
        self.assertLess(sys.getallocatedblocks() - before, 100)


class PureAtomVectorTests(test_vectors.AtomVectorTests):
    """The atom vectors on the pure core."""

    def setUp(self) -> None:
        self.patch(_core, "speedups", None)


class PureContainerVectorTests(test_vectors.ContainerVectorTests):
    """The container vectors on the pure core."""

    def setUp(self) -> None:
        self.patch(_core, "speedups", None)


class PureLargeVectorTests(test_vectors.LargeVectorTests):
    """The large vectors on the pure core."""

    def setUp(self) -> None:
        self.patch(_core, "speedups", None)


class PureErrorVectorTests(test_vectors.ErrorVectorTests):
    """The error vectors on the pure core."""

    def setUp(self) -> None:
        self.patch(_core, "speedups", None)


class PureStreamVectorTests(test_vectors.StreamVectorTests):
    """The stream vectors on the pure core."""

    def setUp(self) -> None:
        self.patch(_core, "speedups", None)
