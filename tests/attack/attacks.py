"""The hostile clients of the attack suite: plain blocking sockets, each bounded in time.

Contract: every attack takes the server's port and a time budget, runs in
the calling thread, never runs longer than its budget plus a few seconds,
and returns what it saw: C{closed_after} (seconds from its first byte until
the server closed, or C{None}), the ERROR text the server sent, and
attack-specific counts.  The servers it targets run with
L{tests.attack.harness.SERVER_OPTIONS}.
"""

from __future__ import annotations

import errno
import os
import re
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from framing import dumps
from framing.wire import BYTES, CLOSE, INT, OPEN, PREAMBLE, encode_header

OPEN_LIST = encode_header(OPEN, 4) + b"list"
CLOSE_TOKEN = encode_header(CLOSE, 0)
VALID = dumps(["still", "in", "sync"])[len(PREAMBLE) :]
TLS_CLIENT_HELLO = bytes.fromhex("16030100a5010000a10303") + os.urandom(32) + b"\x00\x02\x13\x01\x01\x00"
HTTP_REQUEST = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: attack\r\n\r\n"


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _errorText(data: bytes) -> str:
    """The readable part of what the server sent (its ERROR message, if any)."""
    match = re.search(rb"[ -~]{8,}", data)
    return match.group(0).decode("ascii", "replace") if match else ""


EXTRA_WAIT = 0.0
"""Seconds every attacker waits past its budget for the server to close.  0
under the timed rules (C{dev.py attack}, which judges the drop against the
configured limits); the default run's tests raise it with L{patience}, so
that a loaded machine's late drop is still seen, and only a hang is missed."""


@contextmanager
def patience(seconds: float) -> Iterator[None]:
    """Within this block, attackers wait C{seconds} longer for the server to close (see L{EXTRA_WAIT})."""
    global EXTRA_WAIT
    before, EXTRA_WAIT = EXTRA_WAIT, seconds
    try:
        yield
    finally:
        EXTRA_WAIT = before


LATE_READS = 64
"""Reads of what is already there that L{_readUntilClosed} makes past its budget (64 KiB each at most)."""


def _readUntilClosed(sock: socket.socket, started: float, budget: float) -> dict[str, Any]:
    """
    Read until the server closes or C{budget} (plus L{EXTRA_WAIT}) seconds
    have passed since C{started}.  With an extra wait, an answer to the
    valid object sent after a refused one ends the read at once: the server
    kept the stream in sync, and no drop is coming.
    """
    budget += EXTRA_WAIT
    data = b""
    closed_after = None
    lateReads = 0
    # Past the budget, reads go on while they find bytes at once (LATE_READS at most): a close that came while
    # this thread was still sending, or waiting for the CPU on a loaded machine, lies behind what the server
    # sent before it (its ERROR).
    while True:
        left = budget - (time.monotonic() - started)
        if left <= 0:
            if lateReads == LATE_READS:
                break
            lateReads += 1
        sock.settimeout(max(0.05, left))
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        except OSError:
            closed_after = time.monotonic() - started
            break
        if not chunk:
            closed_after = time.monotonic() - started
            break
        data += chunk
        if EXTRA_WAIT and b"sync" in data:
            break
    return {"closed_after": closed_after, "error": _errorText(data), "received": len(data), "in_sync": b"sync" in data}


def _trickle(port: int, budget: float, prefix: bytes, trickle: bytes, interval: float) -> dict[str, Any]:
    """Send C{prefix}, then C{trickle} one byte per C{interval} seconds until the server closes."""
    with _connect(port) as sock:
        started = time.monotonic()
        sock.sendall(prefix)
        sent = 0
        for byte in trickle:
            if time.monotonic() - started > budget:
                break
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                break
            sent += 1
            sock.settimeout(interval)
            try:
                if not sock.recv(65536, socket.MSG_PEEK):
                    break
                break  # the server said something: it is dropping us
            except TimeoutError:
                continue
            except OSError:
                break
        result = _readUntilClosed(sock, started, budget + 2)
        result["trickled_bytes"] = sent
        return result


def slowHeaders(port: int, budget: float) -> dict[str, Any]:
    """Send an object one byte per second."""
    return _trickle(port, budget, PREAMBLE, encode_header(BYTES, 1 << 20) + b"z" * 100, 1.0)


def endlessHeader(port: int, budget: float) -> dict[str, Any]:
    """Send the first bytes of a 9-byte header and never the rest."""
    return _silent(port, budget, PREAMBLE + encode_header(BYTES, 1 << 40)[:4])


def bodyNeverComes(port: int, budget: float) -> dict[str, Any]:
    """Announce a 100 000-byte body, send 100 bytes of it, then nothing."""
    return _silent(port, budget, PREAMBLE + encode_header(BYTES, 100_000) + b"b" * 100)


def openNeverClosed(port: int, budget: float) -> dict[str, Any]:
    """Open a list, put ten items in it, and never close it."""
    return _silent(port, budget, PREAMBLE + OPEN_LIST + encode_header(INT, 7) * 10)


def noPreamble(port: int, budget: float) -> dict[str, Any]:
    """Connect and send nothing at all."""
    return _silent(port, budget, b"")


def _silent(port: int, budget: float, data: bytes) -> dict[str, Any]:
    with _connect(port) as sock:
        started = time.monotonic()
        sock.sendall(data)
        return _readUntilClosed(sock, started, budget)


def _blast(port: int, budget: float, data: bytes, follow: bytes = b"") -> dict[str, Any]:
    """Send C{data} (and C{follow}) as fast as the server reads, then read what it answers."""
    with _connect(port) as sock:
        started = time.monotonic()
        try:
            # A loaded server reads slowly: sending may take longer than the budget, by the extra wait.
            sock.settimeout(budget + EXTRA_WAIT)
            sock.sendall(data + follow)
        except OSError as error:
            return {**_readUntilClosed(sock, started, 0.5), "send_error": type(error).__name__}
        return _readUntilClosed(sock, started, budget)


def hugeLength(port: int, budget: float) -> dict[str, Any]:
    """Announce a 2**62-byte body, then send junk for it as fast as the server takes it."""
    with _connect(port) as sock:
        started = time.monotonic()
        sock.sendall(PREAMBLE + encode_header(BYTES, 1 << 62))
        junk, sent = os.urandom(65536), 0
        sock.settimeout(1.0)
        # Until dropped (the limit is 4 MiB read), however slowly a loaded server reads.
        while time.monotonic() - started < budget + EXTRA_WAIT and sent < 1 << 30:
            try:
                sock.sendall(junk)
            except TimeoutError:
                continue  # the server read nothing for a second (a loaded machine): keep sending
            except OSError:
                break
            sent += len(junk)
        result = _readUntilClosed(sock, started, budget + 2)
        result["sent_bytes"] = sent
        return result


def deepNesting(port: int, budget: float) -> dict[str, Any]:
    """Nest 100 lists (past the depth limit of 64), close them all, then send a valid object."""
    return _blast(port, budget / 4, PREAMBLE + OPEN_LIST * 100 + CLOSE_TOKEN * 100 + VALID)


def tinyTokens(port: int, budget: float) -> dict[str, Any]:
    """One list of two million one-byte ints (past max_items), then a valid object."""
    return _blast(port, budget, PREAMBLE + OPEN_LIST + encode_header(INT, 1) * 2_000_000 + CLOSE_TOKEN + VALID)


def garbage(port: int, budget: float) -> dict[str, Any]:
    """Random bytes instead of the preamble."""
    return _blast(port, budget, os.urandom(4096))


def tlsOnPlainPort(port: int, budget: float) -> dict[str, Any]:
    """A TLS ClientHello on the plain port."""
    return _blast(port, budget, TLS_CLIENT_HELLO)


def httpOnPlainPort(port: int, budget: float) -> dict[str, Any]:
    """An HTTP request on the plain port."""
    return _blast(port, budget, HTTP_REQUEST)


FLOOD_SOURCE = "127.0.0.2"
"""The flood comes from its own loopback address, as a flooding host would."""


def flood(port: int, budget: float, count: int = 1000) -> dict[str, Any]:
    """
    Start C{count} connections at once (non-blocking connects) and send
    nothing; C{closed_after} is the longest any one stayed open.
    """
    import selectors

    selector = selectors.DefaultSelector()
    opened: dict[socket.socket, float] = {}
    started = time.monotonic()
    failed = 0
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((FLOOD_SOURCE, 0))
        sock.setblocking(False)
        if sock.connect_ex(("127.0.0.1", port)) not in (0, errno.EINPROGRESS):
            failed += 1
            sock.close()
            continue
        opened[sock] = time.monotonic()
        selector.register(sock, selectors.EVENT_READ)
    connect_seconds = time.monotonic() - started
    codes: dict[str, int] = {}
    longest = 0.0
    deadline = time.monotonic() + budget + 3 + EXTRA_WAIT
    lateSweeps = 0
    while opened:
        # Past the deadline, what is already there is still read (LATE_READS sweeps at most): closes that
        # came while this thread waited for the CPU on a loaded machine.
        late = time.monotonic() >= deadline
        events = selector.select(timeout=0 if late else 0.2)
        if late:
            lateSweeps += 1
            if not events or lateSweeps > LATE_READS:
                break
        for key, _ in events:
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                chunk = sock.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if chunk:
                text = _errorText(chunk)
                code = "too-many-connections" if "limit" in text else "preamble-timeout" if "preamble" in text else text
                codes[code] = codes.get(code, 0) + 1
                continue
            longest = max(longest, time.monotonic() - opened.pop(sock))
            selector.unregister(sock)
            sock.close()
    for sock in opened:
        sock.close()
    return {
        "connections": count - failed,
        "connect_failed": failed,
        "connect_seconds": round(connect_seconds, 2),
        "still_open": len(opened),
        "closed_after": longest if not opened else None,
        "codes": codes,
        "error": ", ".join(f"{code}: {n}" for code, n in sorted(codes.items())),
    }


ATTACKS: dict[str, tuple[Callable[[int, float], dict[str, Any]], str]] = {
    "slow-headers": (slowHeaders, "stalled"),
    "endless-header": (endlessHeader, "stalled"),
    "huge-length": (hugeLength, "object-too-large"),
    "body-never-comes": (bodyNeverComes, "stalled"),
    "deep-nesting": (deepNesting, "too-deep"),
    "tiny-tokens": (tinyTokens, "too-many-items"),
    "open-never-closed": (openNeverClosed, "stalled"),
    "flood-1000": (flood, "too-many-connections"),
    "no-preamble": (noPreamble, "preamble-timeout"),
    "garbage": (garbage, "bad-preamble"),
    "tls-on-plain-port": (tlsOnPlainPort, "bad-preamble"),
    "http-on-plain-port": (httpOnPlainPort, "bad-preamble"),
}
"""Each attack and the code the server must log for it."""

from .attacks_cost import ATTACKS as _COST_ATTACKS  # noqa: E402 (after ATTACKS: they import helpers from here)
from .attacks_rpc import RPC_ATTACKS  # noqa: E402

ATTACKS.update(_COST_ATTACKS)
ATTACKS.update(RPC_ATTACKS)  # type: ignore[arg-type]
