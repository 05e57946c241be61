# -*- test-case-name: tests.protocols.bulk.test_files,tests.protocols.bulk.test_owners,tests.protocols.bulk.test_tcp -*-
"""Resumable, striped file transfer: assemblies, the bulk-transfer service and its client side.

Contract: an L{Assembly} is a file put together from byte ranges that arrive
in any order, repeated or overlapping, over any number of streams,
connections and restarts; it keeps the bytes in a partial file and what it
holds in a sidecar (L{protocols._sidecars}) written after the data, and the
destination appears by one rename only after the whole file's digest was
verified.  L{BulkService} serves a directory; L{sendFile} and L{fetchFile}
move one file over N connections and resume after a drop, never resending
what the receiver holds.

Cost: each byte is written once and hashed once; a save appends only the
ranges added since the last one; an upload holds at most C{maxFragments}
ranges (L{TooFragmented}).

Design: docs/design/bulk.md
"""

from __future__ import annotations

import json
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, NoReturn

from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.error import ConnectError, ConnectionDone, ConnectionLost
from twisted.internet.interfaces import IReactorThreads
from twisted.internet.task import deferLater
from twisted.logger import Logger

from framing.bulk._digests import (
    DEFAULT_DIGEST,
    DigestUnavailable,
    IntegrityError,
    availableDigests,
    checkAlgorithm,
    chooseDigest,
)

# The service's errors are defined with their wire names in fileerrors and
# keep their names here, where callers have always imported them.
from framing.bulk._fileerrors import (  # noqa: F401
    BadName,
    FileChanged,
    NoSuchFile,
    QuotaExceeded,
    StorageError,
    TooFragmented,
    TooManyOpenFiles,
    TooManyUploads,
    UploadBusy,
    UploadRefused,
)
from framing.bulk._ranges import RangeSet
from framing.slicing._constraints import ByteString, Integer, ListOf, Optional, Text

from .. import rpc
from .._bulkfiles import TransferProgress as TransferProgress  # (public as protocols.bulk.TransferProgress)
from .._logs import escape
from .._places import Directory, NotRegular, lockFile
from .._sidecars import Sidecar, algorithmOf, preferring, recordedAlgorithm, recordedHeader, serviceKey
from ._channel import BulkChannel, callingChannel
from ._integrity import OrderedHasher, inlineHashing
from ._outcome import Outcome, TransferResult
from ._quotas import FileBudget
from ._receiving import IncomingStream
from ._sending import Stream
from ._sinks import Piece, Release, Sink, writeAt
from ._sources import FileSource

MAX_FRAGMENTS = 1024
"""The most disjoint ranges an upload may hold (L{TooFragmented} past it):
an honest transfer has one hole per stripe and per cut, and the held ranges
travel in every C{openUpload} answer."""

MAX_NAME = 255
MAX_UPLOADS = 16
"""The most unfinished uploads one connection may hold (L{BulkService.maxUploads}):
a client uploads a file at a time, striped over connections, not thousands."""
ABANDON_AFTER = 24 * 3600.0
"""Seconds an abandoned upload's partial files are kept for a resume
(L{BulkService.abandonAfter}): a day covers a night's outage."""
DIGEST_CACHE = 1024
_log = Logger(namespace="chunkwire.bulk.files")
PRIVATE_DIRECTORY = ".chunkwire-private"
"""The service's own subdirectory of the served directory (mode 0700):
unfinished uploads, files being received, digest records."""
"""Digests of stored files kept in memory, most recently used first."""


def checkName(name: str) -> str:
    """
    Return C{name} if it names a plain file in the served directory.

    @raise BadName: it holds a path separator or NUL, starts with a dot, or
        is empty or too long.
    """
    if not name or len(name) > MAX_NAME or name.startswith(".") or any(c in name for c in "/\\\0"):
        raise BadName(f"not a plain file name: {name!r}")
    return name


def fileVersion(path: str | os.PathLike[str]) -> str:
    """A token that changes whenever the file is replaced or modified (size and modification time)."""
    st = os.stat(path)
    return f"{st.st_size}-{st.st_mtime_ns}"


# -- assemblies ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Placement:
    """
    Where an L{Assembly} keeps its files: the destination C{name} in
    C{destination}, and the partial file and its sidecar in C{partial}
    (the same directory for a client's download, a private one for the
    file service's uploads), with the sidecar C{key} (C{None}: plain
    sidecars).

    @ivar owned: whether the assembly closes the directories when it is done.
    """

    destination: Directory
    name: str
    partial: Directory
    partName: str
    sidecarName: str
    key: bytes | None = None
    owned: bool = False

    @classmethod
    def beside(cls, path: str | os.PathLike[str]) -> Placement:
        """A file at C{path}, assembled beside it in C{.NAME.part} (and C{.NAME.part.json})."""
        target = Path(path)
        directory = Directory(target.parent)
        name = target.name
        return cls(directory, name, directory, f".{name}.part", f".{name}.part.json", None, True)


class Assembly:
    """
    A file assembled from ranges; see the module docstring.

    @ivar path: the destination.
    @ivar size: the file's size.
    @ivar version: the source's version token the held ranges belong to.
    @ivar held: the L{RangeSet} of bytes written to the partial file.
    @ivar received: payload bytes written by this process (repeats included).
    @ivar duplicates: of those, bytes that were already held.
    @ivar restarted: whether a sidecar was found and refused (forged, or
        claiming bytes the partial file lacks): the upload started afresh.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | Placement,
        size: int,
        version: str,
        algorithm: str = DEFAULT_DIGEST,
        reactor: Any = None,
        maxFragments: int | None = None,
        hashing: str = "auto",
    ) -> None:
        """
        Open the assembly of C{path}: resume from its sidecar if that
        records the same size, version and algorithm, else start afresh.
        The partial file is opened without following links, must be a
        regular file, and is locked (C{flock}) while the assembly is open.

        @param path: the destination, assembled beside it, or a L{Placement}.
        @param reactor: hash in a worker thread reporting to it (see
            L{OrderedHasher}); C{None} hashes inline.
        @param maxFragments: the most disjoint ranges held (C{None}: no cap).
        @param hashing: C{"inline"}: pieces that arrive in order are hashed
            at once in the reactor thread (read-backs still go to a worker
            thread); C{"thread"}: every piece is hashed in a worker thread;
            C{"auto"}: inline unless a core stays free (L{inlineHashing}).
        @raise UploadBusy: another assembly (of this process or another)
            holds the partial file.
        @raise NotRegular: the partial file's name is a link or not a regular file.
        """
        self.maxFragments = maxFragments
        place = path if isinstance(path, Placement) else Placement.beside(path)
        self.place = place
        self.path = place.destination.path / place.name
        self.size = size
        self.version = version
        self.algorithm = checkAlgorithm(algorithm) or DEFAULT_DIGEST
        self.partPath = place.partial.path / place.partName
        self.sidecarPath = place.partial.path / place.sidecarName
        self.sidecar = Sidecar(place.partial, place.sidecarName, place.key)
        self.received = 0
        self.duplicates = 0
        try:
            self._fd: int | None = _openLocked(place.partial, place.partName, place.name)
        except BaseException:
            self._releasePlace()
            raise
        self.held = self.sidecar.load(size, version, self.algorithm, os.fstat(self._fd).st_size)
        self.restarted = self.sidecar.rejected
        if not self.held:
            os.ftruncate(self._fd, 0)
        threads = reactor if reactor is not None and IReactorThreads.providedBy(reactor) else None
        self.hasher = OrderedHasher(self.algorithm, self._readBack, threads, inline=inlineHashing(hashing))
        self._verifying: Outcome | None = None
        if self.held:
            # Resumed: what is already held from offset 0 is hashed from the file.
            self.hasher.allowReadBack(self.held.contiguousEnd(0))

    def __repr__(self) -> str:
        return f"<Assembly {self.path.name} {self.held.total}/{self.size} bytes>"

    @property
    def closed(self) -> bool:
        """Whether the partial file is closed (committed, discarded or suspended)."""
        return self._fd is None

    @property
    def complete(self) -> bool:
        """Whether every byte is held."""
        return self.held.covers(0, self.size)

    def missing(self) -> list[tuple[int, int]]:
        """The ranges still to receive, in order."""
        return self.held.missing(0, self.size)

    def write(self, offset: int, data: Piece, release: Release | None = None) -> None:
        """
        Write C{data} (C{bytes} or a view) at C{offset} and record it; C{release(len(data))} once
        the hasher is done with it.

        @raise ValueError: the range is outside the file.
        """
        end = offset + len(data)
        if end > self.size or self._fd is None:
            raise ValueError(f"[{offset}, {end}) is outside the {self.size}-byte file, or the assembly is closed")
        writeAt(self._fd, data, offset)
        held = self.held
        # In order with no hole behind (a transfer's common case): one step, and nothing held past it to join.
        inOrder = held.extendRun(offset, end)
        frontier = end if inOrder else held.contiguousEnd(0)
        added = end - offset if inOrder else held.add(offset, end)
        due = bool(added) and self.sidecar.note(offset, end)
        if self.maxFragments is not None and len(held) > self.maxFragments:
            # Recorded (the bytes are written), but no more holes are taken.
            self.save()
            raise TooFragmented(f"{self.path.name} would hold more than {self.maxFragments} disjoint ranges")
        self.received += len(data)
        self.duplicates += len(data) - added
        self.hasher.offer(offset, data, release)
        reach = end if inOrder else held.contiguousEnd(0)
        if reach > frontier and reach > end:
            # This piece joined ranges written earlier out of order: they can
            # now be read back and hashed.
            self.hasher.allowReadBack(reach)
        if due:
            self.save()

    def _readBack(self, offset: int, length: int) -> bytes:
        fd = self._fd
        if fd is None:
            raise IntegrityError("the assembly was closed")
        return os.pread(fd, length, offset)

    def save(self) -> None:
        """Record what is held in the sidecar (L{Sidecar.save}: what changed appended, or the whole rewritten)."""
        if self._fd is None:
            return
        self.sidecar.save(self.size, self.version, self.algorithm, self.held)

    def verify(self, expected: bytes | None = None) -> Deferred[bytes]:
        """
        Hash what is not hashed yet and fire with the file's digest; fail
        with L{IntegrityError} if bytes are missing or the digest is not
        C{expected}.  Callable more than once (the digest is computed once).
        """
        if not self.complete:
            return _failed(IntegrityError(f"{self.size - self.held.total} bytes of {self.path.name} are missing"))
        if self._verifying is None:
            outcome = self._verifying = Outcome()
            self.hasher.finish(self.size).addCallbacks(outcome.succeed, outcome.fail)
        result: Deferred[bytes] = self._verifying.wait()
        return result.addCallback(self._check, expected)

    def _check(self, actual: bytes, expected: bytes | None) -> bytes:
        if expected is not None and actual != expected:
            raise IntegrityError(
                f"{self.algorithm} of {self.path.name} is {actual.hex()}, the sender's is {expected.hex()}",
                expected.hex(),
                actual.hex(),
            )
        return actual

    def commit(self) -> None:
        """Move the verified file into place (a link under its name is replaced, not followed); forget the sidecar."""
        place = self.place
        try:
            # Renamed while still locked: no other process can take the
            # name's new partial file for this one meanwhile.
            place.partial.rename(place.partName, place.destination, place.name)
            self.sidecar.remove()
        finally:
            self._close()
            self._releasePlace()

    def discard(self) -> None:
        """Drop the partial file and its sidecar (bad data: it must not be resumed)."""
        self.hasher.abort()
        try:
            if self._fd is not None:
                # Only a partial file this assembly holds (locked) is removed.
                self.place.partial.unlink(self.place.partName)
                self.sidecar.remove()
        finally:
            self._close()
            self._releasePlace()

    def suspend(self) -> None:
        """Keep what is held for a later resume: save the sidecar and close the file."""
        try:
            self.save()
        finally:
            self._close()
            self.hasher.abort()
            self._releasePlace()

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # and with it the lock
            self._fd = None
        self.hasher.abort()

    def _releasePlace(self) -> None:
        if self.place.owned:
            self.place.destination.close()


def _openLocked(directory: Directory, name: str, owner: str) -> int:
    """
    The partial file C{name} in C{directory}, opened and locked
    (L{Directory.openLocked}: a C{flock}, which every worker process of a
    service sees): L{UploadBusy} if another assembly, here or in another
    process, holds it.
    """
    fd = directory.openLocked(name)
    if fd is None:
        raise UploadBusy(f"{owner} is being uploaded by another connection")
    return fd


def _lockedElsewhere(directory: Directory, name: str) -> bool:
    """Whether partial file C{name} is held (locked) by an assembly, of this process or another."""
    try:
        fd = directory.open(name, os.O_RDONLY)
    except OSError:
        return False
    try:
        return not lockFile(fd)
    finally:
        os.close(fd)


def _failed(error: BaseException) -> Deferred[Any]:
    failed: Deferred[Any] = Deferred()
    failed.errback(error)
    return failed


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


class AssemblySink(Sink):
    """Receives a stream's pieces into an L{Assembly} (any ranges, any order); the assembly verifies."""

    sequential = False
    verifies = True
    views = True

    def __init__(self, assembly: Assembly) -> None:
        self.assembly = assembly

    def write(self, offset: int, data: Piece, release: Release) -> None:
        self.assembly.write(offset, data, release)

    def complete(self) -> None:
        self.assembly.save()

    def fail(self, reason: BaseException) -> None:
        # Whatever arrived is kept for a resume.
        self.assembly.save()


# -- the service ---------------------------------------------------------------------------------

_NAME = Text(MAX_NAME)
_VERSION = Text(100)
_RANGES = ListOf(ListOf(Integer(0), 2), 1 << 20)
_DIGESTS = Optional(ListOf(Text(32), 8))


class BulkService(rpc.Referenceable):
    """Serves the files of one directory: upload, download, list.

    Remote methods: C{put(name, stream)} and C{get(name)} move a whole file
    through one call; C{openUpload}, C{upload}, C{finishUpload}, C{stat} and
    C{download} are the resumable, stripable protocol of L{sendFile} and
    L{fetchFile}; C{list()} names the files.  Only regular files are served,
    through the directory's descriptor; a storage error reaches the caller as
    L{StorageError}, naming no path.  A connection holds at most C{maxUploads}
    uploads (L{TooManyUploads}); a name being uploaded cannot be restarted with
    another size or version (L{UploadBusy}).  A stored file's digest is computed
    once per version.

    @ivar directory: the served directory's path (for the operator).
    @ivar served: the served L{Directory}.
    @ivar private: the service's private L{Directory} inside it.
    @ivar unfinished: the L{UnfinishedUploads}.
    @ivar uploads: the assemblies of uploads in progress, by name.
    @ivar maxUploads: the most unfinished uploads one connection may hold.
    @ivar abandonAfter: seconds after which an abandoned upload's files are removed.
    @ivar maxFragments: the most disjoint ranges one upload may hold.
    @ivar owners: which connections hold which uploads (L{UploadOwners}).
    @ivar digests: the digests of stored files (L{DigestCache}).
    @ivar budget: the L{FileBudget}: files held open for clients, per address and in all.

    Design: docs/design/bulk.md
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        reactor: Any = None,
        algorithm: str | None = None,
        digests: Sequence[str] | None = None,
        maxUploads: int = MAX_UPLOADS,
        abandonAfter: float = ABANDON_AFTER,
        maxFragments: int = MAX_FRAGMENTS,
        hashing: str = "auto",
        budget: FileBudget | None = None,
    ):
        """
        @param budget: the L{FileBudget} of open files, shared by every
            service of the process (a new one of default limits if C{None}).
        """
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.served = Directory(self.directory)
        self.private = self.served.private(PRIVATE_DIRECTORY)
        # Sidecars carry HMAC tags under this key: one written by anyone
        # else (a local user, a damaged disk) restarts its upload.
        self.key: bytes | None = serviceKey(self.private)
        self.reactor = reactor
        accepted = (algorithm,) if algorithm is not None else digests
        self.choice = DigestChoice(accepted, reactor, self.served, self.private)
        self.accepted, self.algorithm = self.choice.accepted, self.choice.accepted[0]
        self.digestsFor, self.choose = self.choice.cache, self.choice.choose
        self.maxFragments = maxFragments
        self.hashing = hashing
        self.budget = budget if budget is not None else FileBudget()
        self.unfinished = UnfinishedUploads(self, self.served, self.private, maxUploads, abandonAfter, self.budget)
        self.uploads, self.owners = self.unfinished.assemblies, self.unfinished.owners
        self.digests = self.digestsFor(self.algorithm)
        self.sweep()

    @property
    def maxUploads(self) -> int:
        """The most unfinished uploads one connection may hold."""
        return self.owners.maxUploads

    @property
    def abandonAfter(self) -> float:
        """Seconds after which an abandoned upload's partial files are removed."""
        return self.unfinished.abandonAfter

    @abandonAfter.setter
    def abandonAfter(self, seconds: float) -> None:
        self.unfinished.abandonAfter = seconds

    def sweep(self, now: float | None = None) -> list[str]:
        """Remove abandoned partial files (see L{UnfinishedUploads.sweep}); the names of those removed."""
        return self.unfinished.sweep(now)

    def placement(self, name: str) -> Placement:
        """Where upload C{name} is assembled: C{NAME.part} and its sidecar in the private directory."""
        return Placement(self.served, name, self.private, f"{name}.part", f"{name}.part.json", self.key)

    def _open(self, name: str) -> tuple[int, os.stat_result]:
        """
        A descriptor and the status of served file C{name}: L{NoSuchFile} if
        it is absent or not a regular file (a link is not followed),
        L{StorageError} (no path) if it cannot be opened.
        """
        checkName(name)
        try:
            fd = self.served.open(name)
        except (FileNotFoundError, NotRegular):
            raise NoSuchFile(name) from None
        except OSError as error:
            raise _storageError(error, f"open {name}") from None
        return fd, os.fstat(fd)

    def _take(self) -> Callable[[], None]:
        """One open file of the budget for the caller's address (L{TooManyOpenFiles}, logged, if none is left)."""
        try:
            return self.budget.take(callerAddress())
        except TooManyOpenFiles as error:
            self.owners.refuse(error)

    def _source(self, name: str, version: str | None = None) -> FileSource:
        """Served file C{name} to send (L{FileChanged} if its version is not C{version}), counted in the budget."""
        giveBack = self._take()
        try:
            fd, info = self._open(name)
        except BaseException:
            giveBack()
            raise
        if version is not None and _version(info) != version:
            os.close(fd)
            giveBack()
            raise FileChanged(f"{name} changed since the transfer started")
        return BudgetedSource(os.fdopen(fd, "rb"), giveBack)

    # -- whole files through one call --------------------------------------------------------

    # put and upload chain Deferreds rather than await: a coroutine's frame,
    # kept by the traceback of a transfer cut by its connection, would keep
    # the stream and the upload until a garbage collection.

    @rpc.remote(args={"name": _NAME})
    def put(self, name: str, stream: IncomingStream) -> Deferred[str]:
        """Receive C{stream} as file C{name}; return its verified digest (hex)."""
        checkName(name)
        if not isinstance(stream, IncomingStream):
            raise TypeError("put takes a stream")
        sink = PlacedFileSink(self.private, self.served, name, self._take())
        received = stream.receive(sink).addCallback(self._put, name)
        return received.addErrback(_worded, f"store {name}")

    def _put(self, result: TransferResult, name: str) -> str:
        if result.algorithm is not None:
            self.digestsFor(result.algorithm).remember(name, result.digest)
        return result.hexdigest

    @rpc.remote(args={"name": _NAME})
    def get(self, name: str) -> Stream:
        """Send file C{name} as a stream (the caller receives it and checks its digest)."""
        return Stream(self._source(name))

    # -- resumable uploads -----------------------------------------------------------------------

    @rpc.remote(args={"name": _NAME, "size": Integer(0, 1 << 62), "version": _VERSION, "digests": _DIGESTS})
    def openUpload(self, name: str, size: int, version: str, digests: list[str] | None = None) -> dict[str, Any]:
        """
        Start or resume uploading C{name}: C{version} identifies the source
        (a different one, or a different size, starts afresh); the upload
        is checked with the first of the client's C{digests} the service
        accepts (one an unfinished upload of it already uses, if the client
        lists it: what was held is kept).

        @return: C{{"held": ranges already held, "algorithm": name}}.
        @raise TooManyUploads: the calling connection holds too many.
        @raise UploadBusy: another connection uploads another version.
        @raise DigestUnavailable: no digest in common.
        @raise StorageError: the partial file could not be opened.
        """
        checkName(name)
        self.unfinished.sweepSoon()
        assembly = self.uploads.get(name)
        recorded = assembly.algorithm if assembly is not None else self.unfinished.recordedAlgorithm(name)
        algorithm = self.choose(preferring(recorded, digests) if digests is not None else None)
        if name not in self.uploads and self.digestsFor(algorithm).stored(name, size, version) is not None:
            # Already received whole (the answer to finishUpload was lost).
            return {"held": [[0, size]] if size else [], "algorithm": algorithm}
        if assembly is not None and (assembly.size, assembly.version, assembly.algorithm) != (size, version, algorithm):
            if self.owners.heldElsewhere(name) or name in self.owners.finishing:
                self.owners.refuse(UploadBusy(f"{name} is being uploaded by another connection"))
            self.unfinished.close(name)
            assembly.discard()
            assembly = None
        self.owners.own(name)
        if assembly is None:
            try:
                place = self.placement(name)
                assembly = self.unfinished.open(name, size, version, algorithm, place, self._assemble, self._take)
            except BaseException as error:
                self.owners.disown(name)
                if isinstance(error, UploadRefused):
                    self.owners.refuse(error)
                if isinstance(error, OSError):
                    raise _storageError(error, f"open the upload of {name}") from None
                raise
        return {"held": assembly.held.toList(), "algorithm": assembly.algorithm}

    def _assemble(self, place: Placement, size: int, version: str, algorithm: str) -> Assembly:
        assembly = Assembly(place, size, version, algorithm, self.reactor, self.maxFragments, self.hashing)
        if assembly.restarted:
            _log.warn(
                "Upload {name}: sidecar-refused: its record was not written by this service; it starts afresh",
                name=escape(place.name),
            )
        return assembly

    @rpc.remote(args={"name": _NAME})
    def upload(self, name: str, stream: IncomingStream) -> Deferred[dict[str, Any]]:
        """Receive some ranges of upload C{name}; return how much is held."""
        if not isinstance(stream, IncomingStream):
            raise TypeError("upload takes a stream")
        try:
            assembly = self.unfinished.get(name)
            if stream.size != assembly.size:
                raise ValueError(f"the stream's size {stream.size} is not the upload's {assembly.size}")
            self.owners.own(name)
        except Exception as error:
            stream.cancel(str(error)[:200])
            raise
        received = stream.receive(self.uploadSink(assembly, stream))
        return received.addCallback(_heldBy, assembly).addErrback(_worded, f"store {name}")

    def uploadSink(self, assembly: Assembly, stream: IncomingStream) -> Sink:
        """Where an upload's stream is received: override to watch or shape uploads."""
        return AssemblySink(assembly)

    @rpc.remote(args={"name": _NAME, "digest": ByteString(64)})
    async def finishUpload(self, name: str, digest: bytes) -> dict[str, Any]:
        """
        Verify the complete upload against the sender's C{digest} and move
        it into place.  A mismatch drops the partial file and fails with
        L{IntegrityError}.
        """
        if name not in self.uploads:
            stored = self.choice.remembered(checkName(name), digest)
            info = self.served.stat(name)
            if stored is not None and info is not None:
                # A repeat: the first answer was lost with its connection.
                return {"size": info.st_size, "digest": stored.hex(), "duplicates": 0}
        assembly = self.unfinished.get(name)
        # While it verifies, the upload outlives its connections: the
        # answer may be lost, the file is committed all the same.
        self.owners.finishing.add(name)
        try:
            actual = await assembly.verify(digest)
        except IntegrityError:
            if assembly.complete and self.uploads.get(name) is assembly:
                self.unfinished.close(name)
                assembly.discard()
            raise
        finally:
            self.owners.finishing.discard(name)
            if self.uploads.get(name) is assembly and not self.owners.holds(name):
                self.unfinished.abandon(name)  # its last connection went meanwhile
        if self.uploads.get(name) is assembly:
            self.unfinished.close(name)
        try:
            assembly.commit()
            self.digestsFor(assembly.algorithm).remember(name, actual, source=assembly.version)
        except OSError as error:
            raise _storageError(error, f"store {name}") from None
        return {"size": assembly.size, "digest": actual.hex(), "duplicates": assembly.duplicates}

    # -- resumable downloads ------------------------------------------------------------------

    @rpc.remote(args={"name": _NAME, "digests": _DIGESTS})
    async def stat(self, name: str, digests: list[str] | None = None) -> dict[str, Any]:
        """
        C{{"size", "version", "digest" (hex), "algorithm"}} of file C{name}:
        its digest under the first of the client's C{digests} the service
        accepts (SHA-256 if it names none), computed once, then kept.
        """
        algorithm = self.choose(digests)
        fd, _ = self._open(name)
        try:
            size, version, digest = await self.digestsFor(algorithm).digestOf(name, fd)
        except OSError as error:
            raise _storageError(error, f"read {name}") from None
        return {"size": size, "version": version, "digest": digest.hex(), "algorithm": algorithm}

    @rpc.remote(args={"name": _NAME, "version": _VERSION, "ranges": _RANGES})
    def download(self, name: str, version: str, ranges: list[list[int]]) -> Stream:
        """
        Send C{ranges} of file C{name} (the client verifies the whole file
        against C{stat}'s digest).

        @raise FileChanged: the file's version is no longer C{version}.
        """
        return Stream(self._source(name, version), ranges=[(start, end) for start, end in ranges], digest=None)

    # Last: inside the class body, "list" names this method from here on.
    @rpc.remote
    def list(self) -> list[list[Any]]:
        """C{[name, size]} of every regular file served (links and hidden names left out), by name."""
        try:
            files = sorted(self.served.files())
        except OSError as error:
            raise _storageError(error, "list its files") from None
        return [[name, info.st_size] for name, info in files if not name.startswith(".")]


class PlacedFileSink(Sink):
    """
    A whole file received by C{put}: written under a fresh name in the
    service's private directory, renamed to C{name} in the served
    directory once verified, removed otherwise.
    """

    sequential = False
    views = True

    def __init__(self, private: Directory, served: Directory, name: str, giveBack: Callable[[], None]) -> None:
        """@param giveBack: gives its open file back to the service's budget, once it is closed."""
        self.private, self.served, self.name = private, served, name
        self._giveBack = giveBack
        self.partName: str | None = None
        self._fd: int | None = None

    def start(self, size: int | None, failed: Callable[[BaseException], None]) -> None:
        self.partName = Directory.temporaryName(f"{self.name}.put")
        self._fd = self.private.create(self.partName)

    def write(self, offset: int, data: Piece, release: Release) -> None:
        assert self._fd is not None
        writeAt(self._fd, data, offset)
        release(len(data))

    def complete(self) -> None:
        assert self.partName is not None
        try:
            self.private.rename(self.partName, self.served, self.name)
            self.partName = None
        finally:
            self._close()

    def fail(self, reason: BaseException) -> None:
        self._close()
        if self.partName is not None:
            try:
                self.private.unlink(self.partName)
            except OSError:
                pass
            self.partName = None

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._giveBack()


class BudgetedSource(FileSource):
    """A served file being sent, whose open file goes back to the service's budget when it is closed."""

    def __init__(self, file: Any, giveBack: Callable[[], None]) -> None:
        super().__init__(file, own=True)
        self._giveBack = giveBack

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._giveBack()


def callerAddress() -> str:
    """The address (host) of the connection whose call runs now; C{"local"} for a direct call."""
    channel = callingChannel()
    if channel is None:
        return "local"
    try:
        peer = channel.protocol.transport.getPeer()
    except Exception:
        return "?"
    return str(getattr(peer, "host", peer))


def _storageError(error: OSError, doing: str) -> StorageError:
    """
    The L{StorageError} the caller gets for C{error}, met while C{doing}:
    the errno's name and text only.  The whole error, with the paths it
    names, goes to this server's log, where its owner looks for them.
    """
    _log.warn("Could not {doing}: {error}", doing=escape(doing), error=escape(str(error)))
    return StorageError.fromOSError(error, doing)


def _worded(failure: Any, doing: str) -> Any:
    """A failure of the storage as a L{StorageError}, which names no path; anything else as it is."""
    error = failure.value
    if isinstance(error, OSError) and not isinstance(error, UploadRefused):
        raise _storageError(error, doing)
    return failure


def _uploadName(partial: str) -> str:
    """The upload a partial file (C{NAME.part}) or sidecar (C{NAME.part.json}) belongs to."""
    return partial.removesuffix(".json").removesuffix(".part")


def _nothing() -> None:
    """Gives back nothing: an upload opened outside the budget."""


def _version(info: os.stat_result) -> str:
    """The version token of a file of this status (see L{fileVersion})."""
    return f"{info.st_size}-{info.st_mtime_ns}"


class DigestChoice:
    """
    The digests a L{BulkService} accepts (its order of preference), the one
    it checks a client's file with, and a L{DigestCache} per digest.

    @ivar accepted: the digests accepted, in order of preference.
    """

    def __init__(self, digests: Sequence[str] | None, reactor: Any, served: Directory, private: Directory) -> None:
        self.accepted = tuple(checkAlgorithm(name) or DEFAULT_DIGEST for name in (digests or availableDigests()))
        self._reactor = reactor
        self._served, self._private = served, private
        self._caches: dict[str, DigestCache] = {}

    def cache(self, algorithm: str) -> DigestCache:
        """The L{DigestCache} of stored files' digests under C{algorithm}."""
        found = self._caches.get(algorithm)
        if found is None:
            found = self._caches[algorithm] = DigestCache(algorithm, self._reactor, self._served, self._private)
        return found

    def choose(self, digests: Sequence[str] | None) -> str:
        """
        The first of a client's C{digests} (its order of preference) that
        is accepted; SHA-256 for a client that names none.

        @raise DigestUnavailable: none of them is accepted.
        """
        if digests is None:
            digests = [DEFAULT_DIGEST]
        chosen = chooseDigest(digests, self.accepted)
        if chosen is None:
            raise DigestUnavailable(f"none of {', '.join(digests)} is accepted here (only {', '.join(self.accepted)})")
        return chosen

    def remembered(self, name: str, digest: bytes) -> bytes | None:
        """C{digest} if it is the recorded digest of stored file C{name} under an accepted digest."""
        for algorithm in self.accepted:
            if self.cache(algorithm).remembered(name, None) == digest:
                return digest
        return None


class UnfinishedUploads:
    """The unfinished uploads of a L{BulkService}: their assemblies by name,
    when each is closed, and the sweep of the partial files left behind.

    An upload stays open while a connection that opened it or sent it data is
    up (L{UploadOwners}), its partial file locked (C{flock}) against other
    workers (L{UploadBusy}).  When the last is lost it is closed at once; an
    empty one's files are removed, the others kept for a resume until
    C{abandonAfter} idle seconds, then swept (at start and on C{openUpload}, at
    most once per C{min(abandonAfter, 600)} seconds).

    @ivar served: the served L{Directory}.
    @ivar private: the private L{Directory}, where the partial files are.
    @ivar assemblies: the L{Assembly} of each upload in progress, by name.
    @ivar owners: which connections hold which uploads (L{UploadOwners}).
    @ivar abandonAfter: seconds after which an abandoned upload's partial
        files are removed.
    """

    def __init__(
        self,
        service: object,
        served: Directory,
        private: Directory,
        maxUploads: int,
        abandonAfter: float,
        budget: FileBudget | None = None,
    ) -> None:
        """
        @param service: the service (the key its holds are tied to
            connections under, and the user its uploads are charged to).
        @param budget: the L{FileBudget} that charges the uploads' sizes.
        """
        self._service = service
        self.budget = budget if budget is not None else FileBudget()
        self.served, self.private = served, private
        self.assemblies: dict[str, Assembly] = {}
        self._giveBack: dict[str, Callable[[], None]] = {}
        self.owners = UploadOwners(service, maxUploads, self.abandon)
        self.abandonAfter = abandonAfter
        self._lastSweep = 0.0

    def get(self, name: str) -> Assembly:
        """The assembly of upload C{name}; C{KeyError} if none is open."""
        assembly = self.assemblies.get(checkName(name))
        if assembly is None:
            raise KeyError(f"no upload of {name!r} is open")
        return assembly

    def open(
        self,
        name: str,
        size: int,
        version: str,
        algorithm: str,
        place: Placement,
        assemble: Callable[[Placement, int, str, str], Assembly],
        take: Callable[[], Callable[[], None]],
    ) -> Assembly:
        """
        Open (or resume) upload C{name} as C{assemble} makes it, and keep
        it; C{take} counts its open file in the service's budget (and gives
        the function that gives it back when the upload is closed).
        """
        giveBack = take()
        try:
            self.budget.charge(self._service, name, size)
            self._migrate(name, place)
            assembly = assemble(place, size, version, algorithm)
        except BaseException as error:
            giveBack()
            if not isinstance(error, QuotaExceeded):
                self._account(name)
            raise
        self.assemblies[name] = assembly
        self._giveBack[name] = giveBack
        return assembly

    def recordedAlgorithm(self, name: str) -> str | None:
        """The digest the sidecar of upload C{name} on disk records (see L{files.recordedAlgorithm})."""
        found = algorithmOf(recordedHeader(self.private, f"{name}.part.json"))
        return found or algorithmOf(recordedHeader(self.served, f".{name}.part.json"))

    def _migrate(self, name: str, place: Placement) -> None:
        """Move the partial files an earlier version left in the served directory into the private one."""
        legacy, sidecar = f".{name}.part", f".{name}.part.json"
        info = self.served.stat(legacy)
        if info is None or self.private.stat(place.partName) is not None:
            return
        if info.st_uid != os.geteuid() or info.st_nlink != 1:
            return  # not a file this service made: left alone, not trusted
        header = recordedHeader(self.served, sidecar)
        record = self.served.stat(sidecar)
        if header is None or record is None or record.st_uid != os.geteuid():
            return
        try:
            size, version, algorithm = int(header["size"]), str(header["version"]), str(header["algorithm"])
        except (KeyError, TypeError, ValueError):
            return
        held = Sidecar(self.served, sidecar).load(size, version, algorithm, info.st_size)
        Sidecar(self.private, place.sidecarName, place.key).rewrite(
            Sidecar(self.private, place.sidecarName, place.key).header(size, version, algorithm), held
        )
        self.served.rename(legacy, self.private, place.partName)
        self.served.unlink(sidecar)

    def abandon(self, name: str) -> None:
        """Nobody holds upload C{name} any more: close it, and keep its files only if they hold bytes."""
        assembly = self.assemblies.pop(name, None)
        if assembly is None:
            return
        try:
            if assembly.held.total:
                assembly.suspend()  # kept for a resume: still charged
            else:
                assembly.discard()
                self.budget.uncharge(self._service, name)
        finally:
            self._giveBack.pop(name, _nothing)()

    def close(self, name: str) -> None:
        """Upload C{name} is over (committed or discarded): its connections no longer hold it."""
        self.assemblies.pop(name, None)
        self._giveBack.pop(name, _nothing)()
        self.budget.uncharge(self._service, name)
        self.owners.release(name)

    def sweepSoon(self) -> None:
        """L{sweep}, unless the last sweep was less than C{min(abandonAfter, 600)} seconds ago."""
        if time.time() - self._lastSweep >= min(self.abandonAfter, 600.0):
            self.sweep()

    def sweep(self, now: float | None = None) -> list[str]:
        """
        Remove the partial files (C{NAME.part}, C{NAME.part.json}, a put's
        temporary file) of uploads not open here and not touched for
        C{abandonAfter} seconds, in the private directory (and those an
        earlier version left in the served one).  Returns the names of the
        files removed.
        """
        now = time.time() if now is None else now
        self._lastSweep = now
        open_ = {assembly.place.partName for assembly in self.assemblies.values()}
        open_ |= {name + ".json" for name in open_}
        removed: list[str] = []
        for directory, hidden in ((self.private, False), (self.served, True)):
            try:
                files = list(directory.files())
            except OSError:
                continue
            for name, info in files:
                if name in open_ or not name.endswith((".part", ".part.json", ".tmp")):
                    continue
                if (hidden and not name.startswith(".")) or now - info.st_mtime < self.abandonAfter:
                    continue
                part = name[: -len(".json")] if name.endswith(".part.json") else name
                if not hidden and part.endswith(".part") and _lockedElsewhere(directory, part):
                    continue  # open in another worker process: idle, not abandoned
                try:
                    if directory.unlink(name):
                        removed.append(name)
                except OSError:
                    continue
        # The charges follow the disk: what was removed, and what other
        # processes left there.
        for name in self._kept() | {_uploadName(name) for name in removed if not name.startswith(".")}:
            self._account(name)
        return removed

    def _kept(self) -> set[str]:
        """The names of the unfinished uploads whose sidecars are on disk (in the private directory)."""
        try:
            files = list(self.private.files())
        except OSError:
            return set()
        return {_uploadName(name) for name, _ in files if name.endswith(".part.json")}

    def _account(self, name: str) -> None:
        """Charge upload C{name} as the disk holds it: its sidecar's size if its partial file is kept, else nothing."""
        if name in self.assemblies:
            return
        header = recordedHeader(self.private, f"{name}.part.json")
        kept = self.private.stat(f"{name}.part") is not None
        size = header.get("size") if header is not None and kept else 0
        self.budget.record(self._service, name, size if isinstance(size, int) and size > 0 else 0)


class UploadOwners:
    """
    Which connections hold which unfinished uploads of a L{BulkService}
    (see its docstring): a connection holds an upload it opened or sent
    data to, until the upload is over or the connection is lost; the last
    holder lost abandons the upload (unless it is being finished).

    @ivar maxUploads: the most uploads one connection may hold.
    @ivar owned: the names each connection holds.
    @ivar finishing: names being verified (they outlive their connections).
    """

    def __init__(self, service: object, maxUploads: int, abandon: Callable[[str], None]) -> None:
        """
        @param service: the service (the key its holds are tied to connections under).
        @param abandon: called with a name whose last holder is gone.
        """
        self._service = service
        self.maxUploads = maxUploads
        self._abandon = abandon
        self._holders: dict[str, set[BulkChannel]] = {}
        self.owned: dict[BulkChannel, set[str]] = {}
        self.finishing: set[str] = set()

    def holds(self, name: str) -> bool:
        """Whether some connection holds upload C{name}."""
        return bool(self._holders.get(name))

    def own(self, name: str) -> None:
        """The calling connection holds upload C{name} (a direct call, outside RPC, holds nothing)."""
        channel = callingChannel()
        if channel is None:
            return
        names = self.owned.setdefault(channel, set())
        if name in names:
            return
        if len(names) >= self.maxUploads:
            if not names:
                del self.owned[channel]
            self.refuse(TooManyUploads(f"a connection may hold {self.maxUploads} unfinished uploads"), channel)
        names.add(name)
        self._holders.setdefault(name, set()).add(channel)
        channel.resources.hold((self._service, name), partial(self.ownerLost, channel, name))

    def refuse(self, error: UploadRefused, channel: BulkChannel | None = None) -> NoReturn:
        """Raise C{error}, logged once per connection and code."""
        if channel is None:
            channel = callingChannel()
        if channel is not None:
            channel.resources.noteOnce(error.code, "{error}", error=str(error))
        raise error

    def heldElsewhere(self, name: str) -> bool:
        """Whether a connection other than the calling one holds upload C{name}."""
        mine = callingChannel()
        return any(channel is not mine for channel in self._holders.get(name, ()))

    def disown(self, name: str) -> None:
        """The calling connection no longer holds upload C{name}."""
        channel = callingChannel()
        if channel is not None:
            channel.resources.letGo((self._service, name))
            self.ownerLost(channel, name)

    def ownerLost(self, channel: BulkChannel, name: str) -> None:
        """A connection holding upload C{name} is lost (or let it go): the last one abandons it."""
        self._forget(channel, name)
        holders = self._holders.get(name)
        if holders is not None:
            holders.discard(channel)
            if holders:
                return
            del self._holders[name]
        if name not in self.finishing:
            self._abandon(name)

    def release(self, name: str) -> None:
        """Upload C{name} is over: no connection holds it any more."""
        for channel in self._holders.pop(name, ()):
            channel.resources.letGo((self._service, name))
            self._forget(channel, name)

    def _forget(self, channel: BulkChannel, name: str) -> None:
        names = self.owned.get(channel)
        if names is not None:
            names.discard(name)
            if not names:
                del self.owned[channel]


class DigestCache:
    """
    The digests of a service's stored files: computed once per file version
    (size, modification time, inode), kept in memory (the most recently used
    L{DIGEST_CACHE}) and in the service's private directory
    (C{NAME.ALGORITHM.digest.json}, where no other local user can forge
    one), so a restart does not hash again; concurrent requests for one
    file share one computation.

    @ivar algorithm: the digest's C{hashlib} name.
    """

    def __init__(self, algorithm: str, reactor: Any, served: Directory, private: Directory) -> None:
        self.algorithm = algorithm
        self._reactor = reactor
        self._served, self._private = served, private
        self._digests: OrderedDict[tuple[str, int, int, int], bytes] = OrderedDict()
        self._hashing: dict[tuple[str, int, int, int], Outcome] = {}

    async def digestOf(self, name: str, fd: int) -> tuple[int, str, bytes]:
        """
        The size, version token and digest of stored file C{name}, open as
        C{fd} (which this closes, or hands to the computation it starts).
        """
        owned: int | None = fd
        try:
            info = os.fstat(fd)
            version = _version(info)
            key = (name, info.st_size, info.st_mtime_ns, info.st_ino)
            digest = self._digests.get(key)
            if digest is None:
                digest = self.remembered(name, version)
                if digest is None:
                    owned, computing = None, self._computed(fd, key, name, version)
                    digest = await computing
                self._keep(key, digest)
            else:
                self._digests.move_to_end(key)
        finally:
            if owned is not None:
                os.close(owned)
        return info.st_size, version, digest

    def _computed(self, fd: int, key: tuple[str, int, int, int], name: str, version: str) -> Deferred[bytes]:
        """The digest of file C{fd} as C{key} describes it: one computation, however many wait (C{fd} is taken)."""
        outcome = self._hashing.get(key)
        if outcome is None:
            outcome = self._hashing[key] = Outcome()
            computing = Deferred.fromCoroutine(self.hashFile(FileSource(os.fdopen(fd, "rb"), own=True)))
            computing.addCallbacks(
                self._hashed, self._hashFailed, callbackArgs=(key, name, version), errbackArgs=(key,)
            )
        else:
            os.close(fd)
        waiting: Deferred[bytes] = outcome.wait()
        return waiting

    async def hashFile(self, source: FileSource) -> bytes:
        """Hash the file C{source} reads, then close it (off the reactor thread when the reactor has threads)."""
        try:
            hasher = OrderedHasher(self.algorithm, source.read, _threads(self._reactor))
            hasher.allowReadBack(source.size)
            digest: bytes = await hasher.finish(source.size)
        finally:
            source.close()
        return digest

    def _hashed(self, digest: bytes, key: tuple[str, int, int, int], name: str, version: str) -> None:
        self._keep(key, digest)
        try:
            self.remember(name, digest, version)
        except OSError:
            pass  # kept in memory all the same
        self._hashing.pop(key).succeed(digest)

    def _hashFailed(self, failure: Any, key: tuple[str, int, int, int]) -> None:
        self._hashing.pop(key).fail(failure)

    def _keep(self, key: tuple[str, int, int, int], digest: bytes) -> None:
        digests = self._digests
        digests[key] = digest
        digests.move_to_end(key)
        while len(digests) > DIGEST_CACHE:
            digests.popitem(last=False)

    def recordName(self, name: str) -> str:
        """The name, in the private directory, of stored file C{name}'s digest record."""
        return f"{name}.{self.algorithm}.digest.json"

    def _currentVersion(self, name: str) -> str | None:
        info = self._served.stat(name)
        return None if info is None else _version(info)

    def remember(self, name: str, digest: bytes | None, version: str | None = None, source: str = "") -> None:
        """Record stored file C{name}'s digest, valid while its version stays C{version}."""
        if digest is None:
            return
        version = version or self._currentVersion(name)
        if version is None:
            return
        record = {"version": version, "digest": digest.hex(), "source": source}
        self._private.replace(self.recordName(name), json.dumps(record).encode(), 0o600)

    def _record(self, name: str) -> dict[str, Any] | None:
        """The digest record of a stored file, if it still describes the file as it is."""
        try:
            data = self._private.read(self.recordName(name), 4096)
            if data is None:
                return None
            record: dict[str, Any] = json.loads(data)
            return record if record["version"] == self._currentVersion(name) else None
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def remembered(self, name: str, version: str | None) -> bytes | None:
        """The recorded digest of stored file C{name}, if the record holds for C{version} (any, if C{None})."""
        record = self._record(name)
        if record is None or (version is not None and record["version"] != version):
            return None
        return bytes.fromhex(record["digest"])

    def stored(self, name: str, size: int, source: str) -> bytes | None:
        """The digest of stored file C{name} if it was uploaded whole from the source version C{source}."""
        record = self._record(name)
        info = self._served.stat(name)
        if record is None or record.get("source") != source or info is None or info.st_size != size:
            return None
        return bytes.fromhex(record["digest"])


def _heldBy(_: object, assembly: Assembly) -> dict[str, Any]:
    return {"held": assembly.held.total}


def _threads(reactor: Any) -> Any:
    return reactor if reactor is not None and IReactorThreads.providedBy(reactor) else None


# -- the client side -----------------------------------------------------------------------------

Connect = Callable[[], Deferred[rpc.RemoteReference]]
"""Makes a new connection to the service and gives its root."""

RETRYABLE = (ConnectionLost, ConnectionDone, ConnectError, rpc.DeadReferenceError)
"""Failures after which a transfer reconnects and resumes."""


@dataclass(frozen=True)
class FileResult:
    """
    What a completed L{sendFile} or L{fetchFile} reports.

    @ivar name: the file's name on the service.
    @ivar size: its size in bytes.
    @ivar digest: its verified digest, bytes (as L{TransferResult.digest}
        and C{hashlib}'s C{digest()}); L{hexdigest} gives it in hex.
    @ivar algorithm: the digest's algorithm.
    @ivar seconds: how long it took.
    @ivar payload: data bytes sent over all attempts (at least C{size}
        minus what was already held; more when a connection was cut with
        data in flight).
    @ivar cuts: how many attempts failed (a connection dropped, or could
        not be made) before the transfer resumed and completed.
    """

    name: str
    size: int
    digest: bytes
    algorithm: str
    seconds: float
    payload: int
    cuts: int

    @property
    def hexdigest(self) -> str:
        """The digest in hex."""
        return self.digest.hex()


def stripes(ranges: Iterable[tuple[int, int]], count: int) -> list[list[tuple[int, int]]]:
    """
    Split C{ranges} into C{count} lists covering about the same number of
    bytes, each in order (a range is cut where a stripe boundary falls).
    Empty stripes are left out.
    """
    ranges = list(ranges)
    total = sum(end - start for start, end in ranges)
    if count <= 1 or not total:
        return [ranges] if total else []
    share = -(-total // count)
    result: list[list[tuple[int, int]]] = [[]]
    room = share
    for start, end in ranges:
        while start < end:
            if not room:
                result.append([])
                room = share
            take = min(room, end - start)
            result[-1].append((start, start + take))
            start += take
            room -= take
    return result


async def _connectAll(connect: Connect, count: int) -> list[rpc.RemoteReference]:
    roots = []
    try:
        for _ in range(count):
            roots.append(await connect())
    except BaseException:
        _disconnect(roots)
        raise
    return roots


def _disconnect(roots: list[rpc.RemoteReference]) -> None:
    for root in roots:
        if root.broker.isConnected():
            root.broker.transport.loseConnection()


async def sendFile(
    connect: Connect,
    path: str | os.PathLike[str],
    name: str | None = None,
    *,
    streams: int = 1,
    retries: int = 10,
    retryDelay: float = 0.2,
    clock: Any = None,
    progress: TransferProgress | None = None,
    digests: Sequence[str] | None = None,
    hashing: str = "auto",
) -> FileResult:
    """
    Upload the file at C{path} to a L{BulkService} as C{name} (its base
    name by default), over C{streams} connections at once, resuming after
    dropped connections.

    @param connect: makes a new connection and gives the service's root.
    @param clock: an C{IReactorTime} for the waits between attempts (and a
        reactor with threads for hashing off the reactor thread).
    @param progress: a L{TransferProgress} kept up to date for a display.
    @param digests: the digests this side offers, in order of preference
        (default: L{availableDigests}, BLAKE3 first when installed); the
        service checks the file with the first it accepts.
    @raise IntegrityError: the service's digest of what it received is not
        the file's digest.
    @param hashing: C{"inline"} hashes what is sent in order in the
        reactor thread, C{"thread"} in a worker thread, C{"auto"} (the
        default) inline unless a core is free (L{inlineHashing}); reading
        the file back, for stripes, always runs in a worker thread.
    @raise DigestUnavailable: the service accepts none of C{digests}.
    """
    name = checkName(name or os.path.basename(os.fspath(path)))
    job = _Upload(path, name, streams, _clock(clock), _offered(digests), hashing)
    return await _transfer(job, connect, retries, retryDelay, progress)


async def fetchFile(
    connect: Connect,
    name: str,
    path: str | os.PathLike[str] | None = None,
    *,
    streams: int = 1,
    retries: int = 10,
    retryDelay: float = 0.2,
    clock: Any = None,
    progress: TransferProgress | None = None,
    digests: Sequence[str] | None = None,
    hashing: str = "auto",
) -> FileResult:
    """
    Download file C{name} from a L{BulkService} to C{path} (C{name} in the
    current directory by default), over C{streams} connections at once,
    resuming (from a partial file left by an earlier run, too) after
    dropped connections.  C{path} appears only once the file's digest has
    been verified against the service's.

    Arguments as for L{sendFile}: the service's C{name} and the local
    C{path}, with the same keywords and the same L{FileResult}.

    @raise IntegrityError: what arrived does not have the service's digest
        (the partial file is then removed).
    @raise FileChanged: the file changed on the service meanwhile.
    """
    name = checkName(name)
    target = path if path is not None else name
    job = _Download(target, name, streams, _clock(clock), _offered(digests), hashing)
    return await _transfer(job, connect, retries, retryDelay, progress)


def _offered(digests: Sequence[str] | None) -> list[str]:
    offered = list(digests) if digests is not None else list(availableDigests())
    for name in offered:
        checkAlgorithm(name)
    return offered


async def _transfer(
    job: _Upload | _Download, connect: Connect, retries: int, retryDelay: float, progress: TransferProgress | None
) -> FileResult:
    """
    Run C{job}'s attempts over fresh connections until one succeeds; after a
    retryable failure wait C{retryDelay} and go again, C{retries} times.
    """
    progress = progress or TransferProgress()
    job.begin(progress)
    started = time.monotonic()
    failures = 0
    try:
        while True:
            roots: list[rpc.RemoteReference] = []
            try:
                roots = await _connectAll(connect, job.streams)
                progress.attempts += 1
                digest = await job.attempt(roots, progress)
                break
            except RETRYABLE:
                failures += 1
                if failures > retries:
                    raise
            finally:
                _disconnect(roots)
            await deferLater(job.clock, retryDelay, lambda: None)
    except BaseException as error:
        job.failed(error)
        raise
    size, algorithm = job.succeeded()
    return FileResult(job.name, size, digest, algorithm, time.monotonic() - started, job.payload, failures)


class _Upload:
    """
    What L{sendFile} keeps across attempts: the file, its hasher (one pass
    over the file whatever the attempts), payload sent.

    @ivar payload: data bytes sent over all attempts.
    """

    def __init__(
        self, path: str | os.PathLike[str], name: str, streams: int, clock: Any, digests: list[str], hashing: str
    ) -> None:
        self.path, self.name, self.streams, self.clock = path, name, streams, clock
        self.digests, self.hashing = digests, hashing
        self.source = FileSource(path)
        self.size = self.source.size
        self.version = fileVersion(path)
        # Made once the service has chosen the digest (its first answer).
        self.hasher: OrderedHasher | None = None
        self.algorithm = ""
        self.payload = 0
        self._digest: bytes | None = None

    def _hasherFor(self, algorithm: str) -> OrderedHasher:
        """The one hasher of the file under C{algorithm} (one pass over it, whatever the attempts)."""
        if self.hasher is not None and self.algorithm == algorithm:
            return self.hasher
        if algorithm not in self.digests:
            raise DigestUnavailable(f"the service chose {algorithm}, which this side did not offer")
        if self.hasher is not None:
            self.hasher.abort()
        self.algorithm, self._digest = algorithm, None
        self.hasher = OrderedHasher(
            algorithm, self.source.read, _threads(self.clock), inline=inlineHashing(self.hashing)
        )
        if self.streams > 1:
            # Stripes send out of order: hash the file from disk meanwhile.
            self.hasher.allowReadBack(self.size)
        return self.hasher

    def begin(self, progress: TransferProgress) -> None:
        """The transfer starts: the file's size is known at once."""
        progress.total = self.size

    async def attempt(self, roots: list[rpc.RemoteReference], progress: TransferProgress) -> bytes:
        """Ask what the service holds, send the rest in stripes, then have it verify; returns the digest."""
        info = await roots[0].callRemote("openUpload", self.name, self.size, self.version, self.digests)
        hasher = self._hasherFor(info["algorithm"])
        held = RangeSet.fromList(info["held"])
        progress.held = held.total
        parts = stripes(held.missing(0, self.size), self.streams)
        sending = [Stream(FileSource(self.path), ranges=part, hasher=hasher) for part in parts]
        progress.current = sending
        calls = [root.callRemote("upload", self.name, stream) for root, stream in zip(roots, sending, strict=False)]
        try:
            await gatherResults(calls, consumeErrors=True).addErrback(_firstError)
        finally:
            self.payload += sum(stream.sentBytes for stream in sending)
            progress.held, progress.current = progress.held + sum(s.sentBytes for s in sending), []
        if self._digest is None:
            self._digest = await hasher.finish(self.size)
        answer = await roots[0].callRemote("finishUpload", self.name, self._digest)
        return bytes.fromhex(answer["digest"])

    def succeeded(self) -> tuple[int, str]:
        """The transfer completed: release the file; its size and digest algorithm."""
        self._close()
        return self.size, self.algorithm

    def failed(self, error: BaseException) -> None:
        """The transfer failed for good: release the file."""
        self._close()

    def _close(self) -> None:
        self.source.close()
        if self.hasher is not None:
            self.hasher.abort()


class _Download:
    """
    What L{fetchFile} keeps across attempts: the assembly of the file
    (opened by the first attempt, from a partial file of an earlier run if
    it matches), payload received.

    @ivar payload: data bytes received over all attempts.
    """

    def __init__(
        self, path: str | os.PathLike[str], name: str, streams: int, clock: Any, digests: list[str], hashing: str
    ) -> None:
        self.path, self.name, self.streams, self.clock = path, name, streams, clock
        self.hashing = hashing
        # A partial file of an earlier run is resumed under its own digest, if offered.
        self.digests = preferring(recordedAlgorithm(path), digests)
        self.assembly: Assembly | None = None
        self.payload = 0

    def begin(self, progress: TransferProgress) -> None:
        """The transfer starts: the size is known once the service answered C{stat}."""

    async def attempt(self, roots: list[rpc.RemoteReference], progress: TransferProgress) -> bytes:
        """Ask for the file's digest and version, fetch the missing ranges in stripes, verify; returns the digest."""
        info = await roots[0].callRemote("stat", self.name, self.digests)
        if self.assembly is None:
            if info["algorithm"] not in self.digests:
                raise DigestUnavailable(f"the service chose {info['algorithm']}, which this side did not offer")
            self.assembly = Assembly(
                self.path, info["size"], info["version"], info["algorithm"], self.clock, hashing=self.hashing
            )
        assembly = self.assembly
        if info["version"] != assembly.version:
            raise FileChanged(f"{self.name} changed on the service since the transfer started")
        progress.total, progress.held = assembly.size, assembly.held.total
        incoming = [
            await root.callRemote("download", self.name, assembly.version, [list(r) for r in part])
            for root, part in zip(roots, stripes(assembly.missing(), self.streams), strict=False)
        ]
        progress.current = incoming
        try:
            receiving = [stream.receive(AssemblySink(assembly)) for stream in incoming]
            await gatherResults(receiving, consumeErrors=True).addErrback(_firstError)
        finally:
            self.payload += sum(stream.receivedBytes for stream in incoming)
            progress.held, progress.current = assembly.held.total, []
        return await assembly.verify(bytes.fromhex(info["digest"]))

    def succeeded(self) -> tuple[int, str]:
        """The file verified: move it into place; its size and digest algorithm."""
        assert self.assembly is not None
        self.assembly.commit()
        return self.assembly.size, self.assembly.algorithm

    def failed(self, error: BaseException) -> None:
        """
        The transfer failed for good: a complete file with the wrong digest
        is removed, anything else kept for a later resume.
        """
        assembly = self.assembly
        if assembly is None:
            return
        if isinstance(error, IntegrityError):
            if assembly.complete:
                assembly.discard()
        else:
            assembly.suspend()


def _firstError(failure: Any) -> Any:
    """gatherResults wraps the first failure in FirstError: unwrap it, so retries see the real reason."""
    inner = getattr(failure.value, "subFailure", None)
    return inner if inner is not None else failure


def _clock(clock: Any) -> Any:
    if clock is None:
        from twisted.internet import reactor

        return reactor
    return clock
