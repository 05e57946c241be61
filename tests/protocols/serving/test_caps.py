"""Tests for L{protocols.serving._caps}: a side listener's own connection cap and lifetime, and the descriptor limit."""

from __future__ import annotations

import resource

from twisted.internet.address import IPv4Address
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from protocols.serving._caps import DESCRIPTOR_HEADROOM, CappedFactory, ListenerCaps, reserveDescriptors

ADDRESS = IPv4Address("TCP", "127.0.0.1", 1234)


class AbortRecorder(StringTransport):
    """A transport that records an abort."""

    aborted = False

    def abortConnection(self) -> None:
        self.aborted = True


class CappedFactoryTests(SynchronousTestCase):
    """CappedFactory refuses connections over its cap and aborts those that outlive their lifetime."""

    def setUp(self) -> None:
        self.clock = Clock()
        caps = ListenerCaps(maxConnections=2, lifetime=5)
        self.factory = CappedFactory(Factory.forProtocol(Protocol), caps, self.clock)

    def connect(self) -> tuple[object, AbortRecorder]:
        protocol = self.factory.buildProtocol(ADDRESS)
        transport = AbortRecorder()
        if protocol is not None:
            protocol.makeConnection(transport)
        return protocol, transport

    def test_cap(self) -> None:
        """Past maxConnections a connection is refused (None) and counted; one lost makes room again."""
        first, _ = self.connect()
        self.connect()
        refused, _ = self.connect()
        self.assertIsNone(refused)
        self.assertEqual((self.factory.active, self.factory.refused), (2, 1))
        first.connectionLost(None)  # type: ignore[attr-defined]
        self.assertIsNotNone(self.connect()[0])

    def test_lifetime(self) -> None:
        """A connection still up after its lifetime is aborted; one lost before has its timer cancelled."""
        _, lingering = self.connect()
        quick, quickTransport = self.connect()
        quick.connectionLost(None)  # type: ignore[attr-defined]
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)
        self.clock.advance(4.9)
        self.assertFalse(lingering.aborted)
        self.clock.advance(0.2)
        self.assertTrue(lingering.aborted)
        self.assertFalse(quickTransport.aborted)

    def test_logPrefix(self) -> None:
        """The log names the wrapped factory, not the cap."""
        self.assertEqual(self.factory.logPrefix(), "Factory")


class ReserveDescriptorsTests(SynchronousTestCase):
    """reserveDescriptors raises the soft limit to what is needed plus headroom, within the hard limit."""

    def test_raised(self) -> None:
        """Asking for more than the soft limit raises it (as far as the hard limit goes); the original is restored."""
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        self.addCleanup(resource.setrlimit, resource.RLIMIT_NOFILE, (soft, hard))
        if soft == resource.RLIM_INFINITY:
            self.assertEqual(reserveDescriptors(10), soft)
            return
        lower = min(soft, 256)
        resource.setrlimit(resource.RLIMIT_NOFILE, (lower, hard))
        wanted = lower + 10
        expected = wanted + DESCRIPTOR_HEADROOM
        if hard != resource.RLIM_INFINITY:
            expected = min(expected, hard)
        self.assertEqual(reserveDescriptors(wanted), expected)
        self.assertEqual(resource.getrlimit(resource.RLIMIT_NOFILE)[0], expected)
        self.assertEqual(reserveDescriptors(1), expected)  # never lowered
