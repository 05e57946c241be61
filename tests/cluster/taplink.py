"""A host's link as two TAP devices and this process between them: netem's delay and loss in user space.

    python -m tests.cluster.taplink INSIDE OUTSIDE DELAY LOSS

This kernel has no C{sch_netem} (nor C{tc}'s classifiers and actions; see
also L{tests.delayproxy}), so the cluster run (L{tests.cluster.hosts})
gives the host whose link it impairs a link of two TAP devices, INSIDE
(moved into the host's namespace by the run) and OUTSIDE (put on the
bridge), and this process copies each Ethernet frame from one to the
other.  Until told otherwise it forwards every frame at once.  SIGUSR1
impairs the link: each frame, either way, is dropped with probability
LOSS (a fraction) and the others are delivered DELAY seconds after they
arrived, in order, as C{tc qdisc add ... netem delay 100ms loss 5%} on
both ends would; SIGUSR2 repairs it (frames held are still delivered at
their time).  It prints C{link ready}, C{link impaired}, C{link repaired}
as each takes effect.

Cost: one C{read} and one C{write} system call per frame, and a Python
turn (tens of microseconds): this host's traffic only.
"""

from __future__ import annotations

import fcntl
import os
import random
import select
import signal
import struct
import sys
import time
from collections import deque

TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000


def openTap(name: str) -> int:
    """Make (or attach to) the TAP device C{name}; its file descriptor, non-blocking."""
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
    return fd


def main(argv: list[str]) -> int:
    inside, outside = openTap(argv[0]), openTap(argv[1])
    delay, loss = float(argv[2]), float(argv[3])
    impaired = [False]
    changed: list[str] = []

    def impair(*_: object) -> None:
        impaired[0] = True
        changed.append("link impaired")

    def repair(*_: object) -> None:
        impaired[0] = False
        changed.append("link repaired")

    signal.signal(signal.SIGUSR1, impair)
    signal.signal(signal.SIGUSR2, repair)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    other = {inside: outside, outside: inside}
    held: dict[int, deque[tuple[float, bytes]]] = {inside: deque(), outside: deque()}
    print("link ready", flush=True)
    while True:
        while changed:
            print(changed.pop(0), flush=True)
        now = time.monotonic()
        due = [queue[0][0] for queue in held.values() if queue]
        wait = max(0.0, min(due) - now) if due else 0.5
        try:
            readable, _, _ = select.select([inside, outside], [], [], wait)
        except InterruptedError:
            continue
        for fd in readable:
            while True:
                try:
                    frame = os.read(fd, 65536)
                except BlockingIOError:
                    break
                except OSError:
                    break  # (the other end is not up yet: the frame is gone, as on a wire)
                if impaired[0]:
                    if random.random() < loss:
                        continue
                    held[fd].append((time.monotonic() + delay, frame))
                elif held[fd]:
                    held[fd].append((time.monotonic(), frame))  # (behind what is held: order kept)
                else:
                    _write(other[fd], frame)
        now = time.monotonic()
        for fd, queue in held.items():
            while queue and queue[0][0] <= now:
                _write(other[fd], queue.popleft()[1])


def _write(fd: int, frame: bytes) -> None:
    try:
        os.write(fd, frame)
    except OSError:
        pass  # (a full queue or a device down: dropped, as a wire would)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
