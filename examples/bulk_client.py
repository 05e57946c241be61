"""Command-line client of the bulk-transfer service (examples/bulk_server.py).

    python examples/bulk_client.py --connect tcp:host=127.0.0.1:port=8770 send FILE [--name NAME]
    python examples/bulk_client.py --connect tcp:host=127.0.0.1:port=8770 fetch NAME [--output PATH]
    python examples/bulk_client.py --connect tcp:host=127.0.0.1:port=8770 list

C{--streams N} stripes the transfer over N connections.  A dropped connection
is made again and the transfer resumes from what the receiver holds (a fetch
interrupted for good resumes from its C{.NAME.part} file when run again).
On a terminal a progress bar shows bytes, rate and ETA; otherwise a plain
line is printed every second.  The last line gives the size, the time, the
rate in MB/s (10^6 bytes) and the SHA-256 digest both sides verified.  The
exit status is 1 if the transfer failed.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

# The script's directory is on sys.path: the progress display is shared with demo.py.
# humanBytes is imported for modules that take the display from here (tests/protocols/bulk/test_examples.py).
from _progress import ProgressDisplay, humanBytes, transferSummary
from twisted.internet.defer import Deferred
from twisted.internet.task import react
from twisted.logger import globalLogBeginner, textFileLogObserver

from protocols import TokenProtocol, bulk
from protocols.bulk.files import TransferProgress, fetchFile, sendFile

__all__ = ["ProgressDisplay", "humanBytes", "main", "transfer"]


async def transfer(reactor: Any, args: argparse.Namespace) -> None:
    def connect() -> Deferred[Any]:
        return bulk.connect(reactor, args.connect)

    progress = TransferProgress()
    if args.command == "list":
        root = await connect()
        try:
            for name, size in await root.callRemote("list"):
                print(f"{size:>15}  {name}")
        finally:
            await root.broker.disconnect()
        return
    if args.command == "send":
        label = args.name or os.path.basename(args.file)
        display = ProgressDisplay(progress, f"send {label}", sys.stdout, reactor)
        display.start()
        try:
            result = await sendFile(
                connect, args.file, args.name, streams=args.streams, clock=reactor, progress=progress
            )
        finally:
            display.stop()
        print(transferSummary("sent", result), flush=True)
    else:
        output = args.output or args.name
        display = ProgressDisplay(progress, f"fetch {args.name}", sys.stdout, reactor)
        display.start()
        try:
            result = await fetchFile(connect, args.name, output, streams=args.streams, clock=reactor, progress=progress)
        finally:
            display.stop()
        print(transferSummary("fetched", result), flush=True)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connect", default="tcp:host=127.0.0.1:port=8770", metavar="ENDPOINT")
    parser.add_argument("--streams", type=int, default=1, metavar="N", help="connections to stripe over (default 1)")
    commands = parser.add_subparsers(dest="command", required=True)
    send = commands.add_parser("send", help="upload a file")
    send.add_argument("file")
    send.add_argument("--name", help="the name on the server (default: the file's base name)")
    fetch = commands.add_parser("fetch", help="download a file")
    fetch.add_argument("name")
    fetch.add_argument("--output", help="where to write it (default: NAME in the current directory)")
    commands.add_parser("list", help="list the served files")
    parser.add_argument("--trace", action="store_true", help="log every token sent and received, readably, to stderr")
    args = parser.parse_args(argv)
    if args.trace:  # to stderr, so that stdout keeps the progress and the result
        TokenProtocol.trace = True
        globalLogBeginner.beginLoggingTo([textFileLogObserver(sys.stderr)], redirectStandardIO=False)
    if args.streams < 1:
        parser.error("--streams must be at least 1")

    async def run(reactor: Any) -> None:
        try:
            await transfer(reactor, args)
        except Exception as error:
            print(f"failed: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
            raise SystemExit(1) from None

    react(lambda reactor: Deferred.fromCoroutine(run(reactor)))


if __name__ == "__main__":
    main(sys.argv[1:])
