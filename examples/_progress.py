"""Progress display and figures shared by the examples (bulk_client.py, demo.py).

Contract: L{ProgressDisplay} shows a L{TransferProgress} without touching the
transfer: on a terminal a bar redrawn in place ten times a second, otherwise
one plain line a second (so a log or a pipe gets a readable record, not a
stream of carriage returns).  Drawing runs on the reactor's clock and costs
one line of output per tick, whatever the transfer's size.

The examples import this module by name: Python puts a script's own
directory on C{sys.path}, so C{python examples/bulk_client.py} finds it.
"""

from __future__ import annotations

import time
from typing import Any, TextIO

from twisted.internet.task import LoopingCall

from protocols.bulk.files import FileResult, TransferProgress


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

    @ivar tty: whether C{out} is a terminal (decides the style).
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
        """Stop drawing; on a terminal, draw the final state and end the bar's line."""
        if self._loop.running:
            self._loop.stop()
        if self.tty and self._drawn:
            self.draw()
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


def transferSummary(verb: str, result: FileResult) -> str:
    """The line that ends a transfer: size, time, MB/s (10^6 bytes) and the verified digest."""
    rate = result.size / result.seconds / 1e6 if result.seconds > 0 else 0.0
    line = (
        f"{verb} {result.name}: {result.size} bytes ({humanBytes(result.size)}) in {result.seconds:.2f} s,"
        f" {rate:.1f} MB/s, {result.algorithm} {result.digest} verified"
    )
    if result.cuts:
        line += f" (resumed after {result.cuts} interrupted attempts)"
    return line
