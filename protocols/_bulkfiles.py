# -*- test-case-name: tests.protocols.test_bulkfiles,tests.protocols.test_asynciobulk -*-
"""The file service's resumable upload and download as steps, for the clients without Twisted to drive.

Contract: L{uploadSteps} and L{downloadSteps} are the client's side of
section 5.5.6 of the wire format, written once for the blocking and the
asyncio client (L{protocols.blockingbulk}, L{protocols.asynciobulk}): each
is a generator that yields what it needs done (L{Call} a remote method of
the file service, L{Receive} an incoming stream into a sink, L{Hash} a
local file) and is sent the result, so that one driver blocks on each step
and the other awaits it; nothing here waits or does network I/O.  Both send
or fetch only the ranges the other side lacks, resume after a cut (resending
at most a window), and check the whole file's digest; the partial file's
record is the Twisted client's (L{protocols._sidecars}).  C{resume=False} is
one stream checked end to end.

Cost: each byte of the file is read once (L{FileHash}), to be sent or hashed,
never read back.

L{fileStream} is a file as one L{framing.bulk._streams.SendStream}, for a
call of one's own (its L{FileSource} reads it as credit comes and closes
it when sent, dropped or closed).

Imports no Twisted: the clients without Twisted load it.

Design: docs/design/bulk.md
"""

from __future__ import annotations

import mmap
import os
import time
import weakref
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from framing.bulk._digests import (
    NEGOTIATED,
    DigestUnavailable,
    IntegrityError,
    availableDigests,
    checkAlgorithm,
    newHash,
)
from framing.bulk._fileerrors import BadName, UploadBusy
from framing.bulk._ranges import RangeSet
from framing.bulk._streams import IncomingTransfer, SendStream

from ._places import Directory
from ._sidecars import Sidecar, preferring, recordedAlgorithm

_READ = 1024 * 1024
"""Bytes read at a time from a local file (to send, or to hash)."""


@dataclass(frozen=True)
class Call:
    """A step: call the file service's method C{name} with C{args}; its result is sent back."""

    name: str
    args: tuple[Any, ...]


@dataclass(frozen=True)
class Receive:
    """A step: receive C{stream} into C{sink}; C{(bytes received, digest or None)} is sent back."""

    stream: IncomingTransfer
    sink: Any


@dataclass(frozen=True)
class Hash:
    """
    A step: read the local file at C{path} (a path, or an open descriptor,
    left open) from C{running.hashed} to C{end} (C{None}: to its end) into
    C{running}; C{running}'s digest so far is sent back.  L{compute} does
    it, blocking (the asyncio client runs it in an executor).
    """

    path: str | int
    running: FileHash
    end: int | None = None

    def compute(self) -> bytes:
        """Hash the bytes named; the digest of the file's bytes hashed so far (C{running.digest()})."""
        if isinstance(self.path, int):
            self.running.readFrom(self.path, self.end)
        else:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                self.running.readFrom(fd, self.end)
            finally:
                os.close(fd)
        return self.running.digest()


Steps = Generator["Call | Receive | Hash", Any, "FileTransfer"]
"""What L{uploadSteps} and L{downloadSteps} are: steps yielded, results sent in, the outcome returned."""


class StepRunner:
    """
    Runs L{Steps} for a driver: L{next} gives the step to do (C{None} once
    they are over: L{outcome} is theirs), and the driver tells how it went
    (L{succeeded} or L{failed}, the error then raised inside the steps,
    where it cleans up and goes on or ends them).

    @ivar outcome: the steps' L{FileTransfer}, once they are over.
    """

    def __init__(self, steps: Steps) -> None:
        self._steps = steps
        self._result: Any = None
        self._error: BaseException | None = None
        self.outcome: FileTransfer | None = None

    def next(self) -> Call | Receive | Hash | None:
        """The next step (its own errors raised here), or C{None} when the steps are over."""
        result, error = self._result, self._error
        self._result = self._error = None
        try:
            return self._steps.send(result) if error is None else self._steps.throw(error)
        except StopIteration as stop:
            self.outcome = stop.value
            return None

    def succeeded(self, result: Any) -> None:
        """The step gave C{result}."""
        self._result = result

    def failed(self, error: BaseException) -> None:
        """The step failed with C{error}."""
        self._error = error


@dataclass
class TransferProgress:
    """
    How far a file transfer has got, for a progress display: kept up to
    date by the C{sendFile} and C{fetchFile} of the Twisted client and of
    L{protocols.blockingbulk} (L{Progress.shown}).  Reading it costs the
    transfer nothing.

    @ivar total: the file's size.
    @ivar held: bytes the receiver held when the current attempt started.
    @ivar started: when the transfer started (C{time.monotonic()}).
    @ivar attempts: connections (or sets of striped connections) used so far.
    @ivar current: the streams of the current attempt (those sending, with
        their C{sentBytes}, or receiving, with their C{receivedBytes}).
    """

    total: int = 0
    held: int = 0
    started: float = field(default_factory=time.monotonic)
    attempts: int = 0
    current: list[Any] = field(default_factory=list, repr=False)

    @property
    def done(self) -> int:
        """Bytes the receiver has, or is about to have."""
        moved = sum(getattr(s, "sentBytes", 0) or getattr(s, "receivedBytes", 0) for s in self.current)
        return min(self.total, self.held + moved)


@dataclass
class Progress:
    """
    How far a transfer got, over all its attempts (one L{Progress} passed to each attempt's steps).

    @ivar moved: payload bytes that crossed a connection, repeats after a cut included.
    @ivar hashed: an upload's (or a download's) L{FileHash} of its file, under the file's path and
        version, kept across attempts: what an attempt hashed is not read again to be hashed by the next.
    @ivar shown: the L{TransferProgress} the steps keep up to date, for a display.
    """

    moved: int = 0
    hashed: tuple[tuple[str, str], FileHash] | None = None
    shown: TransferProgress = field(default_factory=TransferProgress)

    def began(self, total: int, held: int) -> None:
        """An attempt knows the file's size and what the receiver holds: L{shown} gets them, in that order."""
        shown = self.shown
        shown.total = total
        shown.held = held
        shown.current = []

    def moving(self, stream: Any) -> None:
        """The attempt's bytes move as C{stream} (its C{sentBytes} or C{receivedBytes} are shown as they grow)."""
        self.shown.current = [stream]

    def fileHash(self, path: str, version: str, algorithm: str, trusted: int | None = None) -> FileHash:
        """
        The L{FileHash} of the file at C{path}, C{version}, under
        C{algorithm}: the last attempt's, or a new one (also if the last
        attempt's hashed bytes past C{trusted}: a download's, past what its
        partial file still holds).
        """
        kept = self.hashed
        if (
            kept is None
            or kept[0] != (path, version)
            or kept[1].algorithm != algorithm
            or (trusted is not None and kept[1].hashed > trusted)
        ):
            self.hashed = kept = ((path, version), FileHash(algorithm))
        return kept[1]


@dataclass(frozen=True)
class FileTransfer:
    """
    What an upload or a download ended with.

    @ivar name: the file's name on the service.
    @ivar size: its size in bytes.
    @ivar digest: its digest, verified by both sides (C{bytes}).
    @ivar algorithm: the digest's name (C{"blake3"}, C{"sha256"}).
    @ivar resumedFrom: bytes the receiver already held when the last attempt started.
    @ivar moved: payload bytes that crossed a connection, over every attempt of the L{Progress} given
        (this one alone without).
    """

    name: str
    size: int
    digest: bytes
    algorithm: str
    resumedFrom: int
    moved: int

    @property
    def hexdigest(self) -> str:
        """The digest in hex."""
        return self.digest.hex()


def checkName(name: str) -> str:
    """
    C{name} if the file service could serve it (else the service refuses
    it alike, later).

    @raise BadName: a path, hidden, empty or longer than 255 characters.
    """
    if not name or len(name) > 255 or name.startswith(".") or any(c in name for c in "/\\\0"):
        raise BadName(f"not a plain file name: {name!r}")
    return name


def offered(digests: Sequence[str] | None) -> list[str]:
    """
    The digests a transfer offers: C{digests}, or every one this process
    computes, best first (BLAKE3 when installed, then SHA-256).

    @raise DigestUnavailable: one of C{digests} cannot be computed here.
    """
    names = list(digests) if digests is not None else list(availableDigests())
    for name in names:
        checkAlgorithm(name)
    return names


def hashFile(path: str | os.PathLike[str], algorithm: str) -> bytes:
    """The digest of the file at C{path} under C{algorithm}, read a megabyte at a time."""
    return Hash(os.fspath(path), FileHash(algorithm)).compute()


class FileHash:
    """
    The digest of a local file's leading bytes, taken in order, each byte
    read once: by a stream's source from the frames it reads to send
    (L{update}), and by L{Hash} steps for the bytes nobody sends
    (L{readFrom}).  Costs: the hash's own, and one read of the bytes not
    given to L{update}.

    @ivar algorithm: the digest's name (C{"blake3"}, C{"sha256"}).
    @ivar hashed: the file's bytes C{[0, hashed)} are in the digest.
    """

    def __init__(self, algorithm: str) -> None:
        """
        An empty digest under C{algorithm}.

        @raise DigestUnavailable: this process cannot compute it.
        """
        self.algorithm = algorithm
        self.hashed = 0
        self._digest = newHash(algorithm)

    def update(self, offset: int, data: bytes | memoryview) -> None:
        """
        Hash C{data}, the file's bytes at C{offset}: the part past L{hashed}
        (a part already hashed is skipped: a frame sent again after a cut).

        @raise ValueError: C{offset} is past L{hashed} (the bytes between were never hashed).
        """
        if offset > self.hashed:
            raise ValueError(f"bytes at {offset} offered with only {self.hashed} hashed")
        skip = self.hashed - offset
        if skip < len(data):
            self._digest.update(memoryview(data)[skip:] if skip else data)
            self.hashed = offset + len(data)

    def readFrom(self, fd: int, end: int | None = None) -> None:
        """
        Read the file open as C{fd} from L{hashed} to C{end} (C{None}: to
        its end) with C{os.preadv} into one buffer of at most a megabyte,
        and hash it.  Nothing to read (C{end} reached already: the
        commonest call, as L{HashingRanges} asks before every frame it
        takes) costs no buffer.  The buffer is mapped (page-aligned): a
        C{bytearray} of a megabyte starts 16 bytes into a page, where the
        kernel's copy from the page cache took 4.5 times as long on an AMD
        EPYC (0.85 s of system time per GiB, against 0.17-0.19).

        @raise OSError: the file ends before C{end}.
        """
        if end is not None and self.hashed >= end:
            return
        view = _buffer(_READ if end is None else min(_READ, end - self.hashed))
        while end is None or self.hashed < end:
            want = _READ if end is None else min(_READ, end - self.hashed)
            count = os.preadv(fd, [view[:want]], self.hashed)
            if not count:
                if end is None:
                    return
                raise OSError(f"the file ended at {self.hashed}, before {end}")
            self._digest.update(view[:count])
            self.hashed += count

    def digest(self) -> bytes:
        """The digest of the bytes hashed so far (hashing may go on)."""
        return self._digest.digest()  # type: ignore[no-any-return]


def _buffer(size: int) -> memoryview:
    """A writable buffer of C{size} bytes starting on a page (an anonymous mapping: see L{FileHash.readFrom})."""
    return memoryview(mmap.mmap(-1, size))


def fileVersion(path: str | os.PathLike[str]) -> str:
    """The upload's version of the file at C{path}: its size and modification time (as the Twisted client's)."""
    info = os.stat(path)
    return f"{info.st_size}-{info.st_mtime_ns}"


class FileRanges:
    """
    A stream's source: ranges of an open file, read in order with
    C{os.pread} as credit allows (L{framing.bulk._credit.StreamSource}).
    """

    def __init__(self, fd: int, ranges: Sequence[tuple[int, int]]) -> None:
        self._fd = fd
        self._ranges = [(start, end) for start, end in ranges if end > start]
        self._left = sum(end - start for start, end in self._ranges)
        self._index = 0

    def available(self) -> int:
        """Bytes left to send."""
        return self._left

    def take(self, count: int) -> tuple[int, bytes]:
        """The next frame of at most C{count} bytes, within one range: C{(offset, data)}."""
        start, end = self._ranges[self._index]
        data = os.pread(self._fd, min(count, end - start), start)
        if not data:
            raise OSError(f"the file ended at {start}, before the range to {end}")
        start += len(data)
        if start >= end:
            self._index += 1
        else:
            self._ranges[self._index] = (start, end)
        self._left -= len(data)
        return start - len(data), data


class HashingRanges(FileRanges):
    """
    L{FileRanges} whose reads also go into a L{FileHash} of the whole file,
    in order: each frame as it is taken, and before it the bytes of the
    file it skips (held by the receiver: read only to be hashed, once).
    The bytes after its last range are left to the caller (a L{Hash}
    step).  Costs: the hash of each frame, in the thread that takes it;
    a held range between two of its ranges is read and hashed there, in
    the take that reaches it.
    """

    def __init__(self, fd: int, ranges: Sequence[tuple[int, int]], running: FileHash) -> None:
        FileRanges.__init__(self, fd, ranges)
        self.running = running

    def take(self, count: int) -> tuple[int, bytes]:
        """The next frame, as L{FileRanges.take}, hashed (the held bytes before it first)."""
        self.running.readFrom(self._fd, self._ranges[self._index][0])
        offset, data = FileRanges.take(self, count)
        self.running.update(offset, data)
        return offset, data


class FileSource(FileRanges):
    """
    A whole file as a stream's source, opened here and closed by itself:
    when its last byte is taken, or when the source is collected (a
    stream given up midway), or by L{close}.  Costs: one descriptor while
    the stream is unfinished; one C{os.pread} per frame.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """
        Open the file at C{path} for reading; its size now is the stream's.

        @raise OSError: it cannot be opened (raised here, before any call is made).
        """
        fd = os.open(path, os.O_RDONLY)
        self._closer = weakref.finalize(self, os.close, fd)
        try:
            self.size = os.fstat(fd).st_size
        except BaseException:
            self._closer()
            raise
        FileRanges.__init__(self, fd, [(0, self.size)])
        if not self.size:
            self.close()

    def take(self, count: int) -> tuple[int, bytes]:
        """The next frame, as L{FileRanges.take}; the file is closed once its last byte is taken (or a read fails)."""
        if not self._closer.alive:
            # Its descriptor's number may be another file's by now: never read through it.
            raise OSError(f"the file of this stream was closed with {self._left} bytes unsent")
        try:
            frame = FileRanges.take(self, count)
        except BaseException:
            self.close()
            raise
        if not self._left:
            self.close()
        return frame

    def close(self) -> None:
        """Close the file now (again: nothing); the stream, if still sending, then fails when it next reads."""
        self._closer()

    @property
    def closed(self) -> bool:
        """Whether the file is closed."""
        return not self._closer.alive


def fileStream(path: str | os.PathLike[str], digest: str | None = NEGOTIATED) -> SendStream:
    """
    A stream of the file at C{path}, to pass as an argument of a call on
    the blocking or the asyncio client (C{connection.root.callRemote("put",
    name, fileStream(path))}): its size is the file's now, its bytes read
    as credit comes (L{FileSource}), checked end to end with C{digest}
    (L{NEGOTIATED}: the first digest both sides compute; C{None}: none).
    A stream is sent once.

    @raise OSError: the file cannot be opened.
    """
    source = FileSource(path)
    return SendStream(source, source.size, digest)


class PartialFile:
    """
    A download being assembled beside its destination: C{.NAME.part} holds
    the bytes, C{.NAME.part.json} the size, version and algorithm it is of
    and the ranges held, written after the bytes (L{save}).  The record is
    the Twisted client's (a plain L{protocols._sidecars.Sidecar}, as its
    L{protocols.bulk._files.Assembly} keeps it), so either kind of client
    resumes what the other left.  Both files are reached through their
    directory's descriptor, never through a symbolic link
    (L{protocols._places.Directory}).  A sink: each piece is written at its
    offset as it arrives.

    @ivar held: the L{RangeSet} of bytes written.
    @ivar rejected: whether a record was found and refused (ranges past the
        partial file's end, or not a record): the download started afresh.
    @ivar running: a L{FileHash} of the file that each piece written goes
        into, in order (the held bytes between read from the partial file
        first), or C{None}: L{downloadSteps} sets it, so that what arrives
        is hashed as it is written, not read back.
    """

    def __init__(self, path: str | os.PathLike[str], size: int, version: str, algorithm: str) -> None:
        """
        Open the partial file of C{path}: resumed from its record if that is
        of the same file (size, version, algorithm), else empty.

        The partial file is locked (C{flock}) while open, as the Twisted
        client's L{protocols.bulk._files.Assembly} locks it: two downloads of
        one destination, by any kind of client, never write it at once.

        @raise protocols._places.NotRegular: the partial file's name is a link or not a regular file.
        @raise framing.bulk._fileerrors.UploadBusy: another download of C{path} (any process's) holds the partial file.
        """
        self.path = Path(path)
        self.part = self.path.with_name(f".{self.path.name}.part")
        self.record = self.path.with_name(f".{self.path.name}.part.json")
        self.size, self.version, self.algorithm = size, version, algorithm
        self._directory = Directory(self.path.parent)
        try:
            fd = self._directory.openLocked(self.part.name)
        except BaseException:
            self._directory.close()
            raise
        if fd is None:
            self._directory.close()
            raise UploadBusy(f"{self.path.name} is being downloaded by another transfer")
        self._fd: int | None = fd
        self._sidecar = Sidecar(self._directory, self.record.name)
        self.held = self._sidecar.load(size, version, algorithm, os.fstat(self._fd).st_size)
        self.rejected = self._sidecar.rejected
        self.running: FileHash | None = None
        if not self.held:
            os.ftruncate(self._fd, 0)

    def missing(self) -> list[tuple[int, int]]:
        """The ranges not held yet."""
        return self.held.missing(0, self.size)

    def write(self, offset: int, data: bytes | memoryview) -> None:
        """
        Write C{data} at C{offset} (whole: a short write is continued); the
        record is saved now and then.  With L{running}, C{data} is hashed
        too, after the held bytes before it (read from the file here, once).
        Cost: one C{pwrite} and a few Python calls (the hash's update, the
        held ranges', the record's note); no copy, no view made.
        """
        fd = self._fd
        if fd is None:
            raise ValueError(f"the partial file of {self.path.name} is closed")
        running = self.running
        if running is not None and offset > running.hashed:
            running.readFrom(fd, offset)
        written = os.pwrite(fd, data, offset)
        end = offset + len(data)
        if written < end - offset:
            # (a short write: continued, as views of what is left; the commonest write is whole, with no view made)
            view = memoryview(data)[written:]
            while view:
                count = os.pwrite(fd, view, end - len(view))
                view = view[count:]
        if running is not None:
            running.update(offset, data)
        if self.held.add(offset, end) and self._sidecar.note(offset, end):
            self.save()

    def descriptor(self) -> int:
        """The partial file's descriptor (open while the download runs), for a L{Hash} step to read."""
        return self._descriptor()

    def _descriptor(self) -> int:
        if self._fd is None:
            raise ValueError(f"the partial file of {self.path.name} is closed")
        return self._fd

    def save(self) -> None:
        """Record what is held (the bytes are written before: the record never claims bytes the file lacks)."""
        self._sidecar.save(self.size, self.version, self.algorithm, self.held)

    def commit(self) -> None:
        """The whole file verified: move it into place (a link there is replaced, not followed), forget the record."""
        try:
            self._directory.rename(self.part.name, self._directory, self.path.name)
            self._sidecar.remove()
        finally:
            self._close()

    def discard(self) -> None:
        """Remove the partial file and its record (what it held is of no use)."""
        try:
            self._directory.unlink(self.part.name)
            self._sidecar.remove()
        finally:
            self._close()

    def close(self) -> None:
        """Keep what is held for a later resume: record it, close the file."""
        try:
            self.save()
        finally:
            self._close()

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._directory.close()


def uploadSteps(
    path: str | os.PathLike[str],
    name: str | None = None,
    *,
    resume: bool = True,
    digests: Sequence[str] | None = None,
    progress: Progress | None = None,
) -> Steps:
    """
    Upload the file at C{path} as C{name} (its base name by default); see
    the module docstring.  Returns a L{FileTransfer}.

    @raise IntegrityError: the service's digest of what it holds is not the file's.
    @raise DigestUnavailable: the service accepts none of C{digests}.
    """
    name = checkName(name if name is not None else os.path.basename(os.fspath(path)))
    names = offered(digests)
    progress = progress if progress is not None else Progress()
    fd = os.open(path, os.O_RDONLY)
    try:
        size, version = os.fstat(fd).st_size, fileVersion(path)
        if not resume:
            stream = SendStream(FileRanges(fd, [(0, size)]), size, NEGOTIATED)
            progress.began(size, 0)
            progress.moving(stream)
            try:
                hexdigest = yield Call("put", (name, stream))
            finally:
                progress.moved += stream.sentBytes
            if stream.digestName is None or stream.digestName == NEGOTIATED:
                raise DigestUnavailable("the service settled no digest for the stream")
            return FileTransfer(name, size, bytes.fromhex(hexdigest), stream.digestName, 0, progress.moved)
        info = yield Call("openUpload", (name, size, version, names))
        algorithm = info["algorithm"]
        if algorithm not in names:
            raise DigestUnavailable(f"the service chose {algorithm}, which this side did not offer")
        held = RangeSet.fromList(info["held"])
        progress.began(size, held.total)
        missing = held.missing(0, size)
        running = progress.fileHash(os.fspath(path), version, algorithm)
        if missing:
            # The held bytes before the first missing one are hashed first (off the loop in the asyncio
            # client), the sent ones as they are read to be sent, each byte read once (HashingRanges).
            if missing[0][0]:
                yield Hash(fd, running, missing[0][0])
            stream = SendStream(HashingRanges(fd, missing, running), size, None)
            progress.moving(stream)
            try:
                yield Call("upload", (name, stream))
            finally:
                progress.moved += stream.sentBytes
        digest = (yield Hash(fd, running, size)) if running.hashed < size else running.digest()
        answer = yield Call("finishUpload", (name, digest))
        if bytes.fromhex(answer["digest"]) != digest:
            raise IntegrityError(f"the service verified {name} as another digest", digest.hex(), answer["digest"])
        return FileTransfer(name, size, digest, algorithm, held.total, progress.moved)
    finally:
        os.close(fd)


def downloadSteps(
    name: str,
    path: str | os.PathLike[str] | None = None,
    *,
    resume: bool = True,
    digests: Sequence[str] | None = None,
    progress: Progress | None = None,
) -> Steps:
    """
    Download file C{name} to C{path} (C{name} in the current directory by
    default); see the module docstring.  Returns a L{FileTransfer}.

    @raise IntegrityError: what arrived does not have the service's digest (the partial file is removed).
    @raise framing.bulk._fileerrors.NoSuchFile: the service has no such file.
    """
    name = checkName(name)
    target = Path(path if path is not None else name)
    # A partial file left by an earlier run (of either kind of client) is resumed under its own digest, if offered.
    names = preferring(recordedAlgorithm(target), offered(digests))
    progress = progress if progress is not None else Progress()
    if not resume:
        incoming = yield Call("get", (name,))
        partial = PartialFile(target, incoming.size or 0, "", incoming.digestName or "")
        progress.began(incoming.size or 0, 0)
        progress.moving(incoming)
        try:
            size, digest = yield Receive(incoming, partial)
        except BaseException:
            partial.discard()
            raise
        finally:
            progress.moved += incoming.receivedBytes
        partial.commit()
        return FileTransfer(name, size, digest or b"", incoming.digestName or "", 0, progress.moved)
    info = yield Call("stat", (name, names))
    algorithm, expected = info["algorithm"], bytes.fromhex(info["digest"])
    if algorithm not in names:
        raise DigestUnavailable(f"the service chose {algorithm}, which this side did not offer")
    partial = PartialFile(target, info["size"], info["version"], algorithm)
    resumedFrom = partial.held.total
    try:
        progress.began(info["size"], resumedFrom)
        missing = partial.missing()
        # What arrives is hashed as it is written, the held bytes read once to be hashed: each byte read at most
        # once (a held start before the stream, off the loop in the asyncio client; the held end after it).
        trusted = partial.held.contiguousEnd(0)
        running = partial.running = progress.fileHash(os.fspath(target), info["version"], algorithm, trusted)
        if missing:
            if missing[0][0] > running.hashed:
                yield Hash(partial.descriptor(), running, missing[0][0])
            incoming = yield Call("download", (name, info["version"], [list(r) for r in missing]))
            progress.moving(incoming)
            try:
                yield Receive(incoming, partial)
            finally:
                progress.moved += incoming.receivedBytes
                partial.save()
        digest = (yield Hash(partial.descriptor(), running, info["size"])) if running.hashed < info["size"] else None
        digest = digest if digest is not None else running.digest()
    except BaseException:
        partial.close()
        raise
    if digest != expected:
        partial.discard()
        raise IntegrityError(f"{name} arrived with another digest than the service's", expected.hex(), digest.hex())
    partial.commit()
    return FileTransfer(name, info["size"], digest, algorithm, resumedFrom, progress.moved)
