# -*- test-case-name: tests.protocols.test_places,tests.protocols.bulk.test_files,tests.protocols.bulk.test_owners -*-
"""Files in one directory, reached through its descriptor, never through a symbolic link.

Contract: a L{Directory} is opened once; every name it is given is one path
component looked up relative to its descriptor (C{dir_fd=...},
C{follow_symlinks=False}).  A name that is a link, a FIFO, a device or a
directory finds no file (L{NotRegular}); renaming and unlinking act on the
entry itself, so a local user who can write in a served directory cannot
redirect the service elsewhere by placing a link.  Files are created only
with C{O_EXCL} (L{Directory.create}) or opened with C{O_NOFOLLOW |
O_NONBLOCK} and checked to be regular (L{Directory.open}; the non-blocking open keeps a
FIFO from blocking the reactor).
L{Directory.private} makes or opens a subdirectory of mode 0700.  A failure
of the system is an C{OSError} as raised (the caller words it without the
path: L{framing.bulk._fileerrors.StorageError}).

Cost: one or two system calls per call; one descriptor while open.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # (not on Windows: files are then not locked)
    fcntl = None  # type: ignore[assignment]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


def lockFile(fd: int) -> bool:
    """Take an exclusive C{flock} on C{fd} without waiting: C{False} if another open file holds one."""
    if fcntl is None:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


class NotRegular(OSError):
    """A name in the directory is not a regular file (a link, a FIFO, a device, a directory)."""


class UnsafeDirectory(Exception):
    """A directory meant to be private is not: not a directory, or not the process owner's alone."""


class Directory:
    """
    One directory, by descriptor; see the module docstring.

    @ivar path: where it was opened, for messages to the operator (never looked up again).
    @ivar fd: its descriptor, or C{None} once closed.
    """

    def __init__(self, path: str | os.PathLike[str], *, fd: int | None = None) -> None:
        """
        Open the directory at C{path} (following links in C{path} itself:
        the operator chose it), or adopt C{fd}, an open directory descriptor.
        """
        self.path = Path(path)
        if fd is None:
            fd = os.open(self.path, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        self.fd: int | None = fd

    def __repr__(self) -> str:
        return f"<Directory {self.path}>"

    def descriptor(self) -> int:
        """Its descriptor; C{ValueError} once closed."""
        if self.fd is None:
            raise ValueError(f"{self!r} is closed")
        return self.fd

    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def private(self, name: str) -> Directory:
        """
        The subdirectory C{name}, made with mode 0700 if missing; an
        existing one must be a real directory owned by this process's user
        (its mode is then set to 0700).

        @raise UnsafeDirectory: it is a link, not a directory, or someone else's.
        """
        try:
            os.mkdir(name, 0o700, dir_fd=self.descriptor())
        except FileExistsError:
            pass
        try:
            fd = os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=self.descriptor())
        except OSError as error:
            raise UnsafeDirectory(f"{self.path / name} is not a directory of its own") from error
        info = os.fstat(fd)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            os.close(fd)
            raise UnsafeDirectory(f"{self.path / name} is not this user's directory")
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.fchmod(fd, 0o700)
        return Directory(self.path / name, fd=fd)

    def open(self, name: str, flags: int = os.O_RDONLY, mode: int = 0o644) -> int:
        """
        A descriptor of regular file C{name} opened with C{flags} (which may
        hold C{O_CREAT}); a link is not followed.

        @raise NotRegular: C{name} is a link or not a regular file.
        @raise FileNotFoundError: there is no C{name} (and C{flags} do not create it).
        """
        try:
            fd = os.open(name, flags | _NOFOLLOW | _NONBLOCK | _CLOEXEC, mode, dir_fd=self.descriptor())
        except OSError as error:
            if _isLink(error):
                raise NotRegular(error.errno, "not a regular file") from None
            raise
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise NotRegular(0, "not a regular file")
            if _NONBLOCK:
                os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def openLocked(self, name: str, mode: int = 0o644) -> int | None:
        """
        Regular file C{name}, opened for reading and writing (made if
        missing, a link not followed) and locked by this open file: an
        exclusive C{flock}, which every process sees.  C{None} if another
        open file holds the lock: a partial file being assembled elsewhere.
        A holder that removed or replaced the file before letting go leaves
        the file under the name now to be taken instead.

        @raise NotRegular: C{name} is a link or not a regular file.
        """
        for _ in range(3):
            fd = self.open(name, os.O_RDWR | os.O_CREAT, mode)
            try:
                if not lockFile(fd):
                    os.close(fd)
                    return None
                info, now = os.fstat(fd), self.stat(name)
            except BaseException:
                os.close(fd)
                raise
            if now is not None and (now.st_dev, now.st_ino) == (info.st_dev, info.st_ino):
                return fd
            os.close(fd)
        return None

    def create(self, name: str, mode: int = 0o644) -> int:
        """A new regular file C{name}, open for reading and writing; C{FileExistsError} if the name is taken."""
        return self.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)

    def stat(self, name: str) -> os.stat_result | None:
        """The status of regular file C{name} (a link is not followed), or C{None} if it is absent or not one."""
        try:
            info = os.stat(name, dir_fd=self.descriptor(), follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return info if stat.S_ISREG(info.st_mode) else None

    def read(self, name: str, limit: int) -> bytes | None:
        """Up to C{limit} bytes of regular file C{name}, or C{None} if it is absent or not one."""
        try:
            fd = self.open(name)
        except (FileNotFoundError, NotRegular):
            return None
        try:
            return os.read(fd, limit)
        finally:
            os.close(fd)

    def append(self, name: str, data: bytes) -> None:
        """Append C{data} to existing regular file C{name}."""
        fd = self.open(name, os.O_WRONLY | os.O_APPEND)
        try:
            _writeAll(fd, data)
        finally:
            os.close(fd)

    def replace(self, name: str, data: bytes, mode: int = 0o644) -> None:
        """Make C{name} hold C{data}, atomically: a new file under a random name, renamed over C{name}."""
        temporary = self.temporaryName(name)
        fd = self.create(temporary, mode)
        try:
            _writeAll(fd, data)
        except BaseException:
            os.close(fd)
            self.unlink(temporary)
            raise
        os.close(fd)
        self.rename(temporary, self, name)

    def publish(self, name: str, data: bytes, mode: int = 0o600) -> bool:
        """
        Make C{name} hold C{data} unless it exists already (written whole
        under a random name, then linked): C{False} if it existed.
        """
        temporary = self.temporaryName(name)
        fd = self.create(temporary, mode)
        try:
            _writeAll(fd, data)
        finally:
            os.close(fd)
        try:
            os.link(temporary, name, src_dir_fd=self.descriptor(), dst_dir_fd=self.descriptor(), follow_symlinks=False)
            return True
        except FileExistsError:
            return False
        finally:
            self.unlink(temporary)

    @staticmethod
    def temporaryName(name: str) -> str:
        """A fresh name beside C{name} (C{NAME.RANDOM.tmp})."""
        return f"{name}.{os.urandom(6).hex()}.tmp"

    def rename(self, name: str, other: Directory, otherName: str) -> None:
        """Move entry C{name} to C{otherName} in C{other} (replacing what is there; links are moved, not followed)."""
        os.rename(name, otherName, src_dir_fd=self.descriptor(), dst_dir_fd=other.descriptor())

    def unlink(self, name: str) -> bool:
        """Remove entry C{name} (a link itself, never its target); C{False} if it was absent."""
        try:
            os.unlink(name, dir_fd=self.descriptor())
        except FileNotFoundError:
            return False
        return True

    def files(self) -> Iterator[tuple[str, os.stat_result]]:
        """The name and status of each regular file in the directory (links and the rest are left out)."""
        for name in os.listdir(self.descriptor()):
            info = self.stat(name)
            if info is not None:
                yield name, info


def _isLink(error: OSError) -> bool:
    """Whether an C{O_NOFOLLOW} open failed because the name is a link (C{ELOOP}; C{EMLINK} on some BSDs)."""
    import errno

    return error.errno in (errno.ELOOP, errno.EMLINK)


def _writeAll(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
