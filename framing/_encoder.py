# -*- test-case-name: tests.framing.test_codec,tests.protocols.bulk.test_wire,tests.framing.test_slicing -*-
"""Encoder: objects to tokens, written into a BlockBuffer.

Contract: encoding is one pass over the object; every header is written
once into the current block and every body of at least
C{blocks.LARGE_PIECE} bytes is kept by reference, so a large C{bytes}
value is never copied while encoding.  Cycles and nesting deeper than
C{Limits.max_depth} are refused with L{EncodingError} (shared references
that are not cycles are sent as separate copies).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from typing import Any

from . import _core
from ._blocks import BlockBuffer
from ._errors import ChunkwireError, EncodingError, error_token_text
from ._limits import DEFAULT_LIMITS, Limits
from ._outgoing import Outgoing
from .slicing._arrays import BytesLikeSlicer, NdarraySlicer, is_ndarray
from .slicing._registry import DEFAULT_REGISTRY, Registry
from .wire import (
    BIGINT,
    BIGNEG,
    BYTES,
    CLOSE,
    ERROR,
    FLOAT,
    INT,
    MAX_HEADER_VALUE,
    NEG,
    OPEN,
    PREAMBLE,
    SIMPLE,
    STRING,
    encode_header,
)

_INT_HEADERS = tuple(encode_header(INT, v) for v in range(256))
_NEG_HEADERS = tuple(encode_header(NEG, v) for v in range(256))
_SIMPLE_TOKENS = {None: encode_header(SIMPLE, 0), False: encode_header(SIMPLE, 1), True: encode_header(SIMPLE, 2)}
_CLOSE = encode_header(CLOSE, 0)
_FLOAT_HEADER = encode_header(FLOAT, 8)
_PACK_FLOAT = struct.Struct(">d").pack


@functools.lru_cache(maxsize=1024)
def open_token(name: str) -> bytes:
    """Return the OPEN token (header and body) for open-type C{name}."""
    body = name.encode("ascii")
    return encode_header(OPEN, len(body)) + body


MAX_ERROR_MESSAGE = 1024
"""Most bytes of an ERROR token's body (L{error_token}): well under the default C{Limits.max_error_length} (4 KiB)."""


def error_token(error: ChunkwireError) -> bytes:
    """
    The ERROR token that tells the peer why C{error} ends the connection
    (C{docs/wire-format.md} 4.8, 6.1, 12.4): the code, a colon and the text
    (L{framing._errors.error_token_text}), cut to at most
    L{MAX_ERROR_MESSAGE} bytes on a character's boundary, so the body stays
    UTF-8 (section 4.8).  Every shell sends it before it closes for a rule
    the peer broke (not for the peer's own ERROR).  Costs one format and one
    encoding.
    """
    body = error_token_text(error).encode("utf-8")
    if len(body) > MAX_ERROR_MESSAGE:
        # (a character cut in two at the limit is left out whole)
        body = body[:MAX_ERROR_MESSAGE].decode("utf-8", "ignore").encode("utf-8")
    return encode_header(ERROR, len(body)) + body


_OPEN_LIST = open_token("list")
_OPEN_TUPLE = open_token("tuple")
_OPEN_DICT = open_token("dict")
_OPEN_SET = open_token("set")
_OPEN_FROZENSET = open_token("frozenset")
_NDARRAY = NdarraySlicer()
_BUFFER = BytesLikeSlicer("memoryview")


class Encoder:
    """
    Turns Python objects into chunkwire tokens.

    @ivar limits: the L{Limits} the encoder keeps to (nesting depth), so
        that what it sends a default decoder would accept.
    @ivar registry: where slicers for non-built-in types are looked up.
    """

    def __init__(self, registry: Registry | None = None, limits: Limits | None = None) -> None:
        self.registry = registry or DEFAULT_REGISTRY
        self.limits = limits or DEFAULT_LIMITS
        self._buf = BlockBuffer()
        self._open_ids: set[int] = set()
        self.outgoing: Outgoing | None = None
        """The message being encoded's L{Outgoing} (for slicers), or C{None}."""
        self._openings: dict[str, bytes] = {}
        self._depth = 0
        self._fast = _core.encoder()
        self._fast_parts = _core.parts_encoder()
        self._writers: dict[type, Callable[[Any, int], None]] = {
            int: self._write_int,
            bool: self._write_simple,
            type(None): self._write_simple,
            float: self._write_float,
            bytes: self._write_bytes,
            str: self._write_str,
            list: self._write_list,
            tuple: self._write_tuple,
            dict: self._write_dict,
            set: self._write_set,
            frozenset: self._write_frozenset,
        }
        if self._fast is not None:
            for kind in (list, tuple, dict):
                self._writers[kind] = self._compiled_writer(self._writers[kind])
        # Per type, how the compiled core writes a whole top-level object: b""
        # (a built-in container), a record's OPEN token, or None (it does
        # not), as the registry stood at _tops_generation.
        self._tops: dict[type, bytes | None] = {}
        self._tops_generation = -1

    @staticmethod
    def preamble() -> bytes:
        """The bytes every stream starts with: magic and version."""
        return PREAMBLE

    def encode(self, obj: Any) -> bytes:
        """Return the tokens of one top-level object as one C{bytes}."""
        buf = BlockBuffer()
        self.encode_into(obj, buf)
        return buf.take()

    def encode_into(self, obj: Any, buf: BlockBuffer, outgoing: Outgoing | None = None) -> None:
        """
        Append the tokens of one top-level object to C{buf}.  While it is
        encoded, slicers find C{outgoing} (the message's
        L{framing._outgoing.Outgoing}, or C{None}) as C{encoder.outgoing};
        the caller commits or rolls it back afterwards.

        @raise EncodingError: C{obj} holds something that cannot be sent;
            C{buf} may then hold a partial object and should be discarded.
        """
        self._buf = buf
        self.outgoing = outgoing
        try:
            self.write_object(obj, 0)
        finally:
            self.outgoing = None
            self._open_ids.clear()

    def tokens(self, obj: Any) -> bytes | None:
        """
        The tokens of C{obj} as one top-level object when the compiled core
        writes it whole (a list, tuple or dict of built-in values, or an
        object whose slicer declares a C{record_name}, see below); else
        C{None}, and L{encode_into} is the way.  No slicer runs and nothing
        is done with L{outgoing}.  The bytes are those L{encode_into} writes.

        A slicer declares C{record_name} when its C{slice(obj, encoder)} is
        exactly C{encoder.write_container(record_name, obj, obj)} (the RPC
        message's is).
        """
        fast_parts = self._fast_parts
        if fast_parts is None:
            return None
        if self.registry.generation != self._tops_generation:
            self._tops.clear()
            self._tops_generation = self.registry.generation
        cls = type(obj)
        try:
            opening = self._tops[cls]
        except KeyError:
            opening = self._tops[cls] = self._top_opening(cls)
        if opening is None:
            return None
        if not opening:
            return self._fast(obj, self.limits.max_depth)  # type: ignore[misc]
        return fast_parts(obj, self.limits.max_depth, opening)

    def _top_opening(self, cls: type) -> bytes | None:
        """For L{tokens}: C{b""} for a built-in container, a record type's OPEN token, or C{None}."""
        if cls in (list, tuple, dict):
            return b""
        name = getattr(self.registry.slicer_for(cls), "record_name", None)
        return None if name is None else open_token(name)

    def write_object(self, obj: Any, depth: int) -> None:
        """Write C{obj}, found at nesting C{depth}; for slicers writing their parts."""
        writer = self._writers.get(type(obj))
        if writer is None:
            # Resolved once per type and kept; a writer found through the
            # registry or a base class looks again once a slicer has been
            # registered in the registry or a parent (L{_checked}): built-in
            # types pay nothing.
            writer = self._writers[type(obj)] = self._writer_for(obj)
        writer(obj, depth)

    def write_container(self, name: str, container: Any, parts: Any) -> None:
        """
        For slicers: write OPEN C{name}, each of C{parts} as an object, then
        CLOSE, as a container nested inside whatever is being written.
        C{container} is the object being sliced (for cycle detection).
        """
        opening = self._openings.get(name)
        if opening is None:
            # Names come from slicers (program code), so this stays small.
            opening = self._openings[name] = open_token(name)
        if self._fast_parts is not None and id(container) not in self._open_ids:
            tokens = self._fast_parts(parts, max(self.limits.max_depth - self._depth, 0), opening)
            if tokens is not None:
                self._buf.write_piece(tokens)
                return
        self._write_sequence(opening, parts, self._depth, container)

    def _writer_for(self, obj: Any) -> Callable[[Any, int], None]:
        """Find how to write an object with no built-in writer: registry, subclass, buffer."""
        cls = type(obj)
        slicer = self.registry.slicer_for(cls)
        if slicer is None and is_ndarray(cls):
            slicer = _NDARRAY
        if slicer is not None:
            return self._slicer_writer(slicer)
        for base in cls.__mro__[1:]:
            if base in self._writers and base is not object:
                return self._checked(self._writers[base])
        if _has_buffer(obj):
            return self._slicer_writer(_BUFFER)
        raise EncodingError(
            f"no slicer is registered for {cls.__module__}.{cls.__qualname__}; register it on both sides with"
            f" framing.register({cls.__qualname__}, 'myapp.{cls.__qualname__}') (plus to_wire and from_wire"
            " functions unless it is a dataclass)"
        )

    def _checked(self, writer: Callable[[Any, int], None]) -> Callable[[Any, int], None]:
        """
        C{writer}, found for a type as the registry stood: once a slicer
        is registered in it or a parent (L{Registry.generation}), it forgets
        itself and the type is looked up again.  One comparison per object.
        """
        registry = self.registry
        generation = registry.generation

        def write(obj: Any, depth: int) -> None:
            if registry.generation != generation:
                del self._writers[type(obj)]
                self.write_object(obj, depth)
                return
            writer(obj, depth)

        return write

    def _slicer_writer(self, slicer: Any) -> Callable[[Any, int], None]:
        """A writer through C{slicer}, checked as L{_checked}'s are (written out: one call less per object)."""
        registry = self.registry
        generation = registry.generation

        def write(obj: Any, depth: int) -> None:
            if registry.generation != generation:
                del self._writers[type(obj)]
                self.write_object(obj, depth)
                return
            self._depth = depth
            slicer.slice(obj, self)

        return write

    def _compiled_writer(self, write: Callable[[Any, int], None]) -> Callable[[Any, int], None]:
        """C{write}, tried first by the compiled core (whole containers of exact built-in types, else C{None})."""
        fast = self._fast
        assert fast is not None

        def compiled(value: Any, depth: int) -> None:
            tokens = fast(value, max(self.limits.max_depth - depth, 0))
            if tokens is None:
                write(value, depth)
            else:
                self._buf.write_piece(tokens)

        return compiled

    def _write_int(self, value: int, depth: int) -> None:
        buf = self._buf
        if value >= 0:
            if value < 256:
                buf.write(_INT_HEADERS[value])
            elif value <= MAX_HEADER_VALUE:
                buf.write(encode_header(INT, value))
            else:
                self._write_body(BIGINT, value.to_bytes((value.bit_length() + 7) // 8, "big"))
        else:
            magnitude = -1 - value
            if magnitude < 256:
                buf.write(_NEG_HEADERS[magnitude])
            elif magnitude <= MAX_HEADER_VALUE:
                buf.write(encode_header(NEG, magnitude))
            else:
                self._write_body(BIGNEG, (-value).to_bytes(((-value).bit_length() + 7) // 8, "big"))

    def _write_simple(self, value: bool | None, depth: int) -> None:
        self._buf.write(_SIMPLE_TOKENS[value])

    def _write_float(self, value: float, depth: int) -> None:
        self._buf.write(_FLOAT_HEADER + _PACK_FLOAT(value))

    def _write_bytes(self, value: bytes, depth: int) -> None:
        self._write_body(BYTES, value)

    def _write_str(self, value: str, depth: int) -> None:
        try:
            body = value.encode("utf-8")
        except UnicodeEncodeError as error:
            raise EncodingError(f"string is not encodable as UTF-8: {error.reason}") from None
        self._write_body(STRING, body)

    def _write_body(self, kind: int, body: bytes) -> None:
        buf = self._buf
        buf.write(encode_header(kind, len(body)))
        buf.write_piece(body)

    def _write_list(self, value: list[Any], depth: int) -> None:
        self._write_sequence(_OPEN_LIST, value, depth)

    def _write_tuple(self, value: tuple[Any, ...], depth: int) -> None:
        self._write_sequence(_OPEN_TUPLE, value, depth)

    def _write_set(self, value: set[Any], depth: int) -> None:
        self._write_sequence(_OPEN_SET, value, depth)

    def _write_frozenset(self, value: frozenset[Any], depth: int) -> None:
        self._write_sequence(_OPEN_FROZENSET, value, depth)

    def _write_sequence(self, opening: bytes, items: Any, depth: int, container: Any = None) -> None:
        if container is None:
            container = items
        depth = self._enter(container, depth)
        buf = self._buf
        buf.write(opening)
        writers = self._writers
        for item in items:
            writer = writers.get(type(item))
            if writer is None:
                self.write_object(item, depth)
            else:
                writer(item, depth)
        buf.write(_CLOSE)
        buf.seal_if_full()
        self._open_ids.discard(id(container))

    def _write_dict(self, value: dict[Any, Any], depth: int) -> None:
        depth = self._enter(value, depth)
        buf = self._buf
        buf.write(_OPEN_DICT)
        write = self.write_object
        for key, item in value.items():
            write(key, depth)
            write(item, depth)
        buf.write(_CLOSE)
        buf.seal_if_full()
        self._open_ids.discard(id(value))

    def _enter(self, container: Any, depth: int) -> int:
        """Check a container before writing it; return the depth of its items."""
        depth += 1
        if depth > self.limits.max_depth:
            raise EncodingError(f"containers nested deeper than {self.limits.max_depth}")
        key = id(container)
        if key in self._open_ids:
            raise EncodingError(f"cycle: a {type(container).__name__} contains itself")
        self._open_ids.add(key)
        return depth


def _has_buffer(obj: Any) -> bool:
    """True if C{obj} exports the buffer protocol (asked of the instance: before
    Python 3.12 a type cannot say so itself)."""
    try:
        memoryview(obj).release()
    except TypeError:
        return False
    return True


def dumps(obj: Any, registry: Registry | None = None, limits: Limits | None = None) -> bytes:
    """Return a complete stream holding C{obj}: the preamble, then its tokens."""
    fast = _core.encoder()
    if fast is not None:
        stream = fast(obj, (limits or DEFAULT_LIMITS).max_depth, PREAMBLE)
        if stream is not None:
            return stream
    encoder = Encoder(registry, limits)
    buf = BlockBuffer()
    buf.write(PREAMBLE)
    encoder.encode_into(obj, buf)
    return buf.take()
