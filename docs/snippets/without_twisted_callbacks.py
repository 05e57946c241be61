"""A callback from a plain script: the server calls an object of the client's, no reactor, no Twisted imported."""

import sys

# The service: the key-value example server, started so that the snippet runs as it is.
from _kv_service import startKeyValueServer

from framing.rpc import CallLimits
from protocols.options import ClientOptions

server, port, _ = startKeyValueServer()

# -- the client ------------------------------------------------------------------------------
from framing.rpc import Referenceable, remote  # noqa: E402
from protocols.blocking import connect  # noqa: E402


class Watcher(Referenceable):
    """Passed to the server's watch(): the server calls changed() on every change of the key."""

    @remote
    def changed(self, key: str, value: str | None) -> None:
        print("changed:", key, value)


try:
    with connect(
        f"127.0.0.1:{port}", options=ClientOptions(timeout=10, callLimits=CallLimits(callTimeout=10))
    ) as connection:
        root = connection.root
        watcher = Watcher()
        root.callRemote("watch", "greeting", watcher)
        root.callRemote("put", "greeting", "hello")  # changed() runs here, on this thread, during the put
        root.callRemote("delete", "greeting")
        print("unwatched:", root.callRemote("unwatch", "greeting", watcher))
        root.callRemote("put", "greeting", "again")  # (not watched any more: no call)
    print("twisted imported:", "twisted" in sys.modules)
finally:
    server.terminate()
    server.wait()
