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
from dataclasses import replace
from typing import Any

from _serving import addListenArgument, serveForever
from twisted.internet.defer import Deferred
from twisted.internet.task import react
from twisted.logger import globalLogBeginner, textFileLogObserver

from protocols import TokenProtocol, rpc
from protocols.guard import GuardedFactory, GuardPolicy, addGuardArguments, policyFromArguments
from protocols.kv import KEY, VALUE, KeyNotFound, KeyValueStore

# The store lives in protocols.kv so that `twist chunkwire-kv` serves the same one.
__all__ = ["KEY", "VALUE", "KeyNotFound", "KeyValueStore"]


async def serve(
    reactor: Any,
    descriptions: list[str],
    tracebacks: bool,
    policy: GuardPolicy | None = None,
    callLimits: rpc.CallLimits | None = None,
) -> None:
    store = KeyValueStore()
    brokers = rpc.serverFactory(store, clock=reactor, tracebacks=tracebacks, callLimits=callLimits)
    factory = GuardedFactory(brokers, policy, reactor)
    await serveForever(reactor, descriptions, factory, "kv server")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    addListenArgument(parser, "tcp:8760")
    parser.add_argument("--tracebacks", action="store_true", help="send tracebacks of failed calls to clients")
    parser.add_argument("--log", action="store_true", help="log to stdout")
    parser.add_argument(
        "--call-timeout",
        type=float,
        default=rpc.SERVER_CALL_LIMITS.call_timeout,
        metavar="S",
        help="seconds a watcher has to answer a change before it is dropped",
    )
    addGuardArguments(parser)
    parser.add_argument("--trace", action="store_true", help="log every token sent and received, readably")
    args = parser.parse_args(argv)
    TokenProtocol.trace = args.trace
    # Without --log, logging still begins (to nothing): until it does, Twisted
    # keeps the last 65,536 events, and each holds the connection it names.
    observers: list[Any] = [textFileLogObserver(sys.stdout)] if args.log or args.trace else []
    globalLogBeginner.beginLoggingTo(observers, redirectStandardIO=False)
    policy = policyFromArguments(args)
    callLimits = replace(rpc.SERVER_CALL_LIMITS, call_timeout=args.call_timeout)
    react(
        lambda reactor: Deferred.fromCoroutine(
            serve(reactor, args.listen or ["tcp:8760"], args.tracebacks, policy, callLimits)
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
