"""A key-value store served over chunkwire RPC, on any Twisted endpoint.

    python examples/kv_server.py --listen tcp:8760
    python examples/kv_server.py --listen tcp:8760 --store kv.sqlite
    python examples/kv_server.py --listen tcp:8760 --store postgresql://kv@db.example/kv
    python examples/kv_client.py --connect tcp:host=127.0.0.1:port=8760 put greeting hello
    python examples/kv_client.py --connect tcp:host=127.0.0.1:port=8760 watch greeting

With --users FILE (made with chunkwire-adduser), --client-ca DIR or
--tokens FILE, only clients that log in are served (kv_client.py --user
NAME, --token-file FILE or --certificate-login); every user shares the
one store.

The service is the remote interface IKeyValue of protocols/kv.py, which the
server's KeyValueStore implements and kv_client.py calls through a typed
proxy: get(key), put(key, value), delete(key), list(prefix=""), and
watch(key, watcher) / unwatch(key, watcher): the server calls
watcher.changed(key, value) on every change of key (value is None once
deleted), where watcher is a Referenceable the client passed (kv_client.py's
implements IWatcher).  The interface's type hints are the constraints both
ends check: keys of at most 1 KiB, values of at most 1 MiB.  Keys and values are strings; a missing
key is a KeyNotFound, which both sides register, so it arrives as itself.
The store lives in memory unless --store FILE names a SQLite file, where
each put is on disk before it is answered and every value outlives the
server (several servers may share the file: each one's watchers hear of
the others' changes within a poll, see protocols/kv/_feed.py), or a
postgresql:// URL a PostgreSQL database, which servers on several hosts
share (each one's watchers hear of the others' changes through
LISTEN/NOTIFY).  This
server is one process; `twist chunkwire-kv --workers N --store FILE` runs
several on one port.
It logs to stdout (start-up, logins, peers the guard drops, failed calls)
unless given --quiet.
Stop with Ctrl-C or SIGTERM: the server stops accepting, sends GOAWAY to
every client and exits once they have closed, their calls in flight having
had --grace seconds (30) to finish.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from dataclasses import replace
from typing import Any

from _errors import CommandLineParser, addDebugArgument, runCommand
from _serving import (
    addGraceArgument,
    addListenArgument,
    addLogArguments,
    addLoginArguments,
    beginLoggingAsAsked,
    loginsFrom,
    serveForever,
)

from protocols import TokenProtocol, rpc
from protocols.auth import OPEN, ServiceLogins, SharedRootRealm
from protocols.kv import (
    KEY,
    VALUE,
    IKeyValue,
    IWatcher,
    KeyNotFound,
    KeyValueStore,
    StoreLimits,
    StoreUnavailable,
    openStorage,
)
from protocols.rpc import DEFAULT_GRACE, ServerOptions
from protocols.serving import GuardedFactory, GuardPolicy, addGuardArguments, policyFromArguments

# The store lives in protocols.kv so that `twist chunkwire-kv` serves the same one.
__all__ = ["KEY", "VALUE", "IKeyValue", "IWatcher", "KeyNotFound", "KeyValueStore"]


async def serve(
    reactor: Any,
    descriptions: list[str],
    tracebacks: bool,
    policy: GuardPolicy | None = None,
    callLimits: rpc.CallLimits | None = None,
    logins: ServiceLogins = OPEN,
    storePath: str | None = None,
    limits: StoreLimits | None = None,
    grace: float = DEFAULT_GRACE,
) -> None:
    try:
        storage = None if storePath is None else openStorage(storePath)
    except sqlite3.Error as error:
        # (at start-up, to the operator: the driver's words say what is wrong with the file)
        raise StoreUnavailable(f"cannot open --store {storePath}: {error}") from error
    except StoreUnavailable as error:
        # (a database URL, which may hold a password: not repeated)
        raise StoreUnavailable(f"cannot open --store: {error}") from None
    store = KeyValueStore(storage=storage, clock=reactor, limits=limits)
    # Closed once the reactor has stopped: no call runs after that.
    reactor.addSystemEventTrigger("after", "shutdown", store.close)
    portal = logins.portal(SharedRootRealm(store))
    root = store if portal is None else None
    brokers = rpc.serverFactory(
        root,
        clock=reactor,
        options=ServerOptions(
            tracebacks=tracebacks, callLimits=callLimits, portal=portal, throttle=logins.throttle(reactor)
        ),
    )
    factory = GuardedFactory(brokers, policy, reactor)
    await serveForever(reactor, descriptions, factory, "kv server", logins=logins, grace=grace)


def main(argv: list[str]) -> None:
    parser = CommandLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    addListenArgument(parser, "tcp:8760")
    parser.add_argument(
        "--store",
        metavar="FILE|URL",
        help="keep the store in this SQLite file (created if missing), or in the PostgreSQL database of a "
        "postgresql:// URL (shared by servers on every host), kept across restarts; default: in memory",
    )
    parser.add_argument(
        "--max-keys",
        type=int,
        default=StoreLimits().maxKeys,
        metavar="N",
        help="most keys the store holds; a put of a new key past it fails with kv.StoreFull (default %(default)s)",
    )
    parser.add_argument(
        "--max-store-bytes",
        type=int,
        default=StoreLimits().maxBytes,
        metavar="N",
        help="most characters of keys and values held in all; a put past it fails with kv.StoreFull "
        "(default %(default)s)",
    )
    parser.add_argument("--tracebacks", action="store_true", help="send tracebacks of failed calls to clients")
    addLogArguments(parser)
    parser.add_argument(
        "--call-timeout",
        type=float,
        default=rpc.SERVER_CALL_LIMITS.callTimeout,
        metavar="S",
        help="seconds a watcher has to answer a change before it is dropped",
    )
    addGraceArgument(parser)
    addLoginArguments(parser)
    addGuardArguments(parser)
    parser.add_argument("--trace", action="store_true", help="log every token sent and received, readably")
    addDebugArgument(parser)
    args = parser.parse_args(argv)
    TokenProtocol.trace = args.trace
    beginLoggingAsAsked(args)
    policy = policyFromArguments(args)
    callLimits = replace(rpc.SERVER_CALL_LIMITS, callTimeout=args.call_timeout)
    listen = args.listen or ["tcp:8760"]
    limits = StoreLimits(maxKeys=args.max_keys, maxBytes=args.max_store_bytes)
    runCommand(
        lambda reactor: serve(
            reactor, listen, args.tracebacks, policy, callLimits, loginsFrom(args), args.store, limits, args.grace
        ),
        None,
        args.debug,
        True,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
