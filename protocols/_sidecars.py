# -*- test-case-name: tests.protocols.test_sidecars,tests.protocols.bulk.test_digests -*-
"""The sidecar of a partial file: which byte ranges it holds, and a check that nobody else wrote it.

Contract: a sidecar (C{NAME.part.json} beside C{NAME.part}) is one JSON
header line, then one C{"start end"} line per range held, appended as ranges
arrive and rewritten atomically when the lines outnumber the ranges.  With a
key (the file service's, C{v} 3) every line is chained by HMAC-SHA-256, so a
sidecar written or edited without the key is rejected whole
(L{Sidecar.rejected}); only cutting lines off the end passes, which loses
ranges and never adds any.  A range past the partial file's end rejects it
too.  Every client (Twisted or not) keeps its downloads' records in this one
format, so this module imports no Twisted.

Cost: loading is one read and one HMAC per line; a save costs what changed.
C{json} is imported where a header is parsed or written (L{_parsedHeader},
L{_dumped}): an upload's client keeps no sidecar, and a command that sends
loads none of it.

Design: docs/design/bulk.md
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, AnyStr

from framing.bulk._ranges import RangeSet

from ._places import Directory, NotRegular

PLAIN = 2
"""The version of a sidecar without tags (a client's download, and the file service before keys)."""
KEYED = 3
"""The version of a sidecar whose header and lines carry HMAC tags."""
MAX_SIDECAR = 64 * 1024 * 1024
"""The most bytes of a sidecar read: far above what C{MAX_FRAGMENTS} ranges take."""
KEY_BYTES = 32
SAVE_EVERY = 64 * 1024 * 1024
"""Bytes of new data between two sidecar writes during a transfer (it is
also written when a stream ends, fails or its connection drops)."""
SAVE_RANGES = 1024
"""New ranges between two sidecar writes: what is kept in memory to append."""


class Sidecar:
    """
    The sidecar file C{name} in C{directory}; see the module docstring.

    @ivar lines: the range lines the file holds (0: none, or it must be rewritten).
    @ivar rejected: whether the last L{load} found a sidecar it refused
        (tags that do not match, or ranges past the partial file's end).
    """

    def __init__(self, directory: Directory, name: str, key: bytes | None = None) -> None:
        self.directory = directory
        self.name = name
        self.key = key
        self.lines = 0
        self.rejected = False
        self._tag = b""
        # Ranges written since the last save (appended by the next one), and their bytes.
        self._fresh: list[tuple[int, int]] = []
        self._unsaved = 0

    def header(self, size: int, version: str, algorithm: str) -> dict[str, Any]:
        """The header record of a file of C{size} bytes from source C{version}, checked with C{algorithm}."""
        record: dict[str, Any] = {"v": KEYED if self.key else PLAIN, "size": size, "version": version}
        record["algorithm"] = algorithm
        if self.key:
            record["mac"] = self._mac(_canonical(record)).hex()
        return record

    def load(self, size: int, version: str, algorithm: str, partSize: int) -> RangeSet:
        """
        The ranges the sidecar records for this file (C{partSize}: the
        partial file's size), or an empty set if it is absent, describes
        another file, or is refused (then L{rejected} is set).
        """
        self.rejected, self.lines = False, 0
        data = self.directory.read(self.name, MAX_SIDECAR)
        if not data:
            return RangeSet()
        lines = data.split(b"\n")
        record = _parsedHeader(lines[0])
        if record is None:
            return self._refused()
        expected = self.header(size, version, algorithm)
        if record.get("v") != expected["v"] or not isinstance(record.get("mac", ""), str):
            return RangeSet()
        if self.key and not _sameTag(record.get("mac", ""), expected["mac"]):
            # Either another file's (its mac differs with its fields) or written without the key.
            return self._refused() if self._forged(record) else RangeSet()
        if record != expected:
            return RangeSet()
        return self._ranges(lines, expected, partSize)

    def _forged(self, record: dict[str, Any]) -> bool:
        """Whether a header whose mac is not this file's is not any file's either (written without the key)."""
        fields = {key: value for key, value in record.items() if key != "mac"}
        return not _sameTag(str(record.get("mac", "")), self._mac(_canonical(fields)).hex())

    def _ranges(self, lines: list[bytes], header: dict[str, Any], partSize: int) -> RangeSet:
        held = RangeSet()
        self._tag = bytes.fromhex(header["mac"]) if self.key else b""
        body = lines[1:]
        cut = bool(body and body[-1])  # text after the last newline: a line cut short by a crash
        complete = body[:-1] if body else []
        for line in complete:
            try:
                start, end = self._line(line)
            except ValueError:
                return self._refused()
            if end > partSize:
                return self._refused()
            held.add(start, end)
        # A cut line is dropped, and the next save rewrites the file rather
        # than append after the fragment.
        self.lines = 0 if cut else len(complete)
        return held

    def _line(self, line: bytes) -> tuple[int, int]:
        """One range line (checking and advancing the tag chain with a key)."""
        if not self.key:
            return _range(line)
        text, _, tag = line.rpartition(b" ")
        start, end = _range(text)
        expected = self._mac(self._tag + b" " + text)[:16]
        if not _sameTag(tag, expected.hex().encode()):
            raise ValueError("a range line's tag does not match")
        self._tag = expected
        return start, end

    def _refused(self) -> RangeSet:
        self.rejected = True
        self.lines = 0
        return RangeSet()

    def note(self, start: int, end: int) -> bool:
        """
        Bytes C{[start, end)} were written to the partial file (and were not
        held): the next L{save} records them.  Returns whether a save is due
        (L{SAVE_EVERY} bytes or L{SAVE_RANGES} ranges noted since the last).
        """
        fresh = self._fresh
        if fresh and fresh[-1][1] == start:
            # In order: one line for the whole run.
            fresh[-1] = (fresh[-1][0], end)
        else:
            fresh.append((start, end))
        self._unsaved += end - start
        return self._unsaved >= SAVE_EVERY or len(fresh) >= SAVE_RANGES

    def save(self, size: int, version: str, algorithm: str, held: RangeSet) -> None:
        """
        Record C{held} (the bytes are written before: the sidecar never
        claims bytes the file lacks): append the ranges noted since the last
        save (one line each, O(what changed)), or, once the lines would
        outnumber twice the ranges held, rewrite it atomically (a temporary
        file, then a rename).
        """
        fresh, self._fresh, self._unsaved = self._fresh, [], 0
        if self.lines and self.lines + len(fresh) <= 2 * len(held) + 64:
            self.append(fresh)
            return
        self.rewrite(self.header(size, version, algorithm), held)

    def append(self, ranges: Iterable[tuple[int, int]]) -> None:
        """Append one line per range (the file exists: L{rewrite} made it)."""
        lines = [self._encode(start, end) for start, end in ranges]
        if lines:
            self.directory.append(self.name, b"".join(lines))
            self.lines += len(lines)

    def rewrite(self, header: dict[str, Any], held: Iterable[tuple[int, int]]) -> None:
        """Replace the file, atomically, by C{header} and one line per range of C{held}."""
        self._tag = bytes.fromhex(header["mac"]) if self.key else b""
        lines = [self._encode(start, end) for start, end in held]
        self.directory.replace(self.name, _dumped(header) + b"\n" + b"".join(lines))
        self.lines = max(len(lines), 1)

    def _encode(self, start: int, end: int) -> bytes:
        text = b"%d %d" % (start, end)
        if not self.key:
            return text + b"\n"
        self._tag = self._mac(self._tag + b" " + text)[:16]
        return text + b" " + self._tag.hex().encode() + b"\n"

    def _mac(self, data: bytes) -> bytes:
        assert self.key is not None
        import hashlib
        import hmac

        return hmac.new(self.key, data, hashlib.sha256).digest()

    def remove(self) -> None:
        """Remove the sidecar (absent is fine)."""
        self.directory.unlink(self.name)


def recordedHeader(directory: Directory, name: str) -> dict[str, Any] | None:
    """The header of sidecar C{name} in C{directory} as written (unchecked), or C{None}."""
    data = directory.read(name, 4096)
    if not data:
        return None
    return _parsedHeader(data.split(b"\n", 1)[0])


def recordedAlgorithm(path: str | os.PathLike[str]) -> str | None:
    """
    The digest algorithm the sidecar of an unfinished download to C{path}
    (C{.NAME.part.json} beside it) records, in any sidecar version that
    records one, or C{None}: a resume prefers it, so that what was held is kept.
    """
    target = Path(path)
    try:
        directory = Directory(target.parent)
    except OSError:
        return None
    try:
        return algorithmOf(recordedHeader(directory, f".{target.name}.part.json"))
    finally:
        directory.close()


def algorithmOf(header: dict[str, Any] | None) -> str | None:
    """The digest algorithm a sidecar's C{header} (L{recordedHeader}) records, or C{None}."""
    algorithm = None if header is None else header.get("algorithm")
    return algorithm if isinstance(algorithm, str) else None


def preferring(recorded: str | None, digests: Sequence[str]) -> list[str]:
    """C{digests} with C{recorded} (a sidecar's algorithm) moved first, if it is among them."""
    if recorded is None or recorded not in digests:
        return list(digests)
    return [recorded, *(name for name in digests if name != recorded)]


def serviceKey(directory: Directory, name: str = "sidecar.key") -> bytes:
    """
    The key of the sidecars kept in C{directory} (a private one): made
    once (random, mode 0600), shared by every process serving it.
    """
    for _ in range(3):
        try:
            key = directory.read(name, KEY_BYTES + 1)
        except NotRegular:
            key = None
        if key is not None and len(key) == KEY_BYTES:
            return key
        if key is not None:
            directory.unlink(name)  # a short key: a crash while it was made
        directory.publish(name, os.urandom(KEY_BYTES))
    raise OSError(f"no sidecar key could be made in {directory.path}")


def _canonical(record: dict[str, Any]) -> bytes:
    return _dumped({key: record[key] for key in sorted(record) if key != "mac"})


def _parsedHeader(line: bytes) -> dict[str, Any] | None:
    """A header line's record, or C{None} if it is not a JSON object."""
    import json

    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _dumped(record: dict[str, Any]) -> bytes:
    """C{record} as a header line's JSON (without the newline)."""
    import json

    return json.dumps(record).encode()


def _range(line: bytes) -> tuple[int, int]:
    """One C{b"start end"}: two integers, in order."""
    start, end = line.split(b" ")
    first, last = int(start), int(end)
    if first < 0 or last < first:
        raise ValueError(f"not a range: {line!r}")
    return first, last


def _sameTag(tag: AnyStr, expected: AnyStr) -> bool:
    """
    Whether C{tag} is C{expected}, compared in constant time (C{hmac}'s
    C{compare_digest}).  Only a keyed sidecar compares tags, and C{hmac}
    loads then: an unkeyed one (every client's) never loads it, nor the
    OpenSSL hashes it brings (about 4 ms of a command's start).
    """
    import hmac

    return hmac.compare_digest(tag, expected)
