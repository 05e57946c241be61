"""
The asyncio client against a server that floods it with PINGs (and calls) and reads nothing.

Each PING asks this side for a PONG, which the server never reads
(L{tests.protocols.flooding}).  The client stops reading while its
transport's write buffer is over the connection's budget, so what it holds
stays bounded; its calls still fail at their time, and C{close()} returns
within its grace though the buffer never drains.  Each of the server's
calls asks for a FAIL too and is a refusal: past the refusal rate the
connection is dropped at once.
"""

from __future__ import annotations

import asyncio
import socket
import time

from twisted.trial.unittest import SynchronousTestCase

from framing import Limits
from framing._refusals import TooManyRefusals
from framing.rpc._errors import CallTimedOut, DeadReferenceError
from framing.rpc._limits import CallLimits
from framing.rpc._session import UNSENT
from protocols.asyncioclient import AsyncConnection, connect
from protocols.options import ClientOptions
from tests.protocols.flooding import HANG, FloodingServer

BUDGET = 1024 * 1024
"""The connection's budget (C{Limits.max_connection_memory}) here: the default 64 MiB would take long to fill."""

BOUND = BUDGET + 4 * 1024 * 1024
"""
Most bytes the client's write buffer may hold: the budget plus the replies
of the read that passed it (a read is at most 256 KiB of the server's
PINGs, whose PONGs are as large), with room to spare.  Before the
fix it grew by megabytes a second for as long as the server sent.
"""

MARGIN = 20.0
"""Seconds past a timeout or a grace within which what it bounds must have ended, however loaded the machine."""


class FloodTests(SynchronousTestCase):
    """What the asyncio client holds, its calls' time and its closing, against a server that sends and never reads."""

    def test_boundedAndClosed(self) -> None:
        """
        Against the flood, the write buffer is charged to the session's
        ledger, reading stops once it passes the budget and the buffer
        stays within L{BOUND} while a call waits, the call fails with L{CallTimedOut} at its
        time, and C{close()} returns within its grace, aborting the
        transport that could not send what it held.
        """
        server = FloodingServer(self)

        async def main() -> tuple[list[int], float, float, AsyncConnection]:
            connection = await connect(
                server.address,
                options=ClientOptions(
                    timeout=HANG,
                    silenceTimeout=None,
                    limits=Limits(max_connection_memory=BUDGET),
                    callLimits=CallLimits(callTimeout=5.0),
                ),
            )
            connection.closeGrace = 1.0
            # (a small kernel send buffer: the transport's own fills within the call's time, as it would later)
            connection._transport.get_extra_info("socket").setsockopt(  # type: ignore[union-attr]
                socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024
            )
            sizes: list[int] = []
            calling = asyncio.ensure_future(connection.root.callRemote("echo", 1))
            started = time.monotonic()
            while not calling.done():
                sizes.append(connection.bufferedBytes)
                await asyncio.sleep(0.01)  # (sampling, not synchronising: the call's own time ends the loop)
            with self.assertRaises(CallTimedOut):
                await calling
            elapsed = time.monotonic() - started
            reading = connection._transport.is_reading()  # type: ignore[union-attr]
            self.assertFalse(reading, "the client went on reading a server that reads nothing")
            ledger = connection._session.ledger
            self.assertGreater(ledger.holding(UNSENT), 0)
            # (the ledger went over the budget, which is what stops reading: the write buffer, with what the
            # read that passed it holds in its other accounts; the buffer alone may stay under the budget)
            self.assertGreater(ledger.peak, BUDGET, ledger.accounts())
            closing = time.monotonic()
            await connection.close()
            return sizes, elapsed, time.monotonic() - closing, connection

        sizes, elapsed, closed, connection = asyncio.run(asyncio.wait_for(main(), HANG))
        self.assertLess(max(sizes), BOUND)
        self.assertLess(elapsed, 5.0 + MARGIN)
        self.assertLess(closed, 1.0 + MARGIN)
        self.assertEqual(connection.bufferedBytes, 0)

    def test_callFloodDropped(self) -> None:
        """
        A server that floods calls to nothing (each a refusal, owed a FAIL it
        never reads) is dropped past the refusal rate
        (L{framing._refusals.TooManyRefusals}), long before the call's own
        timeout and before the buffer nears the budget.  (Before: the FAILs
        filled the write buffer up to the 64 MiB budget, the call waited for
        its timeout: the hostile-server catalogue's full flood x asyncio row,
        63 MiB above idle.)
        """
        server = FloodingServer(self, calls=True)

        async def main() -> tuple[float, list[AsyncConnection]]:
            started = time.monotonic()
            connections = []
            # Dropped during the call (TooManyRefusals); on a loaded machine before it is made (the call is then
            # refused as on a dead connection, naming why it ended), or while connecting (the flood starts at once).
            with self.assertRaises((TooManyRefusals, DeadReferenceError)) as raised:
                connections.append(
                    await connect(
                        server.address,
                        options=ClientOptions(
                            timeout=HANG, silenceTimeout=None, callLimits=CallLimits(callTimeout=HANG)
                        ),
                    )
                )
                connections[0].closeGrace = 1.0
                await connections[0].root.callRemote("echo", 1)
            self.assertIn("more than 1000 refusals", str(raised.exception))
            elapsed = time.monotonic() - started
            for connection in connections:
                await connection.close()
            return elapsed, connections

        elapsed, connections = asyncio.run(asyncio.wait_for(main(), HANG))
        self.assertLess(elapsed, HANG / 2)
        for connection in connections:
            self.assertLess(connection._session.ledger.peak, 1024 * 1024)
