"""Tests for L{protocols.rpc._listening}: a ServingPort is Twisted's port plus the factory of brokers it serves."""

from __future__ import annotations

from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.defer import Deferred, succeed
from twisted.trial.unittest import SynchronousTestCase

from protocols.rpc import BrokerFactory
from protocols.rpc._listening import ServingPort


class Port:
    """Stands for the port a Twisted endpoint listens with."""

    connected = 3

    def __init__(self) -> None:
        self.stopped = 0

    def getHost(self) -> IPv4Address:
        return IPv4Address("TCP", "127.0.0.1", 4321)

    def stopListening(self) -> Deferred[None]:
        self.stopped += 1
        return succeed(None)

    def __repr__(self) -> str:
        return "<Port>"


class ServingPortTests(SynchronousTestCase):
    """ServingPort answers for its port, and keeps the factory whatever wrapped it."""

    def test_port(self) -> None:
        """getHost and stopListening are the port's; other attributes too; the factory is the one given."""
        port = Port()
        factory: Any = BrokerFactory(None)
        serving = ServingPort(port, factory)
        self.assertEqual(serving.getHost().port, 4321)
        self.assertIsNone(self.successResultOf(serving.stopListening()))
        self.assertEqual(port.stopped, 1)
        self.assertEqual(serving.connected, 3)
        self.assertIs(serving.factory, factory)
        self.assertEqual(repr(serving), "<ServingPort <Port>>")

    def test_drainWithoutConnections(self) -> None:
        """drain stops listening and, with no connection up, fires at once."""
        port = Port()
        serving = ServingPort(port, BrokerFactory(None))
        self.assertIsNone(self.successResultOf(serving.drain(grace=1.0)))
        self.assertEqual(port.stopped, 1)
