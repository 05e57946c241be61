# -*- test-case-name: tests.protocols.test_blockingbulk,tests.protocols.test_options -*-
"""Bulk transfers on the blocking client: upload and download files, resumable and checked, without Twisted.

    from protocols.blockingbulk import connect

    with connect("127.0.0.1:8770") as connection:
        sent = connection.upload("report.pdf")
        fetched = connection.download("report.pdf", "copy.pdf")
        assert fetched.digest == sent.digest

Contract: L{connect} is L{protocols.blocking.connect} (the same arguments)
for a L{BlockingBulkConnection}, which also carries bulk streams.
L{BlockingBulkConnection.upload} and L{BlockingBulkConnection.download} move
a file to or from the file service as the Twisted client's C{sendFile} and
C{fetchFile} do (resumed, the digest checked, L{framing.bulk.IntegrityError}
on a mismatch; L{sendFile} and L{fetchFile} also reconnect up to C{retries}
times).  A L{framing.bulk.SendStream} may be passed to any call, and
L{BlockingBulkConnection.receive} takes a result's stream into a sink.
L{sendFile} and L{fetchFile} keep a L{TransferProgress} up to date for a
display, and an L{Interruption} stops them from a signal handler or
another thread (L{Interrupted}), what was moved kept for a resume.
What L{connect} raises (L{ConnectTimedOut}, L{ServerSilent},
L{ConnectionLost}: those of L{protocols.blocking.connect}) is exported here too.

Cost: no thread per transfer (the thread reading the socket sends the
data, outside the connection's lock); bytes in flight bounded by the
server's window.  Imports only L{framing} and the standard library.

Design: docs/design/bulk.md
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from framing.bulk._streams import ClientStreams, IncomingTransfer, Sink
from framing.rpc._errors import ConnectionLost, ConnectTimedOut, DeadReferenceError, ServerSilent
from framing.rpc._session import Settled

from ._allocator import allocatorSteady, steadyAllocator
from ._bulkfiles import (
    Call,
    FileTransfer,
    Hash,
    Progress,
    Receive,
    StepRunner,
    Steps,
    TransferProgress,
    downloadSteps,
    fileStream,
    uploadSteps,
)
from .blocking import BlockingConnection, _open, _Waiter, connectTarget
from .options import CLIENT_DEFAULTS, ClientOptions

STEADY_READ_SIZE = 1024 * 1024
"""
Bytes a bulk connection asks of one C{recv} once L{steadyAllocator} fixed
this process's malloc thresholds (L{connect} does): the value of
L{protocols.bulk.STEADY_READ_SIZE} (not imported: that package loads
Twisted; tests/protocols/test_blockingbulk.py pins them equal).  A read then
takes a whole frame, so a download makes about one turn, one grant and one
file write per frame (1 GiB fetched: 0.2 s less CPU than with 256 KiB reads
and the allocator as it was).  Without the steady allocator, reads stay the
blocking client's smaller ones: each fresh megabyte would be faulted in again.
"""

RETRYABLE = (ConnectionLost, ServerSilent, DeadReferenceError, ConnectionError)
"""Failures after which L{sendFile} and L{fetchFile} reconnect and resume."""


class BlockingBulkConnection(BlockingConnection):
    """
    A L{BlockingConnection} that carries bulk streams (see the module docstring).

    @ivar streams: its L{ClientStreams}.
    """

    def __init__(self, sock: Any, peer: str, options: ClientOptions = CLIENT_DEFAULTS) -> None:
        """As L{BlockingConnection}'s, with the bulk streams as the session's extension."""
        self.streams = ClientStreams()
        super().__init__(sock, peer, options, extension=self.streams)
        if allocatorSteady():
            self._readSize = STEADY_READ_SIZE

    def receive(self, stream: IncomingTransfer, sink: Sink) -> tuple[int, bytes | None]:
        """
        Receive C{stream} (from a call's result) into C{sink} (its C{write(offset, data)}
        is called with each piece as it is read) and block until its END was checked.

        @return: the bytes received and the digest checked (C{None} for a stream without one).
        @raise framing.bulk.IntegrityError: the bytes do not have the sender's digest.
        @raise framing.bulk.StreamReset: the sender aborted it (or this side's sink failed).
        @raise ConnectionLost: the connection ended first.
        """
        waiter = _Waiter()
        self._settle(lambda: self.streams.startReceiving(stream, sink, waiter))
        return self._wait(waiter, None, f"stream {stream.streamId}")  # type: ignore[no-any-return]

    def _settle(self, step: Callable[[], list[Settled]]) -> None:
        """
        Run C{step} on the session's streams under the connection's lock and
        apply what it decided; then, the lock released, send what it queued.
        """
        with self._lock:
            self._apply(step())
        if self._outbox:
            self._flushOutbox()

    def upload(
        self,
        path: str | os.PathLike[str],
        name: str | None = None,
        *,
        resume: bool = True,
        digests: Sequence[str] | None = None,
    ) -> FileTransfer:
        """
        Upload the file at C{path} to the file service as C{name} (its base
        name by default): with C{resume}, only what the service does not
        hold yet (L{protocols._bulkfiles.uploadSteps}); else the whole file
        as one stream (C{put}).  Blocks until the service verified it.

        @param digests: the digests offered, best first (default: all this side computes).
        @raise framing.bulk.IntegrityError: the service's digest of what it holds is not the file's.
        """
        return self.run(uploadSteps(path, name, resume=resume, digests=digests))

    def download(
        self,
        name: str,
        path: str | os.PathLike[str] | None = None,
        *,
        resume: bool = True,
        digests: Sequence[str] | None = None,
    ) -> FileTransfer:
        """
        Download file C{name} from the file service to C{path} (C{name} here
        by default): with C{resume}, from what C{.NAME.part} beside it holds
        (L{protocols._bulkfiles.downloadSteps}); else the whole file as one
        stream (C{get}).  C{path} appears only once the digest is checked.

        @raise framing.bulk.IntegrityError: what arrived does not have the service's digest.
        @raise framing.bulk.NoSuchFile: the service has no such file.
        """
        return self.run(downloadSteps(name, path, resume=resume, digests=digests))

    def run(self, steps: Steps) -> FileTransfer:
        """Do C{steps} (C{protocols/_bulkfiles.py}), blocking on each; their outcome."""
        runner = StepRunner(steps)
        while (step := runner.next()) is not None:
            try:
                if isinstance(step, Call):
                    runner.succeeded(self.root.callRemote(step.name, *step.args))
                elif isinstance(step, Receive):
                    runner.succeeded(self.receive(step.stream, step.sink))
                else:
                    assert isinstance(step, Hash)
                    runner.succeeded(step.compute())
            except Exception as error:
                runner.failed(error)
        assert runner.outcome is not None
        return runner.outcome


def connect(
    address: str | tuple[str, int],
    *,
    interface: type | None = None,
    options: ClientOptions = CLIENT_DEFAULTS,
    steady: bool = True,
) -> BlockingBulkConnection:
    """
    Connect to the chunkwire bulk server at C{address}: as
    L{protocols.blocking.connect}, with the same arguments, for a
    L{BlockingBulkConnection}.  With C{steady} (the default), first fix this
    process's malloc thresholds for bulk data (L{steadyAllocator}, as the
    Twisted clients with bulk options do), so that the connection reads
    L{STEADY_READ_SIZE} at a time.

    @raise ValueError: the options have C{bulk} (Twisted's clients' settings; this client has its own).
    """
    options.refuseBulk("protocols.blockingbulk.connect")
    if steady:
        steadyAllocator()
    (host, port), context = connectTarget(address, options)
    connection = _open((host, port), f"{host}:{port}", host, context, None, options, interface, BlockingBulkConnection)
    assert isinstance(connection, BlockingBulkConnection)
    return connection


class Interrupted(Exception):
    """The transfer was stopped by its L{Interruption}; what the receiver holds is kept, to be resumed."""


class Interruption:
    """
    Stops a L{sendFile} or L{fetchFile} on request: L{interrupt}, from a
    signal handler (as a command's Ctrl-C) or another thread, shuts down
    the transfer's connection (L{BlockingBulkConnection.abort}), so that
    whatever it blocks on returns at once; the transfer then saves what
    it holds as a cut would (a download's partial file and record) and
    raises L{Interrupted} instead of reconnecting.  A hash of held bytes
    being read runs to its end first.  Costs nothing while not used.

    @ivar requested: whether L{interrupt} was called.
    """

    def __init__(self) -> None:
        self.requested = False
        self._connection: BlockingBulkConnection | None = None

    def interrupt(self) -> None:
        """Stop the transfer (again: nothing more).  Takes no lock: safe in a signal handler."""
        self.requested = True
        connection = self._connection
        if connection is not None:
            connection.abort()

    def watch(self, connection: BlockingBulkConnection | None) -> None:
        """The transfer now runs on C{connection} (C{None}: on none); abort it at once if already interrupted."""
        self._connection = connection
        if connection is not None and self.requested:
            connection.abort()

    def check(self, cause: BaseException | None = None) -> None:
        """
        @raise Interrupted: L{interrupt} was called (C{cause}, what the transfer
            failed with then, is its C{__cause__}).
        """
        if self.requested:
            raise Interrupted("the transfer was interrupted") from cause


def _again(
    connect: Callable[[], BlockingBulkConnection],
    steps: Callable[[Progress], Steps],
    retries: int,
    delay: float,
    shown: TransferProgress | None,
    interruption: Interruption | None,
) -> FileTransfer:
    """
    Run fresh C{steps} on fresh connections until they succeed; after a
    cut, wait C{delay} and resume.  The outcome's C{moved} counts every
    attempt's bytes.  An C{interruption} stops it (L{Interrupted}).
    """
    failures = 0
    progress = Progress(shown=shown if shown is not None else TransferProgress())
    interruption = interruption if interruption is not None else Interruption()
    while True:
        interruption.check()
        progress.shown.attempts += 1
        try:
            connection = connect()
            interruption.watch(connection)
            try:
                with connection:
                    return connection.run(steps(progress))
            finally:
                interruption.watch(None)
        except RETRYABLE as error:
            interruption.check(error)
            failures += 1
            if failures > retries:
                raise
        except Exception as error:
            interruption.check(error)
            raise
        time.sleep(delay)


def sendFile(
    connect: Callable[[], BlockingBulkConnection],
    path: str | os.PathLike[str],
    name: str | None = None,
    *,
    retries: int = 10,
    retryDelay: float = 0.2,
    digests: Sequence[str] | None = None,
    progress: TransferProgress | None = None,
    interruption: Interruption | None = None,
) -> FileTransfer:
    """
    Upload the file at C{path} as C{name} over connections C{connect}
    makes, reconnecting and resuming after a cut, C{retries} times at
    most (as the Twisted client's C{sendFile}, over one connection at a
    time).  C{progress} is kept up to date for a display (its C{attempts}
    count the connections tried); C{interruption} can stop it (L{Interrupted}).
    """
    return _again(
        connect,
        lambda progress: uploadSteps(path, name, digests=digests, progress=progress),
        retries,
        retryDelay,
        progress,
        interruption,
    )


def fetchFile(
    connect: Callable[[], BlockingBulkConnection],
    name: str,
    path: str | os.PathLike[str] | None = None,
    *,
    retries: int = 10,
    retryDelay: float = 0.2,
    digests: Sequence[str] | None = None,
    progress: TransferProgress | None = None,
    interruption: Interruption | None = None,
) -> FileTransfer:
    """Download file C{name} to C{path} as L{sendFile} uploads: reconnecting and resuming after a cut."""
    return _again(
        connect,
        lambda progress: downloadSteps(name, path, digests=digests, progress=progress),
        retries,
        retryDelay,
        progress,
        interruption,
    )


__all__ = [
    "BlockingBulkConnection",
    "ConnectTimedOut",
    "ConnectionLost",
    "FileTransfer",
    "Interrupted",
    "Interruption",
    "ServerSilent",
    "TransferProgress",
    "connect",
    "fetchFile",
    "fileStream",
    "sendFile",
]
