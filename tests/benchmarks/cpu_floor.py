"""The CPU floor under end-to-end SHA-256 on loopback: why the hashed bulk case cannot reach the raw ceiling here.

    python -m tests.benchmarks.cpu_floor [--gib N]

Prints the CPU seconds per GiB of (a) a plain blocking loopback TCP copy,
both ends in one process (no Python per chunk: the kernel's two copies and
little else), and (b) hashlib SHA-256 of the same bytes on one core, and
from them the fastest a transfer can go on this machine's cores when both
ends hash every byte, as the default bulk check does.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import socket
import threading
import time

MiB = 1 << 20
GiB = 1 << 30


def socketCpu(total: int) -> float:
    """CPU seconds (both ends) to move C{total} bytes over loopback TCP with blocking sockets."""
    block = os.urandom(MiB)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        client = socket.create_connection(server.getsockname())
        conn, _ = server.accept()

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


def hashCpu(total: int) -> float:
    """CPU seconds for one SHA-256 of C{total} bytes."""
    block = os.urandom(MiB)
    digest = hashlib.sha256()
    started = time.process_time()
    for _ in range(total // MiB):
        digest.update(block)
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, default=1.0, help="GiB to move and to hash (default 1)")
    args = parser.parse_args()
    total = int(args.gib * GiB)
    cores = os.cpu_count() or 1
    copy, digest = socketCpu(total) / args.gib, hashCpu(total) / args.gib
    floor = copy + 2 * digest
    print(f"plain loopback TCP copy, both ends: {copy:.2f} CPU-s per GiB")
    print(f"SHA-256 on one core: {digest:.2f} CPU-s per GiB; both ends hash: {2 * digest:.2f}")
    print(f"with both ends hashing: at least {floor:.2f} CPU-s per GiB; on {cores} cores no faster than")
    print(f"  {cores / floor * GiB / 1e6:,.0f} MB/s (compare the raw Twisted producer in bench_bulk)")


if __name__ == "__main__":
    main()
