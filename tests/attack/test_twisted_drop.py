"""The Twisted client drops a hostile server that never reads: its call fails at the drop, its socket within the grace.

Issue 39, found by the hostile-server catalogue: against the C{flood}
server (L{tests.attack.hostileserver}: CALLs and PINGs as fast as the socket
takes them, nothing read) the Twisted client passes its refusal rate and
drops the server, but its polite close never ends (the server takes none of
the bytes queued for it), so a call in flight without a timeout waited for
ever.  Here the server runs in this process (its own threads) and the
client makes a 4 MiB echo with no timeout: the call must fail with the
drop's typed error, and the connection must end (aborted) within its
grace (L{GRACE}, set on its config) plus L{MARGIN}.  Outcomes only: the
margin is one only a hang misses.
"""

from __future__ import annotations

import time
from typing import Any

from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from framing._refusals import TooManyRefusals
from protocols import rpc
from protocols.options import ClientOptions
from protocols.testing import whenLost

from ..protocols.helpers import pytestTest, trialTest
from .catalogue import MARGIN
from .hostileclients import CONNECT_TIMEOUT
from .hostileserver import FULL, HostileServer

GRACE = 1.0
"""
The client connection's drop grace here (its C{config.dropGrace}): the
default, L{protocols._config.DROP_GRACE} (10 s), is the same rule waited
for ten times as long; tests/protocols/test_drop.py pins that the grace
is the config's.
"""


async def floodDropped(reactor: Any) -> None:
    """
    The Twisted client's 4 MiB echo, without a timeout, to the flood
    server: it fails with L{TooManyRefusals} when the client drops the
    server, and the connection ends within L{GRACE} plus a margin.
    """
    server = HostileServer("flood", FULL)  # (FULL's sizes are the clients' default limits, which it keeps)
    try:
        root = await rpc.connect(
            reactor, f"tcp:host=127.0.0.1:port={server.port}", options=ClientOptions(timeout=CONNECT_TIMEOUT)
        )
        connection = root.broker.connection
        connection.config = connection.config.replace(dropGrace=GRACE)
        lost = whenLost(connection)
        started = time.monotonic()
        try:
            await root.callRemote("echo", b"x" * (4 << 20))
        except TooManyRefusals:
            pass
        else:
            raise AssertionError("the flood server answered an echo")
        failed = time.monotonic() - started
        assert failed < GRACE + MARGIN, f"the call failed {failed:.1f} s after it was made"
        reason = await lost
        ended = time.monotonic() - started
        assert isinstance(reason, TooManyRefusals), repr(reason)
        assert ended < GRACE + MARGIN, f"the connection ended {ended:.1f} s after the call was made"
    finally:
        await deferToThread(server.stop)
    assert server.errors == [], server.errors


class TwistedDropTests(TestCase):
    """The hostile flood server against the Twisted client, under trial."""

    test_flood_dropped = trialTest(floodDropped)


test_flood_dropped = pytestTest(floodDropped)
