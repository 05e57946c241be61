"""Tests for the codec: L{framing.Encoder}, L{framing.Decoder}, L{framing.dumps} and L{framing.loads}."""

from __future__ import annotations

import math
import struct
from itertools import pairwise
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, Encoder, EncodingError, Limits, Ping, Pong, ProtocolError, Violation, dumps, loads
from framing._encoder import MAX_ERROR_MESSAGE, error_token, open_token
from framing._errors import (
    Aborted,
    BadPreamble,
    BodyTooLarge,
    InvalidValue,
    PeerError,
    TooDeep,
    TooManyItems,
    TruncatedStream,
    UnexpectedToken,
    UnknownType,
)
from framing.wire import (
    ABORT,
    BIGINT,
    BIGNEG,
    BYTES,
    CLOSE,
    ERROR,
    FLOAT,
    INT,
    PING,
    PONG,
    PREAMBLE,
    SIMPLE,
    STRING,
    encode_header,
)
from tests.properties import examples

INT_BOUNDARIES = [
    0,
    1,
    11,
    12,
    255,
    256,
    2**16 - 1,
    2**16,
    2**32 - 1,
    2**32,
    2**64 - 1,
    2**64,
    2**64 + 1,
    2**200,
    -1,
    -11,
    -12,
    -13,
    -256,
    -257,
    -(2**64) + 1,
    -(2**64),
    -(2**64) - 1,
    -(2**64) - 2,
    -(2**300),
]

# Limits.max_bigint_length is 1 KiB: magnitudes below 2**8192.  Built from a
# bit count rather than st.integers(-(2**8000), 2**8000), whose repr is huge.
big_ints = st.builds(
    lambda bits, low, negative: (-1 if negative else 1) * ((1 << bits) | low),
    st.integers(64, 8190),
    st.integers(0, 2**64),
    st.booleans(),
)
ints = st.one_of(st.integers(), st.sampled_from(INT_BOUNDARIES), big_ints)
special_floats = [math.inf, -math.inf, math.nan, -0.0, 0.0, 5e-324, 1.7976931348623157e308]
floats = st.one_of(st.floats(), st.sampled_from(special_floats))
texts = st.one_of(st.text(max_size=30), st.sampled_from(["", "\U0001f600", "a\U00010000z", "\u00e9\u4e2d\U0010ffff"]))
hashable_leaves = st.one_of(st.none(), st.booleans(), ints, st.floats(allow_nan=False), st.binary(max_size=30), texts)
hashables = st.recursive(
    hashable_leaves,
    lambda children: st.one_of(st.lists(children, max_size=4).map(tuple), st.frozensets(children, max_size=4)),
    max_leaves=8,
)
leaves = st.one_of(st.none(), st.booleans(), ints, floats, st.binary(max_size=60), texts)
objects = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=6),
        st.lists(children, max_size=6).map(tuple),
        st.dictionaries(hashables, children, max_size=5),
        st.sets(hashables, max_size=5),
        st.frozensets(hashables, max_size=5),
    ),
    max_leaves=25,
)


def same(a: Any, b: Any) -> bool:
    """
    Return whether C{a} and C{b} are equal with the same types all the way
    down, NaN equal to NaN and the sign of zero significant.
    """
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        if math.isnan(a):
            return math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return False
        b_keys = {key: key for key in b}
        return all(same(key, b_keys[key]) and same(value, b[key]) for key, value in a.items())
    if isinstance(a, (set, frozenset)):
        if a != b:
            return False
        b_members = {member: member for member in b}
        return all(same(member, b_members[member]) for member in a)
    return bool(a == b)


def tok(kind: int, value: int | bytes) -> bytes:
    """One token: a header with a value, or a header and its body."""
    if isinstance(value, bytes):
        return encode_header(kind, len(value)) + value
    return encode_header(kind, value)


CLOSE_TOKEN = tok(CLOSE, 0)


def body(obj: Any) -> bytes:
    """The tokens of C{obj} without the preamble."""
    return Encoder().encode(obj)


def decode_chunks(chunks: list[bytes], limits: Limits | None = None) -> list[Any]:
    """Feed C{chunks} to a fresh decoder; return every result, checking it ends cleanly."""
    decoder = Decoder(limits)
    results: list[Any] = []
    for chunk in chunks:
        results.extend(decoder.feed(chunk))
    decoder.close()
    return results


def chunkings(data: bytes, every_offset: bool) -> list[list[bytes]]:
    """Whole, byte by byte, and (optionally) split in two at every offset."""
    ways = [[data], [data[i : i + 1] for i in range(len(data))]]
    if every_offset:
        ways.extend([data[:i], data[i:]] for i in range(1, len(data)))
    return ways


class RoundTripTests(SynchronousTestCase):
    """loads(dumps(x)) gives back x, exactly, however the stream is cut."""

    def assertRoundTrips(self, obj: Any, every_offset: bool = True) -> None:
        """C{obj} survives dumps/loads and every chunking of the stream decodes to it."""
        data = dumps(obj)
        self.assertTrue(data.startswith(PREAMBLE))
        self.assertTrue(same(loads(data), obj), f"{loads(data)!r} is not {obj!r}")
        for chunks in chunkings(data, every_offset):
            results = decode_chunks(chunks)
            self.assertEqual(len(results), 1)
            self.assertTrue(same(results[0], obj), f"{results[0]!r} is not {obj!r}")

    @settings(max_examples=examples(300), deadline=None)
    @given(obj=objects)
    def test_round_trip(self, obj: Any) -> None:
        """Any mix of the built-in types round-trips whole and byte by byte."""
        self.assertRoundTrips(obj, every_offset=False)

    @settings(max_examples=100, deadline=None)
    @given(obj=objects, cuts=st.lists(st.integers(0, 10**6), max_size=12))
    def test_random_chunking(self, obj: Any, cuts: list[int]) -> None:
        """Any object decodes the same whatever the chunk boundaries."""
        data = dumps(obj)
        points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
        results = decode_chunks([data[a:b] for a, b in pairwise(points)])
        self.assertEqual(len(results), 1)
        self.assertTrue(same(results[0], obj))

    def test_int_boundaries(self) -> None:
        """Integers at every header-width and big-integer boundary, both signs, round-trip."""
        for value in INT_BOUNDARIES:
            self.assertRoundTrips(value)

    def test_int_encoding_widths(self) -> None:
        """Integers use the shortest header: 1 byte below 12, then 2, 3, 5 and 9 bytes, then a BIGINT body."""
        for value, size in ((11, 1), (12, 2), (255, 2), (256, 3), (2**16, 5), (2**32, 9), (2**64 - 1, 9)):
            self.assertEqual(len(body(value)), size, value)
        self.assertEqual(body(2**64), tok(BIGINT, (2**64).to_bytes(9, "big")))
        self.assertEqual(body(-(2**64) - 1), tok(BIGNEG, (2**64 + 1).to_bytes(9, "big")))

    def test_big_ints_at_limit(self) -> None:
        """Integers with a 1 KiB magnitude, both signs, round-trip; one byte more is refused."""
        biggest = 2 ** (8 * 1024) - 1
        self.assertRoundTrips(biggest, every_offset=False)
        self.assertRoundTrips(-biggest, every_offset=False)
        self.assertRaises(BodyTooLarge, loads, dumps(biggest + 1))

    def test_simple_values(self) -> None:
        """None, False and True round-trip as themselves, not as ints."""
        for value in (None, False, True):
            self.assertRoundTrips(value)
        self.assertIs(loads(dumps(True)), True)
        self.assertIs(loads(dumps(False)), False)

    def test_special_floats(self) -> None:
        """inf, -inf and nan round-trip, and -0.0 keeps its sign."""
        self.assertEqual(loads(dumps(math.inf)), math.inf)
        self.assertEqual(loads(dumps(-math.inf)), -math.inf)
        self.assertTrue(math.isnan(loads(dumps(math.nan))))
        negative_zero = loads(dumps(-0.0))
        self.assertEqual(math.copysign(1.0, negative_zero), -1.0)
        self.assertEqual(math.copysign(1.0, loads(dumps(0.0))), 1.0)
        for value in (1.5, -2.25, 5e-324, 1e308):
            self.assertRoundTrips(value)

    def test_strings(self) -> None:
        """Text with non-BMP characters, empty text and bytes of every value round-trip."""
        for value in ("", "plain", "\u00e9t\u00e9", "\U0001f600\U0010ffff", "a" * 300, b"", bytes(range(256))):
            self.assertRoundTrips(value)

    def test_large_bytes(self) -> None:
        """Bytes bodies larger than a BlockBuffer block and the scanner's in-place size round-trip, alone and nested."""
        big = bytes(range(256)) * 1024
        for value in (big, [b"a", big, b"z"], {"k": big}, (big, big)):
            data = dumps(value)
            self.assertTrue(same(loads(data), value))
            chunks = [data[i : i + 4096] for i in range(0, len(data), 4096)]
            self.assertTrue(same(decode_chunks(chunks)[0], value))

    def test_containers(self) -> None:
        """Lists, tuples, dicts, sets and frozensets, empty and nested, round-trip with their types."""
        for value in (
            [],
            (),
            {},
            set(),
            frozenset(),
            [1, (2, 3), {"k": [None]}, {4}, frozenset({5})],
            {(1, 2): {"x": frozenset({b"y"})}, None: [], 3.5: ()},
            [[[[]]]],
        ):
            self.assertRoundTrips(value)

    def test_shared_references_sent_as_copies(self) -> None:
        """An object reached twice (not a cycle) is encoded twice and decoded as two equal objects."""
        shared = [1, 2]
        result = loads(dumps([shared, shared]))
        self.assertEqual(result, [[1, 2], [1, 2]])
        self.assertIsNot(result[0], result[1])

    def test_nesting_at_limit(self) -> None:
        """Containers nested exactly Limits.max_depth deep encode and decode."""
        limits = Limits(max_depth=10)
        value: Any = []
        for _ in range(9):
            value = [value]
        self.assertEqual(loads(dumps(value, limits=limits), limits), value)


class FeedTests(SynchronousTestCase):
    """Decoder.feed returns completed objects in order across feeds."""

    @settings(max_examples=100, deadline=None)
    @given(values=st.lists(objects, max_size=6), cuts=st.lists(st.integers(0, 10**6), max_size=15))
    def test_objects_in_order_across_feeds(self, values: list[Any], cuts: list[int]) -> None:
        """A stream of several objects cut anywhere yields them all, in order, each exactly once."""
        data = PREAMBLE + b"".join(body(value) for value in values)
        points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
        decoder = Decoder()
        results: list[Any] = []
        for a, b in pairwise(points):
            results.extend(decoder.feed(data[a:b]))
        self.assertTrue(decoder.at_boundary)
        self.assertEqual(len(results), len(values))
        for result, value in zip(results, values, strict=True):
            self.assertTrue(same(result, value))

    def test_each_feed_returns_what_it_completed(self) -> None:
        """Each feed returns exactly the objects that its bytes completed."""
        decoder = Decoder()
        first, second = body([1, 2]), body("two")
        self.assertEqual(decoder.feed(PREAMBLE + first[:-1]), [])
        self.assertEqual(decoder.feed(first[-1:] + second[:2]), [[1, 2]])
        self.assertEqual(decoder.feed(second[2:] + body(3)), ["two", 3])
        self.assertEqual(decoder.feed(b""), [])

    def test_close_mid_object(self) -> None:
        """close() between tokens inside an unfinished container raises TruncatedStream."""
        decoder = Decoder()
        decoder.feed(PREAMBLE + body([1, 2])[:-1])
        self.assertFalse(decoder.at_boundary)
        self.assertRaises(TruncatedStream, decoder.close)

    def test_close_mid_token(self) -> None:
        """close() inside a token raises TruncatedStream."""
        decoder = Decoder()
        decoder.feed(dumps(b"abcdef")[:-2])
        self.assertRaises(TruncatedStream, decoder.close)

    def test_close_at_boundary(self) -> None:
        """close() after whole objects raises nothing."""
        decoder = Decoder()
        self.assertEqual(decoder.feed(dumps([1])), [[1]])
        decoder.close()


class ViolationTests(SynchronousTestCase):
    """A refused object comes back as its Violation, and the next object decodes."""

    def decode(self, stream: bytes, limits: Limits | None = None) -> list[Any]:
        """Decode C{PREAMBLE + stream + a trailing "next"} whole and byte by byte; return the results."""
        data = PREAMBLE + stream + body("next")
        results = decode_chunks([data], limits)
        self.assertEqual(decode_chunks([data[i : i + 1] for i in range(len(data))], limits), results)
        self.assertEqual(results[-1], "next")
        return results

    def assertViolation(self, result: Any, cls: type[Violation], where: str) -> None:
        """C{result} is a C{cls} violation that happened at C{where}."""
        self.assertIsInstance(result, cls)
        self.assertEqual(result.where, where)

    def test_oversize_top_level(self) -> None:
        """A top-level body over its limit is returned as BodyTooLarge with an empty where."""
        results = self.decode(body(b"x" * 11), Limits(max_bytes_length=10))
        self.assertEqual(len(results), 2)
        self.assertViolation(results[0], BodyTooLarge, "")

    def test_oversize_in_list(self) -> None:
        """An oversize item at index 3 of a list refuses the list, with where "[3]"."""
        results = self.decode(body([0, 1, 2, b"x" * 11, 4]), Limits(max_bytes_length=10))
        self.assertEqual(len(results), 2)
        self.assertViolation(results[0], BodyTooLarge, "[3]")

    def test_oversize_in_dict(self) -> None:
        """An oversize value under key 'name' refuses the dict, with where "['name']"."""
        results = self.decode(body({"id": 1, "name": "y" * 6}), Limits(max_string_length=5))
        self.assertViolation(results[0], BodyTooLarge, "['name']")

    def test_oversize_deeply_nested(self) -> None:
        """A violation deep inside nested containers reports the whole path."""
        results = self.decode(body({"a": [1, {"name": b"x" * 11}]}), Limits(max_bytes_length=10))
        self.assertViolation(results[0], BodyTooLarge, "['a'][1]['name']")

    def test_neighbours_survive(self) -> None:
        """Objects before and after a refused one decode normally."""
        stream = body([1]) + body([b"x" * 11, [2, [3]]]) + body({"ok": True})
        results = self.decode(stream, Limits(max_bytes_length=10))
        self.assertEqual(results[0], [1])
        self.assertViolation(results[1], BodyTooLarge, "[0]")
        self.assertEqual(results[2:], [{"ok": True}, "next"])

    def test_too_deep(self) -> None:
        """Nesting beyond Limits.max_depth is a TooDeep violation and the next object decodes."""
        limits = Limits(max_depth=3)
        results = self.decode(body([[[[1, [2]], 3]]]), limits)
        self.assertViolation(results[0], TooDeep, "[0][0][0]")
        self.assertEqual(len(results), 2)

    def test_too_many_items(self) -> None:
        """A list, tuple, set or dict with more than max_items items is a TooManyItems violation."""
        limits = Limits(max_items=3)
        for value, where in (
            ([1, 2, 3, 4], "[3]"),
            ((1, 2, 3, 4), "[3]"),
            ({1, 2, 3, 4}, "<member 3>"),
            ({1: 1, 2: 2, 3: 3, 4: 4}, "<key 3>"),
        ):
            results = self.decode(body(value) + body([1, 2, 3]), limits)
            self.assertViolation(results[0], TooManyItems, where)
            self.assertEqual(results[1:], [[1, 2, 3], "next"])

    def test_unknown_open_type(self) -> None:
        """An OPEN naming no registered type is an UnknownType violation; its contents are skipped."""
        stream = open_token("nosuchtype") + tok(INT, 1) + open_token("list") + tok(INT, 2) + CLOSE_TOKEN + CLOSE_TOKEN
        results = self.decode(stream)
        self.assertViolation(results[0], UnknownType, "")
        self.assertIn("nosuchtype", str(results[0]))

    def test_unknown_open_type_nested(self) -> None:
        """An unknown OPEN inside a list is reported at its index."""
        stream = open_token("list") + tok(INT, 0) + open_token("evil") + CLOSE_TOKEN + CLOSE_TOKEN
        results = self.decode(stream)
        self.assertViolation(results[0], UnknownType, "[1]")

    def test_invalid_utf8(self) -> None:
        """A STRING body that is not UTF-8 is an InvalidValue violation."""
        results = self.decode(tok(STRING, b"ok\xff\xfe"))
        self.assertViolation(results[0], InvalidValue, "")
        nested = self.decode(open_token("list") + tok(STRING, b"\xc3") + CLOSE_TOKEN)
        self.assertViolation(nested[0], InvalidValue, "[0]")

    def test_surrogate_utf8_refused(self) -> None:
        """A STRING body encoding a surrogate code point (not valid UTF-8) is an InvalidValue violation."""
        results = self.decode(tok(STRING, b"\xed\xa0\x80"))
        self.assertViolation(results[0], InvalidValue, "")

    def test_unhashable_dict_key(self) -> None:
        """A list used as a dict key is a Violation, and the next object decodes."""
        stream = open_token("dict") + open_token("list") + tok(INT, 1) + CLOSE_TOKEN + tok(INT, 2) + CLOSE_TOKEN
        results = self.decode(stream)
        self.assertIsInstance(results[0], Violation)
        self.assertEqual(len(results), 2)

    def test_unhashable_set_member(self) -> None:
        """A dict inside a set is a Violation, and the next object decodes."""
        stream = open_token("set") + open_token("dict") + CLOSE_TOKEN + CLOSE_TOKEN
        results = self.decode(stream)
        self.assertIsInstance(results[0], Violation)
        self.assertEqual(len(results), 2)

    def test_duplicate_dict_key(self) -> None:
        """A dict key sent twice is an InvalidValue violation, not a silent overwrite."""
        stream = open_token("dict") + body("a") + body(1) + body("a") + body(2) + CLOSE_TOKEN
        results = self.decode(stream)
        self.assertIsInstance(results[0], InvalidValue)
        self.assertEqual(len(results), 2)

    def test_duplicate_set_member(self) -> None:
        """A set member sent twice is an InvalidValue violation."""
        stream = open_token("set") + body(1) + body(1) + CLOSE_TOKEN
        results = self.decode(stream)
        self.assertIsInstance(results[0], InvalidValue)

    def test_dict_missing_value(self) -> None:
        """A dict closed after a key with no value is an InvalidValue violation."""
        stream = open_token("dict") + body("k") + CLOSE_TOKEN
        results = self.decode(stream)
        self.assertIsInstance(results[0], InvalidValue)

    def test_non_canonical_bigint(self) -> None:
        """A BIGINT below 2**64 or with a leading zero byte is an InvalidValue violation."""
        for stream in (
            tok(BIGINT, (5).to_bytes(9, "big")),
            tok(BIGINT, b"\0" + (2**64).to_bytes(9, "big")),
            tok(BIGNEG, (2**64).to_bytes(9, "big")),
            tok(BIGINT, b""),
        ):
            results = self.decode(stream)
            self.assertIsInstance(results[0], InvalidValue)

    def test_unknown_simple_value(self) -> None:
        """A SIMPLE token with a value other than 0, 1 or 2 is an InvalidValue violation."""
        results = self.decode(tok(SIMPLE, 7))
        self.assertIsInstance(results[0], InvalidValue)

    def test_float_wrong_length(self) -> None:
        """A FLOAT body of 4 bytes is an InvalidValue violation."""
        results = self.decode(tok(FLOAT, b"\0\0\0\0"))
        self.assertIsInstance(results[0], InvalidValue)

    def test_abort_after_violation(self) -> None:
        """ABORT while an already refused object is being skipped ends it; the next object decodes."""
        stream = open_token("list") + tok(BYTES, b"x" * 11) + open_token("list") + tok(INT, 1) + tok(ABORT, 0)
        results = self.decode(stream + body([5]), Limits(max_bytes_length=10))
        self.assertIsInstance(results[0], BodyTooLarge)
        self.assertEqual(results[1:], [[5], "next"])

    def test_abort_mid_object_reports_aborted_and_resyncs(self) -> None:
        """ABORT in the middle of an object returns an Aborted violation and the following objects decode."""
        stream = open_token("list") + tok(INT, 1) + open_token("list") + tok(INT, 2) + tok(ABORT, 0)
        results = self.decode(stream + body(5) + body([7]))
        self.assertViolation(results[0], Aborted, "[1][1]")
        self.assertEqual(results[1:], [5, [7], "next"])

    def test_violation_under_huge_int_key_stays_a_violation(self) -> None:
        """A violation under a dict key too long to repr (over 4300 digits) is still returned as a Violation."""
        limits = Limits(max_bigint_length=4 * 1024, max_bytes_length=10)
        results = self.decode(body({10**5000: b"x" * 11}), limits)
        self.assertIsInstance(results[0], BodyTooLarge)

    def test_control_tokens(self) -> None:
        """PING and PONG, even inside an object, become control events and do not disturb decoding."""
        decoder = Decoder()
        stream = PREAMBLE + tok(PING, 3) + open_token("list") + tok(INT, 1) + tok(PONG, 4) + CLOSE_TOKEN
        self.assertEqual(decoder.feed(stream), [[1]])
        self.assertEqual(decoder.control_events, [Ping(3), Pong(4)])


class ProtocolErrorTests(SynchronousTestCase):
    """Stream-level errors are raised, and the decoder stays broken afterwards."""

    def test_stray_close(self) -> None:
        """A CLOSE at the top level is an UnexpectedToken ProtocolError."""
        decoder = Decoder()
        self.assertRaises(UnexpectedToken, decoder.feed, PREAMBLE + CLOSE_TOKEN)

    def test_error_sticky(self) -> None:
        """After a ProtocolError, feeding valid data raises the same error again."""
        decoder = Decoder()
        error = self.assertRaises(ProtocolError, decoder.feed, PREAMBLE + CLOSE_TOKEN)
        self.assertIs(self.assertRaises(ProtocolError, decoder.feed, body(1)), error)

    def test_peer_error(self) -> None:
        """An ERROR token raises PeerError carrying the peer's message, even mid-object."""
        error = self.assertRaises(PeerError, Decoder().feed, PREAMBLE + tok(ERROR, b"disk on fire"))
        self.assertIn("disk on fire", str(error))
        stream = PREAMBLE + open_token("list") + tok(INT, 1) + tok(ERROR, b"bye")
        self.assertRaises(PeerError, Decoder().feed, stream)

    def test_error_token(self) -> None:
        """
        error_token is the ERROR telling the peer why: the code, a colon and
        the text (not prefixed twice), cut to MAX_ERROR_MESSAGE bytes; the
        peer's decoder raises it as a PeerError with that text.
        """
        token = error_token(BadPreamble("not chunkwire"))
        self.assertEqual(token, tok(ERROR, b"bad-preamble: not chunkwire"))
        error = self.assertRaises(PeerError, Decoder().feed, PREAMBLE + token)
        self.assertIn("bad-preamble: not chunkwire", str(error))
        self.assertEqual(error_token(BadPreamble("bad-preamble: said")), tok(ERROR, b"bad-preamble: said"))
        long = error_token(BadPreamble("x" * 5000))
        self.assertEqual(long, tok(ERROR, (b"bad-preamble: " + b"x" * 5000)[:MAX_ERROR_MESSAGE]))

    def test_error_token_cut_between_characters(self) -> None:
        """
        A message past MAX_ERROR_MESSAGE bytes is cut on a character's
        boundary: the body stays UTF-8 (wire format 4.8) and is the longest
        whole prefix, wherever a character of 2, 3 or 4 bytes meets the limit.
        """
        prefix = len("bad-preamble: ")
        for character in ("é", "€", "𝄞"):
            width = len(character.encode("utf-8"))
            for shift in range(1, width):
                # The limit falls `shift` bytes into a character.
                text = "x" * (MAX_ERROR_MESSAGE - prefix - shift) + character * 10
                whole = ("bad-preamble: " + text).encode("utf-8")
                kept = whole[: MAX_ERROR_MESSAGE - shift]
                kept.decode("utf-8")  # (whole characters: the expectation itself is UTF-8)
                self.assertEqual(error_token(BadPreamble(text)), tok(ERROR, kept), (character, shift))

    def test_close_with_value(self) -> None:
        """A CLOSE carrying a non-zero value is a ProtocolError."""
        stream = PREAMBLE + open_token("list") + tok(CLOSE, 1)
        self.assertRaises(ProtocolError, Decoder().feed, stream)

    def test_reserved_kind(self) -> None:
        """A reserved token kind is a ProtocolError."""
        self.assertRaises(ProtocolError, Decoder().feed, PREAMBLE + b"\xe0")


class LoadsTests(SynchronousTestCase):
    """loads returns exactly one object or raises."""

    def test_raises_violation(self) -> None:
        """loads raises the Violation of a refused object."""
        error = self.assertRaises(BodyTooLarge, loads, dumps([b"x" * 11]), Limits(max_bytes_length=10))
        self.assertEqual(error.where, "[0]")

    def test_trailing_object(self) -> None:
        """A second object after the first is a ProtocolError."""
        self.assertRaises(ProtocolError, loads, dumps(1) + body(2))

    def test_trailing_partial_token(self) -> None:
        """Trailing bytes that start another token are a ProtocolError (a truncated stream)."""
        self.assertRaises(ProtocolError, loads, dumps(1) + body("text")[:2])

    def test_truncated(self) -> None:
        """A blob cut short anywhere but right after the preamble raises TruncatedStream."""
        data = dumps({"k": [1, b"abc", "x" * 20]})
        for end in range(len(data)):
            if end != len(PREAMBLE):
                self.assertRaises(TruncatedStream, loads, data[:end])

    def test_missing_preamble(self) -> None:
        """Tokens without the preamble raise BadPreamble."""
        self.assertRaises(BadPreamble, loads, body([1, 2]))

    def test_nothing(self) -> None:
        """A stream that holds only the preamble is a ProtocolError."""
        self.assertRaises(ProtocolError, loads, PREAMBLE)


class EncoderTests(SynchronousTestCase):
    """The encoder refuses what cannot be sent, with EncodingError."""

    def test_list_cycle(self) -> None:
        """A list that contains itself is an EncodingError."""
        cyclic: list[Any] = [1]
        cyclic.append(cyclic)
        self.assertRaises(EncodingError, dumps, cyclic)

    def test_dict_cycle(self) -> None:
        """A dict reachable from itself through a list is an EncodingError."""
        cyclic: dict[str, Any] = {}
        cyclic["self"] = [cyclic]
        self.assertRaises(EncodingError, dumps, cyclic)

    def test_encoder_reusable_after_error(self) -> None:
        """An Encoder that raised EncodingError encodes the next object correctly."""
        encoder = Encoder()
        cyclic: list[Any] = []
        cyclic.append(cyclic)
        self.assertRaises(EncodingError, encoder.encode, cyclic)
        shared = [1]
        self.assertEqual(encoder.encode([shared, shared]), body([[1], [1]]))

    def test_unsupported_type(self) -> None:
        """An object with no slicer, such as object(), is an EncodingError, also when nested."""
        self.assertRaises(EncodingError, dumps, object())
        self.assertRaises(EncodingError, dumps, {"k": [object()]})
        self.assertRaises(EncodingError, dumps, lambda: None)

    def test_encoding_error_is_type_error(self) -> None:
        """EncodingError is both a Violation and a TypeError."""
        error = self.assertRaises(EncodingError, dumps, object())
        self.assertIsInstance(error, TypeError)
        self.assertIsInstance(error, Violation)

    def test_too_deep(self) -> None:
        """Nesting deeper than the encoder's max_depth is an EncodingError."""
        limits = Limits(max_depth=10)
        value: Any = []
        for _ in range(10):
            value = [value]
        self.assertRaises(EncodingError, dumps, value, limits=limits)
        self.assertRaises(EncodingError, dumps, {"a": value}, limits=Limits(max_depth=11))

    def test_lone_surrogate(self) -> None:
        """A str holding a lone surrogate cannot be UTF-8 and is an EncodingError."""
        self.assertRaises(EncodingError, dumps, "abc\ud800")
        self.assertRaises(EncodingError, dumps, ["ok", "\udfff"])

    def test_subclasses_encoded_as_base(self) -> None:
        """Subclasses of int, str and list with no slicer of their own are sent as their base type."""

        class MyInt(int):
            pass

        class MyStr(str):
            pass

        self.assertTrue(same(loads(dumps([MyInt(5), MyStr("s")])), [5, "s"]))

    def test_float_encoding(self) -> None:
        """A float is a FLOAT header and its 8-byte big-endian IEEE 754 value."""
        self.assertEqual(body(1.5), tok(FLOAT, struct.pack(">d", 1.5)))
