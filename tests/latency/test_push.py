"""A bulk push through a rate-limited delay proxy arrives whole (the 64 MiB case, timed, is in the attack campaign)."""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import TestCase

from ..protocols.helpers import pytestTest, trialTest
from .push import MiB, measurePush

SIZE = 4 * MiB
DELAY = 0.02
RATE = 16 * MiB
"""4 MiB at 16 MiB/s over a 40 ms RTT: a quarter of a second on a quiet machine."""


async def pushArrivesWhole(reactor: Any) -> None:
    """
    4 MiB pushed with default options over a 16 MiB/s, 40 ms RTT link
    arrive whole (measurePush checks the size and digest the receiver
    answers), no sooner than the link allows.  How close to size/rate + RTT
    the push comes is C{dev.py attack}'s push case, against its target.
    """
    result = await measurePush(reactor, SIZE, DELAY, RATE)
    assert result["seconds"] >= SIZE / RATE, result  # the proxy did limit the rate


class PushTests(TestCase):
    """A bulk push over a rate-limited latent link (trial runs this; pytest runs the twin below)."""

    timeout = 120
    test_push_arrives_whole = trialTest(pushArrivesWhole)


test_push_arrives_whole = pytestTest(pushArrivesWhole)
