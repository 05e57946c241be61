"""Who watches which key of the kv store, within one process: the caps, the calls, the forgetting.

Contract: a L{WatchBook} knows, for one server process, the watchers of
each key and what each connection watches; it refuses a watch past a cap
of L{WatchLimits} with a L{WatchRefused}, calls C{changed(key, value)} on
every watcher of a key when told of a change (L{WatchBook.notify}, O(watchers
of that key)), drops a watcher whose call fails or times out (once, with one
log line), and forgets a connection's watches when it is lost, in O(what
that connection watched).  A key with no watchers left has no entry.  It
knows nothing of where values are stored: the store tells it of changes,
whichever process made them (see L{protocols.kv.feed}).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from framing import Violation

from .. import rpc
from ..logs import escape


class WatchRefused(Violation):
    """A C{watch} past a cap of L{WatchLimits}; C{code} says which."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class WatchLimits:
    """
    The caps on watching; C{None} turns one off.  They count the watches of
    one server process (with workers, each counts its own connections).

    @ivar perConnection: most (key, watcher) pairs one connection may hold.
        1,000: a client watching more keys than that should watch a prefix
        of its own design, and each watch costs the server a reference and
        a call per change.
    @ivar perKey: most watchers of one key, over every connection.  1,000:
        each put of the key costs one C{changed()} call per watcher, each
        carrying the value (up to 1 MiB), so this bounds what one put can
        make the server send.
    @ivar perConnectionKey: most watchers one connection may have on one
        key.  10: an honest client needs one (the same watcher object comes
        back as the same reference, and watching twice is a no-op), while
        invented reference ids would otherwise let one connection make each
        put of a 1 MiB value cost the server a gigabyte of calls to it.
    """

    perConnection: int | None = 1000
    perKey: int | None = 1000
    perConnectionKey: int | None = 10


class _Watches:
    """One connection's watches: key to its watchers there, and how many in all."""

    __slots__ = ("byKey", "count")

    def __init__(self) -> None:
        self.byKey: dict[str, set[rpc.RemoteReference]] = {}
        self.count = 0


class WatchBook:
    """
    The watches of one process.

    @ivar watchers: key to the references of the clients' watchers (a key
        with none has no entry).
    @ivar connections: per connection (its broker), what it watches: what to
        forget when it goes.
    @ivar limits: the L{WatchLimits}.
    """

    def __init__(self, limits: WatchLimits | None = None) -> None:
        self.watchers: dict[str, set[rpc.RemoteReference]] = {}
        self.connections: dict[Any, _Watches] = {}
        self.limits = limits or WatchLimits()

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
        self._unlink(key, watcher)
        return True

    def watched(self, key: str) -> bool:
        """Whether any watcher here watches C{key}."""
        return key in self.watchers

    def notify(self, key: str, value: str | None) -> None:
        """Call C{changed(key, value)} on every watcher of C{key}: O(its watchers)."""
        for watcher in list(self.watchers.get(key, ())):
            watcher.callRemote("changed", key, value).addErrback(self._watcherFailed, key, watcher)

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
        watching = _Watches()
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
            for key, watchers in watching.byKey.items():
                for watcher in watchers:
                    self._unlink(key, watcher)
