"""Tests for framing.bulk._wire: data frames streamed through the decoder, control messages."""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing import BlockBuffer, Decoder, Encoder, ProtocolError, Registry, Violation
from framing._encoder import open_token
from framing.bulk._wire import (
    ABORT,
    CANCEL,
    CONTROL_OPEN_TYPE,
    DATA_OPEN_TYPE,
    DONE,
    END,
    GRANT,
    HELLO,
    MAX_MESSAGE,
    MAX_TEXT,
    Control,
    ControlSlicer,
    ControlUnslicer,
    DataUnslicer,
    controlMessage,
    dataFramePieces,
    grantMessage,
)
from framing.slicing._constraints import Constraint
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import BYTES, CLOSE, INT, NEG, PREAMBLE, STRING, encode_header

from .support import payload


class Target:
    """Where a test's data frames go: records each piece and each frame's start."""

    def __init__(self, refuse: bool = False, fail: BaseException | None = None) -> None:
        self.pieces: list[tuple[int, bytes]] = []
        self.starts: list[tuple[int, int, int]] = []
        self.refuse = refuse
        self.fail = fail

    def starting(self, streamId: int, offset: int, length: int) -> Any:
        if self.fail is not None:
            raise self.fail
        self.starts.append((streamId, offset, length))
        return None if self.refuse else self.piece

    def piece(self, offset: int, data: bytes) -> None:
        self.pieces.append((offset, data))


def registry(target: Target) -> Registry:
    result = Registry(DEFAULT_REGISTRY)
    result.add_unslicer(DATA_OPEN_TYPE, lambda limits: DataUnslicer(limits, target.starting))
    result.add_unslicer(CONTROL_OPEN_TYPE, ControlUnslicer)
    result.add_slicer(Control, ControlSlicer())
    return result


def frame(streamId: int, offset: int, body: bytes) -> bytes:
    return b"".join(dataFramePieces(streamId, offset, body))


def feedInPieces(decoder: Decoder, data: bytes, size: int) -> list[Any]:
    results: list[Any] = []
    for start in range(0, len(data), size):
        results += decoder.feed(data[start : start + size])
    return results


class DataFrameTests(SynchronousTestCase):
    """A data frame's body goes to its stream as it arrives, never collected whole."""

    def test_bodyStreamedInPieces(self) -> None:
        """Fed 1000 bytes at a time, a 100 kB body reaches its target in pieces, with offsets, holding nothing."""
        target = Target()
        decoder = Decoder(registry=registry(target))
        body = payload(100_000)
        wire = PREAMBLE + frame(7, 5_000, body) + Encoder(registry(target)).encode([1, 2])
        results: list[Any] = []
        for start in range(0, len(wire), 1000):
            results += decoder.feed(wire[start : start + 1000])
            self.assertLessEqual(decoder.buffered, 1000)
        self.assertEqual(results, [[1, 2]])
        self.assertEqual(target.starts, [(7, 5_000, 100_000)])
        self.assertGreater(len(target.pieces), 90)
        self.assertEqual(b"".join(piece for _, piece in target.pieces), body)
        offsets = [offset for offset, _ in target.pieces]
        self.assertEqual(offsets[0], 5_000)
        self.assertEqual(offsets, sorted(offsets))

    def test_wholeReadIsNotCopied(self) -> None:
        """A read that lies wholly inside a body is handed on as the same bytes object."""
        target = Target()
        decoder = Decoder(registry=registry(target))
        body = payload(300_000)
        wire = frame(1, 0, body)
        head = len(wire) - len(body) - 1
        decoder.feed(PREAMBLE + wire[:head])
        middle = body[:100_000]
        decoder.feed(middle)
        self.assertIs(target.pieces[-1][1], middle)

    def test_droppedBody(self) -> None:
        """A frame whose stream is gone is skipped and the next object still decodes."""
        target = Target(refuse=True)
        decoder = Decoder(registry=registry(target))
        wire = PREAMBLE + frame(3, 0, payload(5000)) + Encoder().encode("after")
        self.assertEqual(feedInPieces(decoder, wire, 333), ["after"])
        self.assertEqual(target.pieces, [])

    def test_badFrameRefused(self) -> None:
        """A frame with a negative offset is refused as a Violation; the stream stays in sync."""
        target = Target()
        wire = (
            PREAMBLE
            + open_token(DATA_OPEN_TYPE)
            + encode_header(INT, 1)
            + encode_header(NEG, 4)
            + encode_header(BYTES, 3)
            + b"abc"
            + encode_header(CLOSE, 0)
            + Encoder().encode("next")
        )
        results = Decoder(registry=registry(target)).feed(wire)
        self.assertIsInstance(results[0], Violation)
        self.assertEqual(results[1], "next")
        self.assertEqual(target.pieces, [])

    def test_protocolErrorFromTarget(self) -> None:
        """A target that finds the frame breaks flow control drops the stream with its ProtocolError."""
        target = Target(fail=ProtocolError("too much"))
        decoder = Decoder(registry=registry(target))
        self.assertRaises(ProtocolError, decoder.feed, PREAMBLE + frame(1, 0, b"x" * 100))

    def test_targetBugRefusesFrame(self) -> None:
        """A target that raises anything else refuses only that frame."""
        target = Target(fail=RuntimeError("bug"))
        decoder = Decoder(registry=registry(target))
        results = decoder.feed(PREAMBLE + frame(1, 0, b"x" * 100) + Encoder().encode(5))
        self.assertIsInstance(results[0], Violation)
        self.assertEqual(results[1], 5)

    def test_plainDecoderStillDelivers(self) -> None:
        """A decoder that streams no body (one under a constraint) delivers the body whole to the same target."""
        target = Target()
        decoder = Decoder(registry=registry(target), constraint=Constraint())
        body = payload(2000)
        self.assertEqual(decoder.feed(PREAMBLE + frame(2, 10, body)), [])
        self.assertEqual(target.pieces, [(10, body)])

    def test_frameCompletesNothing(self) -> None:
        """A data frame yields nothing from feed, yet counts as a completed object and leaves a boundary."""
        target = Target()
        decoder = Decoder(registry=registry(target))
        self.assertEqual(decoder.feed(PREAMBLE + frame(2, 10, payload(2000)) * 3), [])
        self.assertTrue(decoder.at_boundary)
        self.assertEqual(decoder.objects_completed, 3)

    def test_piecesNotCopied(self) -> None:
        """A piece cut from a read that also holds another token is a read-only view into that read, not a copy."""
        target = Target()
        decoder = Decoder(registry=registry(target))
        wire = PREAMBLE + frame(1, 0, payload(3000)) + frame(1, 3000, payload(3000))
        reads = [wire[start : start + 1000] for start in range(0, len(wire), 1000)]
        for read in reads:
            decoder.feed(read)
        for _, piece in target.pieces:
            if type(piece) is memoryview:
                self.assertTrue(piece.readonly)
                self.assertTrue(any(piece.obj is read for read in reads))
            else:
                self.assertTrue(any(piece is read for read in reads))
        self.assertTrue(any(type(piece) is memoryview for _, piece in target.pieces))
        self.assertEqual(b"".join(piece for _, piece in target.pieces), payload(3000) * 2)


class ControlTests(SynchronousTestCase):
    """Control messages: small, checked, round-tripped."""

    def roundTrip(self, control: Control) -> Any:
        target = Target()
        buffer = BlockBuffer()
        buffer.write(PREAMBLE)
        Encoder(registry(target)).encode_into(control, buffer)
        return Decoder(registry=registry(target)).feed(buffer.take())

    def test_roundTrip(self) -> None:
        """A grant and an end message arrive as equal Control tuples."""
        grant = Control((GRANT, 3, 65536))
        end = Control((END, 3, 1000, b"\x01" * 32))
        self.assertEqual(self.roundTrip(grant), [grant])
        result = self.roundTrip(end)
        self.assertEqual(result, [end])
        self.assertIs(type(result[0]), Control)

    def test_grantMessageIsTheEncodedGrant(self) -> None:
        """grantMessage writes the bytes the encoder writes for the same GRANT, whatever the sizes of its values."""
        encoder = Encoder(registry(Target()))
        for streamId in (0, 1, 255, 256, 70_000, 1 << 40):
            for count in (0, 1, 15, 16, 255, 256, 65_535, 65_536, 384 << 10, 1 << 20, (1 << 32) - 1, 1 << 32, 1 << 40):
                grant = Control((GRANT, streamId, count))
                self.assertEqual(grantMessage(streamId, count), encoder.encode(grant), (streamId, count))
        self.assertEqual(
            Decoder(registry=registry(Target())).feed(PREAMBLE + grantMessage(7, 786_432)),
            [Control((GRANT, 7, 786_432))],
        )

    def test_grantMessageChecked(self) -> None:
        """A negative count or id, or one past 64 bits, is refused before anything is written."""
        for streamId, count in ((1, -1), (-1, 1), (1, 1 << 64), (1 << 64, 1)):
            self.assertRaises(ValueError, grantMessage, streamId, count)

    def test_refused(self) -> None:
        """Unknown ops, missing or extra values and oversized bodies are refused."""
        for bad in (
            Control((9, 1, 2)),
            Control((GRANT, 1)),
            Control((GRANT, 1, 2, 3)),
            Control((END, 1, 10, b"x" * 100)),
            Control((GRANT, -1, 5)),
        ):
            (result,) = self.roundTrip(bad)
            self.assertIsInstance(result, Violation, repr(bad))

    def test_valuesOfTheWrongKindRefused(self) -> None:
        """
        Each value after the stream id is of its op's kind: a NEG count
        (which would take credit back), a SIMPLE where an INT is, a STRING
        where a digest is, and so on are refused as invalid-value, and the
        stream stays in step.
        """
        for bad in (
            Control((GRANT, 1, -5)),
            Control((GRANT, 1, True)),
            Control((GRANT, 1, "100")),
            Control((END, 1, -1, None)),
            Control((END, 1, 10, "digest")),
            Control((DONE, 1, 7)),
            Control((CANCEL, 1, 5, "why")),
            Control((ABORT, 1, "code", None)),
            Control((HELLO, 0, "sha256", -1)),
            Control((HELLO, 0, b"sha256", 0)),
        ):
            (result,) = self.roundTrip(bad)
            self.assertIsInstance(result, Violation, repr(bad))
            self.assertEqual(result.code, "invalid-value", repr(bad))
        for good in (
            Control((GRANT, 1, 0)),
            Control((END, 1, 0, None)),
            Control((DONE, 1, b"\x01" * 32)),
            Control((CANCEL, 1, "code", "")),
        ):
            self.assertEqual(self.roundTrip(good), [good])

    def test_helloBytes(self) -> None:
        """A HELLO is OPEN "bulk.ctl", INT 5, INT 0, the digests as one STRING, the initial window as an INT, CLOSE."""
        hello = Control((HELLO, 0, "blake3,sha256", 1 << 20))
        wire = Encoder(registry(Target())).encode(hello)
        expected = (
            open_token(CONTROL_OPEN_TYPE)
            + encode_header(INT, HELLO)
            + encode_header(INT, 0)
            + encode_header(STRING, 13)
            + b"blake3,sha256"
            + encode_header(INT, 1 << 20)
            + encode_header(CLOSE, 0)
        )
        self.assertEqual(wire, expected)
        self.assertEqual(self.roundTrip(hello), [hello])

    def test_helloSeenAtDecodeTime(self) -> None:
        """A HELLO reaches its callback as it is decoded, before the objects after it in the same read are built."""
        seen: list[Any] = []
        target = Target()
        registry_ = registry(target)
        registry_.add_unslicer(CONTROL_OPEN_TYPE, lambda limits: ControlUnslicer(limits, seen.append))
        hello = Control((HELLO, 0, "sha256", 0))
        wire = PREAMBLE + Encoder(registry_).encode(hello) + frame(1, 0, b"abc")
        registry_.add_unslicer(DATA_OPEN_TYPE, lambda limits: DataUnslicer(limits, lambda *a: seen.append("frame")))
        self.assertEqual(Decoder(registry=registry_).feed(wire), [hello])
        self.assertEqual(seen, [hello, "frame"])

    def test_controlMessageFits(self) -> None:
        """A CANCEL or ABORT message is cut to 512 bytes of UTF-8 at a character boundary, surrogates replaced."""
        self.assertEqual(controlMessage("short"), "short")
        self.assertLessEqual(MAX_MESSAGE, MAX_TEXT)
        for text in ("é" * 600, "x" + "€" * 400, "🐍" * 300, "a\udc80b" * 200):
            message = controlMessage(text)
            size = len(message.encode("utf-8"))
            self.assertLessEqual(size, MAX_MESSAGE)
            self.assertGreater(size, MAX_MESSAGE - 4)
        self.assertEqual(controlMessage("a\udc80b"), "a?b")
        cancel = Control((CANCEL, 1, "cancelled", controlMessage("é" * 600)))
        self.assertEqual(self.roundTrip(cancel), [cancel])


class AnnouncementKindTests(SynchronousTestCase):
    """A stream announcement's id and size are INTs: a SIMPLE True or False is no id."""

    def test_simpleIdRefused(self) -> None:
        """OPEN "bulk.stream", SIMPLE True (not the id 1), INT size, none, CLOSE is refused as invalid-value."""
        from framing import Registry
        from framing.bulk._wire import STREAM_OPEN_TYPE, AnnouncementUnslicer
        from framing.wire import OPEN, SIMPLE, SIMPLE_NONE, SIMPLE_TRUE

        registry_ = Registry()
        registry_.add_unslicer(
            STREAM_OPEN_TYPE, lambda limits: AnnouncementUnslicer(limits, lambda announced: announced)
        )
        name = STREAM_OPEN_TYPE.encode()
        opened = PREAMBLE + encode_header(OPEN, len(name)) + name
        for first, expected in ((encode_header(SIMPLE, SIMPLE_TRUE), None), (encode_header(INT, 1), (1, 5, None))):
            wire = opened + first + encode_header(INT, 5) + encode_header(SIMPLE, SIMPLE_NONE) + encode_header(CLOSE, 0)
            (result,) = Decoder(registry=registry_).feed(wire)
            if expected is None:
                self.assertIsInstance(result, Violation)
                self.assertEqual(result.code, "invalid-value")
            else:
                self.assertEqual(tuple(result), expected)
