"""
Tests for bulk values as ONE body token: C{array.array} of every typecode,
foreign byte orders and item sizes, buffer-protocol objects (ctypes, mmap)
and numpy arrays.  The Swift ring bug (seed 001) is the reason: an array
must never become a token per element.
"""

from __future__ import annotations

import array
import ctypes
import mmap
import struct
import sys
import tracemalloc
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, EncodingError, Violation, dumps, loads
from framing._errors import BodyTooLarge, InvalidValue, KindRefused, UnknownType
from framing._limits import Limits
from framing.slicing._arrays import STREAMED_ARRAY
from framing.wire import BYTES, INT, PREAMBLE

from .test_slicing import container, encoded, text, token, tokens

try:
    import numpy
except ImportError:  # pragma: no cover - numpy is optional
    numpy = None

FAMILIES = ("bhilq", "BHILQ", "fd", "uw")


def family(typecode: str) -> str:
    """The family (signed, unsigned, float, char) a typecode belongs to."""
    return next(f for f in FAMILIES if typecode in f)


def sample(typecode: str) -> array.array[Any]:
    """An array of C{typecode} holding its extreme and a few ordinary values."""
    size = array.array(typecode).itemsize
    if typecode in "bhilq":
        low, high = -(2 ** (8 * size - 1)), 2 ** (8 * size - 1) - 1
        return array.array(typecode, [low, -1, 0, 1, 0x12, high])
    if typecode in "BHILQ":
        return array.array(typecode, [0, 1, 0x12, 2 ** (8 * size) - 1])
    if typecode in "fd":
        return array.array(typecode, [0.0, -0.0, 1.5, -2.25, float("inf"), float("-inf"), 1e-30])
    return array.array(typecode, "a\xe9\u20ac\U0001f600")


def array_stream(typecode: str, itemsize: int, byteorder: str, body: bytes) -> bytes:
    """A hand-made stream holding one array, as a writer with C{byteorder} would send it."""
    return PREAMBLE + container("array", text(typecode), token(INT, itemsize), text(byteorder), token(BYTES, body))


def swapped(values: array.array[Any]) -> bytes:
    """The array's bytes in the other byte order."""
    other = array.array(values.typecode, values)
    other.byteswap()
    return other.tobytes()


OTHER_ORDER = "big" if sys.byteorder == "little" else "little"


class ArrayRoundTripTests(SynchronousTestCase):
    """array.array travels exactly, as one body token."""

    def test_every_typecode_roundtrips(self) -> None:
        """An array of each typecode in array.typecodes arrives with equal contents and the same family."""
        for code in array.typecodes:
            source = sample(code)
            back = loads(dumps(source))
            self.assertIsInstance(back, array.array)
            self.assertEqual(family(back.typecode), family(code), code)
            self.assertEqual(back.itemsize, source.itemsize, code)
            self.assertEqual(back.tobytes(), source.tobytes(), code)
            self.assertEqual(back.tolist(), source.tolist(), code)

    def test_typecode_kept(self) -> None:
        """Each typecode comes back as itself where this machine has it with the same item size ('q' stays 'q')."""
        for code in array.typecodes:
            self.assertEqual(loads(dumps(sample(code))).typecode, code)
        back = loads(array_stream("q", 8, OTHER_ORDER, swapped(array.array("q", [-1, 2**62]))))
        self.assertEqual((back.typecode, back.tolist()), ("q", [-1, 2**62]))
        streamed = array.array("Q", range(STREAMED_ARRAY // 8 + 1))
        self.assertEqual(loads(dumps(streamed)).typecode, "Q")

    def test_one_body_token(self) -> None:
        """An array is OPEN, typecode, item size, byte order, ONE BYTES token with its bytes, CLOSE."""
        for code in array.typecodes:
            source = sample(code) * 1000
            parts = tokens(encoded(source))
            bodies = [body for kind, body in parts if kind == "BYTES"]
            self.assertEqual(bodies, [source.tobytes()], code)
            self.assertEqual(len(parts), 6, code)
            self.assertEqual(parts[0], ("OPEN", b"array"))
            self.assertEqual(parts[1], ("STRING", code.encode()))

    def test_token_count_independent_of_length(self) -> None:
        """The encoded size is the array's bytes plus a constant: no per-element cost on the wire."""
        small = len(dumps(array.array("H", range(10))))
        big = len(dumps(array.array("H", bytes(2**19))))
        # Only the body and its header's width differ (a 5-byte header for 2**19 bytes, 2 bytes for 20).
        self.assertEqual(big - small, (5 + 2**19) - (2 + 20))

    def test_empty_array(self) -> None:
        """An empty array round trips."""
        for code in "bHd":
            back = loads(dumps(array.array(code)))
            self.assertEqual((back.typecode, len(back)), (code, 0))

    @settings(deadline=None, max_examples=100)
    @given(st.sampled_from([c for c in array.typecodes if c not in "uwfd"]), st.data())
    def test_integer_arrays_roundtrip(self, code: str, data: st.DataObject) -> None:
        """Any integer array, of any typecode, round trips."""
        size = array.array(code).itemsize
        low, high = (-(2 ** (8 * size - 1)), 2 ** (8 * size - 1) - 1) if code.islower() else (0, 2 ** (8 * size) - 1)
        source = array.array(code, data.draw(st.lists(st.integers(low, high), max_size=50)))
        self.assertEqual(loads(dumps(source)).tolist(), source.tolist())

    @settings(deadline=None, max_examples=100)
    @given(st.lists(st.floats(width=32), max_size=50), st.lists(st.floats(), max_size=50))
    def test_float_arrays_keep_bits(self, singles: list[float], doubles: list[float]) -> None:
        """Float arrays (NaNs included) arrive bit for bit."""
        for source in (array.array("f", singles), array.array("d", doubles)):
            self.assertEqual(loads(dumps(source)).tobytes(), source.tobytes())

    def test_in_containers(self) -> None:
        """Arrays nested in containers arrive in place."""
        ring = {"devs": [{"id": 0}], "replica2part2dev": [array.array("H", [1, 2, 3])] * 3, "part_shift": 12}
        back = loads(dumps(ring))
        self.assertEqual(back, ring)


class ForeignWriterTests(SynchronousTestCase):
    """An array written on a machine with another byte order or item sizes reads correctly."""

    def test_other_byte_order(self) -> None:
        """A stream saying the writer's byte order differs is byte-swapped on arrival, for every typecode."""
        for code in array.typecodes:
            source = sample(code)
            back = loads(array_stream(code, source.itemsize, OTHER_ORDER, swapped(source)))
            self.assertEqual(back.tolist(), source.tolist(), code)

    def test_same_byte_order_named_explicitly(self) -> None:
        """A stream naming this machine's byte order is taken as is."""
        source = sample("i")
        self.assertEqual(loads(array_stream("i", 4, sys.byteorder, source.tobytes())), source)

    def test_big_endian_by_hand(self) -> None:
        """A big-endian 'H' array with bytes 00 01 01 02 holds 1 and 258."""
        back = loads(array_stream("H", 2, "big", b"\x00\x01\x01\x02"))
        self.assertEqual(back.tolist(), [1, 0x0102])
        back = loads(array_stream("H", 2, "little", b"\x01\x00\x02\x01"))
        self.assertEqual(back.tolist(), [1, 0x0102])

    def test_big_endian_writer_simulated(self) -> None:
        """What the array slicer writes on a big-endian machine reads back correctly here."""
        from framing.slicing import _arrays as arrays

        source = array.array("d", [1.5, -2.0, 1e300])

        class BigEndianSys:
            byteorder = OTHER_ORDER

        swapped_source = array.array("d", source)
        swapped_source.byteswap()  # its memory now holds what a foreign writer's memory holds
        patcher = self.patch(arrays, "sys", BigEndianSys)
        data = dumps(swapped_source)
        patcher.restore()
        self.assertIn(OTHER_ORDER.encode(), data)
        self.assertEqual(loads(data).tolist(), source.tolist())

    def test_foreign_item_size(self) -> None:
        """A writer's 'l' of 4 bytes (Windows) arrives as the local signed code with 4-byte items."""
        values = array.array("i", [-5, 7, 2**31 - 1])
        back = loads(array_stream("l", 4, sys.byteorder, values.tobytes()))
        self.assertEqual((back.itemsize, family(back.typecode), back.tolist()), (4, "bhilq", values.tolist()))
        back = loads(array_stream("L", 8, OTHER_ORDER, swapped(array.array("Q", [1, 2**64 - 1]))))
        self.assertEqual((back.itemsize, back.tolist()), (8, [1, 2**64 - 1]))


class ArrayRefusalTests(SynchronousTestCase):
    """Malformed arrays are Violations, and the stream goes on."""

    def assertRefused(self, data: bytes, kind: type[Violation] = Violation) -> Violation:
        results = Decoder().feed(data + encoded("next"))
        self.assertEqual(len(results), 2)
        self.assertIsInstance(results[0], kind)
        self.assertEqual(results[1], "next")
        return results[0]

    def test_partial_item(self) -> None:
        """A body whose length is not a multiple of the item size is refused."""
        self.assertRefused(array_stream("H", 2, "little", b"\x00\x01\x02"), InvalidValue)
        self.assertRefused(array_stream("d", 8, "big", b"\x00" * 12), InvalidValue)

    def test_unknown_typecode(self) -> None:
        """A typecode this Python lacks, or a non-numeric one, is refused."""
        for code in ["z", "O", "x", "?", "c", "\x00"]:
            self.assertRefused(array_stream(code, 1, "little", b"\x00"), InvalidValue)

    def test_multi_character_or_empty_typecode(self) -> None:
        """A typecode that is empty or several characters long ('', 'hi', 'bhilq') is refused."""
        for code, size, body in [("", 1, b"ab"), ("hi", 2, b"ab"), ("bhilq", 8, b"\x00" * 8), ("fd", 4, b"\x00" * 4)]:
            self.assertRefused(array_stream(code, size, "little", body), InvalidValue)

    def test_item_size_with_no_local_code(self) -> None:
        """An item size no local typecode of that family has (3, 0, 16, -1) is refused."""
        for size in [3, 0, 16]:
            self.assertRefused(array_stream("H", size, "little", b"\x00" * 48), InvalidValue)
        data = PREAMBLE + container("array", text("H"), encoded(-1), text("little"), token(BYTES, b"\x00\x00"))
        self.assertRefused(data, InvalidValue)

    def test_bad_byte_order(self) -> None:
        """A byte order other than 'little' or 'big' is refused."""
        for order in ["middle", "Little", "", "big "]:
            self.assertRefused(array_stream("H", 2, order, b"\x00\x01"), InvalidValue)

    def test_wrong_part_kinds(self) -> None:
        """Parts of the wrong kind (bytes typecode, text body, missing or extra parts) are refused."""
        bad = [
            container("array", token(BYTES, b"H"), encoded(2), text("little"), token(BYTES, b"\x00\x00")),
            container("array", text("H"), encoded(2), text("little"), text("\x00\x00")),
            container("array", text("H"), encoded(2), text("little")),
            container("array", text("H"), encoded(2), text("little"), token(BYTES, b"ab"), encoded(1)),
            container("array", text("H"), encoded(True), text("little"), token(BYTES, b"ab")),
            container("array", text("H"), encoded(2.0), text("little"), token(BYTES, b"ab")),
        ]
        for data in bad:
            self.assertRefused(PREAMBLE + data)

    def test_body_over_the_limit(self) -> None:
        """An array body longer than max_bytes_length is refused at its header."""
        decoder = Decoder(limits=Limits(max_bytes_length=1000))
        data = dumps(array.array("d", range(200)))
        results = decoder.feed(data + encoded(1))
        self.assertIsInstance(results[0], BodyTooLarge)
        self.assertEqual(results[1], 1)


class BufferProtocolTests(SynchronousTestCase):
    """Any other buffer-protocol object travels as one body token and arrives as a memoryview."""

    def check_one_body(self, obj: Any) -> None:
        expected = memoryview(obj).tobytes()
        parts = tokens(encoded(obj))
        self.assertEqual([body for kind, body in parts if kind == "BYTES"], [expected])
        self.assertEqual(len(parts), 3)
        back = loads(dumps(obj))
        self.assertIsInstance(back, memoryview)
        self.assertEqual(back.tobytes(), expected)

    def test_ctypes_array(self) -> None:
        """A ctypes array travels as one body token holding its memory."""
        self.check_one_body((ctypes.c_double * 100)(*range(100)))
        self.check_one_body((ctypes.c_uint16 * 5)(1, 2, 3, 4, 5))

    def test_ctypes_structure(self) -> None:
        """A ctypes Structure travels as one body token holding its memory."""

        class Pair(ctypes.Structure):
            _fields_ = [("a", ctypes.c_int32), ("b", ctypes.c_int32)]

        self.check_one_body(Pair(1, 2))

    def test_mmap(self) -> None:
        """An mmap travels as one body token holding its contents."""
        mapped = mmap.mmap(-1, 4096)
        self.addCleanup(mapped.close)
        mapped.write(b"chunkwire" * 100)
        self.check_one_body(mapped)


class NumpyTests(SynchronousTestCase):
    """numpy arrays of plain numeric dtypes travel as one body token."""

    skip = None if numpy is not None else "numpy is not installed"

    DTYPES = ["i1", "u1", "<i2", ">u2", "<i4", ">i4", "<i8", "<u8", "<f2", "<f4", ">f8", "<c8", ">c16", "?"]
    SHAPES = [(), (0,), (7,), (2, 3), (3, 0, 2), (2, 3, 4)]

    def test_dtypes_and_shapes(self) -> None:
        """Arrays of many numeric dtypes and shapes arrive with equal dtype, shape and contents."""
        for dtype in self.DTYPES:
            for shape in self.SHAPES:
                count = int(numpy.prod(shape))
                source = (numpy.arange(count) * 37 % 101 - 50).reshape(shape).astype(dtype)
                back = loads(dumps(source))
                self.assertEqual((back.dtype, back.shape), (source.dtype, source.shape), (dtype, shape))
                self.assertTrue(numpy.array_equal(back, source), (dtype, shape))

    def test_one_body_token(self) -> None:
        """An ndarray's elements are one BYTES token."""
        source = numpy.arange(10000, dtype="<u4").reshape(100, 100)
        parts = tokens(encoded(source))
        self.assertEqual([body for kind, body in parts if kind == "BYTES"], [source.tobytes()])
        self.assertLess(len(parts), 10)

    def test_non_contiguous(self) -> None:
        """Fortran-ordered and strided views arrive with the same values."""
        base = numpy.arange(60, dtype="<i8").reshape(3, 4, 5)
        for source in (numpy.asfortranarray(base), base[:, ::2, 1::2], base.T):
            back = loads(dumps(source))
            self.assertTrue(numpy.array_equal(back, source))

    def test_object_dtype_refused_at_encode_with_encoding_error(self) -> None:
        """An object-dtype array (which would need pickle) is an EncodingError at encode."""
        self.assertRaises(EncodingError, dumps, numpy.array([1, "a", None], dtype=object))

    def test_non_numeric_dtypes_refused_at_encode(self) -> None:
        """Object, string, datetime and structured dtypes cannot be sent."""
        for source in (
            numpy.array([1, "a"], dtype=object),
            numpy.array(["ab"]),
            numpy.array(["2020-01-01"], dtype="datetime64[D]"),
            numpy.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")]),
        ):
            self.assertRaises(Violation, dumps, source)

    def test_object_dtype_refused_at_decode(self) -> None:
        """A stream claiming an object or string dtype is refused; nothing is unpickled."""
        for dtype in ["|O", "|O8", "<U2", "|V8", "<M8[D]", "i4", "<i4 "]:
            data = PREAMBLE + container("ndarray", text(dtype), encoded([1]), token(BYTES, b"\x00" * 8))
            self.assertRaises(InvalidValue, loads, data)

    def test_shape_mismatch_refused(self) -> None:
        """A body that does not match the shape, or a bad shape, is refused."""
        for shape in ([3], [-1], [2, "x"], 5, [True]):
            data = PREAMBLE + container("ndarray", text("<i4"), encoded(shape), token(BYTES, b"\x00" * 8))
            self.assertRaises(Violation, loads, data)

    def test_shape_must_be_a_list(self) -> None:
        """The shape part must be a container, refused at its header otherwise."""
        data = PREAMBLE + container("ndarray", text("<i4"), token(BYTES, b"xx"), token(BYTES, b"\x00" * 4))
        self.assertRaises(KindRefused, loads, data)

    def test_without_numpy_ndarray_is_unknown(self) -> None:
        """When numpy cannot be imported an arriving ndarray is an UnknownType Violation."""
        data = dumps(numpy.arange(3, dtype="<i4"))
        self.addCleanup(sys.modules.__setitem__, "numpy", sys.modules["numpy"])
        sys.modules["numpy"] = None  # type: ignore[assignment]
        self.assertRaises(UnknownType, loads, data)


class ConsistencyTests(SynchronousTestCase):
    """Sanity checks on the helpers above."""

    def test_swapped(self) -> None:
        """swapped() reverses each item's bytes."""
        self.assertEqual(
            swapped(array.array("H", [1])), struct.pack(">H", 1) if sys.byteorder == "little" else b"\x01\x00"
        )


class StreamedArrayTests(SynchronousTestCase):
    """A large array's body is streamed into the array as it arrives: each byte copied once, never collected."""

    def large(self, typecode: str = "H", count: int = STREAMED_ARRAY) -> array.array[Any]:
        return array.array(typecode, range(count)) if typecode in "HIL" else array.array(typecode, [0.5] * count)

    def test_split_anywhere(self) -> None:
        """A streamed array decodes exactly however its stream is cut, and byte by byte."""
        source = self.large("H", STREAMED_ARRAY // 2)
        data = dumps([source, 5])
        body = data.index(source.tobytes())
        cuts = sorted({*range(0, body + 12), *range(body + 12, len(data), 997), *range(len(data) - 12, len(data) + 1)})
        for cut in cuts:
            decoder = Decoder()
            results = decoder.feed(data[:cut]) + decoder.feed(data[cut:])
            self.assertEqual(results, [[source, 5]], str(cut))
        decoder = Decoder()
        results = []
        for i in range(len(data)):
            results += decoder.feed(data[i : i + 1])
        self.assertEqual(results, [[source, 5]])

    def test_other_byte_order(self) -> None:
        """A streamed array from a writer of the other byte order is swapped on arrival."""
        source = self.large("I", STREAMED_ARRAY)
        data = array_stream("I", 4, OTHER_ORDER, swapped(source))
        for step in (len(data), 1000):
            decoder = Decoder()
            results: list[Any] = []
            for i in range(0, len(data), step):
                results += decoder.feed(data[i : i + step])
            self.assertEqual(results, [source])

    def test_memory_one_copy(self) -> None:
        """Decoding a 4 MiB array holds the array (and its growth room) and at most a chunk more: no second copy."""
        source = self.large("d", 512 * 1024)
        data = dumps(source)
        for step in (len(data), 64 * 1024):
            chunks = [data[i : i + step] for i in range(0, len(data), step)]
            decoder = Decoder()
            tracemalloc.start()
            try:
                results: list[Any] = []
                for chunk in chunks:
                    results += decoder.feed(chunk)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            self.assertEqual(results, [source])
            # (array.frombytes keeps 1/16 more room for growth)
            self.assertLess(peak, len(source.tobytes()) * 17 // 16 + 64 * 1024, str(step))

    def test_bad_layout_refused_at_the_header(self) -> None:
        """A large array body whose length is no whole number of items is refused before any of it is kept."""
        body = b"\x00" * (STREAMED_ARRAY + 1)
        data = array_stream("H", 2, sys.byteorder, body) + encoded(1)
        decoder = Decoder()
        results: list[Any] = []
        for i in range(0, len(data), 4096):
            results += decoder.feed(data[i : i + 4096])
            self.assertLess(decoder.buffered, 4096)
        self.assertIsInstance(results[0], InvalidValue)
        self.assertEqual(results[1], 1)
