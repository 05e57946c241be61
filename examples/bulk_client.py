"""Command-line client of the bulk-transfer service (examples/bulk_server.py).

    python examples/bulk_client.py --connect tcp:host=127.0.0.1:port=8770 send FILE [--name NAME]
    python examples/bulk_client.py --connect tcp:host=127.0.0.1:port=8770 fetch NAME [--output PATH] [--force]
    python examples/bulk_client.py --connect tcp:host=127.0.0.1:port=8770 list

--streams N stripes the transfer over N connections.  A dropped connection
is made again and the transfer resumes from what the receiver holds.  A
transfer stopped with Ctrl-C says how far it got and exits with status 130;
run the same command again and it resumes (a fetch from its .NAME.part
file, a send from what the server kept), saying where from.  fetch never
replaces an existing file unless --force is given.  On a terminal a
progress bar shows bytes, rate and ETA; otherwise a plain line is printed
every second.  Rates count only the bytes that moved in this run.  The last
line gives the size, the time, the rate, the digest both sides verified
(BLAKE3 when both have the blake3 package, else SHA-256) and its name,
and what was resumed or skipped.  The exit status is 1 if the transfer
failed.

A command to a plain tcp:host=H:port=P endpoint with one stream runs on
the blocking client (protocols.blockingbulk), hashing inline in the
thread that reads and writes, and loads no Twisted; --streams N (N > 1),
--hashing thread, --trace and every other endpoint (ssl:, unix:, ...) run
on Twisted.  Both behave and answer alike.

A server started with --users or --client-ca serves only clients that log
in: --user NAME (the password from --password-file, $CHUNKWIRE_PASSWORD or
the terminal), --token-file FILE, or --certificate-login (as the client
certificate of an ssl: --connect); each user sees only their own files.  A
refused login exits with status 1.
"""

# Only what parsing the command line needs is imported here: --help and a
# mistyped option load neither Twisted nor chunkwire (tests/examples/test_help.py
# HelpImportTests); a command imports them once it runs.

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

# The script's directory is on sys.path: the error report and the progress display are shared with the other examples.
from _connecting import addTimeoutArgument, plainTCP, warnIfUnverified, withoutTLS
from _errors import CommandLineParser, addDebugArgument, runBlocking, runCommand
from _login import addLoginArguments, credentialsFrom

if TYPE_CHECKING:
    from collections.abc import Callable

    from _progress import ProgressDisplay, RunProgress
    from twisted.internet.defer import Deferred

    from protocols import bulk
    from protocols.blockingbulk import BlockingBulkConnection

__all__ = ["Interrupted", "main", "transfer"]

INTERRUPTED = 128 + signal.SIGINT
"""The exit status after Ctrl-C, as a shell reports a process that SIGINT ended."""


class Interrupted(Exception):
    """The user stopped the transfer (Ctrl-C or SIGTERM); it can be resumed."""


class Interrupt:
    """
    Turns the first Ctrl-C (or SIGTERM) into C{stop()}, which stops the
    running transfer cleanly (a fetch saves what it holds), so that the
    client can say where it stopped; a second one ends the process at once.

    @ivar received: the signal received, or C{None}.
    """

    def __init__(self, stop: Callable[[], None]) -> None:
        self.stop = stop
        self.received: int | None = None

    def install(self) -> None:
        """Take over SIGINT and SIGTERM (from Twisted's handlers, which would just stop the reactor)."""
        for number in (signal.SIGINT, signal.SIGTERM):
            signal.signal(number, self._signalled)

    def _signalled(self, number: int, frame: Any) -> None:
        if self.received is None:
            self.received = number
            self.stop()
        else:
            # The transfer did not stop in time; what the receiver wrote is already on disk.
            os.write(2, b"interrupted again: stopping at once\n")
            os._exit(INTERRUPTED)


def stoppedAt(progress: RunProgress) -> Interrupted:
    """The L{Interrupted} that says how far the transfer got."""
    from _progress import humanBytes

    return Interrupted(
        f"interrupted at {humanBytes(progress.done)} of {humanBytes(progress.total)};"
        " run the same command again to resume"
    )


async def interruptible(reactor: Any, work: Deferred[Any], progress: RunProgress) -> Any:
    """Wait for C{work}; on Ctrl-C raise L{Interrupted} saying how far it got."""
    from twisted.internet.defer import CancelledError

    interrupt = Interrupt(lambda: reactor.callFromThread(work.cancel))
    reactor.callWhenRunning(interrupt.install)
    try:
        return await work
    except CancelledError:
        if interrupt.received is None:
            raise
        raise stoppedAt(progress) from None


def refuseOverwrite(output: str, force: bool) -> None:
    """Stop before a fetch would replace an existing file, unless C{force}."""
    if os.path.lexists(output) and not force:
        print(
            f"not fetching: {output} exists and would be replaced; use --force to replace it, or --output PATH",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(1)


def transferNames(args: argparse.Namespace) -> tuple[str, str, str]:
    """A send's or fetch's name in its lines, its past tense, and where a fetch writes (refusing to replace a file)."""
    if args.command == "send":
        return args.name or os.path.basename(args.file), "sent", ""
    output = args.output or args.name
    refuseOverwrite(output, args.force)
    return args.name, "fetched", output


def progressDisplay(command: str, label: str, reactor: Any) -> tuple[RunProgress, ProgressDisplay]:
    """A transfer's progress and its display (C{reactor} C{None}: the blocking path), which notes a resume."""
    from _progress import ProgressDisplay, RunProgress, humanBytes

    display: ProgressDisplay

    def resuming(held: int) -> None:
        if 0 < held < progress.total:  # all of it held: the last line says it was skipped
            display.note(f"resuming {label} from {humanBytes(held)} of {humanBytes(progress.total)}")

    progress = RunProgress(onResume=resuming)
    display = ProgressDisplay(progress, f"{command} {label}", sys.stdout, reactor)
    return progress, display


async def transfer(
    reactor: Any, args: argparse.Namespace, credentials: Any = None, options: bulk.BulkOptions | None = None
) -> None:
    """Run the command C{args} names, over connections made with C{options} (default: the library's)."""
    from _progress import transferSummary
    from twisted.internet.defer import Deferred

    from protocols import bulk, rpc
    from protocols.bulk import fetchFile, sendFile

    def connect() -> Deferred[Any]:
        streams = options or bulk.BulkOptions()
        connecting = rpc.ClientOptions(credentials=credentials, timeout=args.timeout, bulk=streams)
        return rpc.connect(reactor, args.connect, options=connecting)

    if args.command == "list":
        root = await connect()
        try:
            for name, size in await root.callRemote("list"):
                print(f"{size:>15}  {name}")
        finally:
            await root.broker.disconnect()
        return
    label, verb, output = transferNames(args)
    progress, display = progressDisplay(args.command, label, reactor)
    digests = [args.digest] if args.digest else None
    transferOptions = {
        "streams": args.streams,
        "clock": reactor,
        "progress": progress,
        "digests": digests,
        "hashing": args.hashing,
    }
    if args.command == "send":
        work = Deferred.fromCoroutine(sendFile(connect, args.file, args.name, **transferOptions))
    else:
        work = Deferred.fromCoroutine(fetchFile(connect, args.name, output, **transferOptions))
    display.start()
    try:
        result = await interruptible(reactor, work, progress)
    finally:
        display.stop()
    print(transferSummary(verb, result, progress.resumed), flush=True)


def blockingTarget(args: argparse.Namespace) -> tuple[str, int] | None:
    """
    The C{(host, port)} to connect to when the command runs on the blocking
    client: a plain C{tcp:host=H:port=P} endpoint, one stream, hashing not
    asked to run in a thread of its own, no C{--trace}; else C{None} (Twisted).
    """
    if args.streams != 1 or args.hashing == "thread" or args.trace:
        return None
    return plainTCP(args.connect)


def connecting(target: tuple[str, int], options: Any) -> Callable[[], BlockingBulkConnection]:
    """
    What makes the blocking client's connections to C{target}: a connection
    not ready within the options' C{timeout} fails as the Twisted client's
    does (L{_errors.NotReady}, in its words, not retried).
    """
    from _errors import NotReady

    from protocols.blockingbulk import ConnectTimedOut, ServerSilent, connect

    def connectOnce() -> BlockingBulkConnection:
        try:
            return connect(target, options=options)
        except ConnectTimedOut as error:
            raise NotReady(f"not connected within {options.timeout:g} s") from error
        except ServerSilent as error:
            # (the preamble or the login: no other step of connect() can be silent on a tcp: endpoint)
            step = "the login was not done" if "login" in str(error) else "the server said nothing"
            hint = "" if "login" in str(error) else " (is it a chunkwire server? a TLS server reached without TLS?)"
            raise NotReady(f"connected, but {step} within {options.timeout:g} s{hint}") from error

    return connectOnce


def transferBlocking(ready: Callable[[], None], target: tuple[str, int], args: argparse.Namespace, login: Any) -> None:
    """Run the command C{args} names on the blocking client (see L{blockingTarget}), C{target} its server."""
    from _progress import Finished, transferSummary

    from protocols.blockingbulk import Interrupted as Stopped
    from protocols.blockingbulk import Interruption, fetchFile, sendFile
    from protocols.options import ClientOptions

    ready()
    connect = connecting(target, ClientOptions(credentials=login, timeout=args.timeout))
    if args.command == "list":
        with connect() as connection:
            for name, size in connection.root.callRemote("list"):
                print(f"{size:>15}  {name}")
        return
    label, verb, output = transferNames(args)
    progress, display = progressDisplay(args.command, label, None)
    digests = [args.digest] if args.digest else None
    interruption = Interruption()
    Interrupt(interruption.interrupt).install()
    keywords: dict[str, Any] = {"digests": digests, "progress": progress, "interruption": interruption}
    display.start()
    try:
        if args.command == "send":
            done = sendFile(connect, args.file, args.name, **keywords)
        else:
            done = fetchFile(connect, args.name, output, **keywords)
    except Stopped:
        raise stoppedAt(progress) from None
    finally:
        display.stop()
    seconds = time.monotonic() - progress.started
    result = Finished(done.name, done.size, done.hexdigest, done.algorithm, seconds, done.moved, progress.attempts - 1)
    print(transferSummary(verb, result, progress.resumed), flush=True)


def main(argv: list[str]) -> None:
    parser = CommandLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connect", default="tcp:host=127.0.0.1:port=8770", metavar="ENDPOINT")
    parser.add_argument("--streams", type=int, default=1, metavar="N", help="connections to stripe over (default 1)")
    parser.add_argument(
        "--hashing",
        choices=("auto", "inline", "thread"),
        default="auto",
        help="hash what moves in order in the reactor thread or a worker thread (auto: a thread if a core stays free;"
        " one stream to a tcp:host=H:port=P endpoint runs without a reactor and hashes inline)",
    )
    parser.add_argument(
        "--digest",
        metavar="NAME",
        help="offer only this digest: sha256, or blake3 with the blake3 package"
        " (default: all this side has, BLAKE3 first when installed; the server picks)",
    )
    addLoginArguments(parser)
    addTimeoutArgument(parser)
    commands = parser.add_subparsers(dest="command", required=True)
    send = commands.add_parser("send", help="upload a file")
    send.add_argument("file")
    send.add_argument("--name", help="the name on the server (default: the file's base name)")
    fetch = commands.add_parser("fetch", help="download a file")
    fetch.add_argument("name")
    fetch.add_argument("--output", help="where to write it (default: NAME in the current directory)")
    fetch.add_argument("--force", action="store_true", help="replace the output file if it exists")
    listing = commands.add_parser("list", help="list the served files")
    parser.add_argument("--trace", action="store_true", help="log every token sent and received, readably, to stderr")
    addDebugArgument(parser, send, fetch, listing)
    args = parser.parse_args(argv)
    withoutTLS(args.connect)  # before anything loads Twisted's reactor: a tcp: or unix: client needs no TLS support
    if args.digest is not None:
        from framing.bulk import availableDigests

        if args.digest not in availableDigests():
            parser.error(f"--digest: {args.digest!r} is not one this side computes ({', '.join(availableDigests())})")
    if args.trace:  # to stderr, so that stdout keeps the progress and the result
        from twisted.logger import globalLogBeginner, textFileLogObserver

        from protocols import TokenProtocol

        TokenProtocol.trace = True
        globalLogBeginner.beginLoggingTo([textFileLogObserver(sys.stderr)], redirectStandardIO=False)
    if args.streams < 1:
        parser.error("--streams must be at least 1")
    target = blockingTarget(args)
    credentials = credentialsFrom(parser, args, plain=target is not None)
    warnIfUnverified(args.connect)
    if target is not None:

        def runWithoutTwisted(ready: Callable[[], None]) -> None:
            try:
                transferBlocking(ready, target, args, credentials)
            except Interrupted as stopped:
                print(stopped, file=sys.stderr, flush=True)
                raise SystemExit(INTERRUPTED) from None

        runBlocking(runWithoutTwisted, args.connect, args.debug)

    async def run(reactor: Any) -> None:
        try:
            await transfer(reactor, args, credentials)
        except Interrupted as stopped:
            print(stopped, file=sys.stderr, flush=True)
            raise SystemExit(INTERRUPTED) from None

    runCommand(run, args.connect, args.debug)


if __name__ == "__main__":
    main(sys.argv[1:])
