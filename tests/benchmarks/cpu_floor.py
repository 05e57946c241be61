"""The floors under bulk transfer on loopback: why a checked transfer, or a file copy, falls short of raw here.

    python -m tests.benchmarks.cpu_floor [--gib N] [--no-files]

Prints the CPU seconds per GiB of (a) a plain blocking loopback TCP copy,
both ends in one process (no Python per chunk: the kernel's two copies and
little else), and (b) each digest a transfer may be checked with (SHA-256,
and BLAKE3 when the C{blake3} package is installed) on one core, and from
them the fastest a transfer can go on this machine's cores when both ends
hash every byte, as the default bulk check does.  That limit takes the
work of both ends as perfectly divisible over the cores, with nothing else:
to show what a transfer without framing reaches against it, each digest's
line is followed by the same copy with blocking loops in two processes
(sender: hash a MiB, send it; receiver: 512 KiB reads, hash each), the
shape of a transfer whose two ends are one thread each.

Then (unless C{--no-files}) the floor under the example CLI's case in
C{bench_bulk}: the same blocking copy, but the sender reads a file in tmpfs
(C{/dev/shm}, 1 MiB C{pread}s) and the receiver writes what it receives into
a fresh file in tmpfs (C{pwrite} of each 256 KiB read), without and then
with BLAKE3 (else SHA-256) at both ends.  No framing, no reactor, one loop
per end: nothing a real transfer of a file can skip, so its rate is about
what C{bench_bulk}'s C{cli} case can reach.  Compare its MB/s with the
socket-only line (and with the raw Twisted producer in C{bench_bulk}):
the raw producer reads and writes no file.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

MiB = 1 << 20
GiB = 1 << 30
TMPFS = "/dev/shm"


def _pair() -> tuple[socket.socket, socket.socket]:
    """A connected loopback TCP pair: (sending end, receiving end)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        client = socket.create_connection(server.getsockname())
        conn, _ = server.accept()
    return client, conn


def socketCpu(total: int) -> float:
    """CPU seconds (both ends) to move C{total} bytes over loopback TCP with blocking sockets."""
    block = os.urandom(MiB)
    client, conn = _pair()

    def send() -> None:
        for _ in range(total // MiB):
            client.sendall(block)
        client.close()

    view = memoryview(bytearray(MiB))
    started = time.process_time()
    sender = threading.Thread(target=send)
    sender.start()
    while conn.recv_into(view):
        pass
    sender.join()
    conn.close()
    return time.process_time() - started


def newDigest(name: str) -> Any:
    """A fresh hash object: C{"blake3"} from the blake3 package, anything else from hashlib."""
    if name == "blake3":
        import blake3  # type: ignore[import-not-found]

        return blake3.blake3()
    return hashlib.new(name)


def hashCpu(total: int, name: str = "sha256") -> float:
    """CPU seconds for one digest C{name} of C{total} bytes, 1 MiB updates."""
    block = os.urandom(MiB)
    digest = newDigest(name)
    started = time.process_time()
    for _ in range(total // MiB):
        digest.update(block)
    return time.process_time() - started


def digestFloor(total: int, name: str, copy: float | None = None) -> dict[str, float]:
    """
    The floor for a transfer of C{total} bytes hashed with C{name} at both
    ends: CPU seconds per GiB of the copy, of one digest, of all of it, and
    the fastest rate in MB/s on this machine's cores (the work of both ends
    divided perfectly over them).  C{copy}: a copy's CPU-s per GiB already
    measured.
    """
    gib = total / GiB
    copy = socketCpu(total) / gib if copy is None else copy
    digest = hashCpu(total, name) / gib
    floor = copy + 2 * digest
    cores = os.cpu_count() or 1
    return {"copy": copy, "digest": digest, "floor": floor, "mb_s": cores / floor * GiB / 1e6}


def pipeRate(total: int, name: str) -> dict[str, float]:
    """
    C{total} bytes over loopback from a forked sending process (1 MiB
    blocks: hash, then C{sendall}) to this one (512 KiB reads, each hashed),
    both ends hashing with C{name}: no framing, no reactor, one thread per
    end.  MB/s, each end's CPU-s per GiB, and the bytes received.
    """
    client, conn = _pair()
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the sender
        conn.close()
        block = os.urandom(MiB)
        update = newDigest(name).update
        for _ in range(total // MiB):
            update(block)
            client.sendall(block)
        client.close()
        os._exit(0)
    client.close()
    cpu = time.process_time()
    update = newDigest(name).update
    received = 0
    while data := conn.recv(512 * 1024):
        update(data)
        received += len(data)
    cpu = time.process_time() - cpu
    conn.close()
    _, _, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - started
    return {
        "received": received,
        "mb_s": total / wall / 1e6,
        "sender_cpu_s_per_gib": (usage.ru_utime + usage.ru_stime) * GiB / total,
        "receiver_cpu_s_per_gib": cpu * GiB / total,
    }


def digests() -> list[str]:
    """The digests a transfer may be checked with here: SHA-256, and BLAKE3 when installed."""
    try:
        import blake3  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        return ["sha256"]
    return ["sha256", "blake3"]


def sourceFile(total: int) -> str:
    """A file of C{total} bytes in tmpfs (one random MiB, rotated per MiB so no two MiB are equal)."""
    block = os.urandom(MiB)
    handle, path = tempfile.mkstemp(dir=TMPFS, prefix="chunkwire-floor-")
    with os.fdopen(handle, "wb") as file:
        for index in range(total // MiB):
            shift = (index * 40503) % MiB
            file.write(block[shift:] + block[:shift])
    return path


def fileCopy(source: str, total: int, digest: str | None) -> tuple[float, float]:
    """
    Copy C{source} over loopback TCP into a fresh tmpfs file (see the module
    docstring), hashing at both ends if C{digest}: (MB/s, CPU-s per GiB).
    """
    client, conn = _pair()
    update: Callable[[Any], Any] = newDigest(digest).update if digest else _nothing

    def send() -> None:
        fd = os.open(source, os.O_RDONLY)
        sending = newDigest(digest).update if digest else _nothing
        for offset in range(0, total, MiB):
            data = os.pread(fd, MiB, offset)
            sending(data)
            client.sendall(data)
        os.close(fd)
        client.close()

    handle, target = tempfile.mkstemp(dir=TMPFS, prefix="chunkwire-floor-")
    cpu, wall = time.process_time(), time.perf_counter()
    sender = threading.Thread(target=send)
    sender.start()
    offset = 0
    while data := conn.recv(256 * 1024):
        update(data)
        os.pwrite(handle, data, offset)
        offset += len(data)
    sender.join()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    os.close(handle)
    os.unlink(target)
    conn.close()
    return total / wall / 1e6, cpu * GiB / total


def _nothing(data: Any) -> None:
    """No digest."""


def printFileFloor(total: int) -> None:
    """The tmpfs-to-tmpfs copy's rate and CPU, against the socket alone (see the module docstring)."""
    source = sourceFile(total)
    fast = digests()[-1]
    try:
        for label, digest in (("file to file, no digest", None), (f"file to file, {fast} at both ends", fast)):
            rate, cpu = fileCopy(source, total, digest)
            print(f"{label}: {rate:,.0f} MB/s, {cpu:.2f} CPU-s per GiB (both ends)")
    finally:
        os.unlink(source)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, default=1.0, help="GiB to move and to hash (default 1)")
    parser.add_argument("--no-files", action="store_true", help="skip the tmpfs file-to-file floor")
    args = parser.parse_args()
    total = int(args.gib * GiB) // MiB * MiB
    cores = os.cpu_count() or 1
    copy = socketCpu(total) / args.gib
    print(f"plain loopback TCP copy, both ends: {copy:.2f} CPU-s per GiB")
    for name in digests():
        floor = digestFloor(total, name, copy)
        digest = floor["digest"]
        print(f"{name} on one core: {digest:.2f} CPU-s per GiB; both ends hash: {2 * digest:.2f}")
        print(f"  with both ends hashing: at least {floor['floor']:.2f} CPU-s per GiB; on {cores} cores no faster than")
        print(f"  {floor['mb_s']:,.0f} MB/s (compare the raw Twisted producer in bench_bulk)")
        if hasattr(os, "fork"):
            pipe = pipeRate(total, name)
            print(
                f"  blocking loops in two processes, {name} at both ends: {pipe['mb_s']:,.0f} MB/s"
                f" ({pipe['mb_s'] / floor['mb_s']:.2f} of that), CPU-s per GiB sender"
                f" {pipe['sender_cpu_s_per_gib']:.2f}, receiver {pipe['receiver_cpu_s_per_gib']:.2f}"
            )
    if not args.no_files and os.path.isdir(TMPFS):
        rate, _ = socketRate(total)
        print(f"socket only, same loops: {rate:,.0f} MB/s")
        printFileFloor(total)


def socketRate(total: int) -> tuple[float, float]:
    """The socket-only rate of the same blocking loops (no file, no digest): what the file floor is set against."""
    client, conn = _pair()
    block = os.urandom(MiB)

    def send() -> None:
        for _ in range(total // MiB):
            client.sendall(block)
        client.close()

    cpu, wall = time.process_time(), time.perf_counter()
    sender = threading.Thread(target=send)
    sender.start()
    while conn.recv(256 * 1024):
        pass
    sender.join()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    conn.close()
    return total / wall / 1e6, cpu * GiB / total


if __name__ == "__main__":
    main()
