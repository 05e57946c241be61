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
import threading
import time

from twisted.trial.unittest import SynchronousTestCase

from framing import Encoder, Limits, Registry
from framing.rpc.errors import CallTimedOut, ConnectionOverBudget
from framing.rpc.session import UNSENT
from framing.rpc.wire import CALL, Message, addMessageTypes
from framing.slicing.registry import DEFAULT_REGISTRY
from framing.wire import PING, PREAMBLE, encode_header
from protocols.blocking import BlockingConnection, connect

MARGIN = 20.0
"""Seconds past a call's timeout within which it must have failed, however loaded the machine (before: 60 and more)."""

HANG = 60.0
"""Seconds within which anything that is not a hang finishes."""

REGISTRY = Registry(DEFAULT_REGISTRY)
addMessageTypes(REGISTRY)


class FloodingServer:
    """
    A listening socket whose one connection gets the preamble, then
    batches of CALLs (to export 77, which the client does not have) and
    PINGs as fast as the socket takes them; nothing is ever read from it.
    """

    def __init__(self, test: SynchronousTestCase) -> None:
        self.listener = socket.socket()
        # (inherited by the accepted socket: the client's replies fill it at once)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.sent = 0
        self._stopped = threading.Event()
        self._connection: socket.socket | None = None
        self._thread = threading.Thread(target=self._flood, daemon=True)
        self._thread.start()
        test.addCleanup(self.stop)

    def _flood(self) -> None:
        encoder = Encoder(REGISTRY)
        try:
            connection, _ = self.listener.accept()
        except OSError:
            return
        self._connection = connection
        requestId = 1
        try:
            connection.sendall(PREAMBLE)
            while not self._stopped.is_set():
                pieces = []
                for _ in range(500):
                    pieces.append(encoder.encode(Message((CALL, requestId, 77, "poke", (), {}))))
                    pieces.append(encode_header(PING, requestId))
                    requestId += 1
                batch = b"".join(pieces)
                connection.sendall(batch)
                self.sent += len(batch)
        except OSError:
            pass  # (the client closed: the flood is over)

    def stop(self) -> None:
        self._stopped.set()
        self.listener.close()
        if self._connection is not None:
            try:
                self._connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(HANG)
        if self._connection is not None:
            self._connection.close()


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
