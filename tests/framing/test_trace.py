"""framing._trace: a readable line per token, the same however the stream is chunked, with bounded memory."""

from __future__ import annotations

import array

from twisted.trial.unittest import SynchronousTestCase

from framing import dumps
from framing._trace import TokenTracer, trace
from framing.wire import PREAMBLE


def chunked(data: bytes, size: int) -> list[str]:
    """Trace C{data} fed in pieces of C{size} bytes."""
    tracer = TokenTracer()
    lines: list[str] = []
    for offset in range(0, len(data), size):
        lines += [event.text for event in tracer.feed(data[offset : offset + size])]
    return lines


class TraceFormatTests(SynchronousTestCase):
    """Each token kind has a short readable form."""

    def test_nested(self) -> None:
        """A dict of atoms traces as its OPEN, each key and value, then CLOSE."""
        obj = {"n": 5, "neg": -3, "f": 2.5, "ok": True, "none": None, "big": 2**70, "tiny": -(2**70)}
        self.assertEqual(
            trace(dumps(obj)),
            [
                "PREAMBLE version 1",
                "OPEN 'dict'",
                *("STRING 'n'", "INT 5", "STRING 'neg'", "NEG -3", "STRING 'f'", "FLOAT 2.5"),
                *("STRING 'ok'", "SIMPLE True", "STRING 'none'", "SIMPLE None"),
                *("STRING 'big'", f"BIGINT {2**70}", "STRING 'tiny'", f"BIGNEG {-(2**70)}"),
                "CLOSE",
            ],
        )

    def test_bytesPreview(self) -> None:
        """A byte string shows its length and the hex of its first bytes, marked when cut short."""
        self.assertEqual(trace(dumps(b"\x00\x01\xff")), ["PREAMBLE version 1", "BYTES 3 bytes 0001ff"])
        line = trace(dumps(bytes(range(256)) * 4))[1]
        self.assertEqual(line, "BYTES 1024 bytes " + bytes(range(32)).hex() + "…")

    def test_longText(self) -> None:
        """A long string shows its start and its length in bytes."""
        self.assertEqual(trace(dumps("a" * 100))[1], "STRING '" + "a" * 32 + "'… (100 bytes)")

    def test_structuredFields(self) -> None:
        """Each event carries the kind's name, the value or body length, and a preview of the body."""
        event = TokenTracer().feed(dumps(b"abc"))[1]
        self.assertEqual((event.kind, event.value, event.preview, str(event)), ("BYTES", 3, b"abc", event.text))

    def test_brokenStream(self) -> None:
        """Bytes that are not chunkwire end the trace with one PROTOCOL-ERROR line, then nothing."""
        tracer = TokenTracer()
        [event] = tracer.feed(b"GET / HTTP/1.1\r\n")
        self.assertEqual(event.kind, "PROTOCOL-ERROR")
        self.assertIn("bad-preamble", event.text)
        self.assertEqual(tracer.feed(PREAMBLE), [])

    def test_noPreamble(self) -> None:
        """With preamble=False the tracer reads tokens from the first byte."""
        self.assertEqual(trace(dumps(7)[len(PREAMBLE) :], preamble=False), ["INT 7"])


class TraceChunkingTests(SynchronousTestCase):
    """The trace does not depend on how the stream is cut."""

    def test_everySplit(self) -> None:
        """Fed whole, split at every offset, and byte by byte, a stream traces the same."""
        data = dumps([{"k": "v" * 40}, b"\x07" * 70, 3.5, 2**80, ("t",), None])
        whole = trace(data)
        self.assertEqual(chunked(data, 1), whole)
        for offset in range(len(data)):
            tracer = TokenTracer()
            lines = [e.text for e in tracer.feed(data[:offset]) + tracer.feed(data[offset:])]
            self.assertEqual(lines, whole, offset)

    def test_largeBodyNotHeld(self) -> None:
        """A 4 MiB body is traced in 64 KiB pieces while the tracer keeps only its preview."""
        data = dumps(array.array("B", bytes(4 << 20)))
        tracer = TokenTracer()
        held = 0
        lines: list[str] = []
        for offset in range(0, len(data), 65536):
            lines += [e.text for e in tracer.feed(data[offset : offset + 65536])]
            held = max(held, tracer._scanner.buffered + len(tracer._kept))
        self.assertLessEqual(held, 64)
        self.assertIn(f"BYTES {4 << 20} bytes " + "00" * 32 + "…", lines)
