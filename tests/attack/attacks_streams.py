"""Attacks on object streams, against L{tests.attack.streamserver} as a process.

Contract: each attack runs in the calling thread on plain blocking sockets,
builds its messages by hand from the wire shapes of L{framing.rpc._wire}
and L{framing.rpc._streams}, and bounds every wait.

 - L{nonReader}: calls C{firehose}, grants its stream 2**62 items and
   bytes, and never reads: only the connection's own back-pressure bounds
   what the server makes for it.
 - L{unfinishedStreams}: connects, leaves streams unfinished both ways
   (streams announced to C{swallow} that never send an item, and
   C{firehose} streams never granted credit), and closes, again and again:
   every reader, producer and broker must be freed with the connection.
 - L{CallFlood}: calls C{hold}, which never ends, with large arguments as
   fast as the server reads them (from a thread of its own, until stopped):
   only the connection's ledger (account C{calls}) bounds what it holds.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from zope.interface import implementer

from framing import Encoder, Registry
from framing.rpc._streams import ANNOUNCE_OPEN_TYPE, CREDIT, FlowMessage, addFlowTypes
from framing.rpc._wire import CALL, Message, MessageSlicer
from framing.slicing._interfaces import ISlicer
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import PREAMBLE

from .attacks import _connect
from .harness import ENV, ROOT

ROOT_ID = 0
HUGE_CREDIT = 1 << 62


class Announced:
    """A stream the attacker announces under an id of its own, and never sends an item of."""

    def __init__(self, streamId: int) -> None:
        self.streamId = streamId


@implementer(ISlicer)
class _AnnouncedSlicer:
    def slice(self, obj: Any, encoder: Any) -> None:
        encoder.write_container(ANNOUNCE_OPEN_TYPE, obj, (obj.streamId,))


def _encoder() -> Encoder:
    registry = Registry(DEFAULT_REGISTRY)
    registry.add_slicer(Message, MessageSlicer())
    registry.add_slicer(Announced, _AnnouncedSlicer())
    addFlowTypes(registry)
    return Encoder(registry)


class StreamServer:
    """L{tests.attack.streamserver} in a process of its own, on a port it picked and reported."""

    def __init__(self, logPath: Path) -> None:
        self.logPath = logPath
        self._log = open(logPath, "wb")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.attack.streamserver"],
            cwd=ROOT,
            env=ENV,
            stdin=subprocess.PIPE,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.port = int(self._waitFor(rb"stream server listening on port=(\d+)", 60))

    def _waitFor(self, pattern: bytes, timeout: float, after: int = 0) -> bytes:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = re.compile(pattern).search(self.logPath.read_bytes(), after)
            if match:
                return match.group(1)
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"the stream server did not say {pattern!r}: {self.logPath.read_text(errors='replace')}")

    def rss(self) -> int:
        """The server's resident memory, in bytes."""
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) * 1024  # type: ignore[union-attr]

    def census(self, timeout: float = 60) -> tuple[int, int]:
        """The live readers and brokers in the server after a garbage collection."""
        after = self.logPath.stat().st_size
        assert self.process.stdin is not None
        self.process.stdin.write(b"census\n")
        self.process.stdin.flush()
        line = self._waitFor(rb"(census readers=\d+ brokers=\d+)", timeout, after)
        readers, brokers = re.findall(rb"\d+", line)
        return int(readers), int(brokers)

    def ledger(self, timeout: float = 60) -> tuple[int, int]:
        """What the server's ledgers hold together, and how many times one went over its budget."""
        after = self.logPath.stat().st_size
        assert self.process.stdin is not None
        self.process.stdin.write(b"ledger\n")
        self.process.stdin.flush()
        line = self._waitFor(rb"(ledger held=-?\d+ full=\d+)", timeout, after)
        held, full = re.findall(rb"-?\d+", line)
        return int(held), int(full)

    def stop(self) -> None:
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(b"quit\n")
            self.process.stdin.flush()
            self.process.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait(10)
        self._log.close()


def nonReader(port: int) -> socket.socket:
    """
    Call C{firehose} and grant its stream (the server's first on this
    connection: id 1) 2**62 items and bytes; return the socket, which the
    caller keeps open and never reads.
    """
    encoder = _encoder()
    sock = _connect(port)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.sendall(
        PREAMBLE
        + encoder.encode(Message((CALL, 1, ROOT_ID, "firehose", None)))
        + encoder.encode(FlowMessage((CREDIT, 1, HUGE_CREDIT, HUGE_CREDIT)))
    )
    return sock


def unfinishedStreams(port: int, inputs: int, outputs: int) -> None:
    """
    One connection: a call to C{swallow} with C{inputs} streams announced
    and never fed, C{outputs} calls to C{firehose} whose streams get no
    credit; the server's answers read for a moment (its CREDITs come back
    for the streams announced), then the connection closed.
    """
    encoder = _encoder()
    with _connect(port) as sock:
        sock.settimeout(10)
        message = [Message((CALL, 1, ROOT_ID, "swallow", None, [Announced(n + 1) for n in range(inputs)]))]
        message += [Message((CALL, 2 + n, ROOT_ID, "firehose", None)) for n in range(outputs)]
        sock.sendall(PREAMBLE + b"".join(encoder.encode(one) for one in message))
        # The server's preamble and first answers: it has read the calls.
        sock.recv(1 << 16)


class CallFlood:
    """
    One connection's CALLs of C{hold} (which never ends), C{size} bytes of
    argument each, up to C{count}, sent from a thread of their own as fast
    as the server reads them; nothing is read back.  L{stop} ends it.

    @ivar sent: the bytes sent so far.
    @ivar calls: the CALLs sent whole so far.
    @ivar done: whether all C{count} were sent (the server read them all).
    """

    def __init__(self, port: int, size: int, count: int) -> None:
        self.sent = 0
        self.calls = 0
        self.done = False
        self._size = size
        self._count = count
        self._sock = _connect(port)
        self._sock.settimeout(None)  # (blocked while the server does not read; stop() wakes it)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        encoder = _encoder()
        payload = b"x" * self._size
        try:
            self._sock.sendall(PREAMBLE)
            for requestId in range(1, self._count + 1):
                data = encoder.encode(Message((CALL, requestId, ROOT_ID, "hold", None, payload)))
                self._sock.sendall(data)
                self.sent += len(data)
                self.calls += 1
            self.done = True
        except OSError:
            pass

    def stop(self) -> None:
        """Shut the connection (waking a send blocked on it) and wait for the thread."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._thread.join(60)
