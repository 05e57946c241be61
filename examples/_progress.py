"""Progress display and figures shared by the examples (bulk_client.py, demo.py).

Contract: L{ProgressDisplay} shows a L{TransferProgress} without touching the
transfer: on a terminal a bar redrawn in place ten times a second, as wide
as the terminal and never wider (each draw returns to the start of the line
and clears it, so nothing wraps and nothing is left behind); otherwise one
plain line a second (so a log or a pipe gets a readable record, not a
stream of carriage returns).  Rates and ETAs count only the bytes that moved
in this run, never what the receiver held before it (L{RunProgress}).
Drawing runs on the reactor's clock, or for a client without Twisted on
a thread of its own that only reads the progress, and costs one line of
output per tick, whatever the transfer's size.

No progress library (tqdm, rich) is used, not even as an option: the bar is
forty lines, it must run on the reactor's clock too, the plain
one-line-a-second form for pipes and logs would still be needed, and two
renderers would be two things to keep honest and test.  This module loads
no Twisted: the commands that run without it use it too.

The examples import this module by name: Python puts a script's own
directory on C{sys.path}, so C{python examples/bulk_client.py} finds it.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from protocols.blockingbulk import TransferProgress

CLEAR_LINE = "\r\x1b[K"
"""Back to the start of the line, and erase it (ANSI EL): a redraw leaves nothing of a longer line behind."""

MIN_BAR = 10
"""Narrower than this, the bar is left out and only the figures are shown."""


def humanBytes(count: float) -> str:
    """C{1536} -> C{"1.5 KiB"}: binary units, as file sizes usually are."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if count < 1024 or unit == "TiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def humanRate(bytesPerSecond: float) -> str:
    """C{2.5e6} -> C{"2.5 MB/s"}, C{1500} -> C{"1.5 kB/s"}: decimal units, never a rounded-off C{"0.0 MB/s"}."""
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if bytesPerSecond >= scale:
            return f"{bytesPerSecond / scale:.1f} {unit}"
    return f"{bytesPerSecond:.0f} B/s"


def clockTime(seconds: float) -> str:
    """C{75} -> C{"1:15"}."""
    seconds = int(seconds + 0.5)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def terminalWidth() -> int:
    """Columns to draw in: the terminal's (or C{$COLUMNS}) less one, so that the cursor never wraps."""
    return max(shutil.get_terminal_size((80, 24)).columns - 1, 20)


class RunProgress(TransferProgress):
    """
    A L{TransferProgress} (as the Twisted and the blocking client's
    C{sendFile} and C{fetchFile} keep it) that also knows what the receiver held when this
    run began: the first C{held} the transfer reports once it knows the
    size (for a fetch, what an earlier run left in the partial file; for a
    send, what the server kept).

    @ivar resumed: those bytes, or C{None} until the transfer has said.
    @ivar onResume: called with them once, when they are known.
    """

    def __init__(self, onResume: Callable[[int], None] | None = None) -> None:
        object.__setattr__(self, "resumed", None)
        object.__setattr__(self, "onResume", onResume)
        super().__init__()

    def __setattr__(self, name: str, value: Any) -> None:
        # sendFile and fetchFile set total, then held, as each attempt starts.
        first = name == "held" and self.__dict__.get("total") and self.__dict__.get("resumed") is None
        object.__setattr__(self, name, value)
        if first:
            object.__setattr__(self, "resumed", value)
            if self.onResume is not None:
                self.onResume(value)

    @property
    def moved(self) -> int:
        """Bytes moved in this run so far."""
        return max(self.done - (self.resumed or 0), 0)


class ProgressDisplay:
    """
    Shows a L{TransferProgress}: a bar redrawn in place on a terminal, a
    plain line every second otherwise.

    @ivar tty: whether C{out} is a terminal (decides the style).
    @ivar width: the columns to fit, or C{None} to ask the terminal at each draw.
    """

    def __init__(
        self, progress: TransferProgress, label: str, out: TextIO, clock: Any, width: int | None = None
    ) -> None:
        self.progress = progress
        self.label = label
        self.out = out
        self.tty = out.isatty()
        self.width = width
        self.clock = clock
        self._loop: Any = None
        self._ticker: threading.Thread | None = None
        self._stopped = threading.Event()
        # A draw and a note never interleave (with no reactor, they run in two threads).
        self._writing = threading.Lock()
        self._drawn = False

    def start(self) -> None:
        """
        Draw every tick from now on: on C{clock} (a reactor), or with
        C{clock} C{None} on a daemon thread (for a transfer that blocks the
        main thread), which only reads the progress.
        """
        interval = 0.1 if self.tty else 1.0
        if self.clock is None:
            self._ticker = threading.Thread(target=self._tick, args=(interval,), name="progress", daemon=True)
            self._ticker.start()
            return
        from twisted.internet.task import LoopingCall

        self._loop = LoopingCall(self.draw)
        self._loop.clock = self.clock
        self._loop.start(interval, now=False)

    def _tick(self, interval: float) -> None:
        while not self._stopped.wait(interval):
            self.draw()

    def stop(self) -> None:
        """
        Stop drawing; on a terminal, draw the final state and end the bar's
        line, even when the transfer finished before the first tick (a fast
        transfer still shows where it ended).
        """
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        if self._ticker is not None:
            self._stopped.set()
            self._ticker.join()
            self._ticker = None
        if self.tty and self.progress.total:
            self.draw()
            with self._writing:
                self.out.write("\n")
                self.out.flush()
                self._drawn = False

    def note(self, text: str) -> None:
        """Print one line of its own, above the bar if one is drawn (the next tick redraws it)."""
        with self._writing:
            self.out.write((CLEAR_LINE if self.tty and self._drawn else "") + text + "\n")
            self.out.flush()

    def figures(self) -> str:
        """Percentage, bytes, and the rate and ETA of this run's bytes."""
        done, total = self.progress.done, self.progress.total
        moved = self.progress.moved if isinstance(self.progress, RunProgress) else done
        elapsed = max(time.monotonic() - self.progress.started, 1e-6)
        rate = moved / elapsed
        eta = clockTime((total - done) / rate) if rate > 0 and total else "?"
        percent = 100 * done / total if total else 100.0
        speed = humanRate(rate) if moved else "-- B/s"
        return f"{percent:3.0f}%  {humanBytes(done)} / {humanBytes(total)}  {speed}  ETA {eta}"

    def line(self, width: int | None = None) -> str:
        """
        The current state as one line; on a terminal, no wider than
        C{width} columns: the figures first, then a bar of at least
        L{MIN_BAR}, then the label (shortened if need be); the bar widens to
        fill the rest.
        """
        figures = self.figures()
        if not self.tty:
            return f"{self.label}: {figures}"
        width = width or self.width or terminalWidth()
        label = self.label
        labelRoom = width - len(figures) - 4 - MIN_BAR  # " [" + bar + "] "
        if len(label) > labelRoom >= 12:
            label = label[: labelRoom - 3] + "..."
        room = width - len(label) - len(figures) - 4
        if room >= MIN_BAR:
            done, total = self.progress.done, self.progress.total
            filled = int(room * done / total) if total else room
            return f"{label} [{'#' * filled}{'.' * (room - filled)}] {figures}"
        return f"{label} {figures}" if len(label) + len(figures) + 1 <= width else figures[:width]

    def draw(self) -> None:
        if not self.progress.total:
            return
        line = self.line()
        with self._writing:
            self._drawn = True
            self.out.write(CLEAR_LINE + line if self.tty else line + "\n")
            self.out.flush()


@dataclass(frozen=True)
class Finished:
    """
    What L{transferSummary} says of a transfer, as C{protocols.bulk.FileResult}
    has it (the Twisted client gives one; the blocking client's outcome is made into one).
    """

    name: str
    size: int
    hexdigest: str
    algorithm: str
    seconds: float
    payload: int
    cuts: int


def transferSummary(verb: str, result: Any, resumed: int | None = None) -> str:
    """
    The line that ends a transfer (C{result}: a C{FileResult} or a
    L{Finished}): size, time, the rate of the bytes that moved in this
    run, and the verified digest; then what was resumed or
    skipped.  C{resumed} is what the receiver held when the run began
    (L{RunProgress.resumed}); by default, what did not move.
    """
    moved = result.payload
    held = resumed if resumed is not None else max(result.size - moved, 0)
    if moved:
        speed = humanRate(moved / result.seconds) if result.seconds > 0 else "too fast to time"
    else:
        speed = "nothing moved"
    line = (
        f"{verb} {result.name}: {result.size} bytes ({humanBytes(result.size)}) in {result.seconds:.2f} s,"
        f" {speed}, {result.algorithm} {result.hexdigest} verified"
    )
    if not moved and result.size:
        line += f"; skipped: {'the server' if verb == 'sent' else 'this side'} already had all of it"
    elif held:
        line += f"; resumed from {humanBytes(held)}, {humanBytes(moved)} moved in this run"
    if result.cuts:
        line += f" (resumed after {result.cuts} interrupted attempts)"
    return line
