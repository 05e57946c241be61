"""The key-value store of the RPC tutorial and of C{twist chunkwire-kv}.

Remote methods of the root (see L{KeyValueStore}): C{get(key)},
C{put(key, value)}, C{delete(key)}, C{list(prefix="")}, and
C{watch(key, watcher)} / C{unwatch(key, watcher)}: the server calls
C{watcher.changed(key, value)} on every change of C{key} (C{value} is
C{None} once deleted), where C{watcher} is a C{Referenceable} the client
passed.  Keys and values are strings; a missing key is a L{KeyNotFound},
registered as C{"kv.KeyNotFound"}, so a client that imports this module sees
it arrive as itself.

Contract: every operation is O(1) in the store's size except C{list}
(O(n log n) in the keys); a watcher whose connection is lost is forgotten.
"""

from __future__ import annotations

from typing import Any

from twisted.logger import Logger

from framing.slicing.constraints import Boolean, Text

from . import rpc

KEY = Text(1024)
VALUE = Text(1 << 20)


class KeyNotFound(Exception):
    """The key is not in the store.  Registered as C{"kv.KeyNotFound"}."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


rpc.register_error(KeyNotFound, "kv.KeyNotFound")


class KeyValueStore(rpc.Referenceable):
    """
    The store: a dict of strings, and the watchers of each key.

    @ivar data: key to value.
    @ivar watchers: key to the references of the clients' watchers.
    """

    log = Logger()

    def __init__(self) -> None:
        self.data: dict[str, str] = {}
        self.watchers: dict[str, set[rpc.RemoteReference]] = {}
        self._connections: set[Any] = set()

    @rpc.remote(args={"key": KEY})
    def get(self, key: str) -> str:
        try:
            return self.data[key]
        except KeyError:
            raise KeyNotFound(key) from None

    @rpc.remote(args={"key": KEY, "value": VALUE})
    def put(self, key: str, value: str) -> None:
        self.data[key] = value
        self._notify(key, value)

    @rpc.remote(args={"key": KEY}, result=Boolean())
    def delete(self, key: str) -> bool:
        if self.data.pop(key, None) is None:
            return False
        self._notify(key, None)
        return True

    @rpc.remote(args={"prefix": KEY})
    def list(self, prefix: str = "") -> list[str]:
        return sorted(key for key in self.data if key.startswith(prefix))

    @rpc.remote(args={"key": KEY})
    def watch(self, key: str, watcher: rpc.RemoteReference) -> str | None:
        """Call C{watcher.changed(key, value)} on every change; return the current value."""
        if not isinstance(watcher, rpc.RemoteReference):
            raise TypeError("the watcher must be a Referenceable of the caller")
        self.watchers.setdefault(key, set()).add(watcher)
        self._forgetOnDisconnect(watcher.broker)
        return self.data.get(key)

    @rpc.remote(args={"key": KEY})
    def unwatch(self, key: str, watcher: rpc.RemoteReference) -> bool:
        # The same client object arrives as the same RemoteReference, so set
        # membership finds it.
        watching = self.watchers.get(key, set())
        found = watcher in watching
        watching.discard(watcher)
        return found

    def _notify(self, key: str, value: str | None) -> None:
        for watcher in list(self.watchers.get(key, ())):
            watcher.callRemote("changed", key, value).addErrback(self._watcherFailed, key, watcher)

    def _watcherFailed(self, failure: Any, key: str, watcher: rpc.RemoteReference) -> None:
        self.log.info("Dropping a watcher of {key!r}: {reason}", key=key, reason=failure.getErrorMessage())
        self.watchers.get(key, set()).discard(watcher)

    def _forgetOnDisconnect(self, broker: Any) -> None:
        if broker in self._connections:
            return
        self._connections.add(broker)

        def forget(_: object) -> None:
            self._connections.discard(broker)
            for watching in self.watchers.values():
                for watcher in [w for w in watching if w.broker is broker]:
                    watching.discard(watcher)

        broker.whenDisconnected().addCallback(forget)
