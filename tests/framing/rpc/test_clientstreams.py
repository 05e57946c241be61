"""The sans-IO reading of object streams by a client session (L{framing.rpc._clientstreams}), with bytes by hand."""

from __future__ import annotations

import gc
from typing import Any

from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from framing import Decoder, Encoder, EncodingError, Registry
from framing.rpc._clientstreams import StreamArgumentRefused
from framing.rpc._errors import RemoteError
from framing.rpc._session import ClientSession, SessionState
from framing.rpc._streams import (
    ANNOUNCE_OPEN_TYPE,
    CANCEL,
    CREDIT,
    DEFAULT_WINDOW,
    DEFAULT_WINDOW_BYTES,
    END,
    ERROR,
    ITEM,
    EndCountMismatch,
    FlowMessage,
    ItemCreditExceeded,
    ObjectStreamIdReused,
    addFlowTypes,
)
from framing.rpc._streamtable import ReceivedStream
from framing.rpc._wire import ANSWER, Message, addMessageTypes
from framing.slicing._interfaces import ISlicer
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import PREAMBLE

PEER = "127.0.0.1:8760"


class Announced(tuple):  # type: ignore[type-arg]
    """A stream's announcement as the server writes it: C{(streamId,)}."""


@implementer(ISlicer)
class AnnouncedSlicer:
    def slice(self, obj: Any, encoder: Any) -> None:
        encoder.write_container(ANNOUNCE_OPEN_TYPE, obj, obj)


REGISTRY = Registry(DEFAULT_REGISTRY)
addMessageTypes(REGISTRY)
addFlowTypes(REGISTRY)
REGISTRY.add_slicer(Announced, AnnouncedSlicer())


class Server:
    """The server's side by hand: the bytes it sends, the flow messages it reads."""

    def __init__(self) -> None:
        self.decoder = Decoder(registry=REGISTRY)
        self.encoder = Encoder(REGISTRY)

    def send(self, *messages: Any) -> bytes:
        return b"".join(self.encoder.encode(message) for message in messages)

    def read(self, data: bytes) -> list[Any]:
        return self.decoder.feed(data)


def streamed(streamId: int = 1) -> tuple[ClientSession[str], Server, ReceivedStream, list[Any]]:
    """A session that made call 1, answered with stream C{streamId}: the stream, and what the server read."""
    session: ClientSession[str] = ClientSession(PEER)
    server = Server()
    server.read(session.start())
    session.receive(PREAMBLE)
    _, data = session.call("call", 0, "count", (), {})
    server.read(data)
    settled = session.receive(server.send(Message((ANSWER, 1, Announced((streamId,))))))
    [(waiter, stream, error)] = settled
    assert waiter == "call" and error is None
    return session, server, stream, server.read(session.dataToSend())


def items(streamId: int, *values: Any) -> FlowMessage:
    return FlowMessage((ITEM, streamId, *values))


class ReadingTests(SynchronousTestCase):
    """A stream in an answer: credit, items, the end."""

    def test_firstCredit(self) -> None:
        """The announcement decodes as the session's reader; the whole window is granted at once."""
        session, _, stream, sent = streamed()
        self.assertIsInstance(stream, ReceivedStream)
        self.assertEqual(sent, [FlowMessage((CREDIT, 1, DEFAULT_WINDOW, DEFAULT_WINDOW_BYTES))])
        self.assertEqual(session.objectStreams.streamCount, 1)

    def test_itemsWakeWaiterCreditInSteps(self) -> None:
        """Items wake the waiting consumer; credit goes back a quarter window at a time as items are taken."""
        session, server, stream, _ = streamed()
        stream.waiter = "consumer"
        settled = session.receive(server.send(items(1, *range(DEFAULT_WINDOW))))
        self.assertEqual(settled, [("consumer", None, None)])
        self.assertIsNone(stream.waiter)
        streams = session.objectStreams
        taken = [streams.take(stream) for _ in range(DEFAULT_WINDOW // 4 - 1)]
        self.assertEqual(server.read(session.dataToSend()), [])
        taken.append(streams.take(stream))
        self.assertEqual(taken, list(range(DEFAULT_WINDOW // 4)))
        self.assertEqual(
            server.read(session.dataToSend()), [FlowMessage((CREDIT, 1, DEFAULT_WINDOW // 4, DEFAULT_WINDOW_BYTES))]
        )

    def test_endAfterItems(self) -> None:
        """END: the items held are still taken, then the stream is finished."""
        session, server, stream, _ = streamed()
        session.receive(server.send(items(1, "a", "b"), FlowMessage((END, 1, 2))))
        self.assertTrue(stream.ended)
        self.assertFalse(stream.finished)
        self.assertEqual([session.objectStreams.take(stream) for _ in range(2)], ["a", "b"])
        self.assertTrue(stream.finished)
        self.assertEqual(session.objectStreams.streamCount, 0)

    def test_endCountingMessagesFails(self) -> None:
        """
        An END that counts other than the items that arrived (here the ITEM
        messages, 2, for 3 items) fails the stream after its items
        (EndCountMismatch); the session stays open.
        """
        session, server, stream, _ = streamed()
        session.receive(server.send(items(1, "a", "b"), items(1, "c"), FlowMessage((END, 1, 2))))
        self.assertFalse(stream.ended)
        self.assertIsInstance(stream.error, EndCountMismatch)
        self.assertEqual([session.objectStreams.take(stream) for _ in range(3)], ["a", "b", "c"])
        self.assertIs(session.state, SessionState.OPEN)

    def test_errorAfterItems(self) -> None:
        """ERROR: rebuilt as a FAIL's error, after the items held."""
        session, server, stream, _ = streamed()
        stream.waiter = "consumer"
        settled = session.receive(
            server.send(items(1, 7), FlowMessage((ERROR, 1, "builtins.ValueError", "broke", None)))
        )
        self.assertEqual(settled, [("consumer", None, None)])
        self.assertEqual(session.objectStreams.take(stream), 7)
        self.assertIsInstance(stream.error, RemoteError)
        self.assertIn("broke", str(stream.error))

    def test_cancel(self) -> None:
        """cancel() drops the items held and sends CANCEL once; the server's later items are ignored."""
        session, server, stream, _ = streamed()
        session.receive(server.send(items(1, 1, 2)))
        session.objectStreams.cancel(stream)
        session.objectStreams.cancel(stream)
        self.assertEqual(server.read(session.dataToSend()), [FlowMessage((CANCEL, 1))])
        self.assertEqual(session.receive(server.send(items(1, 3))), [])
        self.assertEqual(len(stream.buffer), 0)
        self.assertIs(session.state, SessionState.OPEN)

    def test_droppedReaderCancelled(self) -> None:
        """A reader dropped unfinished has its CANCEL in the next output; the streamDropped hook is told."""
        told: list[bool] = []
        session: ClientSession[str] = ClientSession(PEER, streamDropped=lambda: told.append(True))
        server = Server()
        server.read(session.start())
        session.receive(PREAMBLE)
        session.call("call", 0, "count", (), {})
        session.receive(server.send(Message((ANSWER, 1, Announced((1,))))))
        gc.collect()
        self.assertEqual(told, [True])
        self.assertEqual(server.read(session.dataToSend())[-1], FlowMessage((CANCEL, 1)))

    def test_endOfSessionFailsStream(self) -> None:
        """The session's end fails every stream with the reason, its waiting consumer settled."""
        session, _, stream, _ = streamed()
        stream.waiter = "consumer"
        reason = ConnectionError("gone")
        self.assertEqual(session.end(reason), [("consumer", None, None)])
        self.assertIs(stream.error, reason)


class BadInputTests(SynchronousTestCase):
    """A server that breaks the streams' rules ends the session with a typed error."""

    def test_pastTheWindow(self) -> None:
        """More items than granted: ItemCreditExceeded ends the session (and fails the stream)."""
        session, server, stream, _ = streamed()
        session.receive(server.send(items(1, *range(DEFAULT_WINDOW + 1))))
        self.assertIs(session.state, SessionState.ENDED)
        self.assertIsInstance(session.failure, ItemCreditExceeded)
        self.assertIs(stream.error, session.failure)

    def test_idReused(self) -> None:
        """A stream id not above the last one ends the session with ObjectStreamIdReused."""
        session, server, _, _ = streamed(5)
        session.call("again", 0, "count", (), {})
        session.receive(server.send(Message((ANSWER, 2, Announced((5,))))))
        self.assertIs(session.state, SessionState.ENDED)
        self.assertIsInstance(session.failure, ObjectStreamIdReused)

    def test_streamArgumentRefused(self) -> None:
        """A generator in a call's arguments is refused with StreamArgumentRefused; nothing is kept."""
        session, _, _, _ = streamed()
        with self.assertRaises(StreamArgumentRefused):
            session.call("gen", 0, "total", ((n for n in range(3)),), {})
        self.assertEqual(len(session), 0)  # (the first call was answered; the refused one is not kept)


async def _numbers() -> Any:
    yield 1


class SendingTests(SynchronousTestCase):
    """Streams a session sends in a call's arguments (given C{streamSending}: the asyncio client's)."""

    def opened(self) -> tuple[ClientSession[str], Server, list[Any]]:
        told: list[Any] = []
        session: ClientSession[str] = ClientSession(PEER, streamSending=told.append)
        server = Server()
        server.read(session.start())
        session.receive(PREAMBLE)
        return session, server, told

    def test_announcedCreditedSentEnded(self) -> None:
        """Live once the CALL is encoded; CREDIT wakes the puller; items go as ITEMs, then END; the I/O layer told."""
        session, server, told = self.opened()
        source = _numbers()
        _, data = session.call("call", 0, "total", (source,), {})
        [producer] = told
        self.assertIs(producer.source, source)
        self.assertFalse(producer.window.open())
        producer.waiter = "puller"
        settled = session.receive(server.send(FlowMessage((CREDIT, producer.streamId, 2, 1000))))
        self.assertEqual(settled, [("puller", None, None)])
        self.assertTrue(producer.window.open())
        streams = session.objectStreams
        streams.itemReady(producer, 7)
        streams.endSending(producer)
        self.assertEqual(
            server.read(session.dataToSend()),
            [FlowMessage((ITEM, producer.streamId, 7)), FlowMessage((END, producer.streamId, 1))],
        )
        self.assertEqual(told, [producer, producer])
        self.assertTrue(producer.over)
        source.aclose().close()

    def test_cancelledByServer(self) -> None:
        """The server's CANCEL ends the stream: over, the I/O layer told (it stops pulling), nothing more sent."""
        session, server, told = self.opened()
        session.call("call", 0, "firstThree", (_numbers(),), {})
        [producer] = told
        session.receive(server.send(FlowMessage((CANCEL, producer.streamId))))
        self.assertTrue(producer.over)
        self.assertEqual(told, [producer, producer])
        session.objectStreams.itemReady(producer, 1)
        self.assertEqual(session.dataToSend(), b"")

    def test_rolledBack(self) -> None:
        """A CALL that fails to encode after announcing a stream: the stream never goes live."""
        session, _, told = self.opened()
        source = _numbers()
        with self.assertRaises(EncodingError):
            session.call("call", 0, "total", (source, object()), {})
        self.assertEqual(told, [])
        self.assertEqual(session.objectStreams.announcing, [])
        source.aclose().close()
