"""Calling a chunkwire service from a plain script: no reactor, and no Twisted imported."""

import sys

# The service: the key-value example server, started so that the snippet runs as it is
# (in real use it already runs somewhere: python examples/kv_server.py --listen tcp:8760).
from _kv_service import startKeyValueServer

from framing.rpc import CallLimits
from protocols.options import ClientOptions

server, port, _ = startKeyValueServer()

# -- the client ------------------------------------------------------------------------------
from framing.rpc import NoSuchMethod, RemoteViolation, registerError  # noqa: E402
from protocols.blocking import connect  # noqa: E402


class KeyNotFound(KeyError):
    """The server's kv.KeyNotFound, registered under its wire name: it arrives as itself."""


registerError(KeyNotFound, "kv.KeyNotFound")

try:
    with connect(
        f"127.0.0.1:{port}", options=ClientOptions(timeout=10, callLimits=CallLimits(callTimeout=10))
    ) as connection:
        root = connection.root
        root.callRemote("put", "greeting", "hello")
        print("get:", root.callRemote("get", "greeting"))
        print("list:", root.callRemote("list", prefix="gr"))
        try:
            root.callRemote("get", "nobody")
        except KeyNotFound as error:
            print("missing:", error)
        try:
            root.callRemote("put", "k" * 2000, "v")
        except RemoteViolation as error:
            print("refused by the server:", error.code, error.where)
        try:
            root.callRemote("gett", "greeting")
        except NoSuchMethod as error:
            print("no such method:", error)
    print("twisted imported:", "twisted" in sys.modules)
finally:
    server.terminate()
    server.wait()
