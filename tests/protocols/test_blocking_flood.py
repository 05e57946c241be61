"""
The blocking client against a server that floods it with PINGs (and calls) and reads nothing.

Each PING asks this side for a PONG, an automatic reply which the server
never reads.  The client's sends then find no room; a call still fails at
its own time, and what waits to be sent is bounded by the connection's
budget.  Each of the server's calls asks for a FAIL too (the object it
calls is not exported here) and is a refusal: past the refusal rate the
connection is dropped at once.  The server is a thread of this process
writing chunkwire by hand, with a small receive buffer so that it fills
quickly.
"""

from __future__ import annotations

import socket
import time

from twisted.trial.unittest import SynchronousTestCase

from framing import Limits
from framing._decoder import DECODING
from framing._refusals import TooManyRefusals
from framing.rpc._errors import CallTimedOut, ConnectionOverBudget, DeadReferenceError
from framing.rpc._limits import CallLimits
from framing.rpc._session import UNSENT
from protocols.blocking import BlockingConnection, connect
from protocols.options import ClientOptions
from tests.protocols.flooding import FloodingServer

MARGIN = 20.0
"""Seconds past a call's timeout within which it must have failed, however loaded the machine (before: 60 and more)."""

HANG = 60.0
"""Seconds within which anything that is not a hang finishes."""


class FloodTests(SynchronousTestCase):
    """A call's time and the connection's budget hold against a server that sends and never reads."""

    def test_callTimeoutWhileSendsBlock(self) -> None:
        """
        A call with a C{callTimeout} fails with L{CallTimedOut} at that
        time (plus a margin), though every send of this side's replies
        finds the socket full, and the connection closes at once after.
        """
        server = FloodingServer(self)
        connection = connect(server.address, options=ClientOptions(callLimits=CallLimits(callTimeout=2.0)))
        self.addCleanup(connection.close)
        # (a small send buffer: full within the call's time, as a large one is within a longer time)
        connection._socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
        started = time.monotonic()
        with self.assertRaises(CallTimedOut):
            connection.root.callRemote("echo", 1)
        elapsed = time.monotonic() - started
        self.assertLess(elapsed, 2.0 + MARGIN)
        # What happened is what the test is about: replies were left unsent, the server reading nothing.  (Charged
        # at some point, not held now: the kernel's buffers take some more between the client's tries, and the
        # timeout can fall just after one took everything.  Besides the outbox, only the decoder's part-read
        # calls of the flood are charged here, when a read ends inside one.)
        accounts = connection._session.ledger.accounts()
        self.assertIn(UNSENT, accounts)
        self.assertLessEqual(set(accounts), {UNSENT, DECODING})
        self.assertGreater(connection._session.ledger.peak, 0)
        closing = time.monotonic()
        connection.close()
        self.assertLess(time.monotonic() - closing, MARGIN)

    def test_outboxOverBudgetCloses(self) -> None:
        """
        The replies waiting to be sent are charged to the connection's
        ledger: past its budget the connection is closed (while connecting
        or calling: the flood starts with the preamble) with
        L{ConnectionOverBudget}, naming the budget, long before the call's
        own timeout; the outbox is emptied.
        """
        server = FloodingServer(self)
        budget = 64 * 1024
        connections: list[BlockingConnection] = []

        def connectAndCall() -> None:
            connections.append(
                connect(
                    server.address,
                    options=ClientOptions(
                        limits=Limits(max_connection_memory=budget), callLimits=CallLimits(callTimeout=HANG)
                    ),
                )
            )
            self.addCleanup(connections[0].close)
            connections[0].root.callRemote("echo", 1)

        started = time.monotonic()
        with self.assertRaises(ConnectionOverBudget) as raised:
            connectAndCall()
        self.assertLess(time.monotonic() - started, HANG / 2)
        self.assertIn(f"budget of {budget} bytes", str(raised.exception))
        self.assertIn(f"{UNSENT} ", str(raised.exception))
        self.assertEqual(raised.exception.code, "over-budget")
        for connection in connections:
            self.assertEqual(connection._outbox, [])

    def test_callFloodDropped(self) -> None:
        """
        A server that floods calls to nothing (each a refusal, owed a FAIL it
        never reads) is dropped past the refusal rate
        (L{framing._refusals.TooManyRefusals}), long before the call's own
        timeout: the call fails with it, nothing is left in the outbox.
        (Before: the call waited for its timeout while the FAILs piled up.)
        """
        server = FloodingServer(self, calls=True)
        started = time.monotonic()
        connections = []
        # Dropped during the call (TooManyRefusals); on a loaded machine before it is made (the call is then
        # refused as on a dead connection, naming why it ended), or while connecting (the flood starts at once).
        with self.assertRaises((TooManyRefusals, DeadReferenceError)) as raised:
            connections.append(connect(server.address, options=ClientOptions(callLimits=CallLimits(callTimeout=HANG))))
            self.addCleanup(connections[0].close)
            connections[0].root.callRemote("echo", 1)
        self.assertLess(time.monotonic() - started, HANG / 2)
        self.assertIn("more than 1000 refusals", str(raised.exception))
        for connection in connections:
            self.assertEqual(connection._outbox, [])
            self.assertEqual(connection._session.ledger.held, 0)
