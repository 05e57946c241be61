# -*- test-case-name: tests.protocols.kv.test_store,tests.protocols.kv.test_threads -*-
"""Who watches which key of the kv store, within one process: the caps, the calls, the forgetting.

Contract: a L{WatchBook} knows each key's watchers and each connection's
watches; it refuses a watch past L{WatchLimits} with L{WatchRefused}, calls
C{changed(key, value)} on each watcher of a changed key (detached from the
deadline of the call that made the change), drops a watcher whose call
fails or times out (one log line), and forgets a lost connection's watches.
Each unanswered call is charged to its connection's ledger
(L{LEDGER_ACCOUNT}); a connection past L{WatchLimits.perConnectionBytes} is
behind, and its changes are coalesced into one C{changed(key, value,
skipped=N)} per (key, watcher), never queued.  It knows nothing of storage.

Cost: O(watchers of that key) per change, O(what a connection watched) to
forget it; a watcher that never answers holds about one byte bound plus one
value.

Design: docs/design/kv.md
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from twisted.internet.defer import maybeDeferred
from twisted.python.failure import Failure

from framing import Violation

from .. import rpc
from .._logs import escape
from ..rpc._context import detached


class WatchRefused(Violation):
    """A C{watch} past a cap of L{WatchLimits}; C{code} says which."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class WatchLimits:
    """The caps on watching; C{None} turns one off.  They count the watches of
    one server process (with workers, each counts its own connections).

    @ivar perConnection: most (key, watcher) pairs one connection may hold (1,000).
    @ivar perKey: most watchers of one key, over every connection (1,000): bounds what one put sends.
    @ivar perConnectionKey: most watchers one connection may have on one key (10).
    @ivar perConnectionBytes: most bytes of C{changed()} calls one connection may have
        unanswered (4 MiB); past it that connection's changes are coalesced.

    Why these defaults: docs/design/kv.md
    """

    perConnection: int | None = 1000
    perKey: int | None = 1000
    perConnectionKey: int | None = 10
    perConnectionBytes: int | None = 4 * 1024 * 1024


LEDGER_ACCOUNT = "kv.watch"
"""The ledger account of a connection's unanswered C{changed()} calls."""

CALL_OVERHEAD = 64
"""Bytes a C{changed()} call is charged beyond its key and value: its message's tokens (ids, name, headers)."""


def callSize(key: str, value: str | None) -> int:
    """
    The bytes a C{changed(key, value)} call holds: the UTF-8 length of the
    key and value plus L{CALL_OVERHEAD}.  O(1) for ASCII strings (their
    length is their UTF-8 length), else one encoding of each.
    """
    size = CALL_OVERHEAD + (len(key) if key.isascii() else len(key.encode("utf-8", "surrogatepass")))
    if value is not None:
        size += len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
    return size


class _Watches:
    """
    One connection's watches: key to its watchers there, how many in all,
    the bytes of its unanswered C{changed()} calls, and, while it is behind,
    the changes coalesced for it: (key, watcher) to how many it was not told.
    """

    __slots__ = ("byKey", "count", "ledger", "unanswered", "behind", "reading")

    def __init__(self, ledger: Any) -> None:
        self.byKey: dict[str, set[rpc.RemoteReference]] = {}
        self.count = 0
        self.ledger = ledger
        self.unanswered = 0
        self.behind: dict[tuple[str, rpc.RemoteReference], int] = {}
        self.reading = False


class WatchBook:
    """
    The watches of one process.

    @ivar watchers: key to the references of the clients' watchers (a key
        with none has no entry).
    @ivar connections: per connection (its broker), what it watches: what to
        forget when it goes.
    @ivar limits: the L{WatchLimits}.
    @ivar current: the function giving a key's value now (C{None} if it
        has none), or a C{Deferred} of it: what a coalesced change is sent with.
    """

    def __init__(self, limits: WatchLimits | None, current: Callable[[str], Any]) -> None:
        self.watchers: dict[str, set[rpc.RemoteReference]] = {}
        self.connections: dict[Any, _Watches] = {}
        self.limits = limits or WatchLimits()
        self.current = current

    def add(self, key: str, watcher: rpc.RemoteReference) -> None:
        """
        Call C{watcher} on every change of C{key} from now on (a no-op if it already is).

        @raise WatchRefused: the connection or the key has as many watches as
            L{WatchLimits} allows.
        """
        watching = self.connections.get(watcher.broker)
        if watching is None:
            watching = self._connectionWatches(watcher.broker)
        mine = watching.byKey.get(key)
        if mine is None or watcher not in mine:
            self._checkCaps(key, watching, mine)
            if mine is None:
                mine = watching.byKey[key] = set()
            mine.add(watcher)
            watching.count += 1
            self.watchers.setdefault(key, set()).add(watcher)

    def remove(self, key: str, watcher: rpc.RemoteReference) -> bool:
        """Stop calling C{watcher} for C{key}; False if it was not watching."""
        watching = self.connections.get(watcher.broker)
        mine = watching.byKey.get(key) if watching is not None else None
        if watching is None or mine is None or watcher not in mine:
            return False
        mine.discard(watcher)
        if not mine:
            del watching.byKey[key]
        watching.count -= 1
        watching.behind.pop((key, watcher), None)
        self._unlink(key, watcher)
        return True

    def watched(self, key: str) -> bool:
        """Whether any watcher here watches C{key}."""
        return key in self.watchers

    def notify(self, key: str, value: str | None, skipped: int = 0) -> None:
        """
        Tell every watcher of C{key} that it is now C{value} (after
        C{skipped} changes not told separately): a C{changed()} call to each
        whose connection is not behind, one more coalesced change for each
        other.  O(its watchers), and O(1) per watcher that is behind.
        """
        watchers = self.watchers.get(key)
        if not watchers:
            return
        size = callSize(key, value)
        connections = self.connections
        for watcher in list(watchers):
            watching = connections[watcher.broker]
            if watching.behind or not self._fits(watching, size):
                entry = (key, watcher)
                watching.behind[entry] = watching.behind.get(entry, 0) + 1 + skipped
                if not watching.unanswered:
                    self._catchUp(watching)  # (no answer will come to send it: a value read before failed)
            else:
                self._call(watching, key, watcher, value, skipped, size)

    def lostTrack(self) -> int:
        """
        Changes were lost before this process read them, and which keys they
        changed cannot be known: close every connection that has a watch here
        (its watches forgotten at once), so that its client, seeing the
        connection lost, watches again and reads what it missed; how many.
        O(the watches here).
        """
        brokers = list(self.connections)
        for broker in brokers:
            self._connectionLost(None, broker)
            broker.disconnect()
        return len(brokers)

    def _fits(self, watching: _Watches, size: int) -> bool:
        """Whether a call of C{size} bytes may be sent to C{watching}'s connection now."""
        unanswered = watching.unanswered
        if not unanswered:
            return True  # one call always goes: a value over the bound still reaches a watcher that reads
        bound = self.limits.perConnectionBytes
        if bound is not None and unanswered + size > bound:
            return False
        return bool(watching.ledger.room(size))

    def _call(
        self, watching: _Watches, key: str, watcher: rpc.RemoteReference, value: str | None, skipped: int, size: int
    ) -> None:
        """Send one C{changed()} call, its bytes charged until it is answered."""
        watching.unanswered += size
        watching.ledger.charge(LEDGER_ACCOUNT, size)
        with detached():  # (the server's own call: not bound by the deadline of the put that caused it)
            if skipped:
                call = watcher.callRemote("changed", key, value, skipped=skipped)
            else:
                call = watcher.callRemote("changed", key, value)
        call.addBoth(self._answered, watching, size)
        call.addErrback(self._watcherFailed, key, watcher)

    def _answered(self, result: object, watching: _Watches, size: int) -> object:
        """A call to C{watching}'s connection ended (answered, failed or timed out): release it, send what waits."""
        watching.unanswered -= size
        watching.ledger.release(LEDGER_ACCOUNT, size)
        if watching.behind:
            self._catchUp(watching)
        return result

    def _catchUp(self, watching: _Watches) -> None:
        """
        Send the coalesced changes of C{watching}'s connection, oldest first,
        while they fit, each with its key's value read now (through
        C{current}: at once from a dict, from a storage's thread otherwise,
        one read at a time per connection).
        """
        behind = watching.behind
        while behind and not watching.reading:
            entry = next(iter(behind))
            if not entry[1].isConnected():
                behind.clear()  # the connection is going: nothing more is sent on it
                return
            watching.reading = True
            read = maybeDeferred(self.current, entry[0])
            if not read.called:
                read.addBoth(self._readLater, watching, entry)
                return
            outcome: list[Any] = []
            read.addBoth(outcome.append)
            if not self._send(watching, entry, outcome[0]):
                return

    def _readLater(self, value: object, watching: _Watches, entry: tuple[str, rpc.RemoteReference]) -> None:
        if self._send(watching, entry, value):
            self._catchUp(watching)

    def _send(self, watching: _Watches, entry: tuple[str, rpc.RemoteReference], value: object) -> bool:
        """
        Send C{entry}'s coalesced change with C{value} (a key's value read
        for it) if it is still waiting and fits; whether to go on.  A failed
        read leaves the entry for the next answer or change.
        """
        watching.reading = False
        if isinstance(value, Failure):
            return False
        count = watching.behind.get(entry)
        if count is None:
            return True  # (unwatched meanwhile)
        key, watcher = entry
        text = value if isinstance(value, str) else None
        size = callSize(key, text)
        if not self._fits(watching, size):
            return False
        del watching.behind[entry]
        self._call(watching, key, watcher, text, count - 1, size)
        return True

    def _checkCaps(self, key: str, watching: _Watches, mine: set[rpc.RemoteReference] | None) -> None:
        limits = self.limits
        if limits.perConnection is not None and watching.count >= limits.perConnection:
            raise WatchRefused("too-many-watches", f"this connection already has {watching.count} watches, the limit")
        if limits.perConnectionKey is not None and mine is not None and len(mine) >= limits.perConnectionKey:
            raise WatchRefused("too-many-watches", f"this connection already has {len(mine)} watchers of this key")
        watchers = self.watchers.get(key)
        if limits.perKey is not None and watchers is not None and len(watchers) >= limits.perKey:
            raise WatchRefused("too-many-watchers", f"this key already has {len(watchers)} watchers, the limit")

    def _connectionWatches(self, broker: Any) -> _Watches:
        watching = _Watches(broker.connection.ledger)
        self.connections[broker] = watching
        broker.whenDisconnected().addCallback(self._connectionLost, broker)
        return watching

    def _unlink(self, key: str, watcher: rpc.RemoteReference) -> None:
        watchers = self.watchers.get(key)
        if watchers is not None:
            watchers.discard(watcher)
            if not watchers:
                del self.watchers[key]

    def _watcherFailed(self, failure: Any, key: str, watcher: rpc.RemoteReference) -> None:
        """A C{changed()} call failed or timed out: drop the watcher, logged once (not if its connection is gone)."""
        if self.remove(key, watcher) and watcher.isConnected():
            watcher.broker.logFailure(
                "watcher-dropped",
                "{peer}: dropping a watcher of {key}: {code}: {reason}",
                key=escape(key),
                code="call-timeout" if failure.check(rpc.CallTimedOut) else "watcher-failed",
                reason=escape(failure.getErrorMessage()),
            )

    def _connectionLost(self, _: object, broker: Any) -> None:
        """Forget every watch of C{broker}'s connection: O(what it watched)."""
        watching = self.connections.pop(broker, None)
        if watching is not None:
            watching.behind.clear()
            for key, watchers in watching.byKey.items():
                for watcher in watchers:
                    self._unlink(key, watcher)
