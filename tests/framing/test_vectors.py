"""
Conformance tests: the hex vectors in C{tests/vectors/} against C{loads},
C{dumps} and L{framing.Decoder}.

The vectors are normative (see C{docs/wire-format.md}, section "Test
vectors"); this module only reads them.  Every vector is fed to a decoder
whole, split into two pieces at every offset (a vector over 2 KiB: every
offset within 1 KiB of its ends, one in 61 between; L{splitOffsets}), and
byte by byte.
"""

from __future__ import annotations

import array
import json
import math
import re
import unittest
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

import framing
from framing import _errors as errors
from tests.vectorints import integer, longBareIntegers

VECTORS = Path(__file__).resolve().parent.parent / "vectors"
PREAMBLE = bytes.fromhex("8943574952450d0a01")

KNOWN_DISAGREEMENTS: dict[str, str] = {}
"""Vectors on which the code disagrees with the spec, by name: their tests
are skipped while they fail and fail once they pass, so the entry is removed."""


def load_vectors(filename: str) -> list[dict[str, Any]]:
    """Return the vectors listed in C{tests/vectors/<filename>}."""
    vectors: list[dict[str, Any]] = json.loads((VECTORS / filename).read_text("utf-8"))["vectors"]
    return vectors


def build(tagged: dict[str, Any]) -> Any:
    """Turn a vector's tagged JSON description of a value into that value."""
    ((tag, arg),) = tagged.items()
    scalars: dict[str, Callable[[Any], Any]] = {
        "int": int,
        "bytes": bytes.fromhex,
        "str": str,
        "float": float,
        "none": lambda _: None,
        "bool": bool,
        "bytearray": lambda arg: bytearray.fromhex(arg),
        "memoryview": lambda arg: memoryview(bytes.fromhex(arg)),
    }
    if tag in scalars:
        return scalars[tag](arg)
    if tag == "dict":
        return {build(key): build(value) for key, value in arg}
    if tag == "array":
        typecode, items = arg
        return array.array(typecode, [build(item) for item in items])
    containers: dict[str, Callable[[Any], Any]] = {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}
    return containers[tag](build(item) for item in arg)


def assert_same(case: SynchronousTestCase, expected: Any, actual: Any, where: str = "value") -> None:
    """Fail unless C{actual} has the type and value of C{expected} (NaN by isnan, zeros by sign, dicts in order)."""
    case.assertIs(type(actual), type(expected), where)
    if isinstance(expected, float):
        if math.isnan(expected):
            case.assertTrue(math.isnan(actual), where)
        else:
            case.assertEqual((actual, math.copysign(1, actual)), (expected, math.copysign(1, expected)), where)
    elif isinstance(expected, (list, tuple)):
        case.assertEqual(len(actual), len(expected), where)
        for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
            assert_same(case, want, got, f"{where}[{index}]")
    elif isinstance(expected, dict):
        case.assertEqual(len(actual), len(expected), where)
        for index, (want, got) in enumerate(zip(expected.items(), actual.items(), strict=True)):
            assert_same(case, want[0], got[0], f"{where}<key {index}>")
            assert_same(case, want[1], got[1], f"{where}[{want[0]!r}]")
    elif isinstance(expected, array.array):
        case.assertEqual(actual.typecode, expected.typecode, where)
        assert_same(case, expected.tolist(), actual.tolist(), where)
    elif isinstance(expected, memoryview):
        case.assertEqual(actual.tobytes(), expected.tobytes(), where)
    elif isinstance(expected, (set, frozenset)):
        case.assertEqual(sorted(map(repr, actual)), sorted(map(repr, expected)), where)
    else:
        case.assertEqual(actual, expected, where)


def whole(data: bytes) -> Iterator[list[bytes]]:
    """Yield the one way of feeding C{data} in one piece."""
    yield [data]


SPLIT_EDGE = 1024
"""Within this many bytes of either end every offset is a split point; further in, one in L{SPLIT_STRIDE}."""
SPLIT_STRIDE = 61


def splitOffsets(length: int) -> list[int]:
    """
    The offsets C{splits} cuts at: every one, for data up to twice
    L{SPLIT_EDGE}; for longer data (large.json's 64 KiB body), every one in
    the first and last L{SPLIT_EDGE} bytes (the headers and the body's ends,
    where a decoder's states change) and one in L{SPLIT_STRIDE} between
    (the middle of one body, where every cut takes the same path).  Every
    offset of a 64 KiB vector costs 65,537 decodes of 64 KiB: quadratic.
    """
    if length <= 2 * SPLIT_EDGE:
        return list(range(length + 1))
    middle = range(SPLIT_EDGE, length - SPLIT_EDGE, SPLIT_STRIDE)
    return [*range(SPLIT_EDGE), *middle, *range(length - SPLIT_EDGE, length + 1)]


def splits(data: bytes) -> Iterator[list[bytes]]:
    """Yield the ways of feeding C{data} in two pieces (either may be empty), cut at each of L{splitOffsets}."""
    for offset in splitOffsets(len(data)):
        yield [data[:offset], data[offset:]]


def bytewise(data: bytes) -> Iterator[list[bytes]]:
    """Yield the one way of feeding C{data} one byte at a time."""
    yield [data[i : i + 1] for i in range(len(data))]


FEEDINGS = {"whole": whole, "split": splits, "bytewise": bytewise}


def decode(pieces: list[bytes]) -> tuple[list[Any], list[Any], framing.ProtocolError | None]:
    """Feed C{pieces} to a fresh decoder, then close it; return results, control events and any ProtocolError."""
    decoder = framing.Decoder()
    results: list[Any] = []
    try:
        for piece in pieces:
            results.extend(decoder.feed(piece))
        decoder.close()
    except framing.ProtocolError as error:
        return results, decoder.control_events, error
    return results, decoder.control_events, None


def assert_error(case: SynchronousTestCase, error: BaseException | None, name: str, code: str, how: str) -> None:
    """Fail unless C{error} is exactly the error class called C{name} and carries C{code}."""
    case.assertIsNotNone(error, f"no error, expected {name} ({how})")
    case.assertEqual((type(error).__name__, getattr(error, "code", None)), (name, code), how)
    case.assertIs(type(error), getattr(errors, name), how)


def assert_results(case: SynchronousTestCase, expected: list[dict[str, Any]], results: list[Any], how: str) -> None:
    """Fail unless decoded C{results} match the vector's list of values and refusals."""
    case.assertEqual(len(results), len(expected), f"{how}: {results!r:.200}")
    for index, (want, got) in enumerate(zip(expected, results, strict=True)):
        if "error" in want:
            assert_error(case, got, want["error"], want["code"], f"{how}, result {index}")
        else:
            assert_same(case, build(want["value"]), got, f"{how}, result {index}")


def known_disagreement(reason: str, check: Callable[[], None]) -> None:
    """Run C{check}, which fails because of a known bug: skip if it fails, fail if it now passes."""
    try:
        check()
    except AssertionError:
        raise unittest.SkipTest(f"known disagreement with the spec: {reason}") from None
    raise AssertionError(f"fixed (remove it from KNOWN_DISAGREEMENTS): {reason}")


def install(cls: type, filename: str, checks: dict[str, tuple[Callable[..., None], str]]) -> type:
    """Add to C{cls} one test method per vector in C{filename} and per check in C{checks}."""
    for vector in load_vectors(filename):
        slug = re.sub(r"\W", "_", vector["name"])
        for prefix, (check, doc) in checks.items():

            def test(self: SynchronousTestCase, vector: dict[str, Any] = vector, check: Any = check) -> None:
                reason = KNOWN_DISAGREEMENTS.get(vector["name"])
                if reason is None:
                    check(self, vector)
                else:
                    known_disagreement(reason, lambda: check(self, vector))

            test.__name__ = f"test_{prefix}_{slug}"
            test.__doc__ = doc.format(name=vector["name"])
            setattr(cls, test.__name__, test)
    return cls


# -- valid single-object streams ----------------------------------------------


def check_loads(case: SynchronousTestCase, vector: dict[str, Any]) -> None:
    assert_same(case, build(vector["value"]), framing.loads(bytes.fromhex(vector["hex"])))


def check_dumps(case: SynchronousTestCase, vector: dict[str, Any]) -> None:
    case.assertEqual(framing.dumps(build(vector["value"])).hex(), vector["hex"])


def valid_feed_check(feeding: str) -> Callable[[SynchronousTestCase, dict[str, Any]], None]:
    def check(case: SynchronousTestCase, vector: dict[str, Any]) -> None:
        expected = build(vector["value"])
        for pieces in FEEDINGS[feeding](bytes.fromhex(vector["hex"])):
            how = f"fed {feeding} as {[len(p) for p in pieces][:4]}"
            results, events, error = decode(pieces)
            case.assertIsNone(error, how)
            case.assertEqual(events, [], how)
            case.assertEqual(len(results), 1, how)
            assert_same(case, expected, results[0], how)

    return check


VALID_CHECKS = {
    "loads": (check_loads, "loads() of the {name!r} vector gives its value."),
    "dumps": (check_dumps, "dumps() of the {name!r} vector's value gives its bytes."),
    "feed_whole": (valid_feed_check("whole"), "A Decoder fed the {name!r} vector whole gives its one value."),
    "feed_split": (
        valid_feed_check("split"),
        "A Decoder fed the {name!r} vector in two pieces, split at each of splitOffsets, gives its one value.",
    ),
    "feed_bytewise": (
        valid_feed_check("bytewise"),
        "A Decoder fed the {name!r} vector byte by byte gives its one value.",
    ),
}


class AtomVectorTests(SynchronousTestCase):
    """The vectors of C{atoms.json}: one atom per stream."""


class ContainerVectorTests(SynchronousTestCase):
    """The vectors of C{containers.json}: one container per stream."""


class LargeVectorTests(SynchronousTestCase):
    """The vectors of C{large.json}: a body that needs a 4-byte length."""


install(AtomVectorTests, "atoms.json", VALID_CHECKS)
install(ContainerVectorTests, "containers.json", VALID_CHECKS)
install(LargeVectorTests, "large.json", VALID_CHECKS)


# -- invalid single-object streams --------------------------------------------


def check_loads_error(case: SynchronousTestCase, vector: dict[str, Any]) -> None:
    error = case.assertRaises(errors.ChunkwireError, framing.loads, bytes.fromhex(vector["hex"]))
    assert_error(case, error, vector["error"], vector["code"], "loads")


def invalid_feed_check(feeding: str) -> Callable[[SynchronousTestCase, dict[str, Any]], None]:
    def check(case: SynchronousTestCase, vector: dict[str, Any]) -> None:
        is_violation = issubclass(getattr(errors, vector["error"]), framing.Violation)
        for pieces in FEEDINGS[feeding](bytes.fromhex(vector["hex"])):
            how = f"fed {feeding} as {[len(p) for p in pieces][:4]}"
            results, _, error = decode(pieces)
            if is_violation:
                case.assertIsNone(error, how)
                assert_results(case, [vector], results, how)
            else:
                assert_error(case, error, vector["error"], vector["code"], how)

    return check


INVALID_CHECKS = {
    "loads": (check_loads_error, "loads() of the {name!r} vector raises its error with its code."),
    "feed_whole": (
        invalid_feed_check("whole"),
        "A Decoder fed the {name!r} vector whole reports its error with its code.",
    ),
    "feed_split": (
        invalid_feed_check("split"),
        "A Decoder fed the {name!r} vector in two pieces, split at every offset, reports its error with its code.",
    ),
    "feed_bytewise": (
        invalid_feed_check("bytewise"),
        "A Decoder fed the {name!r} vector byte by byte reports its error with its code.",
    ),
}


class ErrorVectorTests(SynchronousTestCase):
    """The vectors of C{errors.json}: streams a receiver must reject, and how."""

    def test_violation_keeps_stream_in_sync(self) -> None:
        """After each Violation vector, a decoder still decodes the next object."""
        for vector in load_vectors("errors.json"):
            if vector["name"] in KNOWN_DISAGREEMENTS:
                continue
            if issubclass(getattr(errors, vector["error"]), framing.Violation):
                decoder = framing.Decoder()
                decoder.feed(bytes.fromhex(vector["hex"]))
                self.assertEqual(decoder.feed(b"\x07"), [7], vector["name"])


install(ErrorVectorTests, "errors.json", INVALID_CHECKS)


# -- multi-item streams -------------------------------------------------------


def stream_feed_check(feeding: str) -> Callable[[SynchronousTestCase, dict[str, Any]], None]:
    def check(case: SynchronousTestCase, vector: dict[str, Any]) -> None:
        events = [{"ping": framing.Ping, "pong": framing.Pong}[kind](integer(id)) for kind, id in vector["events"]]
        for pieces in FEEDINGS[feeding](bytes.fromhex(vector["hex"])):
            how = f"fed {feeding} as {[len(p) for p in pieces][:4]}"
            results, got_events, error = decode(pieces)
            case.assertIsNone(error, how)
            assert_results(case, vector["results"], results, how)
            case.assertEqual(got_events, events, how)

    return check


STREAM_CHECKS = {
    "feed_whole": (
        stream_feed_check("whole"),
        "A Decoder fed the {name!r} stream whole gives its results and control events in order.",
    ),
    "feed_split": (
        stream_feed_check("split"),
        "A Decoder fed the {name!r} stream split at every offset gives its results and control events in order.",
    ),
    "feed_bytewise": (
        stream_feed_check("bytewise"),
        "A Decoder fed the {name!r} stream byte by byte gives its results and control events in order.",
    ),
}


class StreamVectorTests(SynchronousTestCase):
    """The vectors of C{streams.json}: several items, refusals and control tokens in one stream."""


install(StreamVectorTests, "streams.json", STREAM_CHECKS)


# -- the vector set itself ----------------------------------------------------

ALL_FILES = ("atoms.json", "containers.json", "large.json", "errors.json", "streams.json")
BODY_KINDS = {0x2, 0x3, 0x4, 0x5, 0x6, 0x7, 0xB}
WIDTHS = {12: 1, 13: 2, 14: 4, 15: 8}


def headers(data: bytes) -> Iterator[tuple[int, int]]:
    """
    Walk a stream's tokens by the spec alone; yield C{(kind, header_length)}
    for each, stopping at the first header that cannot be framed.
    """
    pos = len(PREAMBLE) if data.startswith(PREAMBLE) else len(data)
    while pos < len(data):
        kind, code = data[pos] >> 4, data[pos] & 0x0F
        if kind > 0xD:
            yield kind, 1
            return
        width = WIDTHS.get(code, 0)
        if pos + 1 + width > len(data):
            return
        value = int.from_bytes(data[pos + 1 : pos + 1 + width], "big") if width else code
        yield kind, 1 + width
        pos += 1 + width + (value if kind in BODY_KINDS else 0)


class VectorSetTests(SynchronousTestCase):
    """The vector files cover what the spec requires them to."""

    def test_names_unique(self) -> None:
        """No two vectors in one file share a name."""
        for filename in ALL_FILES:
            names = [vector["name"] for vector in load_vectors(filename)]
            self.assertEqual(len(names), len(set(names)), filename)

    def test_every_kind_and_width(self) -> None:
        """Between them the vectors use all sixteen kinds and every header length (1, 2, 3, 5 and 9 bytes)."""
        seen = set()
        for filename in ALL_FILES:
            for vector in load_vectors(filename):
                seen.update(headers(bytes.fromhex(vector["hex"])))
        self.assertEqual({kind for kind, _ in seen}, set(range(16)))
        self.assertEqual({length for _, length in seen}, {1, 2, 3, 5, 9})

    def test_integer_boundaries(self) -> None:
        """The atom vectors hold every integer on either side of a header-width or kind boundary."""
        ints = {int(v["value"]["int"]) for v in load_vectors("atoms.json") if "int" in v["value"]}
        bounds = {0, 11, 12, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**64 - 1, 2**64}
        bounds |= {-1, -12, -13, -256, -257, -65536, -65537, -(2**32), -(2**32) - 1, -(2**64), -(2**64) - 1}
        self.assertEqual(bounds - ints, set())

    def test_long_integers_are_strings(self) -> None:
        """
        No vector file holds a bare JSON integer of 16 or more digits (section
        9): JavaScript's JSON.parse would round it, so it is a string.  The
        largest ping id and export id are there, as strings.
        """
        for path in sorted(VECTORS.glob("*.json")):
            self.assertEqual(longBareIntegers(json.loads(path.read_text("utf-8"))), [], path.name)
        [ping] = [vector for vector in load_vectors("streams.json") if vector["name"] == "ping-largest-id"]
        self.assertEqual(ping["events"], [["ping", str(2**64 - 1)]])
        self.assertEqual(integer(ping["events"][0][1]), 2**64 - 1)
        self.assertEqual(integer("-12"), -12)
        self.assertRaises(ValueError, integer, 10**15)
        self.assertRaises(ValueError, integer, "1e3")


class SpecStatementTests(SynchronousTestCase):
    """Statements of the spec about the encoder that a vector cannot show."""

    def test_shared_reference_sent_as_copies(self) -> None:
        """A list held twice is sent twice and decodes as two distinct equal lists."""
        inner = [1]
        data = framing.dumps([inner, inner])
        (vector,) = [v for v in load_vectors("containers.json") if v["name"] == "shared-reference-sent-as-copies"]
        self.assertEqual(data.hex(), vector["hex"])
        first, second = framing.loads(data)
        self.assertEqual(first, second)
        self.assertIsNot(first, second)

    def test_cycle_refused(self) -> None:
        """dumps() refuses a list that contains itself with EncodingError."""
        cycle: list[Any] = [1]
        cycle.append(cycle)
        self.assertRaises(framing.EncodingError, framing.dumps, cycle)
