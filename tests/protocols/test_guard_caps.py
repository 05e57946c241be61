"""The guard's default connection caps (a few flooding addresses leave room) and its command-line options."""

from __future__ import annotations

import argparse
from typing import Any

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.logger import Logger, formatEvent
from twisted.trial.unittest import SynchronousTestCase

from protocols.echo import EchoServer
from protocols.guard import ConnectionCounter, GuardPolicy, addGuardArguments, guard, policyFromArguments


class DefaultCapTests(SynchronousTestCase):
    """GuardPolicy's defaults and ConnectionCounter's order of checks."""

    def test_tenAddressesLeaveRoom(self) -> None:
        """Ten addresses each at the per-address cap do not fill the global cap: an eleventh address gets in."""
        policy, counter = GuardPolicy(), ConnectionCounter()
        assert policy.maxPerPeer is not None and policy.maxConnections is not None
        for n in range(10):
            for _ in range(policy.maxPerPeer):
                self.assertIsNone(counter.admit(f"127.0.0.{n + 2}", policy))
        self.assertIsNotNone(counter.admit("127.0.0.2", policy))
        self.assertIsNone(counter.admit("127.0.0.99", policy))
        self.assertGreaterEqual(policy.maxConnections, 40 * policy.maxPerPeer)

    def test_globalCapBelowDescriptorLimit(self) -> None:
        """The global cap stays below the usual 1,024 file descriptors per process."""
        self.assertLess(GuardPolicy().maxConnections or 0, 1024)

    def test_perPeerReasonFirst(self) -> None:
        """A host over its own cap is told so even when the global cap is also full."""
        policy, counter = GuardPolicy(maxConnections=2, maxPerPeer=2), ConnectionCounter()
        counter.admit("a", policy)
        counter.admit("a", policy)
        self.assertIn("per peer", counter.admit("a", policy) or "")
        self.assertIn("the limit is 2", counter.admit("b", policy) or "")
        self.assertEqual(counter.refused, 2)

    def test_releaseForgetsIdleHosts(self) -> None:
        """A host with no connection left has no entry."""
        policy, counter = GuardPolicy(), ConnectionCounter()
        counter.admit("a", policy)
        counter.release("a")
        self.assertEqual((counter.active, counter.perPeer), (0, {}))


class RefusalLogTests(SynchronousTestCase):
    """Refused connections are logged at a bounded rate, shared by the factory's connections."""

    def test_floodOfConnectionsWritesAFewLines(self) -> None:
        """A thousand refused connections write the first ten in full and one summary line, not a line each."""
        events: list[dict[str, Any]] = []
        clock = Clock()
        policy = GuardPolicy(maxConnections=1, maxPerPeer=None)
        counter = ConnectionCounter()
        protocols = []
        for _ in range(1001):
            protocol: Any = guard(EchoServer(), policy, counter, clock)
            protocol.log = Logger(observer=events.append)
            protocol.makeConnection(StringTransport())
            protocols.append(protocol)
        self.assertEqual(counter.refused, 1000)
        self.assertEqual([p.failure.value.code for p in protocols[1:]], ["too-many-connections"] * 1000)
        dropped = [e for e in events if e.get("code") == "too-many-connections"]
        self.assertEqual(len(dropped), 10)
        counter.refusals.close(protocols[0].log, "refused connections")
        summary = formatEvent(events[-1])
        self.assertIn("990 more events not logged", summary)


class ArgumentTests(SynchronousTestCase):
    """The command-line options keep their spellings and fill GuardPolicy's camelCase fields."""

    def test_flagsFillFields(self) -> None:
        """--preamble-timeout and friends set the matching GuardPolicy fields; 0 turns a rule or cap off."""
        parser = argparse.ArgumentParser()
        addGuardArguments(parser)
        args = parser.parse_args(
            ["--preamble-timeout", "2", "--idle-timeout", "0", "--min-rate", "10", "--max-per-peer", "0"]
        )
        expected = GuardPolicy(preambleTimeout=2.0, idleTimeout=None, minRate=10.0, maxPerPeer=None)
        self.assertEqual(policyFromArguments(args), expected)

    def test_defaultsAreThePolicy(self) -> None:
        """With no flags, the options describe the policy they were added from."""
        parser = argparse.ArgumentParser()
        policy = GuardPolicy(stallTimeout=7.0, maxConnections=5)
        addGuardArguments(parser, policy)
        self.assertEqual(policyFromArguments(parser.parse_args([])), policy)
