# -*- test-case-name: tests.protocols.bulk.test_digests,tests.framing.bulk.test_connection -*-
"""Digests of bulk streams and files, sans-IO: which this process computes, which two peers share, and a mismatch.

Contract: L{availableDigests} names what this process computes, best first
(BLAKE3 when the C{blake3} package is installed, then SHA-256, which every
peer computes); L{chooseDigest} is how both ends of a connection settle
the same digest, each from the other's list; L{newHash} makes a hash
object for a name L{checkAlgorithm} accepts.  Shared by the Twisted bulk
layer (L{protocols.bulk._integrity} hashes there, in order, in a pool of
threads) and the clients without Twisted.  No I/O, no threads.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

try:  # the optional extra chunkwire[fast]
    import blake3 as _blake3
except ImportError:  # pragma: no cover - depends on the environment
    _blake3 = None  # type: ignore[assignment]

DEFAULT_DIGEST = "sha256"
"""The digest every peer can compute (C{hashlib}'s SHA-256): the one a file
service and an assembly fall back on, and the last of every preference list."""

BLAKE3 = "blake3"
"""BLAKE3, from the C{blake3} package (the BLAKE3 team's bindings): about
2.6 times SHA-256's speed here (4.2 against 1.6 GB/s on one core, 1 MiB
updates), so it comes first whenever both ends have it."""

NEGOTIATED = "*"
"""What a stream announces as its digest when the sender does not know the
receiver's digests yet: the first digest of the sender's HELLO that the
receiver accepts (see L{chooseDigest})."""


class DigestUnavailable(ValueError):
    """
    A digest was asked for that this side, or the peer, cannot compute: a
    name C{hashlib} and the optional packages do not know, or no digest
    shared by both ends.  Raised before any data moves.

    @ivar code: C{"digest-unavailable"}.
    """

    code = "digest-unavailable"


PREFERENCE = (BLAKE3, DEFAULT_DIGEST)
"""Every digest chunkwire computes, best first: a transfer uses the first
that both ends have, so the default is C{PREFERENCE[0]} wherever its
package is installed (C{chunkwire[fast]})."""


def availableDigests() -> tuple[str, ...]:
    """The digests this process computes, in order of preference: BLAKE3 first when C{blake3} is importable."""
    return PREFERENCE if _blake3 is not None else (DEFAULT_DIGEST,)


def newHash(name: str) -> Any:
    """
    A fresh hash object for C{name} (C{update}, C{digest}), one thread.

    @raise DigestUnavailable: C{name} cannot be computed here.
    """
    if name == BLAKE3:
        if _blake3 is None:
            raise DigestUnavailable("blake3 needs the blake3 package (pip install blake3, or chunkwire's fast extra)")
        return _blake3.blake3()
    import hashlib

    return hashlib.new(checkAlgorithm(name) or DEFAULT_DIGEST)


def chooseDigest(preferred: Iterable[str], accepted: Iterable[str]) -> str | None:
    """The first of C{preferred} that C{accepted} holds, or C{None}: how both ends pick the same digest."""
    accepting = set(accepted)
    for name in preferred:
        if name in accepting:
            return name
    return None


class IntegrityError(Exception):
    """
    The digest of what arrived is not the digest the sender computed (or the
    size is not the size it announced): the data must not be used.

    @ivar expected: the sender's digest, hex (or C{""}).
    @ivar actual: the receiver's digest, hex (or C{""}).
    """

    def __init__(self, message: str, expected: str = "", actual: str = "") -> None:
        super().__init__(message, expected, actual)
        self.message = message
        self.expected = expected
        self.actual = actual

    def __str__(self) -> str:
        return self.message


def checkAlgorithm(name: str | None) -> str | None:
    """
    Return C{name} if this process can compute it: a fixed-length
    C{hashlib} algorithm available on every platform, or C{"blake3"} with
    the C{blake3} package installed (or C{None}, meaning no digest).

    @raise DigestUnavailable: it is not (a C{ValueError}).
    """
    if name is None:
        return None
    if name == BLAKE3:
        if _blake3 is None:
            raise DigestUnavailable("blake3 needs the blake3 package (pip install blake3, or chunkwire's fast extra)")
        return name
    if name == DEFAULT_DIGEST:
        return name  # (guaranteed everywhere: asked without loading hashlib, which a BLAKE3 transfer never needs)
    import hashlib  # (here, not at the top: loading it loads OpenSSL's hashes, about 4 ms of a command's start)

    if name not in hashlib.algorithms_guaranteed or name.startswith("shake_"):
        raise DigestUnavailable(f"{name!r} is not a fixed-length hashlib algorithm available everywhere")
    return name
