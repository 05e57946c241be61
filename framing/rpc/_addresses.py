# -*- test-case-name: tests.framing.rpc.test_addresses,tests.protocols.rpc.test_failover -*-
"""Several addresses for one service: which one a call goes to, which to connect to when, sans-IO.

Contract: an L{AddressBook} keeps one L{AddressState} per address and one
policy, as gRPC's: L{PICK_FIRST} (one connection, to the first address
that connects) or L{ROUND_ROBIN} (one to each, calls taken in turn).  Each
address backs off on its own (L{Backoff}).  A call's L{CallRoute} says
where to send (L{Send}) or what to do meanwhile (L{Wait}), and fails with
L{NoAddressReady} at its deadline.  A call refused before anything was
written (L{CallRoute.notSent}) goes on to another address; one written
(L{CallRoute.sent}) is never sent again.  The book reads no clock (the
shell gives C{now}) and does no I/O; the clients resolve, connect and wait.

Cost: L{CallRoute.step} is O(1) when a connection is ready; the other
methods are O(addresses), for the few events between calls.

Design: docs/design/rpc-core.md
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from ._errors import ConnectionLost, DeadReferenceError

PICK_FIRST = "pick_first"
"""One connection, to the first address in order that connects."""
ROUND_ROBIN = "round_robin"
"""A connection to every address; calls take the ready ones in turn."""
POLICIES = (PICK_FIRST, ROUND_ROBIN)

C = TypeVar("C")


class ClientConnection(Protocol):
    """
    What L{retire} reads of a client's connection (the blocking and the
    asyncio clients' alike): the server's address as errors name it
    (C{peer}), whether it is over (C{ended}), whether no call waits on it (C{idle}).
    """

    peer: str

    @property
    def ended(self) -> bool: ...

    @property
    def idle(self) -> bool: ...


K = TypeVar("K", bound=ClientConnection)


class NoAddressReady(DeadReferenceError):
    """
    The call was not sent: no connection to any of the service's addresses
    was ready before its deadline (or the client's wait for one).  Nothing
    of it reached a server.

    @ivar errors: the last error of each address that has one, as C{(address, error)}.
    """

    def __init__(self, message: str, errors: Sequence[tuple[Hashable, BaseException]] = ()) -> None:
        super().__init__(message)
        self.errors = tuple(errors)


class AddressState(enum.Enum):
    """Where one address stands."""

    IDLE = "idle"
    """No connection, none being made; may be connected now."""
    CONNECTING = "connecting"
    """The shell is connecting (and logging in)."""
    READY = "ready"
    """Connected: new calls may go here."""
    DRAINING = "draining"
    """The server sent GOAWAY: calls in flight finish here, new ones go elsewhere."""
    BACKING_OFF = "backing-off"
    """The last attempt failed: not tried again before C{retryAt}."""


def _uniform() -> float:
    """A number in [0, 1) from C{random}, loaded at the first jitter: a client that never backs off never loads it."""
    from random import random

    return random()


@dataclass(frozen=True)
class Backoff:
    """
    How long an address waits after its Nth failed attempt in a row:
    C{initial * multiplier ** (N - 1)}, at most C{maximum}, spread by
    C{jitter} either way (gRPC's connection backoff, by default).
    """

    initial: float = 1.0
    multiplier: float = 1.6
    maximum: float = 120.0
    jitter: float = 0.2

    def delay(self, failures: int, uniform: Callable[[], float] = _uniform) -> float:
        """Seconds to wait after C{failures} failed attempts in a row (C{uniform}: a number in [0, 1))."""
        base = min(self.initial * self.multiplier ** max(failures - 1, 0), self.maximum)
        return max(base * (1 + self.jitter * (2 * uniform() - 1)), 0.0)


class Address(Generic[C]):
    """
    One address of the service, and its state.

    @ivar target: the address as the shell connects to it (C{(host, port)}, an endpoint description).
    @ivar state: its L{AddressState}.
    @ivar connection: the shell's connection while L{AddressState.READY} or L{AddressState.DRAINING}.
    @ivar failures: attempts failed in a row.
    @ivar retryAt: when a L{AddressState.BACKING_OFF} address may be tried again (the shell's clock).
    @ivar error: the last attempt's or connection's error, or C{None}.
    @ivar suspect: its connection was lost with an error (not after a drain) and none was made since.
    """

    def __init__(self, target: Hashable) -> None:
        self.target = target
        self.state = AddressState.IDLE
        self.connection: C | None = None
        self.failures = 0
        self.retryAt = 0.0
        self.error: BaseException | None = None
        self.suspect = False

    def __repr__(self) -> str:
        return f"<Address {self.target!r} {self.state.value}>"


@dataclass(frozen=True)
class Send(Generic[C]):
    """Send the call on C{connection} (of C{address}), then tell the route L{CallRoute.sent} or L{CallRoute.notSent}."""

    address: Address[C]
    connection: C


@dataclass(frozen=True)
class Wait(Generic[C]):
    """
    No connection is ready: connect to C{connect} (now L{AddressState.CONNECTING};
    tell the book how each went), and ask again once something changed, at
    C{until} at the latest (C{None}: when something changes).
    """

    connect: tuple[Address[C], ...]
    until: float | None


class AddressBook(Generic[C]):
    """
    The addresses of one service and the policy that picks among them (see
    the module docstring).  Not thread-safe: a shell with threads holds its
    own lock around it.

    @ivar policy: L{PICK_FIRST} or L{ROUND_ROBIN}.
    @ivar addresses: the entries, in the order given (a name's addresses in its resolver's order).
    """

    def __init__(
        self,
        targets: Iterable[Hashable],
        policy: str = PICK_FIRST,
        backoff: Backoff | None = None,
        uniform: Callable[[], float] = _uniform,
    ) -> None:
        """
        @param targets: the addresses, in order (duplicates kept once).
        @param uniform: the jitter's source of numbers in [0, 1) (tests give a fixed one).
        @raise ValueError: an unknown policy, or no address.
        """
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}: expected one of {', '.join(POLICIES)}")
        self.policy = policy
        self.backoff = backoff if backoff is not None else Backoff()
        self._uniform = uniform
        self.addresses: list[Address[C]] = []
        self._ready: list[Address[C]] = []
        self._next = 0
        self.setTargets(targets)

    def setTargets(self, targets: Iterable[Hashable]) -> None:
        """
        The addresses are now C{targets} (a name resolved again): entries
        kept for those still there, with their state; new ones idle; those
        gone forgotten (their connections, if any, are the shell's to close
        once idle: L{removed} lists them).

        @raise ValueError: no address.
        """
        known = {entry.target: entry for entry in self.addresses}
        entries: list[Address[C]] = []
        seen: set[Hashable] = set()
        for target in targets:
            if target not in seen:
                seen.add(target)
                entries.append(known.get(target) or Address(target))
        if not entries:
            raise ValueError("a service needs at least one address")
        self.removed = [entry for entry in self.addresses if entry not in entries and entry.connection is not None]
        self.addresses = entries
        self._ready = [entry for entry in entries if entry.state is AddressState.READY]

    # -- what the shell tells the book -------------------------------------

    def connected(self, address: Address[C], connection: C) -> None:
        """C{address}'s attempt succeeded (connected and logged in): new calls may go to C{connection}."""
        address.state = AddressState.READY
        address.connection = connection
        address.failures = 0
        address.error = None
        address.suspect = False
        if address not in self._ready:
            self._ready.append(address)

    def connectFailed(self, address: Address[C], error: BaseException, now: float) -> None:
        """C{address}'s attempt failed with C{error}: it backs off (L{Backoff}) from C{now}."""
        address.failures += 1
        address.error = error
        address.connection = None
        address.state = AddressState.BACKING_OFF
        address.retryAt = now + self.backoff.delay(address.failures, self._uniform)

    def drained(self, address: Address[C]) -> None:
        """C{address}'s server sent GOAWAY: no new call goes there; its calls in flight finish."""
        if address.state is AddressState.READY:
            address.state = AddressState.DRAINING
            self._ready.remove(address)

    def lost(self, address: Address[C], error: BaseException | None = None) -> None:
        """
        C{address}'s connection is over (closed after a drain, or lost with
        C{error}): it is idle, and may be connected again at once (its next
        failed attempt backs off); one lost with an error other than after a
        drain (its server died or went silent) comes after the other
        addresses in pick_first's order, until it connects again.
        """
        if address in self._ready:
            self._ready.remove(address)
        # Lost other than after a drain: a server that died or went silent.  Tried again at once, but after the others.
        address.suspect = error is not None and address.state is not AddressState.DRAINING
        address.state = AddressState.IDLE
        address.connection = None
        if error is not None:
            address.error = error

    def find(self, connection: C) -> Address[C] | None:
        """The entry whose connection is C{connection}, or C{None} (O(addresses))."""
        for entry in self.addresses:
            if entry.connection is connection:
                return entry
        return None

    # -- what the book tells the shell -------------------------------------

    @property
    def hasReady(self) -> bool:
        """Whether some address is ready for new calls."""
        return bool(self._ready)

    def pick(self) -> Address[C] | None:
        """
        The ready address a new call goes to, or C{None}: pick_first's first
        ready one; round_robin's next in turn.
        """
        ready = self._ready
        if not ready:
            return None
        if self.policy == PICK_FIRST:
            return ready[0]
        self._next = (self._next + 1) % len(ready)
        return ready[self._next]

    def connectNow(self, now: float) -> tuple[Address[C], ...]:
        """
        The addresses to connect to now, marked L{AddressState.CONNECTING}:
        for pick_first, while none is ready nor connecting, the first in
        order that is idle or whose backoff is over (those whose connection
        was lost with an error last); for round_robin, every such address.  The shell connects to each and reports
        (L{connected}, L{connectFailed}).
        """
        due = [entry for entry in self.addresses if self._due(entry, now)]
        if self.policy == PICK_FIRST:
            if self._ready or any(entry.state is AddressState.CONNECTING for entry in self.addresses):
                return ()
            due = sorted(due, key=lambda entry: entry.suspect)[:1]
        for entry in due:
            entry.state = AddressState.CONNECTING
        return tuple(due)

    def wakeAt(self) -> float | None:
        """When the soonest backoff ends (the shell's clock), or C{None}: no address is backing off."""
        times = [entry.retryAt for entry in self.addresses if entry.state is AddressState.BACKING_OFF]
        return min(times) if times else None

    def unavailable(self, name: str) -> NoAddressReady:
        """The error of a call C{name} that found no address ready in its time, with each address's last error."""
        errors = [(entry.target, entry.error) for entry in self.addresses if entry.error is not None]
        detail = "; ".join(f"{target}: {error}" for target, error in errors) or "none connected yet"
        return NoAddressReady(f"cannot call {name!r}: no server ready at any of its addresses ({detail})", errors)

    def route(self, name: str, deadline: float | None) -> CallRoute[C]:
        """The way of one call C{name}, to be sent by C{deadline} (the shell's clock; C{None}: none)."""
        return CallRoute(self, name, deadline)

    @staticmethod
    def _due(entry: Address[C], now: float) -> bool:
        state = entry.state
        return state is AddressState.IDLE or (state is AddressState.BACKING_OFF and entry.retryAt <= now)


class CallRoute(Generic[C]):
    """
    One call's way through the addresses: sent at most once.

    The shell loops on L{step}: L{Send} (send there, then report
    L{sent} or L{notSent}), L{Wait} (connect, wait, ask again), or an
    exception: L{NoAddressReady} once the deadline passed with nothing
    ready.  O(1) per step when a connection is ready.
    """

    def __init__(self, book: AddressBook[C], name: str, deadline: float | None) -> None:
        self.book = book
        self.name = name
        self.deadline = deadline
        self.written = False

    def step(self, now: float) -> Send[C] | Wait[C]:
        """
        What to do now.

        @raise NoAddressReady: the deadline has passed and no connection is ready.
        @raise RuntimeError: the call was written already (L{sent}): it is never sent again.
        """
        if self.written:
            raise RuntimeError(f"the call {self.name!r} was sent already: it is never sent twice")
        book = self.book
        address = book.pick()
        if address is not None:
            assert address.connection is not None
            return Send(address, address.connection)
        deadline = self.deadline
        if deadline is not None and now >= deadline:
            raise book.unavailable(self.name)
        connect = book.connectNow(now)
        wake = book.wakeAt()
        until = deadline if wake is None else wake if deadline is None else min(wake, deadline)
        return Wait(connect, until)

    def sent(self) -> None:
        """The call was written to its connection: whatever becomes of it, it is not sent again."""
        self.written = True

    def notSent(self, address: Address[C], error: BaseException, over: bool = False) -> None:
        """
        C{address}'s connection refused the call before writing any of it
        (C{error}, a L{DeadReferenceError}: it is draining, or C{over}):
        that address takes no new call, and the next L{step} looks elsewhere.

        @raise BaseException: C{error} itself, when it is no L{DeadReferenceError}
            (the call may have been written: it is not moved).
        """
        if not isinstance(error, DeadReferenceError):
            self.written = True
            raise error
        if over:
            self.book.lost(address, error)
        else:
            self.book.drained(address)


def retire(book: AddressBook[K]) -> list[K]:
    """
    The connections of C{book} that are done, for the shell to close: each
    of an address draining (its server sent GOAWAY) that ended or has no
    call left, whose address is lost (idle again, to be connected anew).
    An address ready whose connection ended is lost too, with
    L{ConnectionLost} (nothing to close).  O(addresses).
    """
    done: list[K] = []
    for address in book.addresses:
        connection = address.connection
        if connection is None:
            continue
        if address.state is AddressState.DRAINING and (connection.ended or connection.idle):
            book.lost(address)
            done.append(connection)
        elif address.state is AddressState.READY and connection.ended:
            book.lost(address, ConnectionLost(f"the connection to {connection.peer} ended"))
    return done


def attemptTimeout(timeout: float | None, until: float | None, now: float) -> float | None:
    """
    The seconds one connection attempt may take: the connect C{timeout}
    (C{None}: none), within what is left at C{now} of a call's wait to
    C{until} (a L{Wait}'s; at least a millisecond, so an attempt is made).
    """
    if until is None:
        return timeout
    left = max(until - now, 0.001)
    return left if timeout is None else min(timeout, left)
