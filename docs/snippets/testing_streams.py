"""How-to: test a service's streams of objects in memory, with brokerPair and pair.collect (no reactor).

Run with ``python -m twisted.trial docs/snippets/testing_streams.py`` or ``pytest docs/snippets/testing_streams.py``.
"""

from collections.abc import AsyncIterator
from typing import Protocol

from twisted.trial.unittest import SynchronousTestCase

from protocols import rpc
from protocols.testing import brokerPair


class IPrices(rpc.RemoteInterface, Protocol, name="howto.testing.IPrices"):
    def ticks(self, count: int) -> AsyncIterator[int]: ...


class Prices(rpc.Referenceable, IPrices):
    def __init__(self):
        self.closed = 0

    @rpc.remote
    async def ticks(self, count: int) -> AsyncIterator[int]:
        try:
            for tick in range(100, 100 + count):
                yield tick
        finally:
            self.closed += 1


class PricesTests(SynchronousTestCase):
    def test_ticks(self):
        """The whole stream, from the typed proxy: collect flushes the pair before each item."""
        pair = brokerPair(Prices())
        self.assertEqual(pair.collect(pair.root.typed(IPrices).ticks(3)), [100, 101, 102])

    def test_firstTicks(self):
        """collect(stream, n) takes n items and leaves the stream open; cancel() closes the server's generator."""
        service = Prices()
        pair = brokerPair(service)
        ticks = pair.root.callRemote("ticks", 1_000_000)
        pair.flush()
        stream = self.successResultOf(ticks)
        self.assertEqual(pair.collect(stream, 2), [100, 101])
        stream.cancel()
        pair.flush()
        self.assertEqual(service.closed, 1)
