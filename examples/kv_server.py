"""A key-value store served over chunkwire RPC, on any Twisted endpoint.

    python examples/kv_server.py --listen tcp:8760
    python examples/kv_client.py --connect tcp:host=127.0.0.1:port=8760 put greeting hello
    python examples/kv_client.py --connect tcp:host=127.0.0.1:port=8760 watch greeting

Remote methods of the root (see L{KeyValueStore}): C{get(key)},
C{put(key, value)}, C{delete(key)}, C{list(prefix="")}, and
C{watch(key, watcher)} / C{unwatch(key, watcher)}: the server calls
C{watcher.changed(key, value)} on every change of C{key} (C{value} is
C{None} once deleted), where C{watcher} is a C{Referenceable} the client
passed.  Keys and values are strings; a missing key is a C{KeyNotFound},
which both sides register, so it arrives as itself.  Stop with Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import react
from twisted.logger import globalLogBeginner, textFileLogObserver

from framing.slicing.constraints import Boolean, Text
from protocols import rpc

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
        print(f"dropping a watcher of {key!r}: {failure.getErrorMessage()}", flush=True)
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


async def serve(reactor: Any, descriptions: list[str], tracebacks: bool) -> None:
    store = KeyValueStore()
    for description in descriptions:
        port: Any = await rpc.serve(reactor, description, store, tracebacks=tracebacks)
        print(f"kv server listening on {description} ({port.getHost()})", flush=True)
    await Deferred()  # serve until interrupted


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--listen",
        action="append",
        metavar="ENDPOINT",
        help="a Twisted server endpoint description (repeatable; default tcp:8760)",
    )
    parser.add_argument("--tracebacks", action="store_true", help="send tracebacks of failed calls to clients")
    parser.add_argument("--log", action="store_true", help="log to stdout")
    args = parser.parse_args(argv)
    if args.log:
        observer: Any = textFileLogObserver(sys.stdout)
        globalLogBeginner.beginLoggingTo([observer], redirectStandardIO=False)
    react(lambda reactor: Deferred.fromCoroutine(serve(reactor, args.listen or ["tcp:8760"], args.tracebacks)))


if __name__ == "__main__":
    main(sys.argv[1:])
