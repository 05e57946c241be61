"""Tests for L{framing._scanner.TokenScanner}: bytes to tokens, limits, errors, memory."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable
from itertools import pairwise
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from framing import Limits, ProtocolError, TokenScanner, Violation
from framing._errors import (
    BadPreamble,
    BodyTooLarge,
    BufferLimitExceeded,
    InvalidValue,
    MalformedHeader,
    PeerError,
    TruncatedStream,
    UnsupportedVersion,
)
from framing._scanner import (
    BODY_SKIP,
    BODY_STREAM,
    BODY_VIEWS,
    BODY_WHOLE,
    WANT_BODY,
    WANT_HEADER,
    WANT_PREAMBLE,
)
from framing.wire import (
    BIGINT,
    BIGNEG,
    BODY_KINDS,
    BYTES,
    CLOSE,
    ERROR,
    FLOAT,
    INT,
    MAGIC,
    NEG,
    OPEN,
    PING,
    PREAMBLE,
    SIMPLE,
    STRING,
    VERSION,
    encode_header,
)
from tests.properties import examples

KiB = 1024
MiB = 1024 * KiB

# Limits under which every body the random token strategies make is accepted.
ROOMY = Limits(max_open_name_length=KiB, max_error_length=KiB)


class Boom(Exception):
    """An unexpected failure inside a sink."""


class RecordingSink:
    """
    A token sink that records everything the scanner delivers.

    @ivar events: C{(kind, value)} for tokens, C{("refused", kind, length,
        violation)}, C{("chunk", kind, data)} and C{("end", kind)}.
    @ivar mode: what L{accept_body} answers, or a callable of (kind, length).
    @ivar fail_at: delivery numbers (1-based, counting every sink call that
        receives a token or body piece) at which the sink raises L{Boom} once.
    """

    def __init__(self, mode: int | Callable[[int, int], int] = BODY_WHOLE) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.mode = mode
        self.fail_at: set[int] = set()
        self.calls = 0
        self.accepted: list[tuple[int, int]] = []
        self.handlers = [self._handler(kind) for kind in range(16)]
        self.accepts_all = False  # ask accept_body about every body (TokenSink)

    def _maybe_fail(self) -> None:
        self.calls += 1
        if self.calls in self.fail_at:
            self.fail_at.discard(self.calls)
            raise Boom(f"failure at call {self.calls}")

    def _handler(self, kind: int) -> Callable[[Any], None]:
        def handle(value: Any) -> None:
            self._maybe_fail()
            self.events.append((kind, value))

        return handle

    def accept_body(self, kind: int, length: int) -> int:
        self.accepted.append((kind, length))
        return self.mode(kind, length) if callable(self.mode) else self.mode

    def refused(self, kind: int, length: int, violation: Violation) -> None:
        self.events.append(("refused", kind, length, violation))

    def body_chunk(self, kind: int, data: bytes | memoryview) -> None:
        self._maybe_fail()
        self.events.append(("chunk", kind, data))

    def body_end(self, kind: int) -> None:
        try:
            self._maybe_fail()
        except Boom:
            # The scanner drops a body whose end raised: forget its pieces.
            self.events.append(("lost", kind))
            raise
        self.events.append(("end", kind))

    def tokens(self) -> list[tuple[Any, ...]]:
        """The token events only, with streamed bodies joined into one C{(kind, body)}."""
        out: list[tuple[Any, ...]] = []
        pieces: list[bytes] = []
        for event in self.events:
            if event[0] == "chunk":
                pieces.append(event[2])
            elif event[0] == "end":
                out.append((event[1], b"".join(pieces)))
                pieces = []
            elif event[0] == "lost":
                pieces = []
            elif event[0] != "refused":
                out.append(event)
        return out


def token(kind: int, value: int | bytes) -> bytes:
    """Return the wire bytes of one token."""
    if isinstance(value, bytes):
        return encode_header(kind, len(value)) + value
    return encode_header(kind, value)


def scan(data: bytes, sink: RecordingSink | None = None, **kwargs: Any) -> RecordingSink:
    """Feed C{data} in one piece to a new scanner; return the sink."""
    sink = sink or RecordingSink()
    TokenScanner(sink, **kwargs).feed(data)
    return sink


# A random token: a value kind with a value, or a body kind with a body.
value_tokens = st.tuples(st.sampled_from([INT, NEG, SIMPLE, CLOSE, PING]), st.integers(0, 2**64 - 1))
body_tokens = st.tuples(
    st.sampled_from([BYTES, STRING, OPEN, ERROR]),
    st.one_of(st.binary(max_size=20), st.binary(min_size=250, max_size=600)),
)
float_tokens = st.tuples(st.just(FLOAT), st.binary(min_size=8, max_size=8))
tokens_strategy = st.lists(st.one_of(value_tokens, body_tokens, float_tokens), max_size=25)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    """Cut C{data} at the given offsets (taken modulo its length)."""
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in pairwise(points)]


class PreambleTests(SynchronousTestCase):
    """The scanner requires chunkwire's preamble and explains what it got instead."""

    def test_preamble_required(self) -> None:
        """A valid preamble then a token delivers the token; the scanner starts in WANT_PREAMBLE."""
        sink = RecordingSink()
        scanner = TokenScanner(sink)
        self.assertEqual(scanner.state, WANT_PREAMBLE)
        scanner.feed(PREAMBLE + token(INT, 5))
        self.assertEqual(sink.events, [(INT, 5)])
        self.assertEqual(scanner.state, WANT_HEADER)

    def test_preamble_byte_by_byte(self) -> None:
        """A preamble arriving one byte at a time is accepted once complete."""
        sink = RecordingSink()
        scanner = TokenScanner(sink)
        for i in range(len(PREAMBLE)):
            scanner.feed(PREAMBLE[i : i + 1])
        self.assertEqual(scanner.state, WANT_HEADER)
        scanner.feed(token(INT, 1))
        self.assertEqual(sink.events, [(INT, 1)])

    def test_tokens_without_preamble(self) -> None:
        """Token bytes where the preamble should be are a BadPreamble."""
        self.assertRaises(BadPreamble, scan, token(INT, 5) + token(INT, 6))

    def assertDescribes(self, data: bytes, words: str) -> None:
        """Feeding C{data} raises BadPreamble whose message mentions C{words}."""
        error = self.assertRaises(BadPreamble, scan, data)
        self.assertIn(words, str(error))
        self.assertIsInstance(error, ProtocolError)

    def test_http_request(self) -> None:
        """An HTTP request is refused with a message that says it looks like one."""
        self.assertDescribes(b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", "HTTP request")
        self.assertDescribes(b"POST /rpc HTTP/1.1\r\n", "HTTP request")

    def test_tls_client_hello(self) -> None:
        """A TLS ClientHello (0x16 0x03 ...) is refused with a message that names TLS."""
        self.assertDescribes(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", "TLS")

    def test_plain_text(self) -> None:
        """Plain text is refused with a message that says it is plain text."""
        self.assertDescribes(b"hello there\n", "plain text")

    def test_bad_preamble_at_first_wrong_byte(self) -> None:
        """A wrong byte is refused at once, without waiting for the rest of the preamble."""
        self.assertRaises(BadPreamble, scan, MAGIC[:3] + b"X")

    def test_wrong_version(self) -> None:
        """The right magic with another version is UnsupportedVersion, naming the version."""
        error = self.assertRaises(UnsupportedVersion, scan, MAGIC + bytes([VERSION + 1]))
        self.assertIn(str(VERSION + 1), str(error))

    def test_no_preamble_mode(self) -> None:
        """With preamble=False the scanner reads tokens from the first byte."""
        sink = scan(token(INT, 3), preamble=False)
        self.assertEqual(sink.events, [(INT, 3)])


class HeaderTests(SynchronousTestCase):
    """Malformed and overlong headers are protocol errors at once."""

    def test_reserved_kinds(self) -> None:
        """A first byte of kind 0xE or 0xF is a MalformedHeader at once, whatever its low nibble."""
        for first in (0xE0, 0xE5, 0xEF, 0xF0, 0xFC, 0xFF):
            scanner = TokenScanner(RecordingSink(), preamble=False)
            self.assertRaises(MalformedHeader, scanner.feed, bytes([first]))

    def test_non_canonical_complete(self) -> None:
        """A complete header using a wider length encoding than needed is a MalformedHeader."""
        for header in (
            bytes([(INT << 4) | 12, 11]),
            bytes([(INT << 4) | 13, 0, 255]),
            bytes([(BYTES << 4) | 14, 0, 0, 255, 255]),
            bytes([(NEG << 4) | 15]) + (2**32 - 1).to_bytes(8, "big"),
        ):
            scanner = TokenScanner(RecordingSink(), preamble=False)
            self.assertRaises(MalformedHeader, scanner.feed, header)

    def test_non_canonical_detected_early(self) -> None:
        """A wide header whose leading zero bytes already prove it non-canonical fails before the rest arrives."""
        for partial in (
            bytes([(INT << 4) | 13, 0]),
            bytes([(BYTES << 4) | 14, 0, 0]),
            bytes([(BYTES << 4) | 15, 0, 0, 0, 0]),
        ):
            scanner = TokenScanner(RecordingSink(), preamble=False)
            self.assertRaises(MalformedHeader, scanner.feed, partial)

    def test_partial_canonical_header_waits(self) -> None:
        """An incomplete header that may still be canonical waits for more bytes."""
        sink = RecordingSink()
        scanner = TokenScanner(sink, preamble=False)
        header = encode_header(INT, 2**40)
        for i in range(len(header) - 1):
            scanner.feed(header[i : i + 1])
            self.assertEqual(sink.events, [])
        scanner.feed(header[-1:])
        self.assertEqual(sink.events, [(INT, 2**40)])

    def test_header_longer_than_limit(self) -> None:
        """A header wider than Limits.max_header_length is refused at its first byte."""
        limits = Limits(max_header_length=3)
        scanner = TokenScanner(RecordingSink(), limits, preamble=False)
        self.assertRaises(MalformedHeader, scanner.feed, bytes([(INT << 4) | 14]))
        sink = scan(encode_header(INT, 65535), limits=limits, preamble=False)
        self.assertEqual(sink.events, [(INT, 65535)])

    def test_error_is_sticky(self) -> None:
        """After a ProtocolError every later feed and close raises that same error."""
        sink = RecordingSink()
        scanner = TokenScanner(sink, preamble=False)
        error = self.assertRaises(MalformedHeader, scanner.feed, b"\xf0")
        self.assertIs(self.assertRaises(MalformedHeader, scanner.feed, token(INT, 1)), error)
        self.assertIs(self.assertRaises(MalformedHeader, scanner.close), error)
        self.assertEqual(sink.events, [])

    def test_tokens_before_error_delivered(self) -> None:
        """Tokens ahead of a malformed header in the same chunk are delivered before the error."""
        sink = RecordingSink()
        scanner = TokenScanner(sink, preamble=False)
        self.assertRaises(MalformedHeader, scanner.feed, token(INT, 1) + token(INT, 2) + b"\xe0")
        self.assertEqual(sink.events, [(INT, 1), (INT, 2)])


class TokenDeliveryTests(SynchronousTestCase):
    """Tokens arrive at the sink exactly as encoded, whatever the chunking."""

    @settings(max_examples=examples(200), deadline=None)
    @given(tokens=tokens_strategy, cuts=st.lists(st.integers(0, 10**6), max_size=30))
    def test_any_chunking(self, tokens: list[tuple[int, Any]], cuts: list[int]) -> None:
        """Any split of a token stream delivers the same tokens in order and ends at a boundary."""
        data = PREAMBLE + b"".join(token(kind, value) for kind, value in tokens)
        sink = RecordingSink()
        scanner = TokenScanner(sink, ROOMY)
        for chunk in split(data, cuts):
            scanner.feed(chunk)
        self.assertEqual(sink.events, [(kind, value) for kind, value in tokens])
        self.assertTrue(scanner.at_boundary)
        self.assertEqual(scanner.buffered, 0)
        scanner.close()

    def test_byte_by_byte(self) -> None:
        """A stream fed one byte at a time delivers every token once, in order."""
        tokens = [(INT, 0), (INT, 300), (BYTES, b"abc"), (STRING, b""), (NEG, 2**63), (FLOAT, b"\0" * 8)]
        data = PREAMBLE + b"".join(token(kind, value) for kind, value in tokens)
        sink = RecordingSink()
        scanner = TokenScanner(sink)
        for i in range(len(data)):
            scanner.feed(data[i : i + 1])
        self.assertEqual(sink.events, tokens)

    def test_body_spanning_many_chunks(self) -> None:
        """A body split over many chunks is delivered once, whole, as bytes."""
        body = bytes(range(256)) * 400
        data = token(BYTES, body) + token(INT, 7)
        sink = RecordingSink()
        scanner = TokenScanner(sink, preamble=False)
        for i in range(0, len(data), 1000):
            scanner.feed(data[i : i + 1000])
        self.assertEqual(sink.events, [(BYTES, body), (INT, 7)])
        self.assertIs(type(sink.events[0][1]), bytes)

    def test_large_body_in_one_chunk_delivered_in_place(self) -> None:
        """In BODY_VIEWS mode a body lying whole in one chunk arrives as one piece, a view of that chunk, uncopied."""
        body = bytes(range(256)) * 256
        chunk = token(BYTES, body) + token(INT, 3)
        sink = RecordingSink(BODY_VIEWS)
        TokenScanner(sink, preamble=False).feed(chunk)
        (piece,) = [event[2] for event in sink.events if event[0] == "chunk"]
        self.assertIsInstance(piece, memoryview)
        self.assertIs(piece.obj, chunk)
        self.assertEqual(piece, body)
        self.assertEqual(sink.tokens(), [(BYTES, body), (INT, 3)])

    def test_whole_body_delivered_as_bytes(self) -> None:
        """In BODY_WHOLE mode a body of any size lying whole in one chunk is handed to its handler as bytes."""
        for size in (100, 64 * KiB - 1, 64 * KiB, 300 * KiB):
            body = b"s" * size
            sink = RecordingSink()
            TokenScanner(sink, preamble=False).feed(token(BYTES, body))
            self.assertEqual(sink.events, [(BYTES, body)])
            self.assertIs(type(sink.events[0][1]), bytes)

    def test_in_place_body_redelivered_after_failure(self) -> None:
        """If body_chunk raises on a body viewed in place, the body is not consumed and is offered again."""
        body = b"p" * 64 * KiB
        sink = RecordingSink(BODY_VIEWS)
        sink.fail_at = {1}
        scanner = TokenScanner(sink, preamble=False)
        self.assertRaises(Boom, scanner.feed, token(BYTES, body) + token(INT, 1))
        scanner.feed(b"")
        self.assertEqual(sink.tokens(), [(BYTES, body), (INT, 1)])

    @settings(max_examples=100, deadline=None)
    @given(body=st.binary(max_size=3000), cuts=st.lists(st.integers(0, 10**6), max_size=10))
    def test_views_mode(self, body: bytes, cuts: list[int]) -> None:
        """BODY_VIEWS delivers non-empty pieces, each the chunk itself or a view into it, that join to the body."""
        data = token(BYTES, body) + token(INT, 9)
        sink = RecordingSink(BODY_VIEWS)
        scanner = TokenScanner(sink, preamble=False)
        chunks = split(data, cuts)
        for chunk in chunks:
            scanner.feed(chunk)
        pieces = [event[2] for event in sink.events if event[0] == "chunk"]
        self.assertEqual(b"".join(pieces), body)
        for piece in pieces:
            self.assertTrue(piece)
            self.assertTrue(any((piece.obj if type(piece) is memoryview else piece) is c for c in chunks))
        self.assertEqual(sink.events[len(pieces) :], [("end", BYTES), (INT, 9)])
        self.assertEqual(scanner.buffered, 0)

    def test_accepts_all_skips_asking(self) -> None:
        """A sink with accepts_all set is not asked about bodies, except an OPEN's, and gets them whole."""
        sink = RecordingSink(BODY_SKIP)
        sink.accepts_all = True
        scanner = TokenScanner(sink, preamble=False)
        scanner.feed(token(BYTES, b"abc") + token(STRING, b"x" * 20) + token(OPEN, b"list"))
        self.assertEqual(sink.accepted, [(OPEN, 4)])
        self.assertEqual(sink.events, [(BYTES, b"abc"), (STRING, b"x" * 20)])

    def test_accepts_all_still_enforces_limits(self) -> None:
        """accepts_all does not bypass the limits: an oversize body is still refused at its header."""
        sink = RecordingSink()
        sink.accepts_all = True
        scanner = TokenScanner(sink, Limits(max_bytes_length=2), preamble=False)
        scanner.feed(token(BYTES, b"abc") + token(INT, 1))
        self.assertEqual(sink.events[0][:3], ("refused", BYTES, 3))
        self.assertEqual(sink.events[1:], [(INT, 1)])

    def test_zero_length_bodies(self) -> None:
        """Empty bodies are delivered as b"" in every mode, alone or at a chunk's end."""
        for mode in (BODY_WHOLE, BODY_STREAM, BODY_SKIP):
            sink = RecordingSink(mode)
            scanner = TokenScanner(sink, preamble=False)
            scanner.feed(token(BYTES, b""))
            scanner.feed(token(STRING, b"") + token(INT, 1))
            self.assertTrue(scanner.at_boundary)
            expected = {
                BODY_WHOLE: [(BYTES, b""), (STRING, b""), (INT, 1)],
                BODY_STREAM: [("end", BYTES), ("end", STRING), (INT, 1)],
                BODY_SKIP: [(INT, 1)],
            }[mode]
            self.assertEqual(sink.events, expected)

    def test_accept_body_asked_before_body(self) -> None:
        """accept_body is asked with the kind and announced length when only the header has arrived."""
        sink = RecordingSink()
        scanner = TokenScanner(sink, preamble=False)
        scanner.feed(encode_header(BYTES, 1000))
        self.assertEqual(sink.accepted, [(BYTES, 1000)])
        self.assertEqual(scanner.state, WANT_BODY)

    @settings(max_examples=100, deadline=None)
    @given(body=st.binary(max_size=3000), cuts=st.lists(st.integers(0, 10**6), max_size=10))
    def test_stream_mode(self, body: bytes, cuts: list[int]) -> None:
        """BODY_STREAM delivers non-empty pieces that join to the body, then body_end, then later tokens."""
        data = token(BYTES, body) + token(INT, 9)
        sink = RecordingSink(BODY_STREAM)
        scanner = TokenScanner(sink, preamble=False)
        for chunk in split(data, cuts):
            scanner.feed(chunk)
        chunks = [event[2] for event in sink.events if event[0] == "chunk"]
        self.assertEqual(b"".join(chunks), body)
        self.assertTrue(all(type(piece) is bytes and piece for piece in chunks))
        self.assertEqual(sink.events[len(chunks) :], [("end", BYTES), (INT, 9)])
        self.assertEqual(scanner.buffered, 0)

    def test_skip_mode(self) -> None:
        """BODY_SKIP delivers nothing of the body and holds none of it; the next token follows."""
        body = b"s" * 100000
        data = token(BYTES, body) + token(INT, 4)
        sink = RecordingSink(BODY_SKIP)
        scanner = TokenScanner(sink, preamble=False)
        for i in range(0, len(data), 4096):
            scanner.feed(data[i : i + 4096])
            self.assertLess(scanner.buffered, 16)
        self.assertEqual(sink.events, [(INT, 4)])

    def test_buffered_counts_partial_body(self) -> None:
        """buffered counts the partial body held for BODY_WHOLE, and drops to zero once it is delivered."""
        sink = RecordingSink()
        scanner = TokenScanner(sink, preamble=False)
        scanner.feed(encode_header(BYTES, 100) + b"x" * 30)
        self.assertEqual(scanner.buffered, 30)
        scanner.feed(b"x" * 70)
        self.assertEqual(scanner.buffered, 0)

    def test_float_body_must_be_eight_bytes(self) -> None:
        """A FLOAT body of another length is refused at its header with InvalidValue and skipped."""
        sink = RecordingSink()
        scanner = TokenScanner(sink, preamble=False)
        scanner.feed(token(FLOAT, b"1234") + token(INT, 1))
        self.assertEqual(sink.events[0][:3], ("refused", FLOAT, 4))
        self.assertIsInstance(sink.events[0][3], InvalidValue)
        self.assertEqual(sink.events[1:], [(INT, 1)])


class LimitTests(SynchronousTestCase):
    """Limits are applied at the header, before any body byte is kept."""

    def test_body_refused_at_header(self) -> None:
        """A body over its kind's limit is refused when only its header has arrived."""
        limits = Limits(max_bytes_length=10, max_string_length=5, max_open_name_length=3, max_bigint_length=9)
        for kind, length in ((BYTES, 11), (STRING, 6), (OPEN, 4), (BIGINT, 10), (BIGNEG, 10)):
            sink = RecordingSink()
            scanner = TokenScanner(sink, limits, preamble=False)
            scanner.feed(encode_header(kind, length))
            self.assertEqual(len(sink.events), 1)
            self.assertEqual(sink.events[0][:3], ("refused", kind, length))
            self.assertIsInstance(sink.events[0][3], BodyTooLarge)
            self.assertEqual(sink.accepted, [])

    def test_oversize_error_is_fatal_at_header(self) -> None:
        """An ERROR body over max_error_length is a PeerError at its header, without reading the body."""
        sink = RecordingSink()
        scanner = TokenScanner(sink, Limits(max_error_length=4), preamble=False)
        error = self.assertRaises(PeerError, scanner.feed, encode_header(ERROR, 5))
        self.assertEqual((sink.events, sink.accepted), ([], []))
        self.assertIs(self.assertRaises(PeerError, scanner.feed, b"abcde"), error)

    def test_body_at_limit_accepted(self) -> None:
        """A body exactly at its kind's limit is accepted and delivered."""
        sink = scan(token(BYTES, b"0123456789"), limits=Limits(max_bytes_length=10), preamble=False)
        self.assertEqual(sink.events, [(BYTES, b"0123456789")])

    def test_refused_body_skipped_without_buffering(self) -> None:
        """A refused 64 MiB body is skipped in 64 KiB chunks with almost nothing buffered; the next token arrives."""
        sink = RecordingSink()
        scanner = TokenScanner(sink, Limits(max_bytes_length=KiB), preamble=False)
        size = 64 * MiB
        scanner.feed(encode_header(BYTES, size) + b"\0" * 100)
        self.assertEqual(sink.events[0][:3], ("refused", BYTES, size))
        chunk = b"\0" * (64 * KiB)
        remaining = size - 100
        while remaining > len(chunk):
            scanner.feed(chunk)
            remaining -= len(chunk)
            self.assertLess(scanner.buffered, 4 * KiB)
        scanner.feed(chunk[:remaining] + token(INT, 42))
        self.assertEqual(sink.events[1:], [(INT, 42)])
        self.assertTrue(scanner.at_boundary)

    def test_body_memory_grows_with_bytes_received(self) -> None:
        """A body announced as 200 MiB holds memory for the 1 MiB received, not for the announcement."""
        sink = RecordingSink()
        scanner = TokenScanner(sink, preamble=False)
        chunk = b"b" * (64 * KiB)
        gc.collect()
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            scanner.feed(encode_header(BYTES, 200 * MiB))
            for _ in range(16):
                scanner.feed(chunk)
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        self.assertEqual(scanner.buffered, MiB)
        self.assertLess(peak, 4 * MiB)

    def test_max_buffered_bytes(self) -> None:
        """More unprocessed bytes than max_buffered_bytes held after a feed is a BufferLimitExceeded."""
        limits = Limits(max_buffered_bytes=3)
        scanner = TokenScanner(RecordingSink(), limits, preamble=False)
        scanner.feed(bytes([(INT << 4) | 15, 1, 2]))
        self.assertRaises(BufferLimitExceeded, scanner.feed, b"\3")
        self.assertRaises(BufferLimitExceeded, scanner.feed, b"")

    def test_preamble_counts_against_buffer_limit(self) -> None:
        """A partial preamble longer than max_buffered_bytes is refused too."""
        scanner = TokenScanner(RecordingSink(), Limits(max_buffered_bytes=4))
        scanner.feed(MAGIC[:4])
        self.assertRaises(BufferLimitExceeded, scanner.feed, MAGIC[4:5])


class CloseTests(SynchronousTestCase):
    """close() tells a clean end from a truncated one."""

    def test_close_at_boundary(self) -> None:
        """close() after whole tokens raises nothing."""
        scanner = TokenScanner(RecordingSink())
        scanner.feed(PREAMBLE + token(BYTES, b"abc"))
        scanner.close()

    def test_close_mid_preamble(self) -> None:
        """close() inside the preamble raises TruncatedStream."""
        scanner = TokenScanner(RecordingSink())
        scanner.feed(PREAMBLE[:4])
        self.assertRaises(TruncatedStream, scanner.close)

    def test_close_mid_header(self) -> None:
        """close() inside a header raises TruncatedStream."""
        scanner = TokenScanner(RecordingSink(), preamble=False)
        scanner.feed(encode_header(INT, 2**40)[:3])
        self.assertRaises(TruncatedStream, scanner.close)

    def test_close_mid_body(self) -> None:
        """close() inside a body raises TruncatedStream, in every body mode."""
        for mode in (BODY_WHOLE, BODY_STREAM, BODY_SKIP):
            scanner = TokenScanner(RecordingSink(mode), preamble=False)
            scanner.feed(encode_header(BYTES, 10) + b"abc")
            self.assertRaises(TruncatedStream, scanner.close)

    def test_close_is_sticky(self) -> None:
        """After a truncated close, feed raises the same TruncatedStream."""
        scanner = TokenScanner(RecordingSink(), preamble=False)
        scanner.feed(encode_header(BYTES, 10))
        error = self.assertRaises(TruncatedStream, scanner.close)
        self.assertIs(self.assertRaises(TruncatedStream, scanner.feed, b"x"), error)


class ExceptionSafetyTests(SynchronousTestCase):
    """
    A sink that raises something unexpected never leaves the scanner out of
    sync.  The exact guarantee: a token read in place (a value token, or a
    whole body that arrived with its header) and a streamed body piece are
    not consumed when their handler raises, so the next feed delivers them
    again; a body the scanner collected across chunks is consumed when its
    handler raises (the scanner is back at a token boundary first).  Either
    way, every later token is delivered intact.
    """

    def test_value_token_redelivered(self) -> None:
        """A value token whose handler raised is delivered again, with what follows, on the next feed."""
        sink = RecordingSink()
        sink.fail_at = {2}
        scanner = TokenScanner(sink, preamble=False)
        self.assertRaises(Boom, scanner.feed, token(INT, 1) + token(INT, 2) + token(INT, 3))
        self.assertEqual(sink.events, [(INT, 1)])
        scanner.feed(b"")
        self.assertEqual(sink.events, [(INT, 1), (INT, 2), (INT, 3)])

    def test_in_place_body_redelivered(self) -> None:
        """A whole body that arrived with its header is delivered again after its handler raised."""
        sink = RecordingSink()
        sink.fail_at = {1}
        scanner = TokenScanner(sink, preamble=False)
        self.assertRaises(Boom, scanner.feed, token(BYTES, b"abc") + token(INT, 2))
        scanner.feed(b"")
        self.assertEqual(sink.events, [(BYTES, b"abc"), (INT, 2)])
        self.assertEqual(sink.accepted, [(BYTES, 3), (BYTES, 3)])

    def test_collected_body_dropped_stream_stays_in_sync(self) -> None:
        """A body collected across chunks whose handler raised is dropped; the tokens after it still arrive."""
        sink = RecordingSink()
        sink.fail_at = {1}
        scanner = TokenScanner(sink, preamble=False)
        scanner.feed(encode_header(BYTES, 6) + b"abc")
        self.assertRaises(Boom, scanner.feed, b"def" + token(INT, 7) + token(INT, 8))
        self.assertEqual(scanner.state, WANT_HEADER)
        scanner.feed(token(INT, 9))
        self.assertEqual(sink.events, [(INT, 7), (INT, 8), (INT, 9)])

    def test_split_header_body_dropped_stream_stays_in_sync(self) -> None:
        """A body whose header was split across chunks and whose handler raised leaves later tokens intact."""
        sink = RecordingSink()
        sink.fail_at = {1}
        scanner = TokenScanner(sink, preamble=False)
        data = token(BYTES, b"x" * 20) + token(INT, 7) + token(INT, 8)
        scanner.feed(data[:1])
        self.assertRaises(Boom, scanner.feed, data[1:])
        scanner.feed(b"")
        self.assertEqual(sink.events, [(INT, 7), (INT, 8)])

    def test_stream_piece_redelivered(self) -> None:
        """A streamed body piece whose body_chunk raised is passed on again at the next feed."""
        sink = RecordingSink(BODY_STREAM)
        sink.fail_at = {2}
        scanner = TokenScanner(sink, preamble=False)
        scanner.feed(encode_header(BYTES, 6) + b"ab")
        self.assertRaises(Boom, scanner.feed, b"cd")
        scanner.feed(b"ef" + token(INT, 1))
        self.assertEqual(sink.tokens(), [(BYTES, b"abcdef"), (INT, 1)])

    def test_accept_body_raising_consumes_nothing(self) -> None:
        """If accept_body raises, the header is not consumed and is offered again at the next feed."""
        answers = iter([Boom, BODY_WHOLE])

        def mode(kind: int, length: int) -> int:
            answer = next(answers)
            if answer is Boom:
                raise Boom("accept_body failed")
            return answer

        sink = RecordingSink(mode)
        scanner = TokenScanner(sink, preamble=False)
        self.assertRaises(Boom, scanner.feed, token(BYTES, b"hi"))
        scanner.feed(b"")
        self.assertEqual(sink.events, [(BYTES, b"hi")])

    @settings(max_examples=examples(300), deadline=None)
    @given(
        tokens=tokens_strategy,
        cuts=st.lists(st.integers(0, 10**6), max_size=20),
        failures=st.sets(st.integers(1, 40), max_size=6),
        stream=st.booleans(),
        fast=st.booleans(),
    )
    def test_random_failures_never_desync(
        self, tokens: list[tuple[int, Any]], cuts: list[int], failures: set[int], stream: bool, fast: bool
    ) -> None:
        """Under random sink failures and chunkings, the delivered tokens are the sent ones minus some failed bodies."""
        data = b"".join(token(kind, value) for kind, value in tokens)
        sink = RecordingSink(BODY_STREAM if stream else BODY_WHOLE)
        sink.accepts_all = fast and not stream
        sink.fail_at = set(failures)
        scanner = TokenScanner(sink, ROOMY, preamble=False)
        for chunk in split(data, cuts):
            self._feed_retrying(scanner, chunk)
        self.assertTrue(scanner.at_boundary)
        delivered = sink.tokens()
        # Only body tokens may be dropped, and only because a failure hit them.
        dropped = 0
        position = 0
        for expected in tokens:
            if position < len(delivered) and delivered[position] == expected:
                position += 1
            else:
                self.assertIn(expected[0], BODY_KINDS)
                dropped += 1
        self.assertEqual(position, len(delivered))
        self.assertLessEqual(dropped, len(failures))

    def _feed_retrying(self, scanner: TokenScanner, chunk: bytes) -> None:
        """Feed C{chunk}, then feed nothing again after each sink failure until a feed succeeds."""
        while True:
            try:
                scanner.feed(chunk)
                return
            except Boom:
                chunk = b""
