# -*- test-case-name: tests.protocols.auth.test_names,tests.protocols.auth.test_publishing -*-
"""The table of objects a server publishes under unguessable names.

Contract: L{NameTable.register} gives each object a fresh 256-bit name
(52 characters of base32) and keeps only its SHA-256 digest, never the name;
L{NameTable.lookup} costs the same and answers the same C{None} for every
name it does not know, comparing no secret byte by byte.  A table made with
a C{path} keeps the digests across restarts (rewritten whole and atomically,
mode 0600); L{NameTable.bind} gives a label its object again after a restart,
and until then its names are refused.  A file that is not a name table, or
that group or others may write, is a L{NameFileError}.  One process writes a
given file.

Cost: O(length of the name) per operation; O(names in the table) per
change to a table with a file.

Design: docs/design/auth.md
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from framing.login._urls import ObjectURL

from ._identity import ServerIdentity
from ._secretfiles import writeAtomically

NAME_BYTES = 32
"""Random bytes in a name: 256 bits, twice the 128 an unguessable name needs."""


FILE_FORMAT = "chunkwire-names-1"
"""The C{format} field of a name table's file (JSON: C{{"format": ..., "names": [{"sha256": HEX, "label": TEXT}]}})."""


class NameFileError(ValueError):
    """
    A name table's file cannot be used: it is not a name table, or others may write it.

    @ivar path: the file.
    """

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(f"{os.fspath(path)}: {reason}")
        self.path = os.fspath(path)


class _Unbound:
    """The object of a name read from the file, until L{NameTable.bind} gives its label one."""

    def __repr__(self) -> str:
        return "<unbound>"


UNBOUND = _Unbound()


def _digest(name: str) -> bytes:
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).digest()


def _read(path: Path) -> dict[bytes, tuple[Any, str]]:
    """
    The entries kept in the file at C{path}, every one unbound.

    @raise NameFileError: the file is writable by group or others, or is not a name table.
    """
    if os.name == "posix" and path.stat().st_mode & 0o022:
        raise NameFileError(path, "group or others may write it (and so publish names of their own); use mode 0600")
    try:
        document = json.loads(path.read_bytes())
        if not isinstance(document, dict) or document.get("format") != FILE_FORMAT:
            raise ValueError(f"not a {FILE_FORMAT} file")
        entries: dict[bytes, tuple[Any, str]] = {}
        for entry in document["names"]:
            digest, label = bytes.fromhex(entry["sha256"]), entry["label"]
            if len(digest) != hashlib.sha256().digest_size or not isinstance(label, str) or digest in entries:
                raise ValueError("an entry is not one digest and a label")
            entries[digest] = (UNBOUND, label)
    except (ValueError, KeyError, TypeError) as error:
        raise NameFileError(path, f"not a name table ({error})") from None
    return entries


class NameTable:
    """
    Objects published under secret names, with a label each for logs.

    A name is a capability: whoever holds it (inside an L{ObjectURL}) may
    reach the object, until it is revoked.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        """
        @param path: a file that keeps the names (their digests and labels)
            across restarts: read if it exists, made (mode 0600) at the
            first registration otherwise.  C{None}: the names last as long
            as this table.
        @raise NameFileError: the file exists and cannot be used.
        """
        self.path = None if path is None else Path(path)
        self._entries: dict[bytes, tuple[Any, str]] = {}
        if self.path is not None and self.path.exists():
            self._entries = _read(self.path)

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
        self._change({digest: (obj, label)}, [])
        return name

    def lookup(self, name: str) -> tuple[Any, str] | None:
        """
        The object and label published as C{name}, or C{None} (unknown,
        wrong, revoked, and kept in the file but not yet bound, alike).
        """
        found = self._entries.get(_digest(name))
        if found is None or found[0] is UNBOUND:
            return None
        return found

    def revoke(self, name: str) -> bool:
        """Stop publishing C{name} (in the file too); return whether it was published."""
        digest = _digest(name)
        if digest not in self._entries:
            return False
        self._change({}, [digest])
        return True

    def bind(self, label: str, obj: Any) -> int:
        """
        Publish C{obj} again under every name registered with C{label}
        (in an earlier run, for a table read from its file): the URLs
        handed out for them reach C{obj}.  The file does not change.

        @return: how many names now reach C{obj}; 0 if none has that label
            (register one then).
        """
        digests = [digest for digest, (_, kept) in self._entries.items() if kept == label]
        for digest in digests:
            self._entries[digest] = (obj, label)
        return len(digests)

    def publish(self, obj: Any, label: str) -> str | None:
        """
        Publish C{obj} as C{label} once for good: under the names C{label}
        already has (L{bind}), or, if it has none, under a new name.

        @return: the new name, or C{None} when C{label} had names (the URLs
            handed out for them reach C{obj}; this table cannot say them again).
        """
        if self.bind(label, obj):
            return None
        return self.register(obj, label)

    def revokeLabel(self, label: str) -> int:
        """Stop publishing every name registered with C{label}; return how many there were."""
        digests = [digest for digest, (_, kept) in self._entries.items() if kept == label]
        if digests:
            self._change({}, digests)
        return len(digests)

    def _change(self, added: dict[bytes, tuple[Any, str]], removed: list[bytes]) -> None:
        """
        Add and remove entries, and keep the file (if any) the same: if it
        cannot be written, the table is left as it was and the error raised.
        """
        # Only a table with a file pays for the copy (its change costs O(names) anyway, to write the file).
        before = None if self.path is None else dict(self._entries)
        self._entries.update(added)
        for digest in removed:
            del self._entries[digest]
        if self.path is None or before is None:
            return
        try:
            self._save(self.path)
        except BaseException:
            self._entries = before
            raise

    def _save(self, path: Path) -> None:
        names = [{"sha256": digest.hex(), "label": label} for digest, (_, label) in self._entries.items()]
        writeAtomically(path, json.dumps({"format": FILE_FORMAT, "names": names}, indent=1) + "\n", 0o600)

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
