"""A stream in a remote interface: one hint (L{bulk.StreamArg}) both ends accept, narrowed by L{bulk.asIncoming}."""

from __future__ import annotations

from typing import Protocol

from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase

from protocols import bulk, rpc

from .support import BulkPair, negotiatedHash, payload


class IArchive(rpc.RemoteInterface, Protocol, name="test.IArchive"):
    def store(self, name: str, data: bulk.StreamArg) -> Deferred[str]: ...

    def fetch(self, name: str) -> Deferred[bulk.StreamArg]: ...


class Archive(rpc.Referenceable, IArchive):
    """Keeps what it is sent in memory, by name; hints its parameter as the interface does."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.received: list[object] = []

    @rpc.deferred
    async def store(self, name: str, data: bulk.StreamArg) -> str:
        self.received.append(data)
        pieces: list[bytes] = []
        result = await bulk.asIncoming(data).receive(pieces.append)
        self.files[name] = b"".join(pieces)
        return result.hexdigest

    @rpc.deferred
    async def fetch(self, name: str) -> bulk.StreamArg:
        return bulk.Stream(self.files[name])


class TypedStreamTests(SynchronousTestCase):
    """A typed proxy sends a Stream where the interface hints StreamArg; each end gets what it should."""

    def setUp(self) -> None:
        self.archive = Archive()
        self.pair = BulkPair(self.archive)
        self.proxy = self.pair.root.typed(IArchive)

    def test_sentStreamArrivesIncoming(self) -> None:
        """A Stream passed to the proxy reaches the method as an IncomingStream, and its bytes arrive intact."""
        data = payload(100_000)
        answer = self.proxy.store("a", bulk.Stream(data))
        self.pair.flush()
        self.assertEqual(self.successResultOf(answer), negotiatedHash(data).hexdigest())
        self.assertEqual([type(stream) for stream in self.archive.received], [bulk.IncomingStream])
        self.assertEqual(self.archive.files["a"], data)

    def test_returnedStreamArrivesIncoming(self) -> None:
        """A Stream the method returns reaches the caller as an IncomingStream, which bulk.asIncoming hands back."""
        data = payload(50_000, seed=5)
        self.archive.files["b"] = data
        answer = self.proxy.fetch("b")
        self.pair.flush()
        arrived = self.successResultOf(answer)
        stream = bulk.asIncoming(arrived)
        self.assertIs(stream, arrived)
        pieces: list[bytes] = []
        done = stream.receive(pieces.append)
        self.pair.flush()
        self.assertEqual(self.successResultOf(done).size, len(data))
        self.assertEqual(b"".join(pieces), data)

    def test_localCallRefused(self) -> None:
        """A Stream handed to the method directly, not through a connection, fails bulk.asIncoming with a TypeError."""
        called = Archive().store("c", bulk.Stream(b"local"))
        failure = self.failureResultOf(called, TypeError)
        self.assertIn("only through a connection", str(failure.value))
