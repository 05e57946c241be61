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
from framing.rpc._errors import ConnectionLost, DeadReferenceError, ServerSilent
from framing.rpc._session import Settled

from ._bulkfiles import (
    Call,
    FileTransfer,
    Hash,
    Progress,
    Receive,
    StepRunner,
    Steps,
    downloadSteps,
    fileStream,
    uploadSteps,
)
from .blocking import BlockingConnection, _open, _Waiter, connectTarget
from .options import CLIENT_DEFAULTS, ClientOptions

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
    address: str | tuple[str, int], *, interface: type | None = None, options: ClientOptions = CLIENT_DEFAULTS
) -> BlockingBulkConnection:
    """
    Connect to the chunkwire bulk server at C{address}: as
    L{protocols.blocking.connect}, with the same arguments, for a
    L{BlockingBulkConnection}.

    @raise ValueError: the options have C{bulk} (Twisted's clients' settings; this client has its own).
    """
    options.refuseBulk("protocols.blockingbulk.connect")
    (host, port), context = connectTarget(address, options)
    connection = _open((host, port), f"{host}:{port}", host, context, None, options, interface, BlockingBulkConnection)
    assert isinstance(connection, BlockingBulkConnection)
    return connection


def _again(
    connect: Callable[[], BlockingBulkConnection], steps: Callable[[Progress], Steps], retries: int, delay: float
) -> FileTransfer:
    """
    Run fresh C{steps} on fresh connections until they succeed; after a
    cut, wait C{delay} and resume.  The outcome's C{moved} counts every attempt's bytes.
    """
    failures = 0
    progress = Progress()
    while True:
        try:
            connection = connect()
            with connection:
                return connection.run(steps(progress))
        except RETRYABLE:
            failures += 1
            if failures > retries:
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
) -> FileTransfer:
    """
    Upload the file at C{path} as C{name} over connections C{connect}
    makes, reconnecting and resuming after a cut, C{retries} times at
    most (as the Twisted client's C{sendFile}, over one connection at a time).
    """
    return _again(
        connect, lambda progress: uploadSteps(path, name, digests=digests, progress=progress), retries, retryDelay
    )


def fetchFile(
    connect: Callable[[], BlockingBulkConnection],
    name: str,
    path: str | os.PathLike[str] | None = None,
    *,
    retries: int = 10,
    retryDelay: float = 0.2,
    digests: Sequence[str] | None = None,
) -> FileTransfer:
    """Download file C{name} to C{path} as L{sendFile} uploads: reconnecting and resuming after a cut."""
    return _again(
        connect, lambda progress: downloadSteps(name, path, digests=digests, progress=progress), retries, retryDelay
    )


__all__ = ["BlockingBulkConnection", "FileTransfer", "connect", "fetchFile", "fileStream", "sendFile"]
