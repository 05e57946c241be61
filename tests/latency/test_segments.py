"""TCP segments per small call on loopback: chunkwire sends one each way; a token-by-token writer and AMP beside it."""

from __future__ import annotations

import os
import unittest
from typing import Any

from twisted.trial.unittest import SynchronousTestCase, TestCase

from ..protocols.helpers import pytestTest, trialTest
from .segments import Unsupported, captureTool, countAll, splitTokens, table

CALLS = 20


async def _counts(reactor: Any, capture: bool) -> dict[str, dict[str, Any]]:
    try:
        return await countAll(reactor, CALLS, capture)
    except Unsupported as reason:
        raise unittest.SkipTest(str(reason)) from None


async def tcpInfoCounts(reactor: Any) -> None:
    """By TCP_INFO's data-segment counters, one chunkwire call is one segment each way; token by token it is more."""
    results = await _counts(reactor, capture=False)
    chunkwire, tokens = results["chunkwire"], results["token-by-token"]
    assert (chunkwire["data_segs_out"], chunkwire["data_segs_in"]) == (1.0, 1.0), table(results)
    assert tokens["data_segs_out"] > 2 and tokens["data_segs_in"] > 2, tokens  # the counter does see many
    assert results["amp"]["data_segs_out"] >= 1.0, results["amp"]


async def tcpdumpCounts(reactor: Any) -> None:
    """By a tcpdump capture on the test's own port, one chunkwire call is one segment with payload each way."""
    if captureTool() is None:
        raise unittest.SkipTest("tcpdump is not installed (Debian: apt-get install tcpdump)")
    if os.geteuid() != 0:
        raise unittest.SkipTest("capturing on lo with tcpdump needs root (CAP_NET_RAW)")
    results = await _counts(reactor, capture=True)
    dump = results["chunkwire"]["tcpdump"]
    assert (dump["data_segs_up"], dump["data_segs_down"]) == (1.0, 1.0), table(results)
    tokens = results["token-by-token"]
    assert tokens["tcpdump"]["data_segs_up"] == tokens["data_segs_out"], tokens  # both methods agree


class SegmentTests(TestCase):
    """Segments per call on loopback (trial runs these; pytest runs the twins below)."""

    timeout = 60
    test_tcp_info_counts = trialTest(tcpInfoCounts)
    test_tcpdump_counts = trialTest(tcpdumpCounts)


test_tcp_info_counts = pytestTest(tcpInfoCounts)
test_tcpdump_counts = pytestTest(tcpdumpCounts)


class SplitTokensTests(SynchronousTestCase):
    """The token-by-token variant cuts writes exactly at token boundaries."""

    def test_split(self) -> None:
        """A preamble and a list of three items come out as the preamble and one piece per token."""
        from framing import dumps
        from framing.wire import PREAMBLE

        pieces = splitTokens(dumps([1, "two", b"three"]))
        self.assertEqual(pieces[0], PREAMBLE)
        self.assertEqual(b"".join(pieces), dumps([1, "two", b"three"]))
        self.assertEqual(len(pieces), 1 + 5)  # OPEN list, INT, STRING, BYTES, CLOSE
