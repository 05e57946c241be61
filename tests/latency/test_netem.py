"""RPC latency over a kernel-made latent link (netem in two network namespaces), where the machine allows it.

Where it does not (no root, no iproute2, no namespaces, or, as on the
machine this was written on, a kernel without C{sch_netem}) the test skips
and its reason names the step that failed and what the system said.
"""

from __future__ import annotations

import unittest

from twisted.trial.unittest import SynchronousTestCase

from .netem import NetemLink, Unavailable, explain, measure


class NetemTests(SynchronousTestCase):
    """Round trips across two namespaces joined by a veth pair with netem delaying each end 50 ms."""

    def test_latencyAcrossNamespaces(self) -> None:
        """
        Calls across the namespaces are answered, and each takes at least
        the link's RTT (the delay really is there).  How close to one RTT
        they come is a figure against its target, in C{dev.py attack}.
        """
        try:
            link = NetemLink.create(delay=0.05)
        except Unavailable as reason:
            raise unittest.SkipTest(str(reason)) from None
        try:
            result = measure(link, calls=20)
        finally:
            link.destroy()
        rtt = 2 * link.delay
        self.assertGreaterEqual(result["sequential_s"], rtt * 0.99, result)
        self.assertGreaterEqual(result["first_answer_s"], rtt * 0.99, result)

    def test_skipReasonNamesNetem(self) -> None:
        """When tc does not know the netem qdisc, the reason says the kernel lacks sch_netem and quotes tc."""
        command = ["ip", "netns", "exec", "ns", "tc", "qdisc", "add", "dev", "cwc", "root", "netem", "delay", "50ms"]
        reason = explain(command, "Error: Specified qdisc kind is unknown.\n")
        self.assertTrue(reason.startswith("this kernel lacks sch_netem: `ip netns exec"), reason)
        self.assertIn("said: Error: Specified qdisc kind is unknown.", reason)

    def test_otherFailuresAreNotBlamedOnNetem(self) -> None:
        """A namespace that cannot be made is reported as that, not as a missing netem."""
        reason = explain(["ip", "netns", "add", "x"], "mount --make-shared /run/netns failed: Operation not permitted")
        self.assertTrue(reason.startswith("not permitted to make network namespaces here"), reason)
