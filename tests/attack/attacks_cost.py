"""Attacks on decoding cost: small inputs built to take memory or CPU out of proportion to their size.

Contract: each attack is built from wire tokens by hand, as a hostile peer
would build them, and runs within its time budget like those in
L{tests.attack.attacks}.  An attack whose object is refused (the connection
stays up by design) says so with C{refused_object}, then sends a valid
object, so that the echo server's answer to it shows the stream is in sync.

  - amplification: OPEN a list, then inner lists of empty sets (5 wire bytes
    each, 224 bytes held), never closed; the per-object memory budget
    refuses it at 32 MiB estimated, the guard drops it at its wire cap.
  - amplification-closed: the same, 1 MB of it, closed: refused with
    C{object-too-costly} by the decoder alone, C{resource-exhausted} by a
    guarded server (its pool is full first), the stream stays in sync.
  - hash-collision-set / -dict: 40,000 ints (30,000 keys) that are all
    multiples of 2**61 - 1, so they share one hash: refused with
    C{hash-collisions} after a few dozen members.
  - ndarray-shape: an ndarray whose shape is 900 one-KiB ints then 0:
    refused with C{invalid-value} before any product is formed.
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Callable
from typing import Any

from framing.wire import BIGINT, BYTES, CLOSE, INT, OPEN, PREAMBLE, SIMPLE, STRING, encode_header

from . import attacks
from .attacks import VALID, _blast, _connect, _readUntilClosed, tinyTokens

MODULUS = sys.hash_info.modulus
CLOSE_TOKEN = encode_header(CLOSE, 0)
NONE_TOKEN = encode_header(SIMPLE, 0)


def _open(name: str) -> bytes:
    return encode_header(OPEN, len(name)) + name.encode("ascii")


def _int(n: int) -> bytes:
    if n < 2**64:
        return encode_header(INT, n)
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return encode_header(BIGINT, len(body)) + body


def _text(text: str) -> bytes:
    body = text.encode("utf-8")
    return encode_header(STRING, len(body)) + body


EMPTY_SET = _open("set") + CLOSE_TOKEN


def _call(kind: str, argument: bytes) -> bytes:
    """C{argument} as the top-level object (echo) or as the argument of a kv C{get} call (CALL to the root, id 1)."""
    if kind == "echo":
        return argument
    call = _open("rpc") + _int(0) + _int(next(_REQUEST_IDS)) + _int(0) + _text("get") + NONE_TOKEN
    return call + argument + CLOSE_TOKEN


_REQUEST_IDS = itertools.count(1)


def amplification(port: int, budget: float, sets: int = 1 << 20) -> dict[str, Any]:
    """A list of lists of empty sets, never closed, sent as fast as the server reads."""
    with _connect(port) as sock:
        started = time.monotonic()
        sock.settimeout(max(1.0, budget))
        block = EMPTY_SET * 65536
        sent = 0
        try:
            sock.sendall(PREAMBLE + _open("list") + _open("list"))
            # send(), not sendall(): a timeout (a loaded server that reads nothing for a while) then loses
            # no part of a block, so the sets stay whole, and the attacker keeps sending until its time is up.
            view, offset = memoryview(block), 0
            while sent < sets and time.monotonic() - started < budget + attacks.EXTRA_WAIT:
                try:
                    offset += sock.send(view[offset:])
                except TimeoutError:
                    continue
                if offset == len(block):
                    offset = 0
                    sent += 65536
        except OSError:
            pass
        result = _readUntilClosed(sock, started, budget + 2)
        result["sets_sent"] = sent
        return result


def _refused(port: int, budget: float, data: bytes, follow: bytes = VALID) -> dict[str, Any]:
    """Send C{data}, which the server refuses, then C{follow}, which it must answer."""
    result = _blast(port, budget, PREAMBLE + data + follow)
    result["refused_object"] = True
    return result


def amplificationClosed(port: int, budget: float) -> dict[str, Any]:
    """200,000 empty sets (1 MB) in one list, closed, then a valid object."""
    return _refused(port, budget, _open("list") + EMPTY_SET * 200_000 + CLOSE_TOKEN)


def _collidingSet(count: int) -> bytes:
    return _open("set") + b"".join(_int(i * MODULUS) for i in range(1, count + 1)) + CLOSE_TOKEN


def _collidingDict(count: int) -> bytes:
    return _open("dict") + b"".join(_int(i * MODULUS) + _int(0) for i in range(1, count + 1)) + CLOSE_TOKEN


def _against(kind: str, build: Callable[[], bytes]) -> Callable[[int, float], dict[str, Any]]:
    follow = VALID if kind == "echo" else _call(kind, _text("sync"))

    def attack(port: int, budget: float) -> dict[str, Any]:
        return _refused(port, budget, _call(kind, build()), follow)

    attack.__doc__ = f"{build.__doc__} ({kind} server)"
    return attack


def _hashSet() -> bytes:
    """A set of 40,000 ints that share one hash (about 440 kB)."""
    return _collidingSet(40_000)


def _hashDict() -> bytes:
    """A dict of 30,000 int keys that share one hash."""
    return _collidingDict(30_000)


def _ndarrayShape() -> bytes:
    """An ndarray whose shape is 900 one-KiB ints, then 0."""
    big = 2 ** (8 * 1024 - 1)
    shape = _open("list") + _int(big) * 900 + _int(0) + CLOSE_TOKEN
    return _open("ndarray") + _text("<f8") + shape + encode_header(BYTES, 0) + CLOSE_TOKEN


def _byServer(build: Callable[[], bytes]) -> Callable[[int, float], dict[str, Any]]:
    """One attack that sends C{build()} as the server it meets expects it (found by its answer to nothing)."""
    echo, kv = _against("echo", build), _against("kv", build)

    def attack(port: int, budget: float) -> dict[str, Any]:
        return (kv if _isKv(port) else echo)(port, budget)

    attack.__doc__ = build.__doc__
    return attack


def _isKv(port: int) -> bool:
    """True if the server on C{port} answers an RPC call to its root (the kv server), False for echo."""
    probe = PREAMBLE + _open("rpc") + _int(0) + _int(1) + _int(0) + _text("get") + NONE_TOKEN + _text("k") + CLOSE_TOKEN
    with _connect(port) as sock:
        sock.sendall(probe)
        sock.settimeout(2)
        data = b""
        try:
            while len(data) < 64:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
                if _open("rpc") in data:
                    break
        except TimeoutError:
            pass
    return _open("rpc") in data


ATTACKS: dict[str, tuple[Callable[[int, float], dict[str, Any]], str]] = {
    "amplification": (amplification, "object-too-large"),
    # What the decoder holds between reads is charged to the listener's pool
    # (GuardPolicy.maxHeldBytes, 32 MiB), which these objects fill before
    # max_object_memory (32 MiB, estimated beyond their wire bytes, which the
    # pool counts too): refused for want of room, the stream kept in sync.
    "amplification-closed": (amplificationClosed, "resource-exhausted"),
    "hash-collision-set": (_byServer(_hashSet), "hash-collisions"),
    "hash-collision-dict": (_byServer(_hashDict), "hash-collisions"),
    "ndarray-shape": (_byServer(_ndarrayShape), "invalid-value"),
    # Not a new attack: a list of two million one-byte ints now passes the
    # object's memory budget (32 MiB, at 50 bytes estimated a value) at
    # about 670,000 values, before max_items (1 Mi), so its code changes;
    # and a guarded server's pool is full before that (as above).
    "tiny-tokens": (tinyTokens, "resource-exhausted"),
}
"""The cost attacks and the code the server must log for each."""
