"""The table of objects a server publishes under unguessable names.

Contract: L{NameTable.register} gives each object a fresh name of 256 bits
from C{os.urandom} (52 characters of lowercase base32).  The table keeps
only the SHA-256 digest of each name, never the name, so a memory dump or a
log of the table does not hand out access.  L{NameTable.lookup} does the
same work for every name it is given: it hashes the whole presented name
and looks the digest up in a dict, so an unknown name, a wrong one, a
revoked one and one that shares a prefix with a real one cost the same and
answer the same C{None}; no comparison runs over a secret byte by byte.
Each operation is O(length of the name).
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Sequence
from typing import Any

from .identity import ServerIdentity
from .urls import ObjectURL

__all__ = ["NAME_BYTES", "NameTable"]

NAME_BYTES = 32
"""Random bytes in a name: 256 bits, twice the 128 an unguessable name needs."""


def _digest(name: str) -> bytes:
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).digest()


class NameTable:
    """
    Objects published under secret names, with a label each for logs.

    A name is a capability: whoever holds it (inside an L{ObjectURL}) may
    reach the object, until it is revoked.
    """

    def __init__(self) -> None:
        self._entries: dict[bytes, tuple[Any, str]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"<NameTable of {len(self)} names>"

    def register(self, obj: Any, label: str) -> str:
        """
        Publish C{obj} under a new name and return the name.

        @param label: a description that is not secret, for logs (the name is).
        """
        while True:
            name = base64.b32encode(os.urandom(NAME_BYTES)).decode("ascii").rstrip("=").lower()
            digest = _digest(name)
            if digest not in self._entries:
                break
        self._entries[digest] = (obj, label)
        return name

    def lookup(self, name: str) -> tuple[Any, str] | None:
        """The object and label published as C{name}, or C{None} (unknown, wrong and revoked alike)."""
        return self._entries.get(_digest(name))

    def revoke(self, name: str) -> bool:
        """Stop publishing C{name}; return whether it was published."""
        return self._entries.pop(_digest(name), None) is not None

    def url(self, identity: ServerIdentity | str, hints: Sequence[str], name: str) -> ObjectURL:
        """
        The URL of the object published as C{name} on the server with
        C{identity} (or that key hash), reachable at C{hints}.

        @raise KeyError: C{name} is not published here.
        """
        if self.lookup(name) is None:
            raise KeyError("no object is published under that name")
        serverKey = identity if isinstance(identity, str) else identity.keyHash
        return ObjectURL(serverKey, tuple(hints), name)
