"""
Tests for the pluggable slicing layer: the registry (user types, local
registries, nothing unregistered built from the wire, no pickle), the
built-in types round tripping exactly, nesting limits, and shared references
and cycles.

The small token helpers at the top are shared with C{test_constraints},
C{test_arrays} and C{test_recovery}, which craft streams by hand.
"""

from __future__ import annotations

import ast
import dataclasses
import io
import math
import os
import subprocess
import sys
import tokenize
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyClass, verifyObject

import framing
from framing import Decoder, Encoder, EncodingError, Limits, ProtocolError, Violation, dumps, loads
from framing._errors import BodyTooLarge, InvalidValue, TooDeep, UnknownType
from framing.slicing._interfaces import ISlicer, IUnslicer
from framing.slicing._registry import DEFAULT_REGISTRY, Registry
from framing.wire import (
    BODY_KINDS,
    BYTES,
    CLOSE,
    INT,
    KIND_NAMES,
    OPEN,
    PREAMBLE,
    STRING,
    decode_header,
    encode_header,
)
from tests.properties import examples

FRAMING_DIR = Path(framing.__file__).resolve().parent

# -- helpers shared by the slicing test modules --------------------------


def token(kind: int, payload: bytes | int = 0) -> bytes:
    """One token: a body kind with its body, or a value kind with its value."""
    if isinstance(payload, (bytes, bytearray)):
        return encode_header(kind, len(payload)) + bytes(payload)
    return encode_header(kind, payload)


def text(value: str) -> bytes:
    """A STRING token."""
    return token(STRING, value.encode("utf-8"))


def container(name: str, *parts: bytes) -> bytes:
    """OPEN C{name}, the given parts (already tokens), CLOSE."""
    return token(OPEN, name.encode("ascii")) + b"".join(parts) + token(CLOSE)


def encoded(obj: Any, registry: Registry | None = None) -> bytes:
    """The tokens of one object, without the preamble."""
    return Encoder(registry).encode(obj)


def tokens(data: bytes, start: int = 0) -> list[tuple[str, Any]]:
    """Split C{data[start:]} into (kind name, value or body) pairs."""
    out: list[tuple[str, Any]] = []
    pos = start
    while pos < len(data):
        header = decode_header(data, pos, len(data))
        assert header is not None, f"incomplete header at {pos}"
        kind, value, size = header
        pos += size
        if kind in BODY_KINDS:
            out.append((KIND_NAMES[kind], data[pos : pos + value]))
            pos += value
        else:
            out.append((KIND_NAMES[kind], value))
    return out


def same(a: Any, b: Any) -> bool:
    """
    Strict equality: equal values of exactly the same types all the way down,
    NaN equal to NaN, -0.0 distinct from 0.0, dict order significant.
    """
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return len(a) == len(b) and all(
            same(ka, kb) and same(va, vb) for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True)
        )
    if isinstance(a, (set, frozenset)):
        rest = list(b)
        for x in a:
            for i, y in enumerate(rest):
                if same(x, y):
                    del rest[i]
                    break
            else:
                return False
        return not rest
    return bool(a == b)


def feed_all(decoder: Decoder, data: bytes, step: int | None = None) -> list[Any]:
    """Feed C{data} whole, or in pieces of C{step} bytes; return every result."""
    if step is None:
        return decoder.feed(data)
    results: list[Any] = []
    for i in range(0, len(data), step):
        results += decoder.feed(data[i : i + step])
    return results


scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.binary(max_size=40)
    | st.text(max_size=20)
    | st.text(st.characters(min_codepoint=0x10000, max_codepoint=0x10FFFF), max_size=4)
)
hashables = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3).map(tuple) | st.frozensets(inner, max_size=3),
    max_leaves=6,
)
values = st.recursive(
    scalars | st.binary(max_size=16).map(bytearray) | st.binary(max_size=16).map(memoryview),
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.lists(inner, max_size=5).map(tuple)
        | st.dictionaries(hashables, inner, max_size=5)
        | st.sets(hashables, max_size=5)
        | st.frozensets(hashables, max_size=5)
    ),
    max_leaves=25,
)


# -- user types used below ------------------------------------------------


class Money:
    """A user type sent with a pair of functions."""

    def __init__(self, cents: int, currency: str) -> None:
        self.cents = cents
        self.currency = currency

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Money) and (self.cents, self.currency) == (other.cents, other.currency)

    __hash__ = None  # type: ignore[assignment]


@dataclasses.dataclass
class Point:
    """A user dataclass sent with no functions."""

    x: int
    y: int
    label: str = ""


@dataclasses.dataclass(frozen=True)
class Tag:
    """A frozen dataclass."""

    name: str


class Interval:
    """A user type sent by a hand-written slicer/unslicer pair."""

    def __init__(self, low: int, high: int) -> None:
        self.low = low
        self.high = high


@implementer(ISlicer)
class IntervalSlicer:
    """Writes an Interval as OPEN "test.interval", low, high, CLOSE."""

    def slice(self, obj: Interval, encoder: Encoder) -> None:
        encoder.write_container("test.interval", obj, (obj.low, obj.high))


@implementer(IUnslicer)
class IntervalUnslicer:
    """Builds an Interval from two ints, refusing any body token at its header."""

    open_type = "test.interval"

    def __init__(self, limits: Limits) -> None:
        self.parts: list[int] = []

    def check_token(self, kind: int, size: int) -> None:
        raise InvalidValue("an interval holds two small ints, no bodies")

    def receive_child(self, obj: Any) -> None:
        if type(obj) is not int or len(self.parts) == 2:
            raise InvalidValue("an interval holds exactly two ints")
        self.parts.append(obj)

    def finish(self) -> Interval:
        if len(self.parts) != 2 or self.parts[0] > self.parts[1]:
            raise InvalidValue("an interval needs low <= high")
        return Interval(*self.parts)

    def child_where(self) -> str:
        return ("<low>", "<high>", "<extra>")[len(self.parts)]


def local_registry() -> Registry:
    """A registry local to one test, holding the user types above."""
    registry = Registry(parent=DEFAULT_REGISTRY)
    registry.register(Money, "test.money", lambda m: [m.cents, m.currency], lambda s: Money(*s))
    registry.register(Point, "test.point")
    registry.register(Tag, "test.tag")
    registry.register(Interval, "test.interval", slicer=IntervalSlicer(), unslicer=IntervalUnslicer)
    return registry


# -- the registry ------------------------------------------------------


class RegistryTests(SynchronousTestCase):
    """User types travel by open-type name through a registry."""

    def setUp(self) -> None:
        self.registry = local_registry()

    def roundtrip(self, obj: Any) -> Any:
        return loads(dumps(obj, registry=self.registry), registry=self.registry)

    def test_function_pair(self) -> None:
        """A type registered with to_wire/from_wire round trips, alone and inside containers."""
        self.assertEqual(self.roundtrip(Money(1999, "EUR")), Money(1999, "EUR"))
        self.assertEqual(self.roundtrip({"price": [Money(5, "USD")]}), {"price": [Money(5, "USD")]})

    def test_function_pair_wire_shape(self) -> None:
        """A registered type travels as OPEN name, its state, CLOSE: the name is the only type information."""
        data = encoded(Money(5, "USD"), self.registry)
        self.assertEqual(data, container("test.money", encoded([5, "USD"])))

    def test_dataclass_without_functions(self) -> None:
        """A dataclass registered with no functions round trips, its init fields travelling as a dict."""
        self.assertEqual(self.roundtrip(Point(3, -4, "p")), Point(3, -4, "p"))
        self.assertEqual(self.roundtrip(Tag("x")), Tag("x"))
        self.assertEqual(
            encoded(Point(1, 2), self.registry), container("test.point", encoded({"x": 1, "y": 2, "label": ""}))
        )

    def test_dataclass_unknown_field_refused(self) -> None:
        """A dataclass state naming a field the class lacks is a Violation, never passed to the constructor."""
        data = PREAMBLE + container("test.point", encoded({"x": 1, "y": 2, "evil": 3}))
        self.assertRaises(Violation, loads, data, registry=self.registry)

    def test_dataclass_missing_field_refused(self) -> None:
        """A dataclass state missing a required field is a Violation."""
        data = PREAMBLE + container("test.point", encoded({"x": 1}))
        self.assertRaises(Violation, loads, data, registry=self.registry)

    def test_dataclass_state_not_a_dict_refused(self) -> None:
        """A dataclass state that is not a dict is a Violation."""
        data = PREAMBLE + container("test.point", encoded([1, 2]))
        self.assertRaises(Violation, loads, data, registry=self.registry)

    def test_register_non_dataclass_without_functions(self) -> None:
        """Registering a plain class with neither functions nor slicers is a TypeError."""
        self.assertRaises(TypeError, Registry().register, Money, "test.nope")

    def test_custom_slicer_unslicer_pair(self) -> None:
        """A hand-written ISlicer/IUnslicer pair round trips its type and verifies against the interfaces."""
        verifyObject(ISlicer, IntervalSlicer())
        verifyClass(IUnslicer, IntervalUnslicer)
        verifyObject(IUnslicer, IntervalUnslicer(Limits()))
        result = self.roundtrip([Interval(1, 5), Interval(-3, -3)])
        self.assertEqual([(i.low, i.high) for i in result], [(1, 5), (-3, -3)])

    def test_slicer_written_as_the_islicer_docstring_says(self) -> None:
        """A slicer calling encoder.write_container(name, obj, parts), as ISlicer documents, works."""

        @implementer(ISlicer)
        class DocumentedSlicer:
            def slice(self, obj: Interval, encoder: Any) -> None:
                encoder.write_container("test.interval", obj, (obj.low, obj.high))

        registry = Registry(parent=DEFAULT_REGISTRY)
        registry.register(Interval, "test.interval", slicer=DocumentedSlicer(), unslicer=IntervalUnslicer)
        back = loads(dumps([Interval(1, 2)], registry=registry), registry=registry)
        self.assertEqual((back[0].low, back[0].high), (1, 2))

    def test_custom_unslicer_refusals(self) -> None:
        """A custom unslicer's refusals (at a header, a child or finish) become Violations naming the position."""
        bad_body = PREAMBLE + container("test.interval", text("one"), encoded(2))
        bad_order = PREAMBLE + container("test.interval", encoded(5), encoded(1))
        too_many = PREAMBLE + container("test.interval", encoded(1), encoded(2), encoded(3))
        for data, where in [(bad_body, "<low>"), (bad_order, ""), (too_many, "<extra>")]:
            with self.assertRaises(InvalidValue) as caught:
                loads(data, registry=self.registry)
            self.assertEqual(caught.exception.where, where)

    def test_slicer_must_provide_islicer(self) -> None:
        """A slicer that does not provide ISlicer is refused at registration."""
        self.assertRaises(TypeError, Registry().add_slicer, Interval, object())

    def test_half_a_pair_refused(self) -> None:
        """A slicer without an unslicer (or to_wire without from_wire) is refused at registration."""
        registry = Registry()
        self.assertRaises(TypeError, registry.register, Interval, "x", slicer=IntervalSlicer())
        self.assertRaises(TypeError, registry.register, Money, "x", to_wire=lambda m: 1)

    def test_bad_names_refused(self) -> None:
        """Open-type names must be 1 to 64 ASCII characters."""
        registry = Registry()
        for name in ["", "caf\xe9", "x" * 65]:
            self.assertRaises(ValueError, registry.register, Money, name, lambda m: 1, lambda s: s)

    def test_local_registry_stays_local(self) -> None:
        """Registrations in Registry(parent=DEFAULT_REGISTRY) are unknown to the default encoder and decoder."""
        self.assertIsNone(DEFAULT_REGISTRY.unslicer_for("test.money"))
        self.assertIsNone(DEFAULT_REGISTRY.slicer_for(Money))
        self.assertRaises(EncodingError, dumps, Money(1, "EUR"))
        data = dumps(Money(1, "EUR"), registry=self.registry)
        self.assertRaises(UnknownType, loads, data)

    def test_local_registry_sees_parent(self) -> None:
        """A child registry still sends and builds everything its parent knows."""
        import array

        obj = [bytearray(b"ab"), array.array("i", [1, 2]), {1: (2, 3)}, Money(1, "EUR")]
        self.assertTrue(same(self.roundtrip(obj)[:3], obj[:3]))

    def test_child_override_does_not_change_parent(self) -> None:
        """Two children of one parent may build the same name differently without affecting each other."""
        other = Registry(parent=DEFAULT_REGISTRY)
        other.register(Money, "test.money", lambda m: m.cents, lambda s: ("cents", s))
        data = dumps(Money(7, "EUR"), registry=self.registry)
        self.assertEqual(loads(data, registry=self.registry), Money(7, "EUR"))
        self.assertEqual(loads(data, registry=other), ("cents", [7, "EUR"]))
        self.assertEqual(loads(dumps(Money(7, "EUR"), registry=other), registry=other), ("cents", 7))

    def test_child_sees_parent_registration_made_after_lookup(self) -> None:
        """A type registered on the parent after a child looked it up (and missed) is then found by the child."""
        parent = Registry(parent=DEFAULT_REGISTRY)
        child = Registry(parent=parent)
        self.assertIsNone(child.slicer_for(Money))  # a miss, e.g. an EncodingError before registering
        parent.register(Money, "test.money", lambda m: [m.cents, m.currency], lambda s: Money(*s))
        self.assertIsNotNone(child.slicer_for(Money))
        self.assertEqual(loads(dumps(Money(1, "X"), registry=child), registry=child), Money(1, "X"))

    def test_subclass_uses_nearest_registered_base(self) -> None:
        """An unregistered subclass of a registered type is sent with its base's slicer."""

        class Euro(Money):
            pass

        self.assertEqual(self.roundtrip(Euro(3, "EUR")), Money(3, "EUR"))

    def test_module_level_register(self) -> None:
        """framing.slicing._registry.register adds to the default registry used by plain dumps/loads."""
        from framing.slicing import _registry as module

        @dataclasses.dataclass
        class Celsius:
            degrees: float

        name = "tests.slicing.Celsius"
        module.register(Celsius, name)
        self.addCleanup(_forget, DEFAULT_REGISTRY, Celsius, name)
        self.assertEqual(loads(dumps([Celsius(21.5)])), [Celsius(21.5)])

    def test_register_is_a_public_name_of_framing(self) -> None:
        """framing.register is public, as ARCHITECTURE.md lists it, and registers on the default registry."""
        self.assertEqual(framing.register, DEFAULT_REGISTRY.register)


def _forget(registry: Registry, cls: type, name: str) -> None:
    # Undo a registration on the shared default registry (test hygiene only).
    registry._unslicers.pop(name, None)
    registry._slicers.pop(cls, None)
    registry._slicer_cache.clear()
    registry.codec_cache.clear()  # (what the cores worked out from it, as register clears it)


class NothingUnregisteredIsBuiltTests(SynchronousTestCase):
    """Only what a registry names is ever built from the wire."""

    def test_unknown_open_type_is_a_violation(self) -> None:
        """An OPEN naming an unregistered type is an UnknownType Violation and the next object decodes."""
        decoder = Decoder()
        data = PREAMBLE + container("no.such.Type", encoded([1, 2])) + encoded("next")
        results = decoder.feed(data)
        self.assertEqual(len(results), 2)
        self.assertIsInstance(results[0], UnknownType)
        self.assertEqual(results[1], "next")

    def test_import_by_name_is_not_possible(self) -> None:
        """Streams naming callables (os.system, __builtin__.eval, ...) are Violations and call nothing."""
        calls: list[Any] = []
        self.patch(os, "system", lambda *a: calls.append(a))
        names = [
            "os.system",
            "__builtin__.eval",
            "builtins.eval",
            "builtins.exec",
            "subprocess.Popen",
            "pickle.loads",
            "copyreg._reconstructor",
            "posix.system",
            "__main__.Money",
            f"{Money.__module__}.{Money.__qualname__}",
            "Money",
        ]
        for name in names:
            data = PREAMBLE + container(name, text("touch /tmp/chunkwire-pwned"))
            with self.assertRaises(UnknownType, msg=name):
                loads(data)
            # A registry that knows Money by its registered name still refuses its Python name.
            with self.assertRaises(UnknownType, msg=name):
                loads(data, registry=local_registry())
        self.assertEqual(calls, [])

    def test_nested_unknown_name_where(self) -> None:
        """An unknown type nested inside containers is refused with its position."""
        data = PREAMBLE + container(
            "dict", text("cmd"), container("list", encoded(1), container("os.system", text("x")))
        )
        with self.assertRaises(UnknownType) as caught:
            loads(data)
        self.assertEqual(caught.exception.where, "['cmd'][1]")

    def test_unencodable_type_refused_at_encode(self) -> None:
        """An unregistered class instance is an EncodingError at encode, never sent by its Python name."""

        class Unregistered:
            pass

        self.assertRaises(EncodingError, dumps, Unregistered())
        self.assertRaises(EncodingError, dumps, {"f": Unregistered})
        self.assertRaises(EncodingError, dumps, [len])

    def test_no_pickle_in_framing_source(self) -> None:
        """No module under framing/ imports pickle-like machinery or names __reduce__, eval or __import__."""
        forbidden_modules = {
            "pickle",
            "_pickle",
            "cPickle",
            "marshal",
            "copyreg",
            "shelve",
            "dill",
            "importlib",
            "pydoc",
        }
        forbidden_names = {
            "pickle",
            "__reduce__",
            "__reduce_ex__",
            "__import__",
            "eval",
            "exec",
            "import_module",
            "find_class",
            "locate",
        }
        sources = sorted(FRAMING_DIR.rglob("*.py"))
        self.assertGreater(len(sources), 10)
        problems: list[str] = []
        for path in sources:
            source = path.read_text()
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.Import):
                    mods = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    mods = [node.module or ""]
                else:
                    continue
                problems += [f"{path.name}: imports {m}" for m in mods if m.split(".")[0] in forbidden_modules]
            for tok in tokenize.generate_tokens(io.StringIO(source).readline):
                if tok.type == tokenize.NAME and tok.string in forbidden_names:
                    problems.append(f"{path.name}:{tok.start[0]}: uses {tok.string}")
                if tok.type == tokenize.STRING and "__reduce" in tok.string:
                    problems.append(f"{path.name}:{tok.start[0]}: names __reduce__")
        self.assertEqual(problems, [])

    def test_decoding_never_imports_pickle(self) -> None:
        """Encoding and decoding every supported kind in a fresh interpreter never loads pickle."""
        code = (
            "import sys, array, dataclasses\n"
            "from framing import dumps, loads\n"
            "from framing.slicing._registry import Registry\n"
            "@dataclasses.dataclass\n"
            "class P:\n"
            "    x: int\n"
            "r = Registry(); r.register(P, 'p')\n"
            "obj = [None, True, 2**70, -1.5, b'b', 's', (1,), {1: 2}, {3}, frozenset([4]),\n"
            "       bytearray(b'x'), memoryview(b'y'), array.array('d', [1.0]), P(1)]\n"
            "from framing.slicing._registry import DEFAULT_REGISTRY\n"
            "r = Registry(parent=DEFAULT_REGISTRY); r.register(P, 'p')\n"
            "assert loads(dumps(obj, registry=r), registry=r)[13] == P(1)\n"
            "print(sorted(m for m in sys.modules if 'pickle' in m))\n"
        )
        env = {**os.environ, "PYTHONPATH": str(FRAMING_DIR.parent)}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "[]")


class FromWireFailureTests(SynchronousTestCase):
    """A failing from_wire (or a buggy unslicer) refuses only its object."""

    def setUp(self) -> None:
        self.registry = Registry(parent=DEFAULT_REGISTRY)

        def from_wire(state: Any) -> Money:
            if state[0] < 0:
                raise ValueError("negative money")
            return Money(*state)

        self.registry.register(Money, "test.money", lambda m: [m.cents, m.currency], from_wire)

    def test_exception_refuses_only_that_object(self) -> None:
        """from_wire raising ValueError yields an InvalidValue in that object's place; neighbours decode."""
        enc = Encoder(self.registry)
        data = PREAMBLE + enc.encode(Money(1, "A")) + enc.encode([0, Money(-1, "B")]) + enc.encode(Money(2, "C"))
        for step in (None, 1, 7):
            results = feed_all(Decoder(registry=self.registry), data, step)
            self.assertEqual(len(results), 3)
            self.assertEqual(results[0], Money(1, "A"))
            self.assertIsInstance(results[1], InvalidValue)
            self.assertEqual(results[1].where, "[1]")
            self.assertIn("negative money", str(results[1]))
            self.assertEqual(results[2], Money(2, "C"))

    def test_violation_from_from_wire_passes_through(self) -> None:
        """A Violation raised by from_wire keeps its own class."""
        registry = Registry(parent=DEFAULT_REGISTRY)

        def refuse(state: Any) -> Any:
            raise BodyTooLarge("my own limit")

        registry.register(Money, "test.money", lambda m: m.cents, refuse)
        self.assertRaises(BodyTooLarge, loads, dumps(Money(1, "A"), registry=registry), registry=registry)

    def test_buggy_unslicer_methods_refuse_only_their_object(self) -> None:
        """An unslicer whose constructor, check_token, receive_child or finish raises refuses only its object."""
        for method in ("__init__", "check_token", "receive_child", "finish"):
            unslicer = _buggy_unslicer(method)
            registry = Registry(parent=DEFAULT_REGISTRY)
            registry.register(Interval, "test.interval", slicer=_BodySlicer(), unslicer=unslicer)
            enc = Encoder(registry)
            data = PREAMBLE + enc.encode(1) + enc.encode({"k": Interval(1, 2)}) + enc.encode(3)
            results = Decoder(registry=registry).feed(data)
            self.assertEqual(len(results), 3, method)
            self.assertEqual(results[0], 1)
            self.assertIsInstance(results[1], Violation, method)
            self.assertEqual(results[2], 3)


@implementer(ISlicer)
class _BodySlicer:
    def slice(self, obj: Interval, encoder: Encoder) -> None:
        encoder.write_container("test.interval", obj, (b"body", obj.low))


def _buggy_unslicer(method: str) -> type:
    class Buggy:
        open_type = "test.interval"

        def __init__(self, limits: Limits) -> None:
            self.parts: list[Any] = []
            if method == "__init__":
                raise RuntimeError("bug in __init__")

        def check_token(self, kind: int, size: int) -> None:
            if method == "check_token":
                raise RuntimeError("bug in check_token")

        def receive_child(self, obj: Any) -> None:
            if method == "receive_child":
                raise KeyError("bug in receive_child")
            self.parts.append(obj)

        def finish(self) -> Any:
            if method == "finish":
                raise ZeroDivisionError("bug in finish")
            return self.parts

        def child_where(self) -> str:
            return ""

    return implementer(IUnslicer)(Buggy)


# -- built-in types -----------------------------------------------------


class BuiltinRoundTripTests(SynchronousTestCase):
    """Every built-in type round trips exactly."""

    @settings(deadline=None, max_examples=examples(300))
    @given(values)
    def test_roundtrip(self, obj: Any) -> None:
        """Any mix of built-in values decodes to an equal value of the same types."""
        self.assertTrue(same(loads(dumps(obj)), obj), repr(obj))

    @settings(deadline=None, max_examples=50)
    @given(st.lists(values, min_size=1, max_size=4), st.integers(1, 13))
    def test_stream_of_objects_chunked(self, objs: list[Any], step: int) -> None:
        """Several objects in one stream, fed in small pieces, decode in order."""
        encoder = Encoder()
        data = PREAMBLE + b"".join(encoder.encode(o) for o in objs)
        results = feed_all(Decoder(), data, step)
        self.assertTrue(same(results, objs))

    @settings(deadline=None, max_examples=examples(200))
    @given(st.integers())
    def test_int_any_size(self, value: int) -> None:
        """Any int round trips as an int."""
        self.assertTrue(same(loads(dumps(value)), value))

    def test_int_boundaries(self) -> None:
        """Ints around every header width and the 64-bit/BIGINT boundary round trip."""
        edges = [0, 11, 12, 255, 256, 2**16, 2**32, 2**64 - 1, 2**64, 2**64 + 1, 2**200]
        for value in edges + [-1 - v for v in edges] + [-v for v in edges]:
            self.assertTrue(same(loads(dumps(value)), value), value)

    def test_huge_int(self) -> None:
        """An int at max_bigint_length round trips; one byte longer is BodyTooLarge unless the limit is raised."""
        limit = Limits().max_bigint_length
        fits = 2 ** (8 * limit) - 1
        self.assertEqual(loads(dumps(fits)), fits)
        self.assertEqual(loads(dumps(-fits)), -fits)
        too_big = 2 ** (8 * limit)
        self.assertRaises(BodyTooLarge, loads, dumps(too_big))
        self.assertEqual(loads(dumps(too_big), limits=Limits(max_bigint_length=1 << 20)), too_big)

    def test_bool_is_not_int(self) -> None:
        """True and False arrive as bools, 1 and 0 as ints."""
        self.assertTrue(same(loads(dumps([True, False, 1, 0])), [True, False, 1, 0]))

    def test_special_floats(self) -> None:
        """inf, -inf, nan, -0.0 and subnormals keep their exact bits."""
        import struct

        for value in [math.inf, -math.inf, math.nan, -0.0, 0.0, 5e-324, -5e-324, 1.7976931348623157e308]:
            back = loads(dumps(value))
            self.assertEqual(struct.pack(">d", back), struct.pack(">d", value))

    def test_bytes_like(self) -> None:
        """bytes, bytearray and memoryview arrive as the same types with equal bytes."""
        back = loads(dumps([b"\x00\xff", bytearray(b"ba"), memoryview(b"mv"), memoryview(b"abcdef")[::2]]))
        self.assertEqual([type(x) for x in back], [bytes, bytearray, memoryview, memoryview])
        self.assertEqual([bytes(x) for x in back], [b"\x00\xff", b"ba", b"mv", b"ace"])

    def test_memoryview_of_wider_items_arrives_as_bytes(self) -> None:
        """A memoryview over 4-byte items arrives as a byte memoryview of the same bytes."""
        import array

        source = array.array("i", [1, -2, 3])
        back = loads(dumps(memoryview(source)))
        self.assertIsInstance(back, memoryview)
        self.assertEqual(back.tobytes(), source.tobytes())

    def test_text(self) -> None:
        """Text of every plane, including non-BMP characters and NUL, round trips."""
        for value in ["", "\x00", "caf\xe9", "\u20ac", "\U0001f600\U00010348", "a" * 70000]:
            self.assertEqual(loads(dumps(value)), value)

    def test_lone_surrogate_refused_at_encode(self) -> None:
        """A str that is not valid Unicode (a lone surrogate) is an EncodingError."""
        self.assertRaises(EncodingError, dumps, "\ud800")

    def test_empty_containers(self) -> None:
        """Empty containers of each kind round trip with their types."""
        obj = [[], (), {}, set(), frozenset(), b"", "", bytearray()]
        self.assertTrue(same(loads(dumps(obj)), obj))

    def test_container_types_are_kept(self) -> None:
        """Tuples stay tuples, sets stay sets, frozensets stay frozensets, also as keys."""
        obj = {(1, 2): [frozenset({(3,)})], frozenset({"a"}): ({4}, [5])}
        self.assertTrue(same(loads(dumps(obj)), obj))

    def test_dict_order_kept(self) -> None:
        """A dict arrives with its keys in the sender's order."""
        obj = {k: k for k in [5, "z", 1, b"a", -3.5, None, True]}
        self.assertEqual(list(loads(dumps(obj))), list(obj))

    def test_builtin_subclasses_arrive_as_base(self) -> None:
        """An unregistered subclass of a built-in type is sent as its base type."""

        class MyList(list):  # type: ignore[type-arg]
            pass

        class MyStr(str):
            pass

        back = loads(dumps(MyList([MyStr("a")])))
        self.assertTrue(same(back, ["a"]))


class DepthTests(SynchronousTestCase):
    """Nesting up to Limits.max_depth works; one level more is refused at both ends."""

    @staticmethod
    def nested(depth: int, kind: str = "list") -> Any:
        obj: Any = "leaf"
        for level in range(depth):
            if kind == "mixed":
                obj = ([obj], {"k": obj}, (obj,))[level % 3]
            else:
                obj = [obj] if kind == "list" else {"k": obj} if kind == "dict" else (obj,)
        return obj

    def test_max_depth_roundtrips(self) -> None:
        """Containers nested exactly max_depth deep round trip, for each container type."""
        depth = Limits().max_depth
        for kind in ("list", "dict", "tuple", "mixed"):
            obj = self.nested(depth, kind)
            self.assertEqual(loads(dumps(obj)), obj)

    def test_too_deep_refused_at_encode(self) -> None:
        """Encoding max_depth + 1 nested containers is an EncodingError."""
        depth = Limits().max_depth
        for kind in ("list", "dict", "tuple", "mixed"):
            self.assertRaises(EncodingError, dumps, self.nested(depth + 1, kind))

    def test_too_deep_refused_at_decode(self) -> None:
        """A stream nesting max_depth + 1 containers is TooDeep, and the next object decodes."""
        depth = Limits().max_depth
        deep = Encoder(limits=Limits(max_depth=depth + 1)).encode(self.nested(depth + 1))
        self.assertRaises(TooDeep, loads, PREAMBLE + deep)
        results = Decoder().feed(PREAMBLE + deep + encoded(["after"]))
        self.assertEqual(len(results), 2)
        self.assertIsInstance(results[0], TooDeep)
        self.assertEqual(results[0].where, "[0]" * depth)
        self.assertEqual(results[1], ["after"])

    def test_far_too_deep_refused_cheaply(self) -> None:
        """100000 nested OPENs are refused with TooDeep without recursion, then the stream continues."""
        n = 100_000
        data = PREAMBLE + token(OPEN, b"list") * n + token(CLOSE) * n + encoded(1)
        results = Decoder().feed(data)
        self.assertEqual(len(results), 2)
        self.assertIsInstance(results[0], TooDeep)
        self.assertEqual(results[1], 1)

    def test_custom_depth_limit(self) -> None:
        """A smaller max_depth is honoured by an encoder and a decoder given it."""
        limits = Limits(max_depth=3)
        self.assertEqual(loads(dumps(self.nested(3), limits=limits), limits=limits), self.nested(3))
        self.assertRaises(EncodingError, dumps, self.nested(4), limits=limits)
        self.assertRaises(TooDeep, loads, dumps(self.nested(4)), limits=limits)

    def test_registered_types_count_toward_depth(self) -> None:
        """A registered type is a container level: it counts toward max_depth at encode."""
        registry = local_registry()
        depth = Limits().max_depth
        inner: Any = Point(1, 2)  # two levels: the point and its state dict
        fits = _wrap(inner, depth - 2)
        self.assertEqual(loads(dumps(fits, registry=registry), registry=registry), fits)
        self.assertRaises(EncodingError, dumps, _wrap(inner, depth - 1), registry=registry)


def _wrap(obj: Any, levels: int) -> Any:
    for _ in range(levels):
        obj = [obj]
    return obj


# -- shared references and cycles ------------------------------------------


class SharedReferenceTests(SynchronousTestCase):
    """The format carries values, not identity; cycles cannot be sent."""

    def test_shared_sublist_arrives_as_two_copies(self) -> None:
        """A list holding the same sublist twice decodes to two equal but distinct lists."""
        shared = [1, 2]
        back = loads(dumps([shared, shared]))
        self.assertEqual(back, [[1, 2], [1, 2]])
        self.assertIsNot(back[0], back[1])
        back[0].append(3)
        self.assertEqual(back[1], [1, 2])

    def test_shared_objects_in_dicts_and_user_types(self) -> None:
        """Shared dicts and shared registered objects also arrive as independent copies."""
        registry = local_registry()
        d = {"a": 1}
        p = Point(1, 2)
        back = loads(dumps({"x": d, "y": d, "p": [p, p]}, registry=registry), registry=registry)
        self.assertEqual(back["x"], back["y"])
        self.assertIsNot(back["x"], back["y"])
        self.assertEqual(back["p"][0], back["p"][1])
        self.assertIsNot(back["p"][0], back["p"][1])

    def test_cycles_refused_at_encode(self) -> None:
        """A list, dict or registered object that contains itself is an EncodingError."""
        a: list[Any] = []
        a.append(a)
        b: dict[str, Any] = {}
        b["self"] = [b]
        p = Point(1, 2)
        p.label = [p]  # type: ignore[assignment]
        registry = local_registry()
        for obj in (a, b, [1, [2, a]], p):
            self.assertRaises(EncodingError, dumps, obj, registry=registry)

    def test_encoder_reusable_after_cycle(self) -> None:
        """After refusing a cycle an Encoder still encodes, and shared objects are not mistaken for cycles."""
        encoder = Encoder()
        a: list[Any] = []
        a.append(a)
        self.assertRaises(EncodingError, encoder.encode, a)
        shared = [1]
        data = encoder.encode([shared, [shared, (shared,)]])
        self.assertEqual(Decoder(preamble=False).feed(data), [[[1], [[1], ([1],)]]])

    def test_encoding_error_is_a_type_error(self) -> None:
        """EncodingError is a TypeError (and a Violation), so callers may catch either."""
        a: list[Any] = []
        a.append(a)
        self.assertRaises(TypeError, dumps, a)
        self.assertTrue(issubclass(EncodingError, Violation))


class WireShapeTests(SynchronousTestCase):
    """Spot checks of the tokens the built-in slicers write."""

    def test_containers(self) -> None:
        """A list is OPEN "list", its items, CLOSE; a dict alternates keys and values."""
        self.assertEqual(tokens(encoded([1, "a"])), [("OPEN", b"list"), ("INT", 1), ("STRING", b"a"), ("CLOSE", 0)])
        self.assertEqual(tokens(encoded({1: 2})), [("OPEN", b"dict"), ("INT", 1), ("INT", 2), ("CLOSE", 0)])

    def test_bytes_is_one_token(self) -> None:
        """A bytes value is one BYTES token with the value as its body."""
        self.assertEqual(tokens(encoded(b"x" * 1000)), [("BYTES", b"x" * 1000)])
        self.assertEqual(token(BYTES, b"ab"), encode_header(BYTES, 2) + b"ab")
        self.assertEqual(token(INT, 5), bytes([INT << 4 | 5]))

    def test_loads_rejects_trailing_and_missing(self) -> None:
        """loads wants exactly one object: trailing bytes, a second object or truncation are ProtocolErrors."""
        data = dumps([1, 2])
        self.assertRaises(ProtocolError, loads, data + encoded(3))
        self.assertRaises(ProtocolError, loads, data[:-1])
        self.assertRaises(ProtocolError, loads, PREAMBLE)
