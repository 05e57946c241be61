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
import time
from typing import Any, TextIO

from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall, react

from protocols import bulk
from protocols.bulk.files import FileResult, TransferProgress, fetchFile, sendFile


def humanBytes(count: float) -> str:
    """C{1536} -> C{"1.5 KiB"}: binary units, as file sizes usually are."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if count < 1024 or unit == "TiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def clockTime(seconds: float) -> str:
    """C{75} -> C{"1:15"}."""
    seconds = int(seconds + 0.5)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class ProgressDisplay:
    """
    Shows a L{TransferProgress}: a bar redrawn in place on a terminal, a
    plain line every second otherwise.
    """

    WIDTH = 30

    def __init__(self, progress: TransferProgress, label: str, out: TextIO, clock: Any) -> None:
        self.progress = progress
        self.label = label
        self.out = out
        self.tty = out.isatty()
        self._loop = LoopingCall(self.draw)
        self._loop.clock = clock
        self._drawn = False

    def start(self) -> None:
        self._loop.start(0.1 if self.tty else 1.0, now=False)

    def stop(self) -> None:
        if self._loop.running:
            self._loop.stop()
        if self.tty and self._drawn:
            self.out.write("\n")
            self.out.flush()

    def line(self) -> str:
        """The current state as one line: percentage, bytes, rate, ETA."""
        done, total = self.progress.done, self.progress.total
        elapsed = max(time.monotonic() - self.progress.started, 1e-6)
        rate = done / elapsed
        eta = clockTime((total - done) / rate) if rate > 0 and total else "?"
        percent = 100 * done / total if total else 100.0
        figures = f"{percent:3.0f}%  {humanBytes(done)} / {humanBytes(total)}  {rate / 1e6:.1f} MB/s  ETA {eta}"
        if not self.tty:
            return f"{self.label}: {figures}"
        filled = int(self.WIDTH * done / total) if total else self.WIDTH
        return f"{self.label} [{'#' * filled}{'.' * (self.WIDTH - filled)}] {figures}"

    def draw(self) -> None:
        if not self.progress.total:
            return
        self._drawn = True
        if self.tty:
            self.out.write("\r" + self.line().ljust(100))
        else:
            self.out.write(self.line() + "\n")
        self.out.flush()


def summary(verb: str, result: FileResult) -> str:
    """The final line: size, time, MB/s and the verified digest."""
    rate = result.size / result.seconds / 1e6 if result.seconds > 0 else 0.0
    line = (
        f"{verb} {result.name}: {result.size} bytes ({humanBytes(result.size)}) in {result.seconds:.2f} s,"
        f" {rate:.1f} MB/s, {result.algorithm} {result.digest} verified"
    )
    if result.cuts:
        line += f" (resumed after {result.cuts} interrupted attempts)"
    return line


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
        print(summary("sent", result), flush=True)
    else:
        output = args.output or args.name
        display = ProgressDisplay(progress, f"fetch {args.name}", sys.stdout, reactor)
        display.start()
        try:
            result = await fetchFile(connect, args.name, output, streams=args.streams, clock=reactor, progress=progress)
        finally:
            display.stop()
        print(summary("fetched", result), flush=True)


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
    args = parser.parse_args(argv)
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
