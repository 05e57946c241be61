"""A bulk push through a rate-limited delay proxy (short version; the 64 MiB case is in the attack campaign)."""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import TestCase

from ..protocols.helpers import pytestTest, trialTest
from .push import MiB, line, measurePush

SIZE = 16 * MiB
DELAY = 0.02
RATE = 16 * MiB
"""16 MiB at 16 MiB/s over a 40 ms RTT: about a second, so the 10% allowance (0.1 s) is well above timer noise."""


async def pushWithinBound(reactor: Any) -> None:
    """16 MiB pushed with default options over a 16 MiB/s, 40 ms RTT link arrive within 1.1x of size/rate + RTT."""
    result = await measurePush(reactor, SIZE, DELAY, RATE)
    print("\n" + line(result))
    assert result["seconds"] >= SIZE / RATE, result  # the proxy did limit the rate
    assert result["ratio"] <= 1.1, line(result)


class PushTests(TestCase):
    """A bulk push over a rate-limited latent link (trial runs this; pytest runs the twin below)."""

    timeout = 60
    test_push_within_bound = trialTest(pushWithinBound)


test_push_within_bound = pytestTest(pushWithinBound)
