# -*- test-case-name: tests.protocols.rpc.test_disconnection -*-
"""The end of a broker's connection, for those who wait for it.

Contract: L{Disconnection.wait} gives each caller a L{Deferred} of its own
that fires, once the connection is lost, with the exception that ended it
(C{ConnectionDone} for a clean close), or at once if it already was.  It
never fails, so waiting on it never logs an error; a cancelled waiter is
forgotten at once (then it fails with C{CancelledError}), so a caller that
gives up keeps nothing alive here.  Nothing here refers to the broker.
"""

from __future__ import annotations

from twisted.internet.defer import Deferred, succeed
from twisted.python.failure import Failure


class Disconnection:
    """
    Why a connection ended, and the L{Deferred}s waiting for it to end
    (L{protocols.rpc.Broker.whenDisconnected}).

    @ivar reason: the L{Failure} the connection was lost with, or C{None}
        while it is not lost.
    """

    def __init__(self) -> None:
        self.reason: Failure | None = None
        # A dict as an ordered set: a cancelled waiter is forgotten in O(1).
        self._waiters: dict[Deferred[BaseException], None] = {}

    def wait(self) -> Deferred[BaseException]:
        """A L{Deferred} firing with the exception that ended the connection (see the module docstring)."""
        if self.reason is not None:
            return succeed(self._exception())
        waiter: Deferred[BaseException] = Deferred(self._forget)
        self._waiters[waiter] = None
        return waiter

    def _forget(self, waiter: Deferred[BaseException]) -> None:
        self._waiters.pop(waiter, None)

    def lost(self, reason: Failure) -> None:
        """
        The connection is lost with C{reason}: from now on L{wait} fires at
        once.  The waiters so far fire on L{notify}, which the broker calls
        once the rest of it has seen the loss (pending calls failed, extensions told).
        """
        self.reason = reason

    def notify(self) -> None:
        """Fire every waiter, in the order they came (after L{lost})."""
        waiters, self._waiters = self._waiters, {}
        for waiter in waiters:
            waiter.callback(self._exception())

    def _exception(self) -> BaseException:
        assert self.reason is not None
        exception = self.reason.value
        assert exception is not None
        return exception
