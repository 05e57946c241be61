# -*- test-case-name: tests.framing.rpc.test_drain,tests.protocols.rpc.test_drain -*-
"""GOAWAY and the drain, sans-IO: the one place of their rules, for every shell.

Contract: a L{Drain} is one connection's drain state (C{docs/wire-format.md}
12.1): L{OPEN}, then L{SENT} (this side sent GOAWAY: L{Drain.send} gives
its message) or L{RECEIVED} (L{Drain.received}); either way no new call
starts there (L{GoingAway}), and a second GOAWAY changes nothing; past
the sender's grace its calls still running fail with
L{DrainDeadlineExceeded} (registered: every shell rebuilds it).  The receiver closes
the connection as soon as nothing is in flight either way (no call of
either side waits or runs, no object stream is open: L{Drain.closes}), so
no CALL is on the wire at the close.  The Twisted broker
(L{protocols.rpc._drain}) and the clients' session
(L{framing.rpc._session.ClientSession}) ask it; they keep the timers, the
writing and the closing.  No I/O, no clock.

Cost: nothing per call; a few comparisons each time a shell asks.

Design: docs/design/same-bytes.md
"""

from __future__ import annotations

from ._errors import DeadReferenceError, registerError
from ._wire import GOAWAY, Message


class GoingAway(DeadReferenceError):
    """
    A call was not sent: the connection is draining (one end sent GOAWAY).
    Nothing of it reached the peer, so it may be sent on another connection.
    """


class DrainDeadlineExceeded(Exception):
    """
    The peer was draining and its grace time passed while this call still
    ran there: it was cancelled, and it may or may not have taken effect.

    @ivar grace: the grace time, in seconds.
    """

    def __init__(self, message: str, grace: float = 0.0) -> None:
        super().__init__(message, grace)
        self.grace = grace

    def __str__(self) -> str:
        return str(self.args[0])


registerError(DrainDeadlineExceeded, "chunkwire.DrainDeadlineExceeded")


class DrainState:
    """A connection's drain state: a name, and whether new calls may start there."""

    __slots__ = ("name", "calling")

    def __init__(self, name: str, calling: bool) -> None:
        self.name = name
        self.calling = calling

    def __repr__(self) -> str:
        return f"<drain {self.name}>"


OPEN = DrainState("open", True)
"""No GOAWAY either way: calls start."""
SENT = DrainState("sent GOAWAY", False)
"""This side sent GOAWAY: it starts no call, answers the peer's for its grace time, then closes."""
RECEIVED = DrainState("received GOAWAY", False)
"""The peer sent GOAWAY: this side starts no call, and closes once nothing is in flight (L{Drain.closes})."""


class Drain:
    """
    One connection's drain (see the module docstring).

    @ivar state: L{OPEN}, L{SENT} or L{RECEIVED}.
    @ivar grace: the grace time announced either way, in seconds, or C{None}.
    """

    __slots__ = ("state", "grace")

    def __init__(self) -> None:
        self.state = OPEN
        self.grace: float | None = None

    @property
    def draining(self) -> bool:
        """Whether either end sent GOAWAY."""
        return self.state is not OPEN

    def send(self, grace: float) -> Message | None:
        """
        This side goes away with C{grace} seconds for the peer's calls: the
        GOAWAY to send (its grace in whole milliseconds, at least 0), or
        C{None} if either end sent GOAWAY already.
        """
        if self.state is not OPEN:
            return None
        self.state = SENT
        self.grace = grace
        return Message((GOAWAY, max(0, round(grace * 1000))))

    def received(self, message: Message) -> bool:
        """
        The peer's GOAWAY C{message}: whether it changed the state (the
        first GOAWAY either way; the shell then stops calling and closes
        once L{closes}).
        """
        if self.state is not OPEN:
            return False
        self.state = RECEIVED
        self.grace = message[1] / 1000
        return True

    def refusal(self, peer: str) -> str:
        """Why a call is not made once either end sent GOAWAY: the text its L{GoingAway} ends with."""
        return f"the connection to {peer} is draining ({self.state.name})"

    def closes(self, calls: int, running: int, streams: int) -> bool:
        """
        Whether the receiver of GOAWAY closes now: the peer's GOAWAY came and
        nothing is in flight, neither this side's C{calls} waiting for
        their answers, nor the peer's calls C{running} here, nor object
        C{streams} either way (a stream outlives the call that answered
        with it: it is work in flight too).
        """
        return self.state is RECEIVED and not calls and not running and not streams
