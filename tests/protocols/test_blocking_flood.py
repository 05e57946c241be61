"""
The blocking client against a server that floods it with calls and PINGs and reads nothing.

Each of the server's calls asks this side for a FAIL (the object it calls
is not exported here) and each PING for a PONG: automatic replies, which
the server never reads.  The client's sends then find no room; a call
still fails at its own time, and what waits to be sent is bounded by the
connection's budget.  The server is a thread of this process writing
chunkwire by hand, with a small receive buffer so that it fills quickly.
"""

from __future__ import annotations

import socket
import time

from twisted.trial.unittest import SynchronousTestCase

from framing import Limits
from framing.rpc.errors import CallTimedOut, ConnectionOverBudget
from framing.rpc.session import UNSENT
from protocols.blocking import BlockingConnection, connect
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
        connection = connect(server.address, callTimeout=2.0)
        self.addCleanup(connection.close)
        # (a small send buffer: full within the call's time, as a large one is within a longer time)
        connection._socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
        started = time.monotonic()
        with self.assertRaises(CallTimedOut):
            connection.root.callRemote("echo", 1)
        elapsed = time.monotonic() - started
        self.assertLess(elapsed, 2.0 + MARGIN)
        # What happened is what the test is about: replies were left unsent, the server reading nothing.
        self.assertGreater(connection._session.ledger.holding(UNSENT), 0)
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
            connections.append(connect(server.address, callTimeout=HANG, limits=Limits(max_connection_memory=budget)))
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
