"""How-to: test a protocol with protocols.testing, under trial and under pytest-twisted.

Run with ``python -m twisted.trial docs/snippets/testing_example.py`` or ``pytest docs/snippets/testing_example.py``.
"""

import pytest_twisted
from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase, TestCase

from protocols.echo import EchoClient, EchoServer
from protocols.testing import connectedPair, loopbackTCP


class EchoInMemoryTests(SynchronousTestCase):
    """No reactor: both runners collect SynchronousTestCase classes."""

    def test_echo(self):
        """The echo server answers with the same object, in one write."""
        pair = connectedPair(EchoServer(), EchoClient())
        answer = pair.client.echo({"id": 7})
        pair.flush()  # deliver everything written, both ways
        self.assertEqual(self.successResultOf(answer), {"id": 7})
        self.assertEqual(len(pair.clientTransport.writes), 2)  # the preamble, then the request


async def echoOverTCP(reactor):
    pair = await loopbackTCP(reactor, EchoServer(), EchoClient())
    try:
        return await pair.client.echo([1, 2.5, b"x"])
    finally:
        await pair.close()


class EchoTCPTests(TestCase):
    """trial spins the reactor for a TestCase that returns a Deferred."""

    def test_echoOverTCP(self):
        """The echo server answers over a real loopback connection."""
        from twisted.internet import reactor

        d = Deferred.fromCoroutine(echoOverTCP(reactor))
        return d.addCallback(self.assertEqual, [1, 2.5, b"x"])


@pytest_twisted.ensureDeferred
async def test_echo_over_tcp():
    """Under pytest, pytest-twisted runs the reactor; await the same coroutine."""
    from twisted.internet import reactor

    assert await echoOverTCP(reactor) == [1, 2.5, b"x"]
