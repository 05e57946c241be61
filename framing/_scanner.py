# -*- test-case-name: tests.framing.test_scanner,tests.framing.test_held_tail,tests.framing.test_cores_frames -*-
"""TokenScanner: bytes in, tokens out, as a two-state machine.

Contract: in WANT_HEADER the scanner reads headers in place from the chain's
first chunk (no copy) or, for a header split across chunks, from a peek of at
most 9 bytes; nothing is consumed until a header is complete, checked against
the limits and accepted by the sink, so an exception never leaves the stream
out of sync.  In WANT_BODY each arriving chunk goes straight to the body's
reader (copied once into a whole body; passed on piece by piece for a
streamed one, as C{bytes} or, if the sink asks for views, as the very read or
a C{memoryview} of it, uncopied; dropped for a skipped one) and is released;
a body never waits in the chain, and one lying whole in the chunk being
scanned is delivered from it at once (a whole body as one slice, a streamed
one as one piece).  The memory a body holds grows with the bytes that
arrived, never with the length its header announced.  Per-token cost does
not depend on how much is buffered or on the stream's age.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable
from typing import Any, Protocol

from . import _core
from ._chain import ChunkChain
from ._core import implementation
from ._errors import (
    BodyTooLarge,
    BufferLimitExceeded,
    InvalidValue,
    MalformedHeader,
    PeerError,
    ProtocolError,
    TruncatedStream,
    Violation,
)
from ._limits import DEFAULT_LIMITS, Limits
from .wire import (
    BIGINT,
    BIGNEG,
    BODY_KINDS,
    BYTES,
    ERROR,
    FLOAT,
    INLINE_LIMIT,
    INT,
    KIND_NAMES,
    OPEN,
    PREAMBLE,
    STRING,
    check_preamble,
    decode_header,
    encode_header,
)

WANT_PREAMBLE = "WANT_PREAMBLE"
WANT_HEADER = "WANT_HEADER"
WANT_BODY = "WANT_BODY"
WANT_REST = "WANT_REST"
"""The start of a top-level object that the last chunk cut short is held
(see L{HELD_TAIL_LIMIT}); the next chunk is joined to it and read whole."""

HELD_TAIL_LIMIT = 16 * 1024
"""
The most bytes of a top-level object cut short at a chunk's end that the
scanner holds back, when the compiled reader declined it for that alone
(its C{cut}: every token up to the end is one it takes, so the pure path
would only have begun the object), so that the reader takes it whole with
the next chunk.  Without this, the object that straddles two reads (one in
every read, under a stream of small messages) is decoded token by token by
the pure path: about 1.6% of 1 KiB RPC calls at 100 in flight, and most of
their decoding time.  Holding costs one copy of the held bytes.
"""

BODY_WHOLE = 0
"""Deliver the body as one C{bytes} through C{handlers[kind]}."""
BODY_STREAM = 1
"""Deliver the body piece by piece through C{body_chunk}, then C{body_end}."""
BODY_SKIP = 2
"""Discard the body as it arrives; the sink has already recorded why."""
BODY_VIEWS = 3
"""As L{BODY_STREAM}, but each piece is passed uncopied: the C{bytes} that
was read when the piece is all of it, else a C{memoryview} into it, valid
only during the call (the sink copies what it keeps, once)."""


class TokenSink(Protocol):
    """
    What a L{TokenScanner} delivers tokens to.

    C{handlers} is a list indexed by token kind; the scanner calls
    C{handlers[kind](value)} with the header value for value kinds and with
    the body (C{bytes}) for body kinds delivered whole.  The sink may swap
    entries in place to change how it reacts (for example, while discarding
    a refused object).
    """

    handlers: list  # type: ignore[type-arg]
    accepts_all: bool
    """True while the sink would answer L{BODY_WHOLE} to every body but an
    OPEN's, so the scanner may skip asking (the per-token fast path)."""

    def accept_body(self, kind: int, length: int) -> int:
        """Return L{BODY_WHOLE}, L{BODY_STREAM}, L{BODY_VIEWS} or L{BODY_SKIP} for a body about to arrive."""

    def refused(self, kind: int, length: int, violation: Violation) -> None:
        """The scanner refused a body at its header; it will be skipped."""

    def body_chunk(self, kind: int, data: bytes | memoryview) -> None:
        """The next piece of a streamed body (never empty; a C{memoryview} only in L{BODY_VIEWS} mode)."""

    def body_end(self, kind: int) -> None:
        """A streamed body is complete."""

    # Optional (the compiled core, framing._core): fast_objects(buf, pos) -> pos,
    # or None.  Offered a chunk's first token or an OPEN while accepts_all, it
    # decodes whole objects from there, delivers them itself and returns
    # where it stopped; fast_reader is the compiled reader it belongs to, whose
    # cut says whether it stopped only because the chunk ended.
    #
    # Optional (frames, for a sink that calls TokenScanner.learn_frame):
    # open_frame(name, values, length) -> mode or None.  Offered the headers
    # of a whole frame header (FrameHeaders) while accepts_all, it takes the
    # OPEN, the values and the BYTES header as their tokens would be taken and
    # returns the body's mode, or None having taken nothing (the tokens then
    # go their usual way); frame_opened says, after it raised, whether it had
    # taken the OPEN and the values.


COMPILED = implementation == "compiled"
"""Whether the compiled reader may be offered tokens (see L{framing._core})."""


# For each possible first header byte: True when it is a whole token on its
# own (a value kind with an inline value), the commonest case by far.
_ONE_BYTE_TOKEN = tuple(
    (b >> 4) in KIND_NAMES and (b >> 4) not in BODY_KINDS and (b & 0x0F) < INLINE_LIMIT for b in range(256)
)
_IS_BODY_KIND = tuple(k in BODY_KINDS for k in range(16))
# ...and True when it is the whole header of a short body (length in the byte).
_SHORT_BODY = tuple((b >> 4) in BODY_KINDS and (b & 0x0F) < INLINE_LIMIT for b in range(256))


class WholeBody:
    """
    Collects a whole body to hand out as one C{bytes}, copying each byte once.

    A scanner has one, L{start}ed at each whole body's header and emptied by
    L{value}.  Its buffer grows by doubling, up to the length the header
    announced, so it is never more than twice what arrived, and a body of n
    bytes costs at most about n bytes of copying as it grows.  (Growing only
    as far as each write, BytesIO's own way, reallocates every eighth; where
    the allocator cannot grow a block in place, that copies about 8n bytes.)
    The compiled core has its own, with the same behaviour
    (C{framing._speedups.WholeBody}).

    @ivar remaining: bytes of the body still to come (0 between bodies).
    @ivar capacity: bytes the buffer holds room for.
    """

    __slots__ = ("_buffer", "_length", "capacity", "remaining")

    def __init__(self) -> None:
        # getvalue() of an exactly-full BytesIO returns its buffer without a second copy.
        self._buffer = io.BytesIO()
        self._length = 0
        self.capacity = 0
        self.remaining = 0

    def start(self, length: int) -> None:
        """Begin a body of C{length} bytes."""
        self._length = self.remaining = length

    def take(self, data: bytes) -> bool:
        """
        Copy in C{data} if it is all body and ends none of it (the middle of
        a long body: the per-chunk cost of a large value), and return True;
        else take nothing and return False.
        """
        size = len(data)
        if size >= self.remaining:
            return False
        # (write written out: this is the whole per-chunk cost of a long body)
        buffer = self._buffer
        if buffer.tell() + size > self.capacity:
            self._grow(size)
        buffer.write(data)
        self.remaining -= size
        return True

    def write(self, data: bytes | memoryview) -> None:
        """Copy in C{data}, at most L{remaining} bytes."""
        size = len(data)
        buffer = self._buffer
        if buffer.tell() + size > self.capacity:
            self._grow(size)
        buffer.write(data)
        self.remaining -= size

    def _grow(self, size: int) -> None:
        buffer = self._buffer
        at = buffer.tell()
        end = at + size
        capacity = self.capacity = min(self._length, max(2 * self.capacity, end, _FIRST_CAPACITY))
        if capacity > end:
            # (writing the last byte makes BytesIO allocate exactly that much)
            buffer.seek(capacity - 1)
            buffer.write(b"\0")
            buffer.seek(at)

    def held(self) -> int:
        """Bytes of the body that have arrived."""
        return self._buffer.tell()

    def value(self) -> bytes:
        """The body, as one C{bytes}; the buffer is emptied for the next body."""
        value = self._buffer.getvalue()
        self._buffer = io.BytesIO()
        self._length = self.capacity = self.remaining = 0
        return value

    def abandon(self) -> None:
        """Expect no more of this body (the stream broke): L{take} takes nothing from now on."""
        self.remaining = 0

    def drop(self) -> None:
        """Let go of what arrived of the body, and expect no more of it (its object was refused)."""
        self._buffer = io.BytesIO()
        self._length = self.capacity = self.remaining = 0


_FIRST_CAPACITY = 64 * 1024
"""A whole body's first buffer, or less if it is shorter."""


class _StreamedBody:
    """Passes each piece of a body to the sink as it arrives."""

    __slots__ = ("_kind", "_chunk", "remaining")

    def __init__(self, kind: int, sink: TokenSink, length: int) -> None:
        self._kind = kind
        self._chunk = sink.body_chunk
        self.remaining = length

    def write(self, data: bytes | memoryview) -> None:
        # (counted once delivered: if the sink raises, the piece is offered again)
        self._chunk(self._kind, bytes(data) if type(data) is not bytes else data)
        self.remaining -= len(data)

    def held(self) -> int:
        return 0


class _ViewedBody(_StreamedBody):
    """Passes each piece of a body to the sink as it arrives, uncopied."""

    __slots__ = ()

    def write(self, data: bytes | memoryview) -> None:
        self._chunk(self._kind, data)
        self.remaining -= len(data)


class _SkippedBody:
    """Drops a refused body's bytes as they arrive."""

    __slots__ = ("remaining",)

    def __init__(self, length: int) -> None:
        self.remaining = length

    def write(self, data: bytes | memoryview) -> None:
        self.remaining -= len(data)

    def held(self) -> int:
        return 0


_NO_BODY = _SkippedBody(0)
"""The body between bodies: none remains."""


def _stream_in_place(sink: TokenSink, kind: int, buf: bytes, start: int, stop: int, mode: int) -> None:
    """
    Stream a body lying whole in C{buf} as one piece, without a pass
    through the chain (a view of C{buf} in L{BODY_VIEWS} mode); if the
    sink raises, nothing is committed and the body is offered again.
    """
    if stop > start:
        sink.body_chunk(kind, memoryview(buf)[start:stop] if mode == BODY_VIEWS else buf[start:stop])


MAX_FRAME_TYPES = 4
"""The most frame types one scanner recognises (L{TokenScanner.learn_frame})."""
MAX_FRAME_VALUES = 4
"""The most INT values before a frame's body (L{TokenScanner.learn_frame})."""
_NO_FRAMES = (False,) * 256

FrameHeader = tuple[bytes, tuple[int, ...], int, int, int]
"""What L{FrameHeaders.frame} finds: C{(name, values, length, bytes_at, body_start)}."""


class FrameHeaders:
    """
    Finds the headers of a frame in one call: an OPEN of a frame type's
    name, its INT values, and its BYTES body's header, lying whole in one
    buffer, each header canonical and within the limits (the OPEN's name
    and the body no longer than theirs).  The compiled reader's C{frame}
    and C{add_frame} are its twin (C{framing/_speedups.c}), which finds
    exactly the same.  Anything else (another token, a header cut by the
    buffer's end or one the token path would refuse) is not a frame: the
    scanner then reads the tokens one by one.  Cost: one dict lookup and a
    header decoding per token.
    """

    __slots__ = ("_max_bytes", "_max_header", "_max_name", "_names")

    def __init__(self, limits: Limits) -> None:
        self._names: dict[bytes, int] = {}
        self._max_header = limits.max_header_length
        self._max_name = limits.max_open_name_length
        self._max_bytes = limits.max_bytes_length

    def add_frame(self, name: bytes, values: int) -> bool:
        """
        Recognise frames of open type C{name} with C{values} INTs before
        their body from now on; False (and nothing learnt) past
        L{MAX_FRAME_TYPES} types or L{MAX_FRAME_VALUES} values.
        """
        if name in self._names:
            return self._names[name] == values
        if len(self._names) >= MAX_FRAME_TYPES or not 0 <= values <= MAX_FRAME_VALUES:
            return False
        self._names[name] = values
        return True

    def frame(self, buf: bytes, pos: int) -> FrameHeader | None:
        """The frame whose OPEN is at C{buf[pos]}: C{(name, values, length, bytes_at, body_start)}, or C{None}."""
        end = len(buf)
        widest = self._max_header
        try:
            header = decode_header(buf, pos, end, widest) if pos < end else None
            if header is None or header[0] != OPEN or header[1] > self._max_name:
                return None
            start = pos + header[2]
            pos = start + header[1]
            if pos > end:
                return None
            name = buf[start:pos]
            count = self._names.get(name)
            if count is None:
                return None
            values = []
            for _ in range(count):
                header = decode_header(buf, pos, end, widest) if pos < end else None
                if header is None or header[0] != INT:
                    return None
                values.append(header[1])
                pos += header[2]
            header = decode_header(buf, pos, end, widest) if pos < end else None
        except MalformedHeader:
            return None
        if header is None or header[0] != BYTES or header[1] > self._max_bytes:
            return None
        return name, tuple(values), header[1], pos, pos + header[2]


class TokenScanner:
    """
    Turns a byte stream into tokens delivered to a L{TokenSink}.

    @ivar state: L{WANT_PREAMBLE}, L{WANT_HEADER}, L{WANT_BODY} or L{WANT_REST}.
    @ivar limits: the L{Limits} in force.
    @ivar take_body: L{WholeBody.take} of this scanner's whole body, which
        takes a chunk in the middle of a long body as L{feed} would (else
        returns False): a caller feeding many chunks (L{framing.Decoder.feed})
        asks it first, sparing L{feed} and its pass through the chain.  The
        chain is empty in WANT_BODY between feeds (each moves what it brought
        into the body), and after an error the body takes nothing.
    """

    def __init__(self, sink: TokenSink, limits: Limits | None = None, preamble: bool = True) -> None:
        self.limits = limits or DEFAULT_LIMITS
        self.state = WANT_PREAMBLE if preamble else WANT_HEADER
        self._sink = sink
        self._chain = ChunkChain()
        self._error: ProtocolError | None = None
        self._body_kind = 0
        self._body: WholeBody | _StreamedBody | _SkippedBody = _NO_BODY
        self._whole: WholeBody = _core.whole_body() or WholeBody()
        self.take_body = self._whole.take
        # A sink with a compiled reader (a Decoder on the compiled core), asked once here rather than per chunk.
        self._compiled: Any = sink if COMPILED and hasattr(sink, "fast_objects") else None
        self._body_limits = _body_limits(self.limits)
        self._held_limit = min(HELD_TAIL_LIMIT, self.limits.max_buffered_bytes)
        self._frame_finder: Any = None  # (a FrameHeaders, or the compiled reader)
        self.frames: Callable[[bytes, int], FrameHeader | None] | None = None
        self._frame_firsts: tuple[bool, ...] = _NO_FRAMES

    def reconfigure(self, limits: Limits) -> None:
        """
        Apply C{limits} from the next header on (a body already begun keeps
        the limit it was accepted under); the frame types learnt are
        forgotten (the sink learns them again under the new limits).
        """
        self.limits = limits
        self._body_limits = _body_limits(limits)
        self._held_limit = min(HELD_TAIL_LIMIT, limits.max_buffered_bytes)
        self._forget_frames()

    def learn_frame(self, name: bytes, values: int) -> bool:
        """
        Offer the sink's C{open_frame} every frame of open type C{name}
        (C{values} INTs before its BYTES body) whose headers lie whole in
        the chunk being scanned, found in one call (L{FrameHeaders}, or the
        compiled reader's twin), instead of its tokens one by one.  Return
        whether it is learnt (at most L{MAX_FRAME_TYPES} types).
        """
        finder = self._frame_finder
        if finder is None:
            # (the compiled reader's twin where the sink has one: a decoder on the compiled core)
            reader = self._compiled.fast_reader if self._compiled is not None else None
            finder = self._frame_finder = reader if reader is not None else FrameHeaders(self.limits)
        if not finder.add_frame(name, values):
            return False
        self.frames = finder.frame
        firsts = list(self._frame_firsts)
        firsts[encode_header(OPEN, len(name))[0]] = True
        self._frame_firsts = tuple(firsts)
        return True

    def _forget_frames(self) -> None:
        self._frame_finder = None
        self.frames = None
        self._frame_firsts = _NO_FRAMES

    @property
    def buffered(self) -> int:
        """Bytes held for tokens not yet delivered: the chain plus a partial whole body."""
        return self._chain.size + self._body.held()

    @property
    def in_whole_body(self) -> bool:
        """True while a body to be delivered whole is part-way read (an ERROR's aside: see L{drop_body})."""
        return self.state == WANT_BODY and self._body is self._whole and self._body_kind != ERROR

    @property
    def holding(self) -> bool:
        """True while the start of a top-level object is held for the next chunk (L{WANT_REST})."""
        return self.state == WANT_REST

    @property
    def at_boundary(self) -> bool:
        """True when the bytes fed so far end exactly between two tokens."""
        return self.state == WANT_HEADER and not self._chain.size

    def feed(self, data: bytes) -> bool:
        """
        Scan C{data}, delivering every token it completes.

        @return: C{True} if the compiled reader read C{data} whole (it then
            ends between top-level objects, with nothing held), else C{False}.
        @raise ProtocolError: the stream is broken; this scanner then refuses
            all further input with the same error.
        """
        if self._error is not None:
            raise self._error
        try:
            if self.state == WANT_HEADER and not self._chain.size:
                # The common case: read tokens in place from the new chunk;
                # only what they leave (a partial token, a body's start)
                # goes into the chain.
                compiled = self._compiled
                # (the reader read once, into a local: a call through the instance's attribute is one that
                # Python 3.11 does not specialize)
                fast = compiled.fast_objects if compiled is not None and compiled.accepts_all else None
                if fast is not None:
                    # Whole objects of built-in kinds read in one C call first: a chunk of
                    # nothing else (a small RPC message) is then done, with no scan set up.
                    try:
                        pos = fast(data, 0)
                    except BaseException:
                        self._chain.append(data)  # (kept unread, as _scan_chunk keeps it)
                        raise
                    if pos == len(data):
                        return True
                    self._scan_chunk(data, pos, direct=True)
                else:
                    self._scan_chunk(data, 0, direct=True)
            elif self.state == WANT_REST:
                held = self._chain.peek(len(self._chain))
                self._chain.clear()
                self.state = WANT_HEADER
                self._scan_chunk(held + data, 0, direct=True, rejoined=True)
            elif self.state == WANT_BODY and data and not self._chain.size and self._body is not self._whole:
                # A streamed or skipped body goes on in the new chunk: its share is passed on from the chunk
                # itself, the rest read in place, as the chain would pass them (what is not taken goes there).
                taken = 0
                body = self._body
                try:
                    # (L{_body_from} written out: this runs for nearly every chunk of a long streamed body)
                    remaining = body.remaining
                    if len(data) <= remaining:
                        body.write(data)
                        taken = len(data)
                    else:
                        body.write(memoryview(data)[:remaining])
                        taken = remaining
                    if not body.remaining:
                        self._finish_body()
                except BaseException:
                    self._chain.append(data)
                    self._chain.skip(taken)
                    raise
                if taken < len(data):
                    self._scan_chunk(data, taken, direct=True)
            else:
                # Even a chunk that is all body goes through the chain:
                # appending copies nothing, and it keeps bytes that a raising
                # sink has not yet taken, so the stream stays in sync.
                self._chain.append(data)
            if self._chain.size:
                self._scan()
        except ProtocolError as error:
            self._failed(error)
            raise
        return False

    def drop_body(self) -> bool:
        """
        The object of the body in progress was refused: let go of what
        arrived of a whole body (an ERROR's excepted: the peer's last words
        are read whatever happens) and skip the rest of it as it arrives.
        Return whether that body is an OPEN's (its container, never opened,
        is then one more for the sink to skip).
        """
        if not self.in_whole_body:
            return False
        remaining = self._whole.remaining
        self._whole.drop()
        self._body = _SkippedBody(remaining)
        return self._body_kind == OPEN

    def fail(self, error: ProtocolError) -> None:
        """Refuse all further input with C{error}, and raise it."""
        self._failed(error)
        raise error

    def _failed(self, error: ProtocolError) -> None:
        self._error = error
        self._whole.abandon()

    def close(self) -> None:
        """
        Declare the end of input.

        @raise TruncatedStream: if it ends inside the preamble, a header or a body.
        """
        if self._error is None and self.state == WANT_REST:
            # No next chunk will come: the held tokens go to the sink as the pure path would have sent them.
            self.state = WANT_HEADER
            self._held_limit = 0  # (and nothing is held again: no chunk will follow)
            try:
                self._scan()
            except ProtocolError as error:
                self._failed(error)
        if self._error is None and not self.at_boundary:
            where = "the preamble" if self.state == WANT_PREAMBLE else "a token"
            self._failed(TruncatedStream(f"input ended inside {where}"))
        if self._error is not None:
            raise self._error

    def _scan(self) -> None:
        chain = self._chain
        while chain:
            if self.state == WANT_HEADER:
                buf, start = chain.head()
                stopped = self._scan_chunk(buf, start)
                if self.state == WANT_HEADER and stopped < len(buf) and not self._split_header():
                    break
            elif self.state == WANT_BODY:
                self._body_from_chain()
            elif self.state == WANT_REST or not self._preamble():
                break
        if len(chain) > self.limits.max_buffered_bytes:
            raise BufferLimitExceeded(
                f"{len(chain)} unprocessed bytes held, more than the limit of {self.limits.max_buffered_bytes}"
            )

    def _scan_chunk(self, buf: bytes, pos: int, direct: bool = False, rejoined: bool = False) -> int:
        """
        Deliver every token lying whole in C{buf} from C{pos}; commit what
        was delivered and return where scanning stopped.  C{buf} is the
        chain's head, or (C{direct}) a new chunk of which only the part not
        delivered is then added to the chain (a streamed body's start is
        passed on from it first).  C{rejoined}: C{buf} begins with a held
        tail, which is not held again (one join per object).
        """
        start = pos
        end = len(buf)
        sink = self._sink
        handlers = sink.handlers
        limits = self._body_limits
        one_byte = _ONE_BYTE_TOKEN
        # The pure core never offers tokens to a reader: no test per token then.
        compiled: Any = self._compiled
        resumed = -1  # where the compiled reader last handed back
        try:
            if compiled and compiled.fast_objects and sink.accepts_all:
                pos = resumed = compiled.fast_objects(buf, pos)
            while pos < end:
                first = buf[pos]
                if one_byte[first]:
                    handlers[first >> 4](first & 0x0F)
                    pos += 1
                    continue
                mode = None
                if self._frame_firsts[first] and sink.accepts_all:
                    found = self.frames(buf, pos)  # type: ignore[misc]  # (set with the table: not None here)
                    if found is not None:
                        # A frame's headers, found whole: taken at once, as their tokens would be.
                        framer: Any = sink  # (a sink that learns frames takes them: see TokenSink)
                        try:
                            mode = framer.open_frame(found[0], found[1], found[2])
                        except ProtocolError:
                            if framer.frame_opened:
                                pos = found[3]  # (the OPEN and values taken, the body's header not: as the tokens)
                            raise
                        if mode is not None:
                            kind, value, pos, body_start = BYTES, found[2], found[3], found[4]
                if mode is None:
                    if compiled and first >> 4 == OPEN and compiled.fast_objects and sink.accepts_all:
                        if pos != resumed:
                            resumed = compiled.fast_objects(buf, pos)
                            if resumed != pos:
                                pos = resumed
                                continue
                        # Held only if the reader stopped for the cut alone (asked first: the cheap test that
                        # fails for every OPEN of an object the pure path reads), if nothing follows it (in a
                        # new chunk or the chain's last), and once.
                        if (
                            compiled.fast_reader.cut
                            and end - pos <= self._held_limit
                            and (direct or len(self._chain) == end - start)
                            and not (rejoined and pos == 0)
                        ):
                            self.state = WANT_REST
                            break
                    if _SHORT_BODY[first]:
                        kind, value, size = first >> 4, first & 0x0F, 1
                    else:
                        header = decode_header(buf, pos, end, self.limits.max_header_length)
                        if header is None:
                            break
                        kind, value, size = header
                        if not _IS_BODY_KIND[kind]:
                            handlers[kind](value)
                            pos += size
                            continue
                    body_start = pos + size
                    if value > limits[kind] or (kind == FLOAT and value != 8):
                        mode = self._accept(kind, value)
                    elif kind != OPEN and sink.accepts_all:
                        mode = BODY_WHOLE
                    else:
                        mode = sink.accept_body(kind, value)
                if body_start + value <= end:
                    if mode == BODY_WHOLE:
                        handlers[kind](buf[body_start : body_start + value])
                        pos = body_start + value
                        continue
                    if mode != BODY_SKIP:
                        _stream_in_place(sink, kind, buf, body_start, body_start + value, mode)
                        pos = body_start + value
                        sink.body_end(kind)  # (the body is committed: if this raises, it is dropped)
                        continue
                    # A refused body lying here is passed over.  (Through WANT_BODY, one of no bytes would end
                    # at once and the next token be read as a split header, committed before delivery.)
                    pos = body_start + value
                    continue
                pos = body_start
                self._start_body(kind, value, mode)
                if direct and mode != BODY_WHOLE and pos < end:
                    # (the chain would pass it on next, from this very chunk: if that raises, it stays unread)
                    self._body.write(memoryview(buf)[pos:])
                    pos = end
                break
        finally:
            if not direct:
                self._chain.skip(pos - start)
            elif pos < end:
                self._chain.append(buf)
                self._chain.skip(pos)
        return pos

    def _split_header(self) -> bool:
        """Handle a header that spans chunks; return False if it is still incomplete."""
        peeked = self._chain.peek(self.limits.max_header_length)
        header = decode_header(peeked, 0, len(peeked), self.limits.max_header_length)
        if header is None:
            return False
        kind, value, size = header
        if _IS_BODY_KIND[kind]:
            mode = self._accept(kind, value)
            self._chain.skip(size)
            self._start_body(kind, value, mode)
        else:
            self._sink.handlers[kind](value)
            self._chain.skip(size)
        return True

    def _preamble(self) -> bool:
        peeked = self._chain.peek(len(PREAMBLE))
        if not check_preamble(peeked):
            return False
        self._chain.skip(len(PREAMBLE))
        self.state = WANT_HEADER
        return True

    def _accept(self, kind: int, length: int) -> int:
        """Check a body's announced length against the limits, then ask the sink."""
        limit = self._body_limits[kind]
        if kind == FLOAT and length != 8:
            violation: Violation = InvalidValue(f"FLOAT body must be 8 bytes, not {length}")
        elif length > limit:
            if kind == ERROR:
                # An ERROR is fatal whatever its size; just do not read it.
                raise PeerError(f"the peer reported an error ({length} bytes, too long to read)")
            violation = BodyTooLarge(_too_large(kind, length, limit))
        else:
            return self._sink.accept_body(kind, length)
        self._sink.refused(kind, length, violation)
        return BODY_SKIP

    def _start_body(self, kind: int, length: int, mode: int) -> None:
        """Enter WANT_BODY for a body whose header was just committed."""
        if mode == BODY_WHOLE:
            self._whole.start(length)
            self._body = self._whole
        elif mode == BODY_STREAM:
            self._body = _StreamedBody(kind, self._sink, length)
        elif mode == BODY_VIEWS:
            self._body = _ViewedBody(kind, self._sink, length)
        else:
            self._body = _SkippedBody(length)
        self._body_kind = kind
        self.state = WANT_BODY
        if not length:
            self._finish_body()

    def _body_from(self, data: bytes, offset: int) -> int:
        """Pass the body's share of C{data[offset:]} to its reader; return how many bytes that was."""
        body = self._body
        available = len(data) - offset
        if available <= body.remaining:
            body.write(data if not offset else memoryview(data)[offset:])
            return available
        used = body.remaining
        body.write(memoryview(data)[offset : offset + used])
        return used

    def _body_from_chain(self) -> None:
        chain = self._chain
        while chain and self.state == WANT_BODY:
            buf, start = chain.head()
            # Commit the body's bytes before the body is delivered: if the
            # sink raises on it, what follows is still in the chain, unread.
            chain.skip(self._body_from(buf, start))
            if not self._body.remaining:
                self._finish_body()

    def _finish_body(self) -> None:
        # Back to WANT_HEADER before delivering, so a raising sink leaves the
        # scanner at a clean token boundary.
        body, kind = self._body, self._body_kind
        self._body = _NO_BODY
        self.state = WANT_HEADER
        if body is self._whole:
            self._sink.handlers[kind](body.value())
        elif isinstance(body, _StreamedBody):
            self._sink.body_end(kind)


_LIMIT_FIELDS = {
    BYTES: "max_bytes_length",
    STRING: "max_string_length",
    BIGINT: "max_bigint_length",
    BIGNEG: "max_bigint_length",
    OPEN: "max_open_name_length",
}


def _too_large(kind: int, length: int, limit: int) -> str:
    """A body-too-large message that says what to do: raise the receiver's limit, or stream."""
    field = _LIMIT_FIELDS.get(kind)
    advice = f"; the receiving side may raise it with Limits({field}=...)" if field else ""
    if kind == BYTES:
        advice += ", or send large data as a protocols.bulk.Stream"
    return f"{KIND_NAMES[kind]} body of {length} bytes exceeds the limit of {limit} bytes{advice}"


@functools.lru_cache(maxsize=16)  # (a scanner is made per connection; a few Limits are the rule)
def _body_limits(limits: Limits) -> tuple[int, ...]:
    by_kind = {
        BYTES: limits.max_bytes_length,
        STRING: limits.max_string_length,
        BIGINT: limits.max_bigint_length,
        BIGNEG: limits.max_bigint_length,
        FLOAT: 8,
        OPEN: limits.max_open_name_length,
        ERROR: limits.max_error_length,
    }
    return tuple(by_kind.get(kind, 0) for kind in range(16))
