# -*- test-case-name: tests.protocols.auth.test_realms,tests.examples.test_logins -*-
"""Line files of secrets' verifiers (users, tokens): read with line numbers, rewritten atomically and private.

Contract: L{entries} yields each line that is not blank or a C{#}
comment, with its 1-based number, or raises a L{SecretFileError} naming
the file and line that is not UTF-8.  L{replaceEntry} rewrites a file
with one entry replaced, added or removed, everything else (comments
included) kept in order: it writes a temporary file beside it, syncs it,
and renames it over the old one, so a reader sees the old file or the new
one, never half of either.  A new file is created mode 0600; an existing
one keeps its mode.  Two writers at once may lose one's change (no lock).

L{sharedKey} reads a file of one random key (base64, one line), creating
it first (mode 0600) if missing: the new file is written whole beside its
name and linked into place, so processes that start at once all read the
same key, whichever made it.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
import tempfile
from collections.abc import Iterator

StrPath = str | os.PathLike[str]


class SecretFileError(Exception):
    """
    A user or token file cannot be used: it is missing, unreadable, or a line is malformed.

    @ivar path: the file.
    @ivar line: the 1-based number of the bad line, or C{None} for the file as a whole.
    """

    def __init__(self, path: StrPath, line: int | None, reason: str) -> None:
        where = f"{os.fspath(path)}, line {line}" if line is not None else os.fspath(path)
        super().__init__(f"{where}: {reason}")
        self.path = os.fspath(path)
        self.line = line


def entries(path: StrPath, error: type[SecretFileError] = SecretFileError) -> Iterator[tuple[int, str]]:
    """
    Each entry of the file at C{path} as C{(line number, text without the line end)}.

    @param error: the L{SecretFileError} subclass to raise.
    @raise SecretFileError: the file cannot be read or a line is not UTF-8.
    """
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise error(path, None, e.strerror or str(e)) from None
    for number, line in enumerate(raw.split(b"\n"), 1):
        try:
            text = line.rstrip(b"\r").decode("utf-8")
        except UnicodeDecodeError:
            raise error(path, number, "not valid UTF-8") from None
        if text.strip() and not text.startswith("#"):
            yield number, text


def _keyOf(line: str) -> str | None:
    if not line.strip() or line.startswith("#"):
        return None
    return line.split(":", 1)[0]


def replaceEntry(path: StrPath, key: str, newLine: str | None) -> bool:
    """
    Rewrite the file at C{path} with the entry for C{key} (its text before the first C{:}) set to C{newLine}.

    @param newLine: the entry's new line (without a line end), or C{None} to remove it.
    @return: whether the file had an entry for C{key}.
    """
    try:
        with open(path, encoding="utf-8", newline="") as f:
            # Split as entries() does: on newlines only, not on every Unicode line break.
            old = f.read().split("\n")
        mode: int | None = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        old, mode = [""], None
    except UnicodeDecodeError:
        raise SecretFileError(path, None, "not valid UTF-8") from None
    if old[-1] == "":
        old.pop()
    found = any(_keyOf(line) == key for line in old)
    if newLine is None and not found:
        return False
    new = [line for line in old if _keyOf(line) != key]
    if newLine is not None:
        at = next((i for i, line in enumerate(old) if _keyOf(line) == key), len(old))
        new.insert(min(at, len(new)), newLine)
    writeAtomically(path, "".join(line + "\n" for line in new), 0o600 if mode is None else mode)
    return found


def writeAtomically(path: StrPath, text: str, mode: int) -> None:
    """
    Replace the file at C{path} with C{text}, by writing a synced temporary file beside it and renaming it.

    @param mode: the new file's permission bits.
    """
    directory = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix=".chunkwire-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), mode)
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


KEY_BYTES = 32
"""The length of a key L{sharedKey} makes."""


def sharedKey(path: StrPath, error: type[SecretFileError] = SecretFileError) -> bytes:
    """
    The key in the file at C{path}; a new random one (mode 0600) if the file is missing.

    @param error: the L{SecretFileError} subclass to raise.
    @raise SecretFileError: the file cannot be read or made, or does not hold one base64 key of at least 16 bytes.
    """
    try:
        return _readKey(path, error)
    except FileNotFoundError:
        pass
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, temporary = tempfile.mkstemp(prefix=".chunkwire-", dir=directory)
    except OSError as e:
        raise error(path, None, f"cannot be made: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(base64.b64encode(os.urandom(KEY_BYTES)).decode("ascii") + "\n")
            f.flush()
            os.fsync(f.fileno())
        # link, not rename: if another process made the file meanwhile, its key stays and is the one read.
        os.link(temporary, path)
    except FileExistsError:
        pass
    except OSError as e:
        raise error(path, None, f"cannot be made: {e.strerror or e}") from None
    finally:
        os.unlink(temporary)
    try:
        return _readKey(path, error)
    except FileNotFoundError:
        raise error(path, None, "vanished as it was made") from None


def _readKey(path: StrPath, error: type[SecretFileError]) -> bytes:
    try:
        with open(path, "rb") as f:
            text = f.read()
    except FileNotFoundError:
        raise
    except OSError as e:
        raise error(path, None, e.strerror or str(e)) from None
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise error(path, 1, "not one base64 key") from None
    if len(key) < 16:
        raise error(path, 1, "the key is shorter than 16 bytes")
    return key
