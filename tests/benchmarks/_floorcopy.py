"""One end of bench_bulk's C{floor} case: the CLI's work with no framing, in a process of its own.

    python -m tests.benchmarks._floorcopy listen|connect send|receive --file PATH --digest NAME [--port N]

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
"""

from __future__ import annotations

import argparse
import hashlib
import json
import mmap
import resource
import socket
import time
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
    usage, queued, started = resource.getrusage(resource.RUSAGE_SELF), runQueueSeconds(), time.monotonic()
    with connection:
        moved = (send if direction == "send" else receive)(connection, path, digest)
        hexdigest = digest.hexdigest()
    ended = time.monotonic()
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "direction": direction,
        "started": started,
        "ended": ended,
        "user_s": after.ru_utime - usage.ru_utime,
        "system_s": after.ru_stime - usage.ru_stime,
        "runqueue_s": runQueueSeconds() - queued,
        "bytes": moved,
        "digest": hexdigest,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("role", choices=("listen", "connect"))
    parser.add_argument("direction", choices=("send", "receive"))
    parser.add_argument("--file", required=True, help="the file to send, or the fresh file to receive into")
    parser.add_argument("--digest", default="blake3")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    print(json.dumps(run(args.role, args.direction, args.file, args.digest, args.port)), flush=True)


if __name__ == "__main__":
    main()
