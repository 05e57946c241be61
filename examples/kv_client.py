"""Command-line client of the key-value example (examples/kv_server.py).

    python examples/kv_client.py --connect tcp:host=127.0.0.1:port=8760 put greeting hello
    python examples/kv_client.py --connect tcp:host=127.0.0.1:port=8760 get greeting
    python examples/kv_client.py --connect tcp:host=127.0.0.1:port=8760 delete greeting
    python examples/kv_client.py --connect tcp:host=127.0.0.1:port=8760 list [PREFIX]
    python examples/kv_client.py --connect tcp:host=127.0.0.1:port=8760 watch greeting [--count N]

The client calls the store through a typed proxy of the shared interface
protocols.kv.IKeyValue: arguments it refuses (a key over 1 KiB) fail here,
before anything is sent, and mypy checks the calls.  get and delete of a
missing key exit with status 1.  watch prints
every change of the key until interrupted (or after N changes); it
reconnects with backoff if the server goes away, and watches again on each
new connection; a value that changed while it was away is printed (and
counted) as one change, so watch --count N never waits for a change it
missed.  It tries again 0.5 s after a connection is lost or refused,
each wait half as long again as the last up to --retry-max seconds (10
by default), plus up to a second of jitter.

A server started with --users or --client-ca serves only clients that log
in: --user NAME (the password from --password-file, $CHUNKWIRE_PASSWORD or
the terminal), --token-file FILE, or --certificate-login (as the client
certificate of an ssl: --connect).  A refused login exits with status 1
(watch logs in once before it starts, so a refusal is not retried).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

# The script's directory is on sys.path: importing the server module registers
# KeyNotFound on this side too, so it arrives as itself.
from _connecting import addTimeoutArgument, warnIfUnverified
from _errors import CommandLineParser, addDebugArgument, needsLogin, runCommand
from _login import addLoginArguments, credentialsFrom
from kv_server import KeyNotFound
from twisted.application.internet import backoffPolicy
from twisted.internet.defer import Deferred
from twisted.logger import globalLogBeginner, textFileLogObserver

from protocols import TokenProtocol, rpc
from protocols.kv import IKeyValue, IWatcher
from protocols.options import ClientOptions


class Watcher(rpc.Referenceable, IWatcher):
    """
    Passed to the server's C{watch}: the server calls L{changed} on every
    change (a method of L{IWatcher}, so remote without C{@rpc.remote}).

    @ivar done: fires after C{count} changes (never if C{count} is 0).
    @ivar known: whether L{last} holds the value a server reported.
    @ivar last: the key's value as last reported (C{None}: unset).
    """

    def __init__(self, count: int) -> None:
        self.count = count
        self.seen = 0
        self.done: Deferred[None] = Deferred()
        self.known = False
        self.last: str | None = None

    def subscribed(self, key: str, current: str | None) -> None:
        """
        A watch began on a connection, the key now C{current}.  On a later
        connection (a reconnect), a value different from the last one known
        changed while no connection heard it: report it as one change, or
        C{--count} would wait for a change that already happened.
        """
        missed = self.known and current != self.last
        self.known = True
        self.last = current
        print(f"watching {key} (now {'unset' if current is None else repr(current)})", flush=True)
        if missed:
            self._report(key, current)

    def stop(self, failure: BaseException) -> None:
        """End the watch with C{failure} (once)."""
        if not self.done.called:
            self.done.errback(failure)

    @rpc.deferred
    async def changed(self, key: str, value: str | None, skipped: int = 0) -> None:
        self.known = True
        self.last = value
        self._report(key, value, skipped)

    def _report(self, key: str, value: str | None, skipped: int = 0) -> None:
        if skipped:
            print(f"({skipped} earlier changes of {key} skipped)", flush=True)
        print(f"{key} deleted" if value is None else f"{key} = {value}", flush=True)
        self.seen += 1
        if self.count and self.seen == self.count:
            self.done.callback(None)


async def watch(
    reactor: Any,
    description: str,
    key: str,
    count: int,
    credentials: Any = None,
    timeout: float | None = None,
    retryMax: float = 10.0,
) -> None:
    watcher = Watcher(count)
    if credentials is not None:
        # A refused login is final: find out once, before the reconnecting client would retry it forever.
        first = await rpc.login(reactor, description, credentials, options=ClientOptions(timeout=timeout))
        await first.broker.disconnect()

    async def subscribe(root: rpc.RemoteReference) -> None:
        try:
            current = await root.typed(IKeyValue).watch(key, watcher)
        except Exception as error:
            if not needsLogin(error):
                raise
            failure = error
            # Final, not worth a retry: end the watch once the connection is gone (the
            # reconnecting client's state machine takes no stop while a connection is half made).
            root.broker.whenDisconnected().addCallback(lambda _: reactor.callLater(0, watcher.stop, failure))
            return
        watcher.subscribed(key, current)

    client = rpc.reconnecting(
        reactor,
        description,
        retryPolicy=backoffPolicy(initialDelay=min(0.5, retryMax), maxDelay=retryMax),
        prepareConnection=lambda root: Deferred.fromCoroutine(subscribe(root)),
        options=ClientOptions(credentials=credentials, timeout=timeout),
    )
    try:
        await watcher.done
    finally:
        await client.stopService()


async def once(
    reactor: Any,
    description: str,
    command: str,
    arguments: list[str],
    credentials: Any = None,
    timeout: float | None = None,
) -> None:
    """
    Run one command on a fresh connection, logged in with C{credentials} if
    given, made within C{timeout}; exit 1 for a missing key.
    """
    if credentials is None:
        root = await rpc.connect(reactor, description, options=ClientOptions(timeout=timeout))
    else:
        root = await rpc.login(reactor, description, credentials, options=ClientOptions(timeout=timeout))
    kv = root.typed(IKeyValue)
    try:
        if command == "put":
            key, value = arguments
            await kv.put(key, value)
            print(f"put {key}")
        elif command == "get":
            (key,) = arguments
            try:
                print(await kv.get(key))
            except KeyNotFound as missing:
                print(f"not found: {missing.key}", file=sys.stderr)
                raise SystemExit(1) from None
        elif command == "delete":
            (key,) = arguments
            if not await kv.delete(key):
                print(f"not found: {key}", file=sys.stderr)
                raise SystemExit(1)
            print(f"deleted {key}")
        else:
            for key in await kv.list(*arguments):
                print(key)
    finally:
        await root.broker.disconnect()


ARITY = {"put": 2, "get": 1, "delete": 1, "list": (0, 1), "watch": 1}


def main(argv: list[str]) -> None:
    parser = CommandLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connect", default="tcp:host=127.0.0.1:port=8760", metavar="ENDPOINT")
    parser.add_argument("--count", type=int, default=0, help="watch: stop after this many changes")
    parser.add_argument(
        "--retry-max",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="watch: most seconds between attempts to reconnect, less jitter (default 10)",
    )
    parser.add_argument("command", choices=sorted(ARITY))
    parser.add_argument("arguments", nargs="*")
    parser.add_argument("--trace", action="store_true", help="log every token sent and received, readably")
    addLoginArguments(parser)
    addTimeoutArgument(parser)
    addDebugArgument(parser)
    args = parser.parse_args(argv)
    if args.trace:  # the tokens go to stderr, so that stdout stays the command's answer
        TokenProtocol.trace = True
        globalLogBeginner.beginLoggingTo([textFileLogObserver(sys.stderr)], redirectStandardIO=False)
    arity = ARITY[args.command]
    if len(args.arguments) not in (arity if isinstance(arity, tuple) else (arity,)):
        parser.error(f"{args.command} takes {arity} argument(s)")
    credentials = credentialsFrom(parser, args)
    warnIfUnverified(args.connect)
    if args.retry_max <= 0:
        parser.error("--retry-max must be more than 0 seconds")
    if args.command == "watch":
        runCommand(
            lambda reactor: watch(
                reactor, args.connect, args.arguments[0], args.count, credentials, args.timeout, args.retry_max
            ),
            args.connect,
            args.debug,
        )
    else:
        runCommand(
            lambda reactor: once(reactor, args.connect, args.command, args.arguments, credentials, args.timeout),
            args.connect,
            args.debug,
        )


if __name__ == "__main__":
    main(sys.argv[1:])
