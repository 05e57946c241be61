# -*- test-case-name: tests.framing.test_arrays -*-
"""Bulk values as ONE body token: bytes-likes, C{array.array}, numpy arrays.

Contract: an array's elements travel as one BYTES body (never a token per
element), with what a reader needs to rebuild it exactly on any machine:
the typecode (or dtype), the item size and the writer's byte order.
Decoding copies a large C{array.array} body once into the array: it is
streamed to the unslicer (L{IStreamsBodies}) piece by piece as it comes off
the wire, each piece copied straight from the received chunk; a body whose
length is not a whole number of items, an unknown typecode or a non-numeric
dtype refuses the object (an array's at its body's header, before any of it
is kept).  Sizes from the wire are checked one by one against small
bounds before any arithmetic is done with them (an ndarray's shape has at
most L{MAX_NDIM} dimensions, each below 2**63, checked before their product
is formed; an array's item size is matched against the few local ones), so
a shape of huge ints costs a comparison each, never a bignum product.
numpy is used only if it is installed and only when an C{ndarray} is sent
or received.
"""

from __future__ import annotations

import array
import re
import sys
from typing import Any

from zope.interface import implementer

from .._errors import EncodingError, InvalidValue, UnknownType, short_repr
from ..wire import BYTES, OPEN, STRING
from ._custom import PartsUnslicer
from ._interfaces import ISlicer, IStreamsBodies

_BODY = frozenset({BYTES})
_TEXT = frozenset({STRING})

# Local typecodes by (class of element, item size), so a reader maps a
# writer's 'l' (8 bytes on Linux, 4 on Windows) to whatever local code has
# that size, keeping the writer's own code where it has that size here.
_SIGNED = "bhilq"
_UNSIGNED = "BHILQ"
_FLOATS = "fd"
_CHARS = "uw"


def _local_codes() -> dict[tuple[str, int], str]:
    """
    The local typecode for each writer's (typecode, item size): the
    writer's own where it has that size here (so a 'q' stays a 'q' where
    'l' has its size too), else the first of its family that has.
    """
    table = {}
    for family in (_SIGNED, _UNSIGNED, _FLOATS, _CHARS):
        sizes = {code: array.array(code).itemsize for code in family if code in array.typecodes}
        for typecode in family:
            for size in set(sizes.values()):
                same = [code for code in sizes if sizes[code] == size]
                table[typecode, size] = typecode if typecode in same else same[0]
    return table


_LOCAL_CODES = _local_codes()


def _local_typecode(typecode: str, itemsize: int) -> str:
    if len(typecode) != 1:
        raise InvalidValue(f"array typecode must be one character, not {short_repr(typecode, 20)}")
    local = _LOCAL_CODES.get((typecode, itemsize))
    if local is None:
        raise InvalidValue(f"no local array typecode for {short_repr(typecode, 20)} with {itemsize}-byte items")
    return local


@implementer(ISlicer)
class BytesLikeSlicer:
    """Sends a bytes-like object as OPEN name, BYTES, CLOSE."""

    def __init__(self, name: str) -> None:
        self.name = name

    def slice(self, obj: Any, encoder: Any) -> None:
        encoder.write_container(self.name, obj, (_as_bytes(obj),))


def _as_bytes(obj: Any) -> bytes:
    # One copy: the value may be mutable and is sent after this returns.
    return memoryview(obj).tobytes()


class BytearrayUnslicer(PartsUnslicer):
    """Builds a C{bytearray}."""

    open_type = "bytearray"
    part_kinds = (_BODY,)
    part_types = (bytes,)

    def build(self, data: bytes) -> bytearray:
        return bytearray(data)


class MemoryviewUnslicer(PartsUnslicer):
    """Builds a read-only byte C{memoryview} (any buffer-protocol object arrives as one)."""

    open_type = "memoryview"
    part_kinds = (_BODY,)
    part_types = (bytes,)

    def build(self, data: bytes) -> memoryview:
        return memoryview(data)


@implementer(ISlicer)
class ArraySlicer:
    """Sends an C{array.array} as OPEN "array", typecode, item size, byte order, BYTES, CLOSE."""

    def slice(self, obj: array.array[Any], encoder: Any) -> None:
        parts = (obj.typecode, obj.itemsize, sys.byteorder, obj.tobytes())
        encoder.write_container("array", obj, parts)


STREAMED_ARRAY = 64 * 1024
"""An array body at least this long is streamed into the array as it arrives
(one copy); a shorter one arrives whole, like any body."""
_NO_ARRAY: array.array[Any] = array.array("b")


@implementer(IStreamsBodies)
class ArrayUnslicer(PartsUnslicer):
    """Builds an C{array.array}, swapping bytes if the writer's order differs."""

    open_type = "array"
    part_kinds = (_TEXT, None, _TEXT, _BODY)
    part_types = (str, int, str, bytes)

    def __init__(self, limits: Any) -> None:
        super().__init__(limits)
        self._array: array.array[Any] = _NO_ARRAY
        self._length = self._position = 0
        self._view: memoryview | None = None

    def begin_body(self, length: int) -> bool:
        """Stream a large body straight into the array (its layout checked first)."""
        if length < STREAMED_ARRAY or len(self.parts) != 3:
            return False
        typecode, itemsize, byteorder = self.parts
        self._array = array.array(self._local(typecode, itemsize, byteorder, length))
        self._length = length
        return True

    def body_piece(self, data: bytes | memoryview) -> None:
        """
        Copy a piece into the array, once: a body that comes in one piece
        with C{frombytes}, one in several into the array made at its full
        length.
        """
        view = self._view
        if view is None:
            if len(data) == self._length:
                self._array.frombytes(data)
                return
            itemsize = self._array.itemsize
            self._array = array.array(self._array.typecode, bytes(itemsize)) * (self._length // itemsize)
            view = self._view = memoryview(self._array).cast("B")
        position = self._position
        self._position = position + len(data)
        view[position : self._position] = data

    def end_body(self) -> None:
        if self._view is not None:
            self._view.release()  # (an exported buffer would pin the array's size)
            self._view = None
        self.parts.append(self._array)

    def build(self, typecode: str, itemsize: int, byteorder: str, data: bytes | array.array[Any]) -> array.array[Any]:
        if type(data) is array.array:
            result = data  # streamed in, its layout already checked
        else:
            result = array.array(self._local(typecode, itemsize, byteorder, len(data)))
            result.frombytes(data)
        if byteorder != sys.byteorder and itemsize > 1:
            result.byteswap()
        return result

    def _local(self, typecode: str, itemsize: int, byteorder: str, length: int) -> str:
        """The local typecode for the writer's, after checking the layout and the body's length."""
        if type(itemsize) is not int or not 0 < itemsize <= 16 or byteorder not in ("little", "big"):
            # No local typecode is wider than 8 bytes: a bignum size goes no further.
            raise InvalidValue("array needs a typecode, an item size of 1 to 16 bytes and 'little' or 'big'")
        local = _local_typecode(typecode, itemsize)
        if length % itemsize:
            raise InvalidValue(f"array body of {length} bytes is not a whole number of {itemsize}-byte items")
        return local


MAX_NDIM = 64
"""Most dimensions an ndarray may have (numpy 2's own limit; numpy 1's is 32)."""
MAX_DIMENSION = 2**63 - 1
"""Largest length of one dimension (numpy's index type is a signed 64-bit int)."""

# Only plain numeric dtypes: never object arrays, which would need pickle.
_DTYPE = re.compile(r"^[<>|=][biuf?][0-9]{1,2}$|^[<>|=]c(8|16|32)$")


@implementer(ISlicer)
class NdarraySlicer:
    """Sends a numeric numpy array as OPEN "ndarray", dtype, shape, BYTES, CLOSE."""

    def slice(self, obj: Any, encoder: Any) -> None:
        dtype = obj.dtype.str
        if not _DTYPE.match(dtype):
            raise EncodingError(f"only numeric numpy arrays can be sent, not dtype {dtype}")
        encoder.write_container("ndarray", obj, (dtype, list(obj.shape), obj.tobytes()))


class NdarrayUnslicer(PartsUnslicer):
    """Builds a read-only numpy array over the received body (numpy must be installed)."""

    open_type = "ndarray"
    part_kinds = (_TEXT, frozenset({OPEN}), _BODY)
    part_types = (str, list, bytes)

    def build(self, dtype: Any, shape: Any, data: bytes) -> Any:
        if not isinstance(dtype, str) or not _DTYPE.match(dtype):
            raise InvalidValue(f"ndarray dtype {short_repr(dtype, 20)} is not a plain numeric type")
        # Checked before numpy is imported: a malformed array costs no import.
        count = _element_count(shape)
        try:
            import numpy
        except ImportError:
            raise UnknownType("an ndarray arrived but numpy is not installed") from None
        parsed = numpy.dtype(dtype)
        if count * parsed.itemsize != len(data):
            raise InvalidValue(f"ndarray body of {len(data)} bytes does not match shape {shape} of {dtype}")
        return numpy.frombuffer(data, dtype=parsed).reshape(shape)


def _element_count(shape: Any) -> int:
    """
    The product of C{shape}, after checking each dimension against
    L{MAX_DIMENSION} (and their number against L{MAX_NDIM}) before any
    multiplication: the product of at most 64 factors below 2**63 is cheap.
    """
    if not isinstance(shape, list) or len(shape) > MAX_NDIM:
        raise InvalidValue(f"ndarray shape must be a list of at most {MAX_NDIM} non-negative ints")
    for index, n in enumerate(shape):
        if type(n) is not int or not 0 <= n <= MAX_DIMENSION:
            raise InvalidValue(f"ndarray dimension {index} is not an int between 0 and 2**63 - 1")
    count = 1
    for n in shape:
        count *= n
    return count


def is_ndarray(cls: type) -> bool:
    """True for numpy's ndarray, recognised without importing numpy."""
    return cls.__name__ == "ndarray" and cls.__module__ == "numpy"


ARRAY_UNSLICERS = (BytearrayUnslicer, MemoryviewUnslicer, ArrayUnslicer, NdarrayUnslicer)
