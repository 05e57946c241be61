"""
The blocking client never sends while holding its connection's lock (L{protocols.blocking}'s outbox).

What the session has to send while the lock is held (the bulk frames a
GRANT allows, replies) waits in the outbox and is sent once the lock is
released, so a send that blocks (a peer that does not read) blocks no
other thread's reading or calling.  The peer here is the other end of a
socket pair that the test reads when it chooses; the client's send buffer
is made small so that a few hundred KiB fill it.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable

from twisted.trial.unittest import SynchronousTestCase

from framing._encoder import error_token
from framing.rpc._errors import ConnectionLost, UnexpectedAnswer
from framing.rpc._session import UNSENT
from protocols.blocking import BlockingConnection
from protocols.options import ClientOptions

HANG = 30.0
"""Seconds within which anything that is not a hang finishes, however loaded the machine."""

BIG = 4 * 1024 * 1024
"""Bytes queued at once: far more than the socket pair's buffers hold, so a send of them blocks until read."""


class OutboxTests(SynchronousTestCase):
    """Sending what the session queued under the lock: after the lock is released, in order, failures ending it."""

    def setUp(self) -> None:
        self.client, self.peer = socket.socketpair()
        self.client.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
        self.peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        self.connection = BlockingConnection(self.client, "test peer", ClientOptions(silenceTimeout=None))
        self.addCleanup(self.connection.close)
        self.addCleanup(self.peer.close)  # (first: a send still blocked on it fails, and its thread ends)

    def queue(self, data: bytes) -> None:
        """What a reading turn does with the session's output: apply it, holding the connection's lock."""
        connection = self.connection
        with connection._lock:
            connection._session.output.append(data)
            connection._apply([])

    def queueAtOnce(self, data: bytes) -> None:
        """L{queue} on another thread, which must return (with the lock) though the peer reads nothing."""
        applying = self.inThread(lambda: self.queue(data))
        applying.join(HANG)
        self.assertFalse(applying.is_alive(), "applying the session's output blocked in a send under the lock")

    def inThread(self, action: Callable[[], object]) -> threading.Thread:
        thread = threading.Thread(target=action, daemon=True)
        thread.start()
        return thread

    def readAll(self, size: int) -> bytes:
        """Read C{size} bytes from the peer's end (what the client sent)."""
        self.peer.settimeout(HANG)
        pieces, got = [], 0
        while got < size:
            piece = self.peer.recv(size - got)
            self.assertTrue(piece, "the client closed before sending everything")
            pieces.append(piece)
            got += len(piece)
        return b"".join(pieces)

    def test_queuedUnderLockNotSent(self) -> None:
        """Applying far more output than the socket takes, under the lock, returns without sending (no hang)."""
        big = os.urandom(BIG)
        self.queueAtOnce(big)
        self.assertEqual(b"".join(self.connection._outbox), big)

    def test_blockedSendHoldsNoLock(self) -> None:
        """
        While the outbox's send blocks on a peer that does not read, the
        connection's lock is free (other threads read and call), and more
        queued meanwhile follows it on the wire, whole and in order.
        """
        big, after = os.urandom(BIG), b"then this"
        self.queueAtOnce(big)
        flushing = self.inThread(self.connection._flushOutbox)
        # The send is blocked (the peer reads nothing yet); the lock is not held by it.
        self.assertTrue(self.connection._lock.acquire(timeout=HANG))
        self.connection._lock.release()
        self.queueAtOnce(after)
        self.assertEqual(self.readAll(BIG + len(after)), big + after)
        flushing.join(HANG)
        self.assertFalse(flushing.is_alive())
        self.assertEqual(self.connection._outbox, [])

    def test_piecesQueuedAndSentUnjoined(self) -> None:
        """
        The session's output goes into the outbox as its pieces (a bulk
        frame's body by reference, never joined: that copied every body
        sent) and out with C{sendmsg}, whole and in order, across the
        partial sends of a peer that reads slowly; the ledger charged for
        them is released once they went.
        """
        head, body, tail = b"head", os.urandom(BIG), b"tail"
        connection = self.connection
        with connection._lock:
            connection._session.output.extend([head, body, tail])
            connection._apply([])
            self.assertIs(connection._outbox[1], body)
            self.assertEqual(connection._session.ledger.holding(UNSENT), BIG + 8)
        flushing = self.inThread(connection._flushOutbox)
        self.assertEqual(self.readAll(BIG + 8), head + body + tail)
        flushing.join(HANG)
        self.assertFalse(flushing.is_alive())
        self.assertEqual(connection._outbox, [])
        with connection._lock:
            self.assertEqual(connection._session.ledger.holding(UNSENT), 0)

    def test_restAtDeadlineChargedAsHeld(self) -> None:
        """
        What a send cut at its deadline leaves in the outbox holds only the
        bytes left to send, which the ledger is charged: the piece the
        socket took part of is kept as a copy of its rest, not as a view
        that holds the whole piece (a bulk frame's body, 1 MiB) charged as
        its rest.  The rest goes later, whole and in order, and its charge
        is released.
        """
        head, body, tail = b"head", os.urandom(BIG), b"tail"
        connection = self.connection
        with connection._lock:
            connection._session.output.extend([head, body, tail])
            connection._apply([])
        connection._flushOutbox(time.monotonic())  # (the deadline passed: one send, what the socket takes at once)
        outbox = connection._outbox
        left = sum(len(piece) for piece in outbox)
        self.assertTrue(0 < left < BIG, f"{left} bytes left: the socket took none, or all")
        held = sum(len(piece.obj) if isinstance(piece, memoryview) else len(piece) for piece in outbox)
        with connection._lock:
            self.assertEqual((held, connection._session.ledger.holding(UNSENT)), (left, left))
        flushing = self.inThread(connection._flushOutbox)
        self.assertEqual(self.readAll(BIG + 8), head + body + tail)
        flushing.join(HANG)
        self.assertFalse(flushing.is_alive())
        self.assertEqual(connection._outbox, [])
        with connection._lock:
            self.assertEqual(connection._session.ledger.holding(UNSENT), 0)

    def test_sendFailureEnds(self) -> None:
        """A send of the outbox that fails ends the connection with a clear error, naming the peer."""
        self.queueAtOnce(b"never read")
        self.peer.close()
        self.connection._flushOutbox()
        failure = self.connection._session.failure
        self.assertIsInstance(failure, ConnectionLost)
        self.assertIn("sending to test peer failed", str(failure))

    def endForBrokenRule(self) -> None:
        """What a reading turn does when the server broke a rule (an answer to no call): end, holding the lock."""
        connection = self.connection
        with connection._lock:
            connection._apply(connection._session.end(UnexpectedAnswer("an answer to request 9, which was never made")))

    def test_errorSentAtOnce(self) -> None:
        """Ended for a rule the server broke, the client sends the ERROR saying why, then shuts the socket."""
        self.endForBrokenRule()
        self.peer.settimeout(HANG)
        self.assertEqual(
            self.peer.recv(65536), error_token(UnexpectedAnswer("an answer to request 9, which was never made"))
        )
        self.assertEqual(self.peer.recv(65536), b"")

    def test_errorNeverWaitedFor(self) -> None:
        """
        With what the peer did not read still queued, the end does not wait
        to send the ERROR: the socket is shut at once, the ERROR (which
        would follow the backlog) not sent.
        """
        self.queueAtOnce(os.urandom(BIG))
        ending = self.inThread(self.endForBrokenRule)
        ending.join(HANG)
        self.assertFalse(ending.is_alive(), "the end waited to send the ERROR")
        self.assertEqual(self.connection._outbox, [])
        self.peer.settimeout(HANG)
        self.assertEqual(self.peer.recv(65536), b"")
