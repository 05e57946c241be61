"""examples/_progress.py: the bar fits the terminal and redraws in place; figures count only this run's bytes."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from tests.processes import ENV, ROOT

from .cli import address, bulkServer, slowLink

ANSI = re.compile(rb"\x1b\[[0-9;]*[A-Za-z]")


def progressModule() -> ModuleType:
    """Import examples/_progress.py as the examples do (their directory on sys.path)."""
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import _progress
    finally:
        sys.path.pop(0)
    return _progress


class Terminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def runInTerminal(command: list[str], cwd: Path, columns: int, timeout: float = 120) -> tuple[int, bytes]:
    """Run C{command} with its stdout on a pseudo-terminal and C{COLUMNS} set; give its status and output."""
    leader, follower = pty.openpty()
    env = dict(ENV, COLUMNS=str(columns), LINES="24")
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=follower, stderr=subprocess.PIPE)
    os.close(follower)
    output = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not select.select([leader], [], [], 1)[0]:
            if process.poll() is not None:
                break
            continue
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the terminal's other side is closed
            break
        if not chunk:
            break
        output += chunk
    os.close(leader)
    return process.wait(timeout=30), output


class ProgressLineTests(SynchronousTestCase):
    """ProgressDisplay.line and transferSummary, without a reactor."""

    def setUp(self) -> None:
        self.progress = progressModule()

    def display(self, progress: Any, out: Any, label: str = "send big.iso") -> Any:
        return self.progress.ProgressDisplay(progress, label, out, None)

    def test_fitsEveryWidth(self) -> None:
        """On a terminal, the line is never wider than asked, from 20 to 200 columns, whatever the label."""
        run = self.progress.RunProgress()
        run.total, run.held = 3 * 1024**4, 1024**4
        for label in ("send x", "fetch a-rather-long-file-name-for-a-download.tar.gz"):
            display = self.display(run, Terminal(), label)
            for width in range(20, 201):
                line = display.line(width)
                self.assertLessEqual(len(line), width, (label, width, line))
                if width >= 80:  # room for the figures, a bar and some of the label
                    self.assertRegex(line, r" \[#+\.+\] ")

    def test_terminalWidth(self) -> None:
        """The width comes from COLUMNS (or the terminal), less one column so the cursor never wraps."""
        saved = os.environ.get("COLUMNS")
        self.addCleanup(lambda: os.environ.pop("COLUMNS") if saved is None else os.environ.update(COLUMNS=saved))
        os.environ["COLUMNS"] = "80"
        self.assertEqual(self.progress.terminalWidth(), 79)
        run = self.progress.RunProgress()
        run.total, run.held = 100, 50
        self.assertLessEqual(len(self.display(run, Terminal()).line()), 79)

    def test_redrawInPlace(self) -> None:
        """On a terminal each draw returns to the line's start and clears it, and never ends the line."""
        run = self.progress.RunProgress()
        run.total, run.held = 100, 50
        out = Terminal()
        display = self.display(run, out, "fetch x")
        display.draw()
        display.draw()
        self.assertEqual(out.getvalue().count("\r\x1b[K"), 2)
        self.assertNotIn("\n", out.getvalue())
        self.assertRegex(out.getvalue(), r"^\r\x1b\[Kfetch x \[#+\.+\]  50%  50 B / 100 B")

    def test_finalDrawWithoutTick(self) -> None:
        """A transfer that ends before the first tick still shows its final bar once, on a line of its own."""
        run = self.progress.RunProgress()
        run.total, run.held = 100, 0
        out = Terminal()
        display = self.progress.ProgressDisplay(run, "send x", out, Clock())
        display.start()
        run.held = 100
        display.stop()
        self.assertEqual(out.getvalue().count("\r\x1b[K"), 1)
        self.assertRegex(out.getvalue(), r"^\r\x1b\[Ksend x \[#+\] 100%  100 B / 100 B .*\n$")

    def test_plainLines(self) -> None:
        """Not on a terminal, progress is one plain line per draw: percent, bytes, rate and ETA."""
        run = self.progress.RunProgress()
        run.total, run.held = 4 * 1024**3, 0
        run.held = 1024**3
        out = io.StringIO()
        self.display(run, out).draw()
        self.assertRegex(out.getvalue(), r"^send big.iso:  25%  1.0 GiB / 4.0 GiB  [\d.]+ [kMG]?B/s  ETA \d+:\d\d\n$")

    def test_resumedBytesAreNotRate(self) -> None:
        """Bytes held before this run do not count as moved: no rate and no ETA until bytes move."""
        resumed: list[int] = []
        run = self.progress.RunProgress(onResume=resumed.append)
        run.total, run.held = 4 * 1024**3, 3 * 1024**3
        run.held = 3 * 1024**3 + 10
        self.assertEqual((run.resumed, resumed, run.moved), (3 * 1024**3, [3 * 1024**3], 10))
        run.held = 3 * 1024**3
        out = io.StringIO()
        self.display(run, out).draw()
        self.assertIn("75%  3.0 GiB / 4.0 GiB  -- B/s  ETA ?", out.getvalue())

    def test_humanRate(self) -> None:
        """Rates take the unit that shows them: never 0.0 MB/s."""
        rate = self.progress.humanRate
        self.assertEqual([rate(12), rate(1500), rate(2.5e6), rate(3e9)], ["12 B/s", "1.5 kB/s", "2.5 MB/s", "3.0 GB/s"])


class TerminalTests(SynchronousTestCase):
    """The bar as an 80-column terminal shows it: no line over 80 columns, redrawn in place."""

    def check(self, output: bytes) -> None:
        """Each draw of the bar (what follows a return and clear-line) fits in 80 columns and shows a bar."""
        draws = [re.split(rb"[\r\n]", piece)[0] for piece in output.split(b"\r\x1b[K")[1:]]
        self.assertTrue(draws, output[-2000:])
        for draw in draws:
            self.assertLessEqual(len(ANSI.sub(b"", draw).decode()), 79, draw)
            self.assertRegex(draw, rb" \[[#.]+\] ")

    def test_demo(self) -> None:
        """dev.py demo's bar (examples/demo.py) fits an 80-column terminal."""
        work = Path(self.mktemp()).resolve()
        work.mkdir(parents=True)
        command = [sys.executable, str(ROOT / "examples" / "demo.py"), "--size", "96", "--seconds", "0.05"]
        status, output = runInTerminal(command, work, 80)
        self.assertEqual(status, 0, output[-2000:])
        self.check(output)

    def test_bulkClient(self) -> None:
        """bulk_client's bar fits an 80-column terminal during a send over a slow link."""
        work = Path(self.mktemp()).resolve()
        work.mkdir(parents=True)
        (work / "a-file-with-a-long-name-to-make-the-label-wide.bin").write_bytes(os.urandom(1_500_000))
        slow = slowLink(self, bulkServer(self, work / "served"), 2_000_000)
        script = str(ROOT / "examples" / "bulk_client.py")
        command = [
            sys.executable,
            script,
            "--connect",
            address(slow),
            "send",
            "a-file-with-a-long-name-to-make-the-label-wide.bin",
        ]
        status, output = runInTerminal(command, work, 80)
        self.assertEqual(status, 0, output[-2000:])
        self.check(output)
