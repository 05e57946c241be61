"""Tests for L{framing.slicing._stream}: a byte string sent as a stream of chunks, and its limit."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, Violation
from framing._errors import BodyTooLarge, KindRefused
from framing._limits import Limits
from framing.slicing._stream import stream_close, stream_open, stream_tokens
from framing.wire import BYTES, CLOSE, OPEN, PREAMBLE

from .test_slicing import text, token, tokens


def streamed(chunks: list[bytes]) -> bytes:
    """The bytes a sender writes for a stream of C{chunks}."""
    return b"".join(piece for write in stream_tokens(chunks) for piece in write)


class StreamTokensTests(SynchronousTestCase):
    """stream_tokens writes OPEN "stream", one BYTES per chunk, CLOSE, one list per write."""

    def test_shape(self) -> None:
        """The OPEN goes with the first chunk, each later chunk is its own write, the CLOSE last."""
        writes = list(stream_tokens([b"ab", b"", b"cde"]))
        self.assertEqual(len(writes), 3)
        self.assertEqual(b"".join(writes[0]), stream_open() + token(BYTES, b"ab"))
        self.assertEqual(b"".join(writes[1]), token(BYTES, b"cde"))
        self.assertEqual(writes[2], [stream_close()])
        self.assertEqual(
            tokens(streamed([b"ab", b"", b"cde"])),
            [("OPEN", b"stream"), ("BYTES", b"ab"), ("BYTES", b"cde"), ("CLOSE", 0)],
        )

    def test_empty(self) -> None:
        """A stream of no chunks is OPEN then CLOSE, in one write."""
        self.assertEqual(list(stream_tokens([])), [[stream_open(), stream_close()]])
        self.assertEqual(stream_open(), token(OPEN, b"stream"))
        self.assertEqual(stream_close(), token(CLOSE))


class StreamUnslicerTests(SynchronousTestCase):
    """A decoder joins a stream's chunks into one bytes and refuses what a stream may not hold."""

    def test_joined(self) -> None:
        """The chunks arrive as one bytes object, fed in any split."""
        data = PREAMBLE + streamed([b"hello ", b"chunked ", b"world"])
        whole = Decoder().feed(data)
        self.assertEqual(whole, [b"hello chunked world"])
        decoder = Decoder()
        split = [obj for i in range(len(data)) for obj in decoder.feed(data[i : i + 1])]
        self.assertEqual(split, [b"hello chunked world"])

    def test_tooLong(self) -> None:
        """A stream whose chunks pass max_bytes_length is refused as BodyTooLarge; the next object decodes."""
        data = PREAMBLE + streamed([b"x" * 6, b"y" * 6]) + streamed([b"ok"])
        results = Decoder(limits=Limits(max_bytes_length=10)).feed(data)
        self.assertEqual(len(results), 2)
        self.assertIsInstance(results[0], Violation)
        self.assertIsInstance(results[0], BodyTooLarge)
        self.assertEqual(results[1], b"ok")

    def test_onlyBytes(self) -> None:
        """A STRING inside a stream is refused as KindRefused."""
        data = PREAMBLE + stream_open() + text("no") + stream_close() + streamed([b"ok"])
        results = Decoder().feed(data)
        self.assertIsInstance(results[0], KindRefused)
        self.assertEqual(results[1], b"ok")
