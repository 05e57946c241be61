"""One end of bench_bulk's C{floor} case: the CLI's work with no framing, in a process of its own.

    python -m tests.benchmarks._floorcopy listen|connect send|receive --file PATH --digest NAME [--port N] [--twisted]

Two of these make the framing-free copy the CLI is set against: the sender
reads C{PATH} in 1 MiB C{readinto}s into one buffer, hashes each piece in
place and C{sendall}s it over loopback TCP; the receiver C{recv_into}s a
1 MiB buffer, hashes what came and C{write}s it to C{PATH}, a fresh file.
Each buffer is page-aligned (L{buffer}): the kernel's copy into a buffer
that starts 8 to 24 bytes into a page, where C{bytearray(MiB)} starts,
took 4.5 times as long on the AMD EPYC VM these figures come from (0.85 s
of system time per GiB read from tmpfs, against 0.17-0.19 at every other
offset tried), which made the copy slower than chunkwire's own transfers.
No reactor, no framing, no flow control beyond TCP's: one blocking loop per
end.  The end that listens prints C{{"port": N}} first; each end then prints
one JSON line: when it started and ended (C{CLOCK_MONOTONIC}, the same clock
in every process, so the orchestrator takes the copy's time from the first
start to the last end), its user and system CPU seconds over that time, the
seconds it was runnable but waited for a CPU (schedstat: other load), the
bytes moved and the digest.

With C{--twisted} the listening end runs in a Twisted reactor instead, as
chunkwire's servers do and tuned as they are (L{protocols.bulk.steadyAllocator},
1 MiB reads and up to 1 MiB handed to the socket per turn), still with no
framing: the copy on Twisted (L{serveTwisted}).  Against it, what a
chunkwire server costs beyond the reactor it runs on.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import mmap
import resource
import socket
import time
from functools import partial
from typing import Any

MiB = 1 << 20


def newDigest(name: str) -> Any:
    """A fresh hash object: C{"blake3"} from the blake3 package, anything else from hashlib."""
    if name == "blake3":
        import blake3  # type: ignore[import-not-found]

        return blake3.blake3()
    return hashlib.new(name)


def runQueueSeconds() -> float:
    """Seconds this (single-threaded) process was runnable but waited for a CPU so far; 0 where unknown."""
    try:
        with open("/proc/self/schedstat") as stat:
            return int(stat.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def buffer(size: int = MiB) -> memoryview:
    """A writable buffer of C{size} bytes that starts on a page (an anonymous mapping; see the module docstring)."""
    return memoryview(mmap.mmap(-1, size))


def send(connection: socket.socket, path: str, digest: Any) -> int:
    """Read C{path} 1 MiB at a time into one buffer, hash each piece in place, send it; the bytes sent."""
    view = buffer()
    sent = 0
    with open(path, "rb", buffering=0) as source:
        while count := source.readinto(view):
            piece = view[:count]
            digest.update(piece)
            connection.sendall(piece)
            sent += count
    connection.shutdown(socket.SHUT_WR)
    return sent


def receive(connection: socket.socket, path: str, digest: Any) -> int:
    """Receive into one 1 MiB buffer, hash what came, write it to the fresh file C{path}; the bytes received."""
    view = buffer()
    received = 0
    with open(path, "xb", buffering=0) as target:
        while count := connection.recv_into(view):
            piece = view[:count]
            digest.update(piece)
            while piece:
                piece = piece[target.write(piece) :]
            received += count
    return received


def run(role: str, direction: str, path: str, digestName: str, port: int) -> dict[str, Any]:
    """Be one end of the copy (see the module docstring); what it measured."""
    if role == "listen":
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", port))
            listener.listen(1)
            print(json.dumps({"port": listener.getsockname()[1]}), flush=True)
            connection, _ = listener.accept()
    else:
        connection = socket.create_connection(("127.0.0.1", port))
    digest = newDigest(digestName)
    clock = Stopwatch()
    with connection:
        moved = (send if direction == "send" else receive)(connection, path, digest)
        hexdigest = digest.hexdigest()
    return clock.line(direction, moved, hexdigest)


class Stopwatch:
    """An end's clock and CPU counters from its making (the start of its loop) to L{line} (its end)."""

    def __init__(self) -> None:
        self.usage, self.queued = resource.getrusage(resource.RUSAGE_SELF), runQueueSeconds()
        self.started = time.monotonic()

    def line(self, direction: str, moved: int, hexdigest: str) -> dict[str, Any]:
        """What the end prints (see the module docstring): its span, CPU, run-queue wait, bytes and digest."""
        ended = time.monotonic()
        after = resource.getrusage(resource.RUSAGE_SELF)
        return {
            "direction": direction,
            "started": self.started,
            "ended": ended,
            "user_s": after.ru_utime - self.usage.ru_utime,
            "system_s": after.ru_stime - self.usage.ru_stime,
            "runqueue_s": runQueueSeconds() - self.queued,
            "bytes": moved,
            "digest": hexdigest,
        }


def serveTwisted(direction: str, path: str, digestName: str, port: int) -> dict[str, Any]:
    """
    Be the listening end in Twisted's default reactor: accept one
    connection and, with no framing, either receive it (each C{dataReceived}
    hashed, then written to the fresh file C{path}) or send C{path} (a pull
    producer that reads 1 MiB, hashes it and writes it to the transport each
    time the transport has sent all it holds, then closes the connection);
    what it measured, as L{run}'s.

    The process and the connection are set up as chunkwire's bulk servers
    set theirs: L{protocols.bulk.steadyAllocator}, then the read size and
    send limit chunkwire's bulk connections use by default
    (L{protocols._sockets.tuneForBulk}).  Costs: a reactor turn per read
    and per send, and one bytes object per read and per piece sent, as a
    Twisted protocol has.
    """
    from twisted.internet import protocol, reactor

    from protocols import bulk
    from protocols._sockets import tuneForBulk
    from protocols.bulk._options import STEADY_READ_SIZE

    bulk.steadyAllocator()
    ends: list[dict[str, Any]] = []
    digest = newDigest(digestName)

    class OneCopy(protocol.Protocol):
        def connectionMade(self) -> None:
            listening.stopListening()
            tuneForBulk(self.transport, STEADY_READ_SIZE, bulk.BulkOptions().sendLimit)
            self.moved = 0
            self.clock = Stopwatch()
            if direction == "send":
                self.source = open(path, "rb", buffering=0)
                self.transport.registerProducer(self, False)
            else:
                self.target = open(path, "xb", buffering=0)

        def resumeProducing(self) -> None:
            piece = self.source.read(MiB)
            if not piece:
                self.transport.unregisterProducer()
                self.transport.loseConnection()
                return
            digest.update(piece)
            self.transport.write(piece)
            self.moved += len(piece)

        def stopProducing(self) -> None:
            pass

        def dataReceived(self, data: bytes) -> None:
            digest.update(data)
            piece = memoryview(data)
            while piece:
                piece = piece[self.target.write(piece) :]
            self.moved += len(data)

        def connectionLost(self, reason: object = None) -> None:
            (self.source if direction == "send" else self.target).close()
            ends.append(self.clock.line(direction, self.moved, digest.hexdigest()) | {"reactor": "twisted"})
            reactor.stop()

    factory = protocol.Factory.forProtocol(OneCopy)
    listening = reactor.listenTCP(port, factory, interface="127.0.0.1")
    print(json.dumps({"port": listening.getHost().port}), flush=True)
    reactor.run()
    return ends[0]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("role", choices=("listen", "connect"))
    parser.add_argument("direction", choices=("send", "receive"))
    parser.add_argument("--file", required=True, help="the file to send, or the fresh file to receive into")
    parser.add_argument("--digest", default="blake3")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--twisted", action="store_true", help="listen in a Twisted reactor (the copy on Twisted)")
    args = parser.parse_args(argv)
    if args.twisted and args.role != "listen":
        parser.error("--twisted is for the listening end")
    measure = serveTwisted if args.twisted else partial(run, args.role)
    print(json.dumps(measure(args.direction, args.file, args.digest, args.port)), flush=True)


if __name__ == "__main__":
    main()
