# -*- test-case-name: tests.protocols.bulk.test_wire,tests.protocols.rpc.test_wire_cores,tests.framing.test_scanner -*-
"""The chunkwire wire format: token kinds, the header codec, the preamble.

Contract: a header is 1 to 9 bytes and says everything needed to frame the
token: its kind and either a small value or the exact length of the body that
follows, so a body is read by count and never scanned.  Every value has
exactly one (the shortest) header encoding.  The normative description with
test vectors is C{docs/wire-format.md} and C{tests/vectors/}.

First byte: the kind in the high nibble, C{code} in the low nibble.  C{code}
0-11 is the value itself; 12, 13, 14, 15 mean the value follows as 1, 2, 4 or
8 big-endian bytes.
"""

from __future__ import annotations

from ._errors import BadPreamble, MalformedHeader, UnsupportedVersion

__all__ = [
    "ABORT",
    "BIGINT",
    "BIGNEG",
    "BODY_KINDS",
    "BYTES",
    "CLOSE",
    "ERROR",
    "FLOAT",
    "INLINE_LIMIT",
    "INT",
    "KIND_NAMES",
    "MAGIC",
    "MAX_HEADER_LENGTH",
    "MAX_HEADER_VALUE",
    "NEG",
    "OPEN",
    "PING",
    "PONG",
    "PREAMBLE",
    "SIMPLE",
    "STRING",
    "VALUE_KINDS",
    "VERSION",
    "check_preamble",
    "decode_header",
    "encode_header",
]

# Token kinds (high nibble of the first header byte).
INT = 0x0  # value: a non-negative integer < 2**64
NEG = 0x1  # value v: the integer -1 - v
BYTES = 0x2  # body: a byte string
STRING = 0x3  # body: UTF-8 text
BIGINT = 0x4  # body: big-endian magnitude of an integer >= 2**64
BIGNEG = 0x5  # body: big-endian magnitude of an integer <= -(2**64) - 1
FLOAT = 0x6  # body: 8 bytes, IEEE 754 binary64, big-endian
OPEN = 0x7  # body: the ASCII open-type name of the container that follows
CLOSE = 0x8  # value 0: ends the innermost open container
ABORT = 0x9  # value 0: the sender abandons the top-level object in progress
SIMPLE = 0xA  # value: 0 None, 1 False, 2 True
ERROR = 0xB  # body: UTF-8 text; the sender reports a fatal error and hangs up
PING = 0xC  # value: an id the receiver echoes in a PONG
PONG = 0xD  # value: the id of the PING answered
# 0xE and 0xF are reserved: a header using them is a ProtocolError.

KIND_NAMES = {
    INT: "INT",
    NEG: "NEG",
    BYTES: "BYTES",
    STRING: "STRING",
    BIGINT: "BIGINT",
    BIGNEG: "BIGNEG",
    FLOAT: "FLOAT",
    OPEN: "OPEN",
    CLOSE: "CLOSE",
    ABORT: "ABORT",
    SIMPLE: "SIMPLE",
    ERROR: "ERROR",
    PING: "PING",
    PONG: "PONG",
}

BODY_KINDS = frozenset({BYTES, STRING, BIGINT, BIGNEG, FLOAT, OPEN, ERROR})
"""Kinds whose header value is the length of a body that follows."""

VALUE_KINDS = frozenset({INT, NEG, CLOSE, ABORT, SIMPLE, PING, PONG})
"""Kinds whose header value is the whole token."""

SIMPLE_NONE, SIMPLE_FALSE, SIMPLE_TRUE = 0, 1, 2

INLINE_LIMIT = 12
"""Values below this are carried in the first byte's low nibble."""

MAX_HEADER_LENGTH = 9
MAX_HEADER_VALUE = 2**64 - 1

# Extra header bytes after the first, indexed by the low nibble.
EXTRA_BYTES = (0,) * INLINE_LIMIT + (1, 2, 4, 8)
# Smallest value each width may carry: anything smaller is non-canonical.
_MIN_FOR_WIDTH = {1: INLINE_LIMIT, 2: 1 << 8, 4: 1 << 16, 8: 1 << 32}

MAGIC = b"\x89CWIRE\r\n"
"""The first eight bytes of every stream.  The high-bit first byte and the
CR LF catch 7-bit and newline-translating channels, as PNG's signature does."""
VERSION = 1
PREAMBLE = MAGIC + bytes([VERSION])


def encode_header(kind: int, value: int) -> bytes:
    """
    Return the canonical header for C{kind} with C{value} (a small value, or
    a body length).

    @raise ValueError: if C{kind} is not a token kind or C{value} does not
        fit in 64 bits.
    """
    if value < INLINE_LIMIT:
        if value < 0 or kind not in KIND_NAMES:
            raise ValueError(f"cannot encode kind {kind} with value {value}")
        return _SMALL_HEADERS[kind][value]
    if kind not in KIND_NAMES:
        raise ValueError(f"unknown token kind {kind}")
    first = kind << 4
    if value < 1 << 8:
        return bytes((first | 12, value))
    if value < 1 << 16:
        return bytes((first | 13,)) + value.to_bytes(2, "big")
    if value < 1 << 32:
        return bytes((first | 14,)) + value.to_bytes(4, "big")
    if value <= MAX_HEADER_VALUE:
        return bytes((first | 15,)) + value.to_bytes(8, "big")
    raise ValueError(f"header value {value} does not fit in 64 bits")


_SMALL_HEADERS = {k: [bytes(((k << 4) | v,)) for v in range(INLINE_LIMIT)] for k in KIND_NAMES}


def decode_header(data: bytes, pos: int, end: int, max_length: int = MAX_HEADER_LENGTH) -> tuple[int, int, int] | None:
    """
    Decode the header starting at C{data[pos]}, reading no further than
    C{end}.

    @return: C{(kind, value, header_length)}, or C{None} if the header is
        not complete before C{end} (then nothing about it is known to be
        wrong yet).
    @raise MalformedHeader: at once, as soon as the bytes present prove the
        header invalid: a reserved kind, a width longer than C{max_length},
        or a non-canonical value.
    """
    first = data[pos]
    kind = first >> 4
    if kind > PONG:
        raise MalformedHeader(f"reserved token kind 0x{kind:x} (first header byte 0x{first:02x})")
    code = first & 0x0F
    if code < INLINE_LIMIT:
        return kind, code, 1
    width = EXTRA_BYTES[code]
    if 1 + width > max_length:
        raise MalformedHeader(f"{1 + width}-byte {KIND_NAMES[kind]} header exceeds the limit of {max_length} bytes")
    if pos + 1 + width > end:
        _check_partial(data, pos, end, kind, width)
        return None
    value = int.from_bytes(data[pos + 1 : pos + 1 + width], "big")
    if value < _MIN_FOR_WIDTH[width]:
        raise MalformedHeader(f"non-canonical {KIND_NAMES[kind]} header: value {value} written in {width} bytes")
    return kind, value, 1 + width


def _check_partial(data: bytes, pos: int, end: int, kind: int, width: int) -> None:
    """
    Refuse an incomplete wide header whose bytes present already prove it
    non-canonical, rather than wait for bytes a broken peer may never send.
    """
    # A 2-, 4- or 8-byte value is canonical only if it needs more than half
    # its width: zero high bytes over that half prove it too small.
    half = width // 2
    if half and pos + 1 + half <= end and not any(data[pos + 1 : pos + 1 + half]):
        raise MalformedHeader(f"non-canonical {KIND_NAMES[kind]} header: {half} leading zero bytes in {width}")


def check_preamble(data: bytes) -> bool:
    """
    Check the start of a stream against L{PREAMBLE}.

    @param data: the first bytes received, at most C{len(PREAMBLE)} of them.
    @return: C{True} when the whole preamble is present and valid, C{False}
        when C{data} is a correct but incomplete prefix of it.
    @raise BadPreamble: as soon as a byte differs from the magic, saying what
        the bytes look like.
    @raise UnsupportedVersion: when the magic is right but the version is not.
    """
    magic = data[: len(MAGIC)]
    if not MAGIC.startswith(magic):
        raise BadPreamble(f"not a chunkwire stream: the peer sent {describe_foreign(data)}")
    if len(data) <= len(MAGIC):
        return False
    version = data[len(MAGIC)]
    if version != VERSION:
        raise UnsupportedVersion(f"the peer speaks chunkwire wire format version {version}; this side speaks {VERSION}")
    return True


_HTTP_METHODS = (b"GET ", b"POST", b"PUT ", b"HEAD", b"DELE", b"OPTI", b"PATC", b"CONN", b"TRAC")


def describe_foreign(data: bytes) -> str:
    """Say in a few words what a stream that is not chunkwire looks like."""
    shown = data[:16]
    if data[:1] == b"\x16" and data[1:2] in (b"", b"\x03"):
        what = "a TLS handshake (a TLS client on a plain port?)"
    elif data[:5] == b"HTTP/":
        what = "an HTTP response"
    elif data[:4] == b"PRI ":
        what = "an HTTP/2 connection preface"
    elif any(m.startswith(data[:4]) for m in _HTTP_METHODS) and data[:1].isalpha():
        what = "an HTTP request" if len(data) >= 4 else "text, perhaps an HTTP request"
    elif data[:4] == b"SSH-":
        what = "an SSH banner"
    elif data[:1].isascii() and bytes(data[:16]).isascii() and all(32 <= c < 127 or c in (9, 10, 13) for c in shown):
        what = "plain text"
    else:
        what = "unrecognised binary data"
    return f"{what}: {shown!r}"
