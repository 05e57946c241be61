"""The guard's default connection caps leave room for new addresses when a few addresses flood."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from protocols.guard import ConnectionCounter, GuardPolicy


class DefaultCapTests(SynchronousTestCase):
    """GuardPolicy's defaults and ConnectionCounter's order of checks."""

    def test_tenAddressesLeaveRoom(self) -> None:
        """Ten addresses each at the per-address cap do not fill the global cap: an eleventh address gets in."""
        policy, counter = GuardPolicy(), ConnectionCounter()
        assert policy.max_per_peer is not None and policy.max_connections is not None
        for n in range(10):
            for _ in range(policy.max_per_peer):
                self.assertIsNone(counter.admit(f"127.0.0.{n + 2}", policy))
        self.assertIsNotNone(counter.admit("127.0.0.2", policy))
        self.assertIsNone(counter.admit("127.0.0.99", policy))
        self.assertGreaterEqual(policy.max_connections, 40 * policy.max_per_peer)

    def test_globalCapBelowDescriptorLimit(self) -> None:
        """The global cap stays below the usual 1,024 file descriptors per process."""
        self.assertLess(GuardPolicy().max_connections or 0, 1024)

    def test_perPeerReasonFirst(self) -> None:
        """A host over its own cap is told so even when the global cap is also full."""
        policy, counter = GuardPolicy(max_connections=2, max_per_peer=2), ConnectionCounter()
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
