# -*- test-case-name: tests.protocols.bulk.test_wire,tests.framing.bulk.test_streams,tests.framing.test_cores_frames -*-
"""The bulk layer on the wire: data frames, control messages, stream announcements.

Contract: everything bulk sends is an ordinary top-level chunkwire object, so
it interleaves with RPC messages on the same connection and a peer without
this module refuses it object by object (C{unknown-type}) instead of losing
sync.  Three open-types::

    OPEN "bulk.data"   INT stream_id, INT offset, BYTES body, CLOSE
    OPEN "bulk.ctl"    INT op, INT stream_id, op-specific values, CLOSE
    OPEN "bulk.stream" INT stream_id, size (INT or None), digest name (STRING or None), CLOSE

A digest name of C{"*"} (L{framing.bulk._digests.NEGOTIATED}) means the first
of the sender's HELLO list the receiver accepts.  L{DataUnslicer} hands a
data frame's body on piece by piece as it comes off the socket, uncopied;
L{Control} carries HELLO, GRANT, END, the verdict and giving up, and
L{grantMessage} writes a GRANT's bytes directly.

Cost: one transport write per data frame sent; per frame received four
headers (found in one call once the decoder has learnt the type: see
L{DataUnslicer.begin_frame}) and one lookup by id, holding no more than
one socket read of it.
Wire format: docs/wire-format.md, section 5.5.

Design: docs/design/bulk.md
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from zope.interface import implementer

from framing import NOTHING
from framing._encoder import open_token
from framing._errors import InvalidValue, KindRefused, TooManyItems, short_repr
from framing.slicing._builtin import Unslicer
from framing.slicing._custom import PartsUnslicer
from framing.slicing._interfaces import ISlicer, IStreamsBodies
from framing.wire import BYTES, CLOSE, INT, KIND_NAMES, STRING, encode_header

if TYPE_CHECKING:
    from framing import Limits

DATA_OPEN_TYPE = "bulk.data"
CONTROL_OPEN_TYPE = "bulk.ctl"
STREAM_OPEN_TYPE = "bulk.stream"

# Control operations: (op, stream_id, ...fields).  Stream ids are chosen by
# the sender, so each op travels one way only and names the sender's id.
GRANT = 0
"""Receiver to sender: C{(GRANT, id, bytes)}, that many more bytes may be sent."""
END = 1
"""Sender to receiver: C{(END, id, size, digest)}, no more data; the whole
object's size and digest (C{bytes}, or C{None} if this stream carries none)."""
DONE = 2
"""Receiver to sender: C{(DONE, id, digest)}, everything arrived (and was
verified, if a digest came with it)."""
CANCEL = 3
"""Receiver to sender: C{(CANCEL, id, code, message)}, stop: the stream is not wanted."""
ABORT = 4
"""Sender to receiver: C{(ABORT, id, code, message)}, the sender abandons the stream."""
HELLO = 5
"""Either way, once per connection, before this side's first stream or
first call: C{(HELLO, 0, digests, initialWindow)}: the digests it computes
and accepts, in order of preference, comma-separated (C{"blake3,sha256"}),
and the credit every stream it receives starts with."""

OP_NAMES = ("GRANT", "END", "DONE", "CANCEL", "ABORT", "HELLO")
_FIELDS = (1, 2, 1, 2, 2, 2)
"""How many values follow the stream id, per op."""


def _count(value: Any) -> bool:
    # An INT: not a NEG (which would take credit back), not a SIMPLE True or False.
    return type(value) is int and value >= 0


def _digest(value: Any) -> bool:
    return value is None or type(value) is bytes


def _text(value: Any) -> bool:
    return type(value) is str


_FIELD_KINDS: tuple[tuple[Callable[[Any], bool], ...], ...] = (
    (_count,),  # GRANT: the count
    (_count, _digest),  # END: the size, the digest
    (_digest,),  # DONE: the digest
    (_text, _text),  # CANCEL: code, message
    (_text, _text),  # ABORT: code, message
    (_text, _count),  # HELLO: the digests, the initial window
)
"""What each value after the stream id must be, per op (section 5.5 of the wire format)."""

MAX_DIGEST = 64
"""Longest digest accepted in a control message, in bytes (SHA-512 is 64)."""
MAX_TEXT = 1024
"""Longest text accepted in a control message, in bytes."""
MAX_MESSAGE = 512
"""Longest CANCEL or ABORT message sent, in bytes of UTF-8: well within
L{MAX_TEXT}, whatever characters it holds (a longer one would have the
whole message refused, and the stream would not end at the peer)."""

_DATA_OPEN = open_token(DATA_OPEN_TYPE)
_CLOSE = encode_header(CLOSE, 0)
_INT_HEADERS = tuple(encode_header(INT, v) for v in range(256))
_GRANT_OPEN = open_token(CONTROL_OPEN_TYPE) + _INT_HEADERS[GRANT]
_INT4_HEADER = struct.Struct(">BI").pack
_INT4 = encode_header(INT, 1 << 16)[0]
_INT4_LEAST, _INT8_LEAST = 1 << 16, 1 << 32


def dataFramePieces(streamId: int, offset: int, body: bytes) -> tuple[bytes, bytes, bytes]:
    """
    The pieces of one data frame, to hand to a transport in one write:
    everything before the body, the body (by reference), and the CLOSE.
    """
    stream = _INT_HEADERS[streamId] if streamId < 256 else encode_header(INT, streamId)
    prefix = _DATA_OPEN + stream + encode_header(INT, offset) + encode_header(BYTES, len(body))
    return prefix, body, _CLOSE


def grantMessage(streamId: int, count: int) -> bytes:
    """
    A whole GRANT control message, C{Control((GRANT, streamId, count))}
    encoded: the bytes the encoder writes for it, put together directly.  A
    receiver grants about once per socket read while a stream arrives, and
    this spares each grant the encoder's send transaction.

    @raise ValueError: a negative id or count, or one past 64 bits.
    """
    stream = _INT_HEADERS[streamId] if 0 <= streamId < 256 else encode_header(INT, streamId)
    # (a grant's count is most often 64 KiB to 4 GiB: its header, a 4-byte INT's, written here)
    counted = _INT4_HEADER(_INT4, count) if _INT4_LEAST <= count < _INT8_LEAST else encode_header(INT, count)
    return b"".join((_GRANT_OPEN, stream, counted, _CLOSE))


def controlMessage(text: str) -> str:
    """
    C{text} as a CANCEL's or ABORT's message: at most L{MAX_MESSAGE} bytes
    of UTF-8, cut at a character boundary (a lone surrogate, which UTF-8
    cannot carry, becomes C{?}).
    """
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = text.encode("utf-8", "replace")
    else:
        if len(data) <= MAX_MESSAGE:
            return text
    return data[:MAX_MESSAGE].decode("utf-8", "ignore")


class Control(tuple):  # type: ignore[type-arg]
    """
    One control message, as sent and as received: C{(op, stream_id, ...)}.
    A tuple subclass so its slicer is found by type and it cannot be
    confused with a tuple the peer sent.
    """

    __slots__ = ()


@implementer(ISlicer)
class ControlSlicer:
    """Writes a L{Control} as OPEN C{"bulk.ctl"}, its values, CLOSE."""

    def slice(self, obj: Any, encoder: Any) -> None:
        encoder.write_container(CONTROL_OPEN_TYPE, obj, obj)


class ControlUnslicer(Unslicer):
    """Builds a L{Control}, refusing anything that is not a small scalar of the right shape."""

    open_type = CONTROL_OPEN_TYPE

    def __init__(self, limits: Limits, helloDecoded: Any = None) -> None:
        """
        @param helloDecoded: called with a HELLO as soon as it is decoded,
            before the objects after it in the same read are built.
        """
        super().__init__(limits)
        self.items: list[Any] = []
        self._helloDecoded = helloDecoded

    def check_token(self, kind: int, size: int) -> None:
        if kind == BYTES and size <= MAX_DIGEST or kind == STRING and size <= MAX_TEXT:
            return
        raise KindRefused(f"a bulk control message cannot hold a {KIND_NAMES.get(kind, kind)} of {size} bytes")

    def receive_child(self, obj: Any) -> None:
        items = self.items
        if len(items) < 2:
            if type(obj) is not int or obj < 0 or (not items and obj >= len(OP_NAMES)):
                raise InvalidValue(f"bad bulk control header value {short_repr(obj)}")
        elif len(items) >= 2 + _FIELDS[items[0]]:
            raise TooManyItems(f"a bulk {OP_NAMES[items[0]]} has {_FIELDS[items[0]]} values")
        else:
            op = items[0]
            if not _FIELD_KINDS[op][len(items) - 2](obj):
                raise InvalidValue(f"bad value in a bulk {OP_NAMES[op]}: {short_repr(obj)}")
        items.append(obj)

    def finish(self) -> Control:
        items = self.items
        if len(items) < 2 or len(items) != 2 + _FIELDS[items[0]]:
            raise InvalidValue("a bulk control message is missing values")
        control = Control(items)
        if items[0] == HELLO and self._helloDecoded is not None:
            self._helloDecoded(control)
        return control

    def child_where(self) -> str:
        return "<bulk.ctl>"


class StreamAnnouncement(tuple):  # type: ignore[type-arg]
    """What a stream in an argument or result travels as: C{(stream_id, size, digest_name)}."""

    __slots__ = ()


class AnnouncementUnslicer(PartsUnslicer):
    """Reads C{(stream_id, size, digest_name)}; the connection turns it into an incoming stream."""

    open_type = STREAM_OPEN_TYPE
    part_kinds = (frozenset(), frozenset(), frozenset({STRING}))
    part_types = (int, (int, type(None)), (str, type(None)))

    def __init__(self, limits: Limits, resolve: Any) -> None:
        super().__init__(limits)
        self._resolve = resolve

    def build(self, streamId: Any, size: Any, digest: Any) -> Any:
        # (type checks: a SIMPLE True or False is an int to Python, and no id or size on the wire)
        if (
            type(streamId) is not int
            or streamId < 0
            or (size is not None and (type(size) is not int or size < 0))
            or (digest is not None and len(digest) > 32)
        ):
            raise InvalidValue("a bulk stream needs a non-negative id and size and a short digest name")
        return self._resolve(StreamAnnouncement((streamId, size, digest)))


@implementer(IStreamsBodies)
class DataUnslicer(Unslicer):
    """
    Reads a data frame's stream id and offset, then asks the connection where
    its body goes (L{begin_body}) and passes each piece on as it arrives.
    The frame completes L{framing.NOTHING}.

    The connection's C{dataStarting(stream_id, offset, length)} returns a
    callable taking C{(offset, piece)} (a piece: C{bytes}, or a read-only
    C{memoryview} into the C{bytes} of a read), or C{None} to drop the body (a
    stream that was reset meanwhile); it raises L{ProtocolError} for a frame
    that breaks flow control.
    """

    open_type = DATA_OPEN_TYPE

    def __init__(self, limits: Limits, dataStarting: Any) -> None:
        super().__init__(limits)
        self._starting = dataStarting
        self._values: list[int] = []
        self._target: Any = None
        self._position = 0
        self._bodyDone = False

    def check_token(self, kind: int, size: int) -> None:
        if kind != BYTES or len(self._values) != 2 or self._bodyDone:
            raise KindRefused(f"a bulk data frame cannot hold a {KIND_NAMES.get(kind, kind)} here")

    def receive_child(self, obj: Any) -> None:
        if len(self._values) < 2:
            if type(obj) is not int or obj < 0:
                raise InvalidValue(f"a bulk data frame needs non-negative ints, not {short_repr(obj)}")
            self._values.append(obj)
        elif type(obj) is bytes and not self._bodyDone:
            # A body delivered whole (a decoder under a constraint streams none).
            self.begin_body(len(obj))
            self.body_piece(obj)
            self.end_body()
        else:
            raise TooManyItems("a bulk data frame has three values")

    frame_values = 2
    """A frame: the stream id and the offset, then the body (L{begin_frame})."""

    def begin_frame(self, values: tuple[int, ...], length: int) -> bool:
        """
        The stream id and offset and the body's header at once, as
        C{receive_child} for each, C{check_token} and L{begin_body} would
        take them (C{values}: two INTs, always non-negative).
        """
        streamId, offset = values
        self._values = [streamId, offset]
        self._target = self._starting(streamId, offset, length)
        self._position = offset
        return True

    def begin_body(self, length: int) -> bool:
        """The body's header was accepted: find its stream.  Always streams the body."""
        streamId, offset = self._values
        self._target = self._starting(streamId, offset, length)
        self._position = offset
        return True

    def body_piece(self, data: bytes | memoryview) -> None:
        """The next piece of the body: handed on as it came, a view into a read uncopied (see the module docstring)."""
        target = self._target
        if target is not None:
            target(self._position, data)
        self._position += len(data)

    def end_body(self) -> None:
        self._bodyDone = True

    def finish(self) -> Any:
        if not self._bodyDone:
            raise InvalidValue("a bulk data frame ended without its body")
        return NOTHING

    def child_where(self) -> str:
        return "<bulk.data>"
