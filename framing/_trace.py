# -*- test-case-name: tests.framing.test_trace -*-
"""Wire tracing: a chunkwire byte stream as one readable line per token.

Contract: L{TokenTracer} is sans-IO and independent of the L{Decoder}: it
scans its own copy of the stream with its own L{TokenScanner}, so tracing
costs nothing unless it is switched on, and a connection that traces reads
its bytes twice.  It never holds a whole body: bodies are streamed through
it uncopied and only the first L{TokenTracer.preview} bytes of each are kept, so its
memory is bounded whatever the peer sends.  It refuses nothing (its limits
are the widest the format allows); a stream the format itself rejects ends
the trace with one C{PROTOCOL-ERROR} event.

    >>> from framing import dumps
    >>> for event in TokenTracer().feed(dumps({"n": 5})):
    ...     print(event)
    PREAMBLE version 1
    OPEN 'dict'
    STRING 'n'
    INT 5
    CLOSE
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from ._errors import ProtocolError, Violation
from ._limits import Limits
from ._scanner import BODY_VIEWS, WANT_PREAMBLE, TokenScanner
from .wire import (
    BIGINT,
    BIGNEG,
    CLOSE,
    ERROR,
    FLOAT,
    KIND_NAMES,
    NEG,
    OPEN,
    SIMPLE,
    STRING,
    VERSION,
)

_UNLIMITED = Limits(
    max_bytes_length=2**64 - 1,
    max_string_length=2**64 - 1,
    max_bigint_length=2**64 - 1,
    max_open_name_length=2**64 - 1,
    max_error_length=2**64 - 1,
    max_buffered_bytes=2**64 - 1,
)
_SIMPLE_NAMES = {0: "None", 1: "False", 2: "True"}
_TEXT_KINDS = frozenset({STRING, OPEN, ERROR})


@dataclass(frozen=True)
class TokenEvent:
    """
    One token of a traced stream.

    @ivar kind: the token kind's name (C{"INT"}, C{"OPEN"}, ...), or
        C{"PREAMBLE"}, or C{"PROTOCOL-ERROR"} when the stream broke.
    @ivar value: for a value kind, its header value; for a body kind, the
        body's length in bytes.
    @ivar preview: the first bytes of the body (C{b""} for value kinds).
    @ivar text: the readable line, e.g. C{"STRING 'name'"}, C{"INT 5"},
        C{"BYTES 1024 bytes 0001ff..."}.
    """

    kind: str
    value: int
    preview: bytes
    text: str

    def __str__(self) -> str:
        return self.text


def format_value_token(kind: int, value: int) -> str:
    """The readable line for a value token (C{INT 5}, C{NEG -3}, C{SIMPLE True}, C{CLOSE}, ...)."""
    name = KIND_NAMES.get(kind, f"KIND-{kind:X}")
    if kind == NEG:
        return f"{name} {-1 - value}"
    if kind == SIMPLE:
        return f"{name} {_SIMPLE_NAMES.get(value, value)}"
    if kind == CLOSE and not value:
        return name
    return f"{name} {value}"


def format_body_token(kind: int, length: int, preview: bytes, limit: int = 32) -> str:
    """
    The readable line for a body token of C{length} bytes whose first bytes
    are C{preview}: text kinds as a quoted string, numbers as their value,
    bytes as their length and the hex of at most C{limit} of them.
    """
    name = KIND_NAMES.get(kind, f"KIND-{kind:X}")
    whole = len(preview) >= length
    if kind in _TEXT_KINDS:
        text = preview[:limit].decode("utf-8", "replace")
        more = "" if length <= limit else f"… ({length} bytes)"
        return f"{name} {text!r}{more}"
    if kind == FLOAT and length == 8 and whole:
        return f"{name} {struct.unpack('>d', preview)[0]!r}"
    if kind in (BIGINT, BIGNEG) and whole:
        magnitude = int.from_bytes(preview, "big")
        return f"{name} {-magnitude if kind == BIGNEG else magnitude}"
    shown = preview[:limit].hex()
    more = "" if length <= limit else "…"
    return f"{name} {length} bytes {shown}{more}".rstrip()


class TokenTracer:
    """
    Turns the bytes of one direction of a chunkwire connection into
    L{TokenEvent}s, one per token, in order.

    @ivar preview: how many bytes of each body are kept to show.
    @ivar broken: the L{ProtocolError} that ended the trace, or C{None}.
    """

    accepts_all = False

    def __init__(self, preamble: bool = True, preview: int = 32) -> None:
        self.preview = preview
        self.broken: ProtocolError | None = None
        self._events: list[TokenEvent] = []
        self._kept = bytearray()
        self._length = 0
        self.handlers = [self._make_value_handler(kind) for kind in range(16)]
        self._scanner = TokenScanner(self, _UNLIMITED, preamble)

    def feed(self, data: bytes) -> list[TokenEvent]:
        """Scan C{data}; return the events of the tokens it completed (and a body's header when it starts)."""
        if self.broken is not None:
            return []
        scanner = self._scanner
        in_preamble = scanner.state == WANT_PREAMBLE
        try:
            scanner.feed(data)
        except ProtocolError as error:
            self.broken = error
            self._events.append(TokenEvent("PROTOCOL-ERROR", 0, b"", f"PROTOCOL-ERROR {error.code}: {error}"))
        if in_preamble and scanner.state != WANT_PREAMBLE:
            self._events.insert(0, TokenEvent("PREAMBLE", VERSION, b"", f"PREAMBLE version {VERSION}"))
        events, self._events = self._events, []
        return events

    @property
    def at_boundary(self) -> bool:
        """True when the bytes fed so far end exactly between two tokens."""
        return self._scanner.at_boundary

    # -- the scanner's sink interface ------------------------------------

    def _make_value_handler(self, kind: int) -> Any:
        def handle(value: Any) -> None:
            # Body kinds never arrive here: accept_body streams all of them.
            self._events.append(TokenEvent(KIND_NAMES.get(kind, "?"), value, b"", format_value_token(kind, value)))

        return handle

    def accept_body(self, kind: int, length: int) -> int:
        """Stream every body through L{body_chunk}, keeping only its preview."""
        self._kept.clear()
        self._length = length
        return BODY_VIEWS

    def refused(self, kind: int, length: int, violation: Violation) -> None:
        """Only a FLOAT of the wrong length is refused with these limits: show it."""
        name = KIND_NAMES.get(kind, "?")
        self._events.append(TokenEvent(name, length, b"", f"{name} {length} bytes (refused: {violation})"))

    def body_chunk(self, kind: int, data: bytes | memoryview) -> None:
        """Keep the start of the body, up to the preview size."""
        room = self._preview_size(kind) - len(self._kept)
        if room > 0:
            self._kept += data[:room]

    def body_end(self, kind: int) -> None:
        """The body is complete: emit its event."""
        kept = bytes(self._kept)
        text = format_body_token(kind, self._length, kept, self.preview)
        self._events.append(TokenEvent(KIND_NAMES.get(kind, "?"), self._length, kept, text))
        self._kept.clear()

    def _preview_size(self, kind: int) -> int:
        # Small numbers are kept whole so that their value can be shown.
        if kind in (FLOAT, BIGINT, BIGNEG) and self._length <= 64:
            return self._length
        return self.preview


def trace(data: bytes, preamble: bool = True) -> list[str]:
    """The readable lines of a whole stream C{data}, e.g. for a test's failure message."""
    return [event.text for event in TokenTracer(preamble).feed(data)]
