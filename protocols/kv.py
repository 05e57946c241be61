"""The key-value store of the RPC tutorial and of C{twist chunkwire-kv}.

The service is declared once, as the remote interface L{IKeyValue}, which
both ends import: the server's L{KeyValueStore} implements it, and a client
calls it through a typed proxy (C{await rpc.connect(reactor, address,
interface=IKeyValue)}), whose calls are checked here and by mypy.  Its
methods: C{get(key)}, C{put(key, value)}, C{delete(key)},
C{list(prefix="")}, and C{watch(key, watcher)} / C{unwatch(key, watcher)}:
the server calls C{watcher.changed(key, value)} on every change of C{key}
(C{value} is C{None} once deleted), where C{watcher} is a C{Referenceable}
the client passed (one implementing L{IWatcher}, whose method's hints then
check the server's calls too).  The constraints (keys of at most 1 KiB,
values of at most 1 MiB) are the hints' L{Key} and L{Value}.  Keys and
values are strings; a missing key is a L{KeyNotFound},
registered as C{"kv.KeyNotFound"}, so a client that imports this module sees
it arrive as itself.

Contract: every operation is O(1) in the store's size except C{list}
(O(n log n) in the keys); a put or delete costs O(watchers of that key).
Watches are capped per connection and per key (L{WatchLimits}); past a cap,
C{watch} is refused with a L{WatchRefused} (a C{RemoteViolation} to the
client, coded C{too-many-watches} or C{too-many-watchers}), which the server
counts as a refusal of that connection.  A watcher whose C{changed()} call
fails or times out (the server's calls to clients time out, see
L{protocols.rpc.SERVER_CALL_LIMITS}) is dropped, once, with one log line; a
watcher whose connection is lost is forgotten silently.  Forgetting a
connection's watchers costs O(what that connection watched), and a key with
no watchers left has no entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Protocol

from twisted.logger import Logger

from framing import Violation
from framing.slicing.constraints import Text

from . import rpc
from .logs import escape

Key = Annotated[str, rpc.MaxLength(1024)]
"""A key: a string of at most 1 KiB (UTF-8)."""
Value = Annotated[str, rpc.MaxLength(1 << 20)]
"""A value: a string of at most 1 MiB (UTF-8)."""

KEY = Text(1024)
"""L{Key} as an explicit constraint (what C{remote(args=...)} takes)."""
VALUE = Text(1 << 20)
"""L{Value} as an explicit constraint."""


class KeyNotFound(Exception):
    """The key is not in the store.  Registered as C{"kv.KeyNotFound"}."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


rpc.registerError(KeyNotFound, "kv.KeyNotFound")


class WatchRefused(Violation):
    """A C{watch} past a cap of L{WatchLimits}; C{code} says which."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class WatchLimits:
    """
    The caps on watching; C{None} turns one off.

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


class IWatcher(rpc.RemoteInterface, Protocol, name="kv.IWatcher"):
    """What a client passes to L{IKeyValue.watch}: the server calls C{changed} on every change of the key."""

    async def changed(self, key: Key, value: Value | None) -> None:
        """C{key} is now C{value}, or was deleted (C{None})."""


# Any Referenceable of the caller (the server calls its "changed").
Watcher = rpc.Referenceable | rpc.RemoteReference


class IKeyValue(rpc.RemoteInterface, Protocol, name="kv.IKeyValue"):
    """The key-value service, as both ends see it."""

    async def get(self, key: Key) -> str:
        """The value of C{key}; a L{KeyNotFound} if it has none."""

    async def put(self, key: Key, value: Value) -> None:
        """Set C{key} to C{value}, telling its watchers."""

    async def delete(self, key: Key) -> bool:
        """Delete C{key}, telling its watchers; whether it was there."""

    async def list(self, prefix: Key = "") -> list[str]:
        """The keys that start with C{prefix}, sorted."""

    async def watch(self, key: Key, watcher: Watcher) -> str | None:
        """Call C{watcher.changed(key, value)} on every change of C{key}; its value now."""

    async def unwatch(self, key: Key, watcher: Watcher) -> bool:
        """Stop calling C{watcher} for C{key}; whether it was watching."""


class _Watches:
    """One connection's watches: key to its watchers there, and how many in all."""

    __slots__ = ("byKey", "count")

    def __init__(self) -> None:
        self.byKey: dict[str, set[rpc.RemoteReference]] = {}
        self.count = 0


class KeyValueStore(rpc.Referenceable, IKeyValue):
    """
    The store: a dict of strings, and the watchers of each key.  It
    implements L{IKeyValue}, so its methods of that name are remote, with
    the constraints of the interface's hints; none of them waits, but they
    are C{async def} as the interface declares them (a coroutine that never
    waits is answered at once).

    @ivar data: key to value.
    @ivar watchers: key to the references of the clients' watchers (a key
        with none has no entry).
    @ivar watchLimits: the L{WatchLimits}.
    """

    log = Logger()

    def __init__(self, watchLimits: WatchLimits | None = None) -> None:
        self.data: dict[str, str] = {}
        self.watchers: dict[str, set[rpc.RemoteReference]] = {}
        self.watchLimits = watchLimits or WatchLimits()
        # Per connection, what it watches: what to forget when it goes.
        self._watching: dict[Any, _Watches] = {}

    async def get(self, key: str) -> str:
        try:
            return self.data[key]
        except KeyError:
            raise KeyNotFound(key) from None

    async def put(self, key: str, value: str) -> None:
        self.data[key] = value
        self._notify(key, value)

    async def delete(self, key: str) -> bool:
        if self.data.pop(key, None) is None:
            return False
        self._notify(key, None)
        return True

    async def list(self, prefix: str = "") -> list[str]:
        return sorted(key for key in self.data if key.startswith(prefix))

    async def watch(self, key: str, watcher: Watcher) -> str | None:
        """
        Call C{watcher.changed(key, value)} on every change; return the current value.

        @raise WatchRefused: the connection or the key has as many watches as
            L{WatchLimits} allows.
        """
        if not isinstance(watcher, rpc.RemoteReference):
            raise TypeError("the watcher must be a Referenceable of the caller")
        watching = self._watching.get(watcher.broker)
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
        return self.data.get(key)

    async def unwatch(self, key: str, watcher: Watcher) -> bool:
        # The same client object arrives as the same RemoteReference, so set
        # membership finds it.
        if not isinstance(watcher, rpc.RemoteReference):
            return False
        return self._forget(key, watcher)

    def _checkCaps(self, key: str, watching: _Watches, mine: set[rpc.RemoteReference] | None) -> None:
        limits = self.watchLimits
        if limits.perConnection is not None and watching.count >= limits.perConnection:
            raise WatchRefused("too-many-watches", f"this connection already has {watching.count} watches, the limit")
        if limits.perConnectionKey is not None and mine is not None and len(mine) >= limits.perConnectionKey:
            raise WatchRefused("too-many-watches", f"this connection already has {len(mine)} watchers of this key")
        watchers = self.watchers.get(key)
        if limits.perKey is not None and watchers is not None and len(watchers) >= limits.perKey:
            raise WatchRefused("too-many-watchers", f"this key already has {len(watchers)} watchers, the limit")

    def _connectionWatches(self, broker: Any) -> _Watches:
        watching = _Watches()
        self._watching[broker] = watching
        broker.whenDisconnected().addCallback(self._connectionLost, broker)
        return watching

    def _forget(self, key: str, watcher: rpc.RemoteReference) -> bool:
        """Stop calling C{watcher} for C{key}; False if it was not watching."""
        watching = self._watching.get(watcher.broker)
        mine = watching.byKey.get(key) if watching is not None else None
        if watching is None or mine is None or watcher not in mine:
            return False
        mine.discard(watcher)
        if not mine:
            del watching.byKey[key]
        watching.count -= 1
        self._unlink(key, watcher)
        return True

    def _unlink(self, key: str, watcher: rpc.RemoteReference) -> None:
        watchers = self.watchers.get(key)
        if watchers is not None:
            watchers.discard(watcher)
            if not watchers:
                del self.watchers[key]

    def _notify(self, key: str, value: str | None) -> None:
        for watcher in list(self.watchers.get(key, ())):
            watcher.callRemote("changed", key, value).addErrback(self._watcherFailed, key, watcher)

    def _watcherFailed(self, failure: Any, key: str, watcher: rpc.RemoteReference) -> None:
        """A C{changed()} call failed or timed out: drop the watcher, logged once (not if its connection is gone)."""
        if self._forget(key, watcher) and watcher.isConnected():
            watcher.broker.logFailure(
                "watcher-dropped",
                "{peer}: dropping a watcher of {key}: {code}: {reason}",
                key=escape(key),
                code="call-timeout" if failure.check(rpc.CallTimedOut) else "watcher-failed",
                reason=escape(failure.getErrorMessage()),
            )

    def _connectionLost(self, _: object, broker: Any) -> None:
        """Forget every watch of C{broker}'s connection: O(what it watched)."""
        watching = self._watching.pop(broker, None)
        if watching is not None:
            for key, watchers in watching.byKey.items():
                for watcher in watchers:
                    self._unlink(key, watcher)
