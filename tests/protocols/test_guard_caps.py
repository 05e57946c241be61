"""The guard's default connection caps (a few flooding addresses leave room) and its command-line options."""

from __future__ import annotations

import argparse
from typing import Any

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.logger import Logger, formatEvent
from twisted.trial.unittest import SynchronousTestCase

from protocols._guard import ConnectionCounter, GuardPolicy, addGuardArguments, guard, policyFromArguments
from protocols.echo import EchoServer

from .helpers import cancelDropTimers


class HeldBytesPoolTests(SynchronousTestCase):
    """A guarded listener's connections share one ledger pool of GuardPolicy.maxHeldBytes."""

    def connect(self, policy: GuardPolicy, counter: ConnectionCounter) -> Any:
        protocol = guard(EchoServer(), policy, counter, Clock())
        transport = StringTransport()
        protocol.makeConnection(transport)
        return protocol, transport

    def test_sharedBudget(self) -> None:
        """Two connections within their own budgets but together over the listener's both stop reading, then resume."""
        policy, counter = GuardPolicy(maxHeldBytes=1000), ConnectionCounter()
        (first, firstWire), (second, secondWire) = self.connect(policy, counter), self.connect(policy, counter)
        self.assertIs(first.ledger.pool, second.ledger.pool)
        first.ledger.charge("test", 600)
        second.ledger.charge("test", 600)
        self.assertEqual(secondWire.producerState, "paused")
        first.ledger.charge("test", 1)
        self.assertEqual(firstWire.producerState, "paused")
        second.ledger.release("test", 600)
        self.assertEqual((firstWire.producerState, secondWire.producerState), ("producing", "producing"))

    def test_option(self) -> None:
        """--max-held-bytes sets it; 0 turns it off."""
        parser = argparse.ArgumentParser()
        addGuardArguments(parser)
        self.assertEqual(policyFromArguments(parser.parse_args([])).maxHeldBytes, 32 * 1024 * 1024)
        self.assertEqual(policyFromArguments(parser.parse_args(["--max-held-bytes", "5"])).maxHeldBytes, 5)
        self.assertIsNone(policyFromArguments(parser.parse_args(["--max-held-bytes", "0"])).maxHeldBytes)


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

    def setUp(self) -> None:
        self.addCleanup(cancelDropTimers)

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


class FairEvictionTests(SynchronousTestCase):
    """When full and nothing is idle, the address holding the most gives up a connection to one holding fewer."""

    def setUp(self) -> None:
        self.addCleanup(cancelDropTimers)
        self.clock = Clock()
        self.counter = ConnectionCounter()

    def connect(self, host: str, policy: GuardPolicy) -> Any:
        from twisted.internet.address import IPv4Address

        protocol: Any = guard(EchoServer(), policy, self.counter, self.clock)
        protocol.makeConnection(StringTransport(peerAddress=IPv4Address("TCP", host, 4000)))
        return protocol

    def fill(self, policy: GuardPolicy) -> list[Any]:
        """Eight connections from a, two from b: every slot of ten taken, none idle enough to evict."""
        # Kept for the test's life: the counter holds their guards, which hold their protocols weakly.
        self.held = [self.connect(host, policy) for host in "a" * 8 + "b" * 2]
        return self.held

    def test_newAddressEvictsFromTheBusiest(self) -> None:
        """A new address gets in by dropping the least recently active connection of the address holding the most."""
        policy = GuardPolicy(maxConnections=10, maxPerPeer=8, newPeerReserve=0, evictIdleAfter=None)
        held = self.fill(policy)
        self.counter.touched(held[0].guard)  # a's first is now its most recently active: its second goes
        newcomer = self.connect("c", policy)
        self.assertIsNone(newcomer.failure)
        self.assertEqual(held[1].failure.value.code, "evicted-fair")
        self.assertEqual([p.failure for p in held if p is not held[1]], [None] * 9)
        self.assertEqual(self.counter.perPeer, {"a": 7, "b": 2, "c": 1})
        self.assertEqual((self.counter.active, self.counter.evictedFair), (10, 1))

    def test_convergesOnAnEqualShare(self) -> None:
        """b's newcomers take a's slots only while b holds at least two fewer; then they are refused."""
        policy = GuardPolicy(maxConnections=10, maxPerPeer=8, newPeerReserve=0, evictIdleAfter=None)
        self.fill(policy)
        results = [self.connect("b", policy).failure for _ in range(4)]
        self.assertEqual(results[:3], [None] * 3)
        self.assertEqual(results[3].value.code, "too-many-connections")
        self.assertEqual(self.counter.perPeer, {"a": 5, "b": 5})

    def test_offByOption(self) -> None:
        """fairEviction=False keeps the old rule: full and nothing idle, a newcomer is refused."""
        policy = GuardPolicy(maxConnections=10, maxPerPeer=8, newPeerReserve=0, evictIdleAfter=None, fairEviction=False)
        self.fill(policy)
        self.assertEqual(self.connect("c", policy).failure.value.code, "too-many-connections")

    def test_idleFirst(self) -> None:
        """A connection idle long enough is evicted before any fair eviction."""
        policy = GuardPolicy(maxConnections=10, maxPerPeer=8, newPeerReserve=0, evictIdleAfter=1.0)
        held = self.fill(policy)
        self.clock.advance(2)
        self.assertIsNone(self.connect("c", policy).failure)
        self.assertEqual(held[0].failure.value.code, "evicted-idle")
        self.assertEqual(self.counter.evictedFair, 0)

    def test_bucketsFollowCounts(self) -> None:
        """After any admissions and releases, the busiest count kept is the largest of perPeer's."""
        import random

        policy = GuardPolicy(maxConnections=None, maxPerPeer=None)
        chooser, up = random.Random(7), []
        for _ in range(2000):
            if up and chooser.random() < 0.45:
                self.counter.release(up.pop(chooser.randrange(len(up))))
            else:
                host = f"h{chooser.randrange(12)}"
                self.assertIsNone(self.counter.admit(host, policy))
                up.append(host)
            self.assertEqual(self.counter._most, max(self.counter.perPeer.values(), default=0))


class AwaitingHeaderTests(SynchronousTestCase):
    """Connections from a trusted proxy are counted while they wait for their PROXY header, and capped."""

    def test_countedUnderTheProxyThenTheClient(self) -> None:
        """Waiting: under the proxy's address, outside its per-address cap; named: under the client's, within it."""
        policy, counter = GuardPolicy(maxConnections=10, maxPerPeer=1, maxAwaitingHeader=5), ConnectionCounter()
        waiting = [object() for _ in range(3)]
        for marker in waiting:
            self.assertIsNone(counter.admitAwaiting("proxy", policy, marker, lambda: None))  # type: ignore[arg-type]
        self.assertEqual((counter.active, counter.perPeer), (3, {"proxy": 3}))
        self.assertIsNone(counter.named(waiting[0], "client", policy))  # type: ignore[arg-type]
        self.assertIn("per peer", counter.named(waiting[1], "client", policy) or "")  # type: ignore[arg-type]
        counter.abandoned(waiting[2])  # type: ignore[arg-type]
        self.assertEqual((counter.active, counter.perPeer, counter.awaiting), (1, {"client": 1}, {}))

    def test_oldestWaitingDropped(self) -> None:
        """Past maxAwaitingHeader, the one waiting longest is dropped (and uncounted) to make room."""
        policy, counter = GuardPolicy(maxAwaitingHeader=2), ConnectionCounter()
        dropped: list[int] = []
        for n in range(4):
            self.assertIsNone(counter.admitAwaiting("proxy", policy, object(), lambda n=n: dropped.append(n)))  # type: ignore[arg-type, misc]
        self.assertEqual((dropped, counter.active, counter.evictedAwaiting), ([0, 1], 2, 2))
