"""examples/bulk_client.py as users meet it: interrupted, resumed, not overwriting, honest figures, clean errors."""

from __future__ import annotations

import hashlib
import re
import signal
import socket
import time
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from tests.processes import readUntil, startExample, stop

from .cli import address, bulkServer, clientRun, clientStart, slowLink

SIZE = 16_000_000
RATE = 2_000_000  # bytes a second over the slow link: a 16 MB transfer takes 8 s, so it is mid-way when interrupted
INTERRUPTED = re.compile(r"^interrupted at [\d.]+ MiB of 15\.3 MiB; run the same command again to resume$")


def data(size: int) -> bytes:
    """C{size} bytes that differ from MiB to MiB (a piece stored at the wrong offset would change the digest)."""
    block = hashlib.sha256(b"chunkwire").digest() * (1 << 15)
    return b"".join(block[i % 32 :] + block[: i % 32] for i in range(-(-size // len(block))))[:size]


class BulkClientTests(SynchronousTestCase):
    """
    The bulk client's behaviour at its edges, against a real bulk server
    process: on the blocking client (a tcp:host=H:port=P endpoint, one stream).
    """

    options: tuple[str, ...] = ()
    """Options given before the command."""

    def setUp(self) -> None:
        self.work = Path(self.mktemp()).resolve()
        self.served, self.local = self.work / "served", self.work / "local"
        self.local.mkdir(parents=True)
        self.port = bulkServer(self, self.served)

    def client(self, *arguments: str, port: int | None = None) -> tuple[int, str, str]:
        done = clientRun(
            "bulk_client.py", "--connect", address(port or self.port), *self.options, *arguments, cwd=self.local
        )
        return done.returncode, done.stdout, done.stderr

    def interrupt(self, *arguments: str) -> tuple[int, str]:
        """Run the client over a slow link, press Ctrl-C once bytes are moving; give its status and stderr."""
        slow = slowLink(self, self.port, RATE)
        process = clientStart("bulk_client.py", "--connect", address(slow), *self.options, *arguments, cwd=self.local)
        self.addCleanup(lambda: process.poll() is None and process.kill())
        readUntil(process, rb"(send|fetch) big\.bin: +\d+%  [1-9]")  # a progress line with bytes moved
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
        return process.returncode, err.decode()

    def test_sendInterruptedThenResumed(self) -> None:
        """Ctrl-C during a send exits 130 saying where it stopped; the same command then resumes and says from where."""
        source = self.work / "big.bin"
        source.write_bytes(data(SIZE))
        status, err = self.interrupt("send", str(source))
        self.assertEqual(status, 128 + signal.SIGINT, err)
        self.assertRegex(err.strip(), INTERRUPTED)
        self.assertFalse((self.served / "big.bin").exists())
        status, out, err = self.client("send", str(source))
        self.assertEqual(status, 0, err)
        self.assertRegex(out, r"(?m)^resuming big\.bin from [\d.]+ MiB of 15\.3 MiB$")
        self.assertRegex(out.splitlines()[-1], r"verified; resumed from [\d.]+ MiB, [\d.]+ MiB moved in this run$")
        self.assertEqual((self.served / "big.bin").read_bytes(), source.read_bytes())

    def test_fetchInterruptedThenResumed(self) -> None:
        """Ctrl-C during a fetch exits 130 and keeps the partial file; the same command resumes from it."""
        (self.work / "big.bin").write_bytes(data(SIZE))
        self.assertEqual(self.client("send", str(self.work / "big.bin"))[0], 0)
        status, err = self.interrupt("fetch", "big.bin")
        self.assertEqual(status, 128 + signal.SIGINT, err)
        self.assertRegex(err.strip(), INTERRUPTED)
        self.assertEqual(sorted(p.name for p in self.local.iterdir()), [".big.bin.part", ".big.bin.part.json"])
        status, out, err = self.client("fetch", "big.bin")
        self.assertEqual(status, 0, err)
        held = re.search(r"(?m)^resuming big\.bin from ([\d.]+) MiB of 15\.3 MiB$", out)
        self.assertIsNotNone(held, out)
        assert held is not None
        self.assertGreater(float(held.group(1)), 0)
        self.assertRegex(out.splitlines()[-1], rf"resumed from {held.group(1)} MiB, [\d.]+ MiB moved in this run$")
        self.assertEqual((self.local / "big.bin").read_bytes(), data(SIZE))

    def test_resendSaysNothingMoved(self) -> None:
        """Sending a file the server already holds says that nothing moved and it was skipped, with no rate."""
        source = self.work / "same.bin"
        source.write_bytes(data(300_000))
        self.assertEqual(self.client("send", str(source))[0], 0)
        status, out, err = self.client("send", str(source))
        self.assertEqual(status, 0, err)
        self.assertRegex(
            out, r"nothing moved, (?:sha256|blake3) [0-9a-f]{64} verified; skipped: the server already had all of it"
        )
        self.assertNotIn("MB/s", out)
        self.assertNotIn("resuming", out)

    def test_smallFileRate(self) -> None:
        """A small file's rate is given in a unit that shows it, never as 0.0 MB/s."""
        source = self.work / "tiny.txt"
        source.write_bytes(b"hello\n" * 10)
        status, out, err = self.client("send", str(source))
        self.assertEqual(status, 0, err)
        self.assertNotIn(" 0.0 ", out)
        self.assertRegex(out, r", [\d.]+ (B|kB|MB|GB)/s, (?:sha256|blake3) ")

    def test_fetchRefusesToOverwrite(self) -> None:
        """fetch NAME leaves an existing local NAME alone and says to use --force; with --force it replaces it."""
        (self.work / "notes.txt").write_bytes(b"served notes\n")
        self.assertEqual(self.client("send", str(self.work / "notes.txt"))[0], 0)
        mine = self.local / "notes.txt"
        mine.write_bytes(b"my own notes\n")
        status, out, err = self.client("fetch", "notes.txt")
        self.assertEqual((status, out), (1, ""))
        self.assertIn("notes.txt exists", err)
        self.assertIn("--force", err)
        self.assertEqual(mine.read_bytes(), b"my own notes\n")
        status, out, err = self.client("fetch", "notes.txt", "--force")
        self.assertEqual(status, 0, err)
        self.assertEqual(mine.read_bytes(), b"served notes\n")

    def test_noSuchFile(self) -> None:
        """Fetching a missing file prints only "no such file: NAME" (never the server's path) and exits 1."""
        status, out, err = self.client("fetch", "nosuch.bin")
        self.assertEqual((status, out, err), (1, "", "no such file: nosuch.bin\n"))
        self.assertEqual(list(self.local.iterdir()), [])


class TwistedBulkClientTests(BulkClientTests):
    """The same behaviour where the command runs on Twisted (--hashing thread: the blocking client leaves it)."""

    options = ("--hashing", "thread")


class BulkServerGuardTests(SynchronousTestCase):
    """examples/bulk_server.py takes the guard options the other example servers take."""

    def test_preambleTimeout(self) -> None:
        """Started with --preamble-timeout 0.5, the bulk server drops a client that sends nothing, in seconds."""
        directory = str(Path(self.mktemp()).resolve())
        arguments = ["--listen", "tcp:0:interface=127.0.0.1", "--dir", directory, "--preamble-timeout", "0.5"]
        server = startExample("bulk_server.py", *arguments)
        self.addCleanup(stop, server)
        port = int(readUntil(server, rb"bulk server listening on .* port=(\d+)\)").group(1))
        with socket.create_connection(("127.0.0.1", port), timeout=20) as connection:
            started = time.monotonic()
            while connection.recv(65536):  # the ERROR token that says why, then the close
                pass
            self.assertLess(time.monotonic() - started, 10)
