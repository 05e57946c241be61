"""Issue 28 item 2, against the kv example as a process: a flood of 1 MiB puts for no answer costs bounded memory.

The probe sent 2,452 calls for no answer, each a 1 MiB put of a new key,
and the server passed 2.5 GB in 2.5 s: the store had no size limit, and a
call for no answer is never slowed by answers waiting.  Now the store has
limits (L{protocols.kv.StoreLimits}; the test runs the server with a small
one so that it is reached quickly): past them each put fails with
C{kv.StoreFull} (logged at a bounded rate, nothing stored), and an honest
client's calls go on being answered: its puts, once the flood has filled
the store they share, with the same clear refusal.
"""

from __future__ import annotations

import socket
import tempfile
import threading
import time
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, Encoder
from framing.rpc._wire import ANSWER, CALL, FAIL, NO_ANSWER
from framing.wire import PREAMBLE

from .attacks import _connect
from .attacks_rpc import ROOT, ForgedRef, Message, _registry
from .harness import UNTIMED_PAUSE, ExampleServer, honest, honestResult

MiB = 1024 * 1024
STORE_BYTES = 16 * MiB
"""The server's --max-store-bytes in this test: the flood passes it five times over."""
PUTS = 80


def floodOfPuts(port: int, count: int) -> None:
    """C{count} calls for no answer, each a put of a new key with a 1 MiB value, as fast as the server reads."""
    encoder = Encoder(_registry())
    value = "v" * (MiB - 64)
    with _connect(port) as sock:
        sock.settimeout(60)
        sock.sendall(PREAMBLE)
        for n in range(count):
            sock.sendall(encoder.encode(Message((CALL, NO_ANSWER, ROOT, "put", None, f"flood-{n}", value))))


class StoreFloodTests(SynchronousTestCase):
    """A client flooding puts for no answer cannot grow the kv server past its store's limit."""

    def test_putsForNoAnswerBounded(self) -> None:
        """80 MiB of puts for no answer into a 16 MiB store: RSS grows far less than that; honest calls answered."""
        with tempfile.TemporaryDirectory() as logs:
            server = ExampleServer("kv", Path(logs) / "kv.log", ("--max-store-bytes", str(STORE_BYTES)))
            try:
                before = server.resources()
                clients = honest("kv", server.port, 3.0, pause=UNTIMED_PAUSE)
                floodOfPuts(server.port, PUTS)
                result = honestResult(clients)
                after = server.resources()
                peak = server.memory()["VmHWM"]
                log = server.logSince(0)
            finally:
                server.stop()
        # The flood filled the one store every client shares: the honest puts
        # after that are refused as clearly (kv.StoreFull) and nothing else fails.
        self.assertEqual([error for error in result["errors"] if "kv.StoreFull" not in error], [], result)
        self.assertGreater(result["calls"], 0)
        # The store holds at most 16 MiB, and the flood's reads a few MiB more at a time: far from its 80 MiB.
        self.assertLess(peak - before["rss"], 48 * MiB, (before, after, peak))
        self.assertIn("StoreFull", log)
        self.assertLess(after["fds"], before["fds"] + 8, (before, after))


def _answers(sock: socket.socket, wanted: int, deadline: float) -> int:
    """Read what the server sends until C{wanted} ANSWER or FAIL messages came (or the deadline); how many did."""
    decoder = Decoder(registry=_registry())
    seen = 0
    while seen < wanted and time.monotonic() < deadline:
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        chunk = sock.recv(1 << 16)
        if not chunk:
            break
        seen += sum(1 for m in decoder.feed(chunk) if isinstance(m, tuple) and m and m[0] in (ANSWER, FAIL))
    return seen


def _filesSize(path: Path) -> int:
    """The bytes of the store's database and its WAL."""
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


class _Sizes:
    """Samples a store's file sizes in a thread until stopped; keeps the largest."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.largest = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.largest = max(self.largest, _filesSize(self.path))
            self._stop.wait(0.02)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.largest, _filesSize(self.path))


STORE_FILE_BYTES = 4 * MiB
"""--max-store-bytes of the store-file test: four keys of 512 KiB fill half of it."""


class StoreFileTests(SynchronousTestCase):
    """Issue 33 item 1: a flood of large puts to few keys cannot grow the --store file past its limits' scale."""

    def test_filesBoundedAndGivenBack(self) -> None:
        """
        240 puts of 512 KiB (120 MiB) to four keys of a store limited to
        4 MiB: the database and its WAL never pass 24 MiB (the store kept
        every value twice for a minute, and its WAL never shrank, so they
        grew with every put), and once the keys are deleted the files shrink
        back under 2 MiB.
        """
        encoder = Encoder(_registry())
        value = "s" * (512 * 1024)
        with tempfile.TemporaryDirectory() as work:
            path = Path(work) / "kv.sqlite"
            server = ExampleServer(
                "kv", Path(work) / "kv.log", ("--store", str(path), "--max-store-bytes", str(STORE_FILE_BYTES))
            )
            try:
                sizes = _Sizes(path)
                with _connect(server.port) as sock:
                    sock.settimeout(60)
                    sock.sendall(PREAMBLE)
                    for n in range(240):
                        sock.sendall(encoder.encode(Message((CALL, NO_ANSWER, ROOT, "put", None, f"k{n % 4}", value))))
                    deletes = b"".join(
                        encoder.encode(Message((CALL, 1 + n, ROOT, "delete", None, f"k{n}"))) for n in range(4)
                    )
                    sock.sendall(deletes)
                    answered = _answers(sock, 4, time.monotonic() + 60)
                    largest = sizes.stop()
                    deadline = time.monotonic() + 60
                    while _filesSize(path) >= 2 * MiB and time.monotonic() < deadline:
                        time.sleep(0.1)
                    after = _filesSize(path)
                log = server.logSince(0)
            finally:
                server.stop()
        self.assertEqual(answered, 4, log[-2000:])
        self.assertLess(largest, 24 * MiB, log[-2000:])
        self.assertLess(after, 2 * MiB)


class SilentWatcherTests(SynchronousTestCase):
    """Issue 33 item 2: a watcher that never reads costs the server bounded memory, and honest calls go on."""

    def test_silentWatcherBounded(self) -> None:
        """
        A watcher that never reads (its changed() calls never answered, its
        socket never read), and 160 puts of 1 MiB to its key from another
        client: the server's peak RSS grows by far less than the 160 MiB of
        changes (each was queued whole for the watcher), and the honest
        clients' calls are all answered.
        """
        encoder = Encoder(_registry())
        value = "w" * (MiB - 64)
        with tempfile.TemporaryDirectory() as logs:
            # A long call timeout: the watcher is not dropped for silence during the test.
            server = ExampleServer("kv", Path(logs) / "kv.log", ("--call-timeout", "120"))
            try:
                before = server.resources()
                with _connect(server.port) as watcher:
                    watcher.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                    watcher.sendall(
                        PREAMBLE + encoder.encode(Message((CALL, 1, ROOT, "watch", None, "w", ForgedRef(7))))
                    )
                    time.sleep(0.5)  # (not synchronisation: the watch is checked below through the puts' effect)
                    clients = honest("kv", server.port, 4.0, pause=UNTIMED_PAUSE)
                    # Connected only now, its preamble sent at once: connected earlier, on a loaded machine it
                    # could wait past the server's preamble timeout and be dropped unheard.
                    with _connect(server.port) as putter:
                        putter.settimeout(60)
                        putter.sendall(PREAMBLE)
                        for _ in range(160):
                            putter.sendall(encoder.encode(Message((CALL, NO_ANSWER, ROOT, "put", None, "w", value))))
                        putter.sendall(encoder.encode(Message((CALL, 1, ROOT, "get", None, "w"))))
                        synced = _answers(putter, 1, time.monotonic() + 60)
                    result = honestResult(clients)
                    peak = server.memory()["VmHWM"]
                log = server.logSince(0)
            finally:
                server.stop()
        self.assertEqual(synced, 1, log[-2000:])
        self.assertEqual(result["errors"], [], result)
        self.assertGreater(result["calls"], 0)
        self.assertLess(peak - before["rss"], 64 * MiB, (before, peak))
