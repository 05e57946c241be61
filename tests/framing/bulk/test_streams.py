"""Tests for framing.bulk._streams: a client's bulk streams on a sans-IO session, driven with scripted server bytes."""

from __future__ import annotations

import hashlib
from typing import Any

from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from framing import Decoder, Encoder, Registry
from framing.bulk._digests import DigestUnavailable, IntegrityError
from framing.bulk._errors import FlowControlError, HelloMissing, StreamIdReused, StreamReset
from framing.bulk._states import ReceiveState, SendState
from framing.bulk._streams import (
    CHUNK_SIZE,
    GRANT_STEP,
    WINDOW,
    ClientStreams,
    IncomingTransfer,
    SendStream,
)
from framing.bulk._wire import (
    ABORT,
    CANCEL,
    CONTROL_OPEN_TYPE,
    DATA_OPEN_TYPE,
    DONE,
    END,
    GRANT,
    HELLO,
    STREAM_OPEN_TYPE,
    AnnouncementUnslicer,
    Control,
    ControlSlicer,
    ControlUnslicer,
    DataUnslicer,
    dataFramePieces,
)
from framing.rpc._session import ClientSession
from framing.rpc._wire import ANSWER, CALL, FAIL, Message, addMessageTypes
from framing.rpc._wire import CANCEL as RPC_CANCEL
from framing.slicing._interfaces import ISlicer
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import PREAMBLE


class Announce(tuple):  # type: ignore[type-arg]
    """A stream the scripted server announces: C{(id, size, digest name)}."""


@implementer(ISlicer)
class AnnounceSlicer:
    def slice(self, obj: Announce, encoder: Any) -> None:
        encoder.write_container(STREAM_OPEN_TYPE, obj, tuple(obj))


class ScriptedServer:
    """Encodes what a server sends; decodes what the client sent: messages, and frames as (id, offset, bytes)."""

    def __init__(self) -> None:
        registry = Registry(DEFAULT_REGISTRY)
        addMessageTypes(registry)
        registry.add_slicer(Control, ControlSlicer())
        registry.add_slicer(Announce, AnnounceSlicer())
        registry.add_unslicer(CONTROL_OPEN_TYPE, lambda limits: ControlUnslicer(limits))
        registry.add_unslicer(DATA_OPEN_TYPE, lambda limits: DataUnslicer(limits, self._frame))
        registry.add_unslicer(STREAM_OPEN_TYPE, lambda limits: AnnouncementUnslicer(limits, tuple))
        self.encoder = Encoder(registry)
        self.decoder = Decoder(registry=registry)
        self.frames: list[tuple[int, int, bytes]] = []

    def _frame(self, streamId: int, offset: int, length: int) -> Any:
        pieces: list[bytes] = []
        self.frames.append((streamId, offset, b""))
        index = len(self.frames) - 1

        def piece(position: int, data: Any) -> None:
            pieces.append(bytes(data))
            self.frames[index] = (streamId, offset, b"".join(pieces))

        return piece

    def read(self, data: bytes) -> list[Any]:
        """The client's messages in C{data} (its preamble read by the decoder)."""
        return self.decoder.feed(data)

    def send(self, *objects: Any) -> bytes:
        return b"".join(self.encoder.encode(obj) for obj in objects)


class Source:
    """A source of C{data}, in order."""

    def __init__(self, data: bytes) -> None:
        self.data, self.position = data, 0

    def available(self) -> int:
        return len(self.data) - self.position

    def take(self, count: int) -> tuple[int, bytes]:
        start = self.position
        self.position += min(count, self.available())
        return start, self.data[start : self.position]


class Sink:
    def __init__(self) -> None:
        self.pieces: list[tuple[int, bytes]] = []

    def write(self, offset: int, data: Any) -> None:
        self.pieces.append((offset, bytes(data)))


def opened() -> tuple[ClientSession[Any], ClientStreams, ScriptedServer]:
    streams = ClientStreams(["sha256"])
    session: ClientSession[Any] = ClientSession("server:1", extension=streams)
    server = ScriptedServer()
    server.read(session.start())
    session.receive(PREAMBLE)
    return session, streams, server


class SendingTests(SynchronousTestCase):
    """A stream passed in a call: announced, sent within credit, ended with its digest."""

    def test_helloFirstThenCredit(self) -> None:
        """HELLO precedes the first CALL; the data waits for the server's HELLO, goes within its window, then END."""
        session, streams, server = opened()
        data = bytes(range(256)) * 40
        stream = SendStream(Source(data), len(data))
        _, sent = session.call("waiter", 0, "put", ("name", stream), {})
        hello, call = server.read(sent)
        self.assertEqual((hello[0], hello[3]), (HELLO, 0))
        self.assertEqual((call[0], call[3], call[4][1]), (CALL, "put", (1, len(data), "*")))
        self.assertEqual(stream.state, SendState.ANNOUNCED)
        self.assertEqual(session.dataToSend(), b"")
        session.receive(server.send(Control((HELLO, 0, "blake3,sha256", 4000))))
        self.assertEqual(server.read(session.dataToSend()), [])
        self.assertEqual([(i, o, len(b)) for i, o, b in server.frames], [(1, 0, 4000)])
        self.assertEqual(stream.digestName, "sha256")
        session.receive(server.send(Control((GRANT, 1, 10000))))
        (end,) = server.read(session.dataToSend())
        self.assertEqual(b"".join(body for _, _, body in server.frames), data)
        self.assertEqual(tuple(end), (END, 1, len(data), hashlib.sha256(data).digest()))
        self.assertEqual((stream.state, stream.sentBytes), (SendState.ENDED, len(data)))
        session.receive(server.send(Control((DONE, 1, None))))
        self.assertEqual(stream.state, SendState.DELIVERED)

    def test_helloAnswered(self) -> None:
        """A server's HELLO that comes before any call is answered with this side's, once; the first CALL then goes
        without one (Hello.first: a side's HELLO goes once, first)."""
        session, streams, server = opened()
        session.receive(server.send(Control((HELLO, 0, "sha256", 0))))
        (hello,) = server.read(session.dataToSend())
        self.assertEqual((hello[0], hello[2]), (HELLO, "sha256"))
        session.receive(server.send(Control((HELLO, 0, "sha256", 0))))
        self.assertEqual(session.dataToSend(), b"")
        _, sent = session.call("waiter", 0, "put", ("name",), {})
        self.assertEqual([message[0] for message in server.read(sent)], [CALL])

    def test_namedDigestRefusedByHello(self) -> None:
        """A stream announced before the server's HELLO with a digest the HELLO lacks is given up when it comes:
        ABORT digest-unavailable, no data (5.5; SendSide.helloKnown, as the Twisted sender)."""
        session, streams, server = opened()
        stream = SendStream(Source(b"x" * 100), 100, "sha256")
        _, sent = session.call("waiter", 0, "put", ("name", stream), {})
        server.read(sent)
        session.receive(server.send(Control((HELLO, 0, "blake3", 4000))))
        (abort,) = server.read(session.dataToSend())
        self.assertEqual(tuple(abort[:3]), (ABORT, 1, "digest-unavailable"))
        self.assertEqual((stream.state, type(stream.failure), server.frames), (SendState.FAILED, DigestUnavailable, []))

    def test_grantsReadTogetherMakeOneFrame(self) -> None:
        """
        The GRANTs of one read make one frame of the credit they give
        together (up to a chunk), as the Twisted sender's do in one reactor
        turn, not one frame each: the frames go when the session's output
        is next asked for.  A GRANT read alone is sent on at once.
        """
        session, streams, server = opened()
        data = bytes(range(256)) * (12 * 1024)  # 3 MiB
        stream = SendStream(Source(data), len(data))
        server.read(session.call("waiter", 0, "put", ("name", stream), {})[1])
        session.receive(server.send(Control((HELLO, 0, "sha256", CHUNK_SIZE))))
        server.read(session.dataToSend())
        half = CHUNK_SIZE // 2
        session.receive(server.send(Control((GRANT, 1, half)), Control((GRANT, 1, half))))
        server.read(session.dataToSend())
        session.receive(server.send(Control((GRANT, 1, half))))
        server.read(session.dataToSend())
        self.assertEqual([len(body) for _, _, body in server.frames], [CHUNK_SIZE, CHUNK_SIZE, half])
        self.assertEqual(b"".join(body for _, _, body in server.frames), data[: len(data) - half])

    def test_piecesCarryBodiesByReference(self) -> None:
        """
        C{piecesToSend} gives the session's output as pieces, each data
        frame's body the very object its source gave (not copied into a
        joined buffer), the same bytes in the same order as C{dataToSend}.
        """
        session, streams, server = opened()
        data = bytes(range(256)) * 40
        source = Source(data)
        taken: list[bytes] = []
        take = source.take

        def recorded(count: int) -> tuple[int, bytes]:
            offset, body = take(count)
            taken.append(body)
            return offset, body

        source.take = recorded  # type: ignore[method-assign]
        server.read(session.call("waiter", 0, "put", ("name", SendStream(source, len(data))), {})[1])
        session.receive(server.send(Control((HELLO, 0, "sha256", 4000)), Control((GRANT, 1, 10000))))
        pieces = session.piecesToSend()
        self.assertEqual(len(taken), 2)
        for body in taken:
            self.assertTrue(any(piece is body for piece in pieces), "a body was copied into a joined buffer")
        (end,) = server.read(b"".join(pieces))
        self.assertEqual(b"".join(body for _, _, body in server.frames), data)
        self.assertEqual((session.piecesToSend(), session.dataToSend()), ([], b""))


class CallFailureTests(SynchronousTestCase):
    """5.5.2: a stream whose CALL fails before any GRANT for it is given up; once granted it goes on, unless the
    call is cancelled (SendSide.callFailure, as the Twisted sender)."""

    def sent(self, window: int) -> tuple[ClientSession[Any], ScriptedServer, SendStream, int]:
        session, streams, server = opened()
        stream = SendStream(Source(b"x" * 100_000), 100_000, None)
        requestId, sent = session.call("waiter", 0, "put", ("name", stream), {})
        server.read(sent)
        session.receive(server.send(Control((HELLO, 0, "sha256", window))))
        server.read(session.dataToSend())
        return session, server, stream, requestId

    def fail(self, session: ClientSession[Any], server: ScriptedServer, requestId: int) -> list[Any]:
        session.receive(server.send(Message((FAIL, requestId, "Violation", "refused", None, None))))
        return server.read(session.dataToSend())

    def test_unheardNotStarted(self) -> None:
        """Announced, nothing sent (no window): it fails, and no ABORT goes (the server may never have seen it)."""
        session, server, stream, requestId = self.sent(0)
        self.assertEqual(self.fail(session, server, requestId), [])
        self.assertEqual((stream.state, type(stream.failure)), (SendState.FAILED, StreamReset))

    def test_unheardSending(self) -> None:
        """Sending on the initial window, never granted: it fails with ABORT cancelled."""
        session, server, stream, requestId = self.sent(4000)
        self.assertEqual(stream.state, SendState.SENDING)
        (abort,) = self.fail(session, server, requestId)
        self.assertEqual(tuple(abort[:3]), (ABORT, 1, "cancelled"))
        self.assertEqual(stream.state, SendState.FAILED)

    def test_heardGoesOn(self) -> None:
        """Once a GRANT came, the stream goes on whatever became of the call."""
        session, server, stream, requestId = self.sent(4000)
        session.receive(server.send(Control((GRANT, 1, 4000))))
        server.read(session.dataToSend())
        self.fail(session, server, requestId)
        self.assertEqual(stream.state, SendState.SENDING)

    def test_heardCancelled(self) -> None:
        """The caller cancelling the call gives a heard stream up too: ABORT cancelled, with the CANCEL."""
        session, server, stream, requestId = self.sent(4000)
        session.receive(server.send(Control((GRANT, 1, 4000))))
        server.read(session.dataToSend())
        cancel, abort = server.read(session.cancel(requestId))
        self.assertEqual((cancel[0], tuple(abort[:3])), (RPC_CANCEL, (ABORT, 1, "cancelled")))
        self.assertEqual(stream.state, SendState.FAILED)


class ReceivingTests(SynchronousTestCase):
    """A stream in an answer: granted when received, checked at its END, its waiter settled."""

    def announced(self, digest: str | None = "sha256") -> tuple[ClientSession[Any], ClientStreams, ScriptedServer, Any]:
        session, streams, server = opened()
        _, sent = session.call("call", 0, "get", ("name",), {})
        server.read(sent)
        settled = session.receive(
            server.send(Control((HELLO, 0, "sha256", 0)), Message((ANSWER, 1, Announce((1, 10, digest)))))
        )
        ((waiter, incoming, error),) = settled
        self.assertIsInstance(incoming, IncomingTransfer)
        return session, streams, server, incoming

    def test_checkedAndDone(self) -> None:
        """Receiving sends a GRANT of the window; at END with the right digest, DONE goes and the waiter settles."""
        session, streams, server, incoming = self.announced()
        sink = Sink()
        self.assertEqual(streams.startReceiving(incoming, sink, "receiver"), [])
        (grant,) = server.read(session.dataToSend())
        self.assertEqual(tuple(grant), (GRANT, 1, WINDOW))
        frame = b"".join(dataFramePieces(1, 0, b"0123456789"))
        digest = hashlib.sha256(b"0123456789").digest()
        settled = session.receive(frame + server.send(Control((END, 1, 10, digest))))
        self.assertEqual(settled, [("receiver", (10, digest), None)])
        self.assertEqual(sink.pieces, [(0, b"0123456789")])
        (done,) = server.read(session.dataToSend())
        self.assertEqual(tuple(done), (DONE, 1, digest))

    def test_digestMismatch(self) -> None:
        """An END whose digest is not the data's settles the waiter with IntegrityError and sends CANCEL integrity."""
        session, streams, server, incoming = self.announced()
        streams.startReceiving(incoming, Sink(), "receiver")
        session.dataToSend()
        frame = b"".join(dataFramePieces(1, 0, b"0123456789"))
        settled = session.receive(frame + server.send(Control((END, 1, 10, b"\x00" * 32))))
        ((waiter, result, error),) = settled
        self.assertIsInstance(error, IntegrityError)
        self.assertEqual(incoming.state, ReceiveState.FAILED)
        (cancel,) = server.read(session.dataToSend())
        self.assertEqual(cancel[:3], (CANCEL, 1, "integrity"))

    def test_sizeMismatch(self) -> None:
        """An END stating another size than was received, for a stream with a digest, sends CANCEL size (5.5.4) and
        settles the waiter with StreamReset, as the Twisted receiver does (framing.bulk._connection.endSize)."""
        session, streams, server, incoming = self.announced()
        streams.startReceiving(incoming, Sink(), "receiver")
        session.dataToSend()
        frame = b"".join(dataFramePieces(1, 0, b"01234"))
        digest = hashlib.sha256(b"01234").digest()
        ((waiter, result, error),) = session.receive(frame + server.send(Control((END, 1, 10, digest))))
        self.assertEqual((type(error), error.code), (StreamReset, "size"))  # type: ignore[union-attr]
        (cancel,) = server.read(session.dataToSend())
        self.assertEqual(cancel[:3], (CANCEL, 1, "size"))

    def test_pastCredit(self) -> None:
        """A frame past the credit granted ends the session with FlowControlError; the receiver fails with it."""
        session, streams, server, incoming = self.announced(None)
        streams.startReceiving(incoming, Sink(), "receiver")
        frame = b"".join(dataFramePieces(1, 0, b"x" * (WINDOW + GRANT_STEP)))
        settled = session.receive(frame)
        self.assertIsInstance(session.failure, FlowControlError)
        self.assertIn("receiver", [waiter for waiter, _, _ in settled])

    def test_stopReceiving(self) -> None:
        """
        A receiver that stops (its wait was cancelled) sends CANCEL
        cancelled, its waiter settles with StreamReset, and data after it is
        dropped unread; stopping again, or a stream never received, does nothing.
        """
        session, streams, server, incoming = self.announced()
        sink = Sink()
        streams.startReceiving(incoming, sink, "receiver")
        session.dataToSend()
        session.receive(b"".join(dataFramePieces(1, 0, b"01234")))
        ((waiter, result, error),) = streams.stopReceiving(incoming)
        self.assertEqual((waiter, result, type(error)), ("receiver", None, StreamReset))
        (cancel,) = server.read(session.dataToSend())
        self.assertEqual(cancel[:3], (CANCEL, 1, "cancelled"))
        self.assertEqual(session.receive(b"".join(dataFramePieces(1, 5, b"56789"))), [])
        self.assertEqual((sink.pieces, session.dataToSend()), ([(0, b"01234")], b""))
        self.assertEqual(streams.stopReceiving(incoming), [])
        other, others, _, unread = self.announced()
        self.assertEqual((others.stopReceiving(unread), other.dataToSend()), ([], b""))

    def test_nothingBeforeReceiving(self) -> None:
        """Data for a stream nobody receives yet is dropped unread (the window stated is 0) and grants nothing."""
        session, streams, server, incoming = self.announced(None)
        session.receive(b"".join(dataFramePieces(1, 0, b"x")))
        self.assertIsNone(session.failure)
        self.assertEqual((incoming.receivedBytes, session.dataToSend()), (0, b""))

    def test_announcedBeforeHello(self) -> None:
        """
        A stream announced before the server's HELLO breaks 5.5's order: the
        answer carrying it fails its call with HelloMissing (a Violation,
        hello-missing); the session stays open, and the same answer after
        the HELLO is taken.
        """
        session, streams, server = opened()
        _, sent = session.call("call", 0, "get", ("name",), {})
        server.read(sent)
        ((waiter, result, error),) = session.receive(server.send(Message((ANSWER, 1, Announce((1, 10, "sha256"))))))
        self.assertIsInstance(error, HelloMissing)
        self.assertEqual(error.code, "hello-missing")
        self.assertIsNone(session.failure)
        _, sent = session.call("again", 0, "get", ("name",), {})
        server.read(sent)
        settled = session.receive(
            server.send(Control((HELLO, 0, "sha256", 0)), Message((ANSWER, 2, Announce((2, 10, "sha256")))))
        )
        self.assertIsInstance(settled[0][1], IncomingTransfer)

    def test_streamIdReused(self) -> None:
        """A second announcement with an id not above the last ends the session with StreamIdReused."""
        session, streams, server, incoming = self.announced()
        _, sent = session.call("again", 0, "get", ("name",), {})
        session.receive(server.send(Message((ANSWER, 2, Announce((1, 10, "sha256"))))))
        self.assertIsInstance(session.failure, StreamIdReused)
