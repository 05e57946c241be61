# -*- test-case-name: tests.protocols.bulk.test_streams -*-
"""Outcome and TransferResult: what a transfer ends with, for however many wait.

Contract: an L{Outcome} fires once (later calls are ignored); every
L{Outcome.wait} gets its own Deferred, so a waiter that goes away (or
cancels) never leaves an unhandled failure behind for the others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure


class Outcome:
    """
    A result that many may wait for.

    @ivar fired: whether it has a result or a failure.
    @ivar result: the result, once fired with one.
    @ivar failure: the Failure, once fired with one.
    """

    def __init__(self) -> None:
        self.result: Any = None
        self.failure: Failure | None = None
        self.fired = False
        self._waiters: list[Deferred[Any]] = []

    def wait(self, onCancel: Callable[[], object] | None = None) -> Deferred[Any]:
        """
        A L{Deferred} of the result; cancelling it calls C{onCancel()} (if
        given) after it stops waiting, and it fails with C{CancelledError}.
        """
        canceller = None if onCancel is None else (lambda waiter: self._cancelled(waiter, onCancel))
        waiter: Deferred[Any] = Deferred(canceller)
        if not self.fired:
            self._waiters.append(waiter)
        elif self.failure is not None:
            waiter.errback(self.failure)
        else:
            waiter.callback(self.result)
        return waiter

    def _cancelled(self, waiter: Deferred[Any], onCancel: Callable[[], object]) -> None:
        if waiter in self._waiters:
            self._waiters.remove(waiter)
        onCancel()

    def succeed(self, result: Any) -> None:
        """Fire with C{result} (ignored if already fired)."""
        self._fire(result, None)

    def fail(self, reason: BaseException | Failure) -> None:
        """Fire with C{reason} (ignored if already fired)."""
        self._fire(None, reason if isinstance(reason, Failure) else Failure(reason))  # type: ignore[no-untyped-call]

    def _fire(self, result: Any, failure: Failure | None) -> None:
        if self.fired:
            return
        self.fired, self.result, self.failure = True, result, failure
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if failure is not None:
                waiter.errback(failure)
            else:
                waiter.callback(result)


@dataclass(frozen=True)
class TransferResult:
    """
    What a completed transfer reports.

    @ivar size: the object's size in bytes.
    @ivar digest: its verified digest, or C{None} if no digest was used.
    @ivar algorithm: the digest's C{hashlib} name, or C{None}.
    @ivar transferred: payload bytes this stream carried (less than C{size}
        when only some ranges were sent).
    """

    size: int
    digest: bytes | None
    algorithm: str | None
    transferred: int

    @property
    def hexdigest(self) -> str:
        """The digest in hex, or C{""}."""
        return self.digest.hex() if self.digest is not None else ""
