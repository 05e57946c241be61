# -*- test-case-name: tests.protocols.test_asynciobulk,tests.protocols.test_asyncioclient_logins -*-
"""Bulk transfers on the asyncio client: upload and download files, resumable and checked, without Twisted.

    from protocols.asynciobulk import connect

    async with await connect("127.0.0.1:8770") as connection:
        sent = await connection.upload("report.pdf")
        fetched = await connection.download("report.pdf", "copy.pdf")

Contract: as L{protocols.blockingbulk}'s, awaited: L{connect} is
L{protocols.asyncioclient.connect} for an L{AsyncBulkConnection}.  C{upload}
and C{download} run the steps of C{protocols/_bulkfiles.py} (resumed, the whole
file's digest checked at both ends), awaiting each; bytes of a local file
that do not move are hashed in the loop's default executor, so the loop
keeps serving.  A L{framing.bulk.SendStream} passed to a call
(L{fileStream} makes one of a file) sends as the server's credit comes; an
incoming stream is received with L{AsyncBulkConnection.receive}.  Several
transfers may run at once on one connection.

Cost: each byte of the file is read once; at most a window of the server's
waits in the transport's buffer.  Imports only L{framing} and the standard
library: no Twisted.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

from framing.bulk._streams import ClientStreams, IncomingTransfer, Sink

from ._bulkfiles import (
    Call,
    FileTransfer,
    Hash,
    Receive,
    StepRunner,
    Steps,
    downloadSteps,
    fileStream,
    uploadSteps,
)
from .asyncioclient import AsyncConnection, _open
from .blocking import connectTarget
from .options import CLIENT_DEFAULTS, ClientOptions


class AsyncBulkConnection(AsyncConnection):
    """
    An L{AsyncConnection} that carries bulk streams (see the module docstring).

    @ivar streams: its L{ClientStreams}.
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, peer: str, options: ClientOptions = CLIENT_DEFAULTS, **keywords: Any
    ) -> None:
        """As L{AsyncConnection}'s (C{pin}, for one), with the bulk streams as the session's extension."""
        self.streams = ClientStreams()
        super().__init__(loop, peer, options, extension=self.streams, **keywords)

    async def receive(self, stream: IncomingTransfer, sink: Sink) -> tuple[int, bytes | None]:
        """
        Receive C{stream} (from a call's result) into C{sink} (its
        C{write(offset, data)} called with each piece as it is read) until
        its END was checked.

        @return: the bytes received and the digest checked (C{None} for a stream without one).
        @raise framing.bulk.IntegrityError: the bytes do not have the sender's digest.
        @raise framing.bulk.StreamReset: the sender aborted it (or this side's sink failed).
        @raise ConnectionLost: the connection ended first.

        Cancelling the wait cancels the stream: the server is sent a CANCEL
        and stops sending it.
        """
        future: asyncio.Future[tuple[int, bytes | None]] = self._loop.create_future()
        self._apply(self.streams.startReceiving(stream, sink, future))
        try:
            return await self.awaitStream(future)
        except asyncio.CancelledError:
            # Tell the server (CANCEL), or it sends a window more that nobody reads.
            self._apply(self.streams.stopReceiving(stream))
            raise

    async def upload(
        self,
        path: str | os.PathLike[str],
        name: str | None = None,
        *,
        resume: bool = True,
        digests: Sequence[str] | None = None,
    ) -> FileTransfer:
        """Upload the file at C{path} as C{name}: L{protocols.blockingbulk.BlockingBulkConnection.upload}, awaited."""
        return await self.run(uploadSteps(path, name, resume=resume, digests=digests))

    async def download(
        self,
        name: str,
        path: str | os.PathLike[str] | None = None,
        *,
        resume: bool = True,
        digests: Sequence[str] | None = None,
    ) -> FileTransfer:
        """Download file C{name} to C{path}: L{protocols.blockingbulk.BlockingBulkConnection.download}, awaited."""
        return await self.run(downloadSteps(name, path, resume=resume, digests=digests))

    async def run(self, steps: Steps) -> FileTransfer:
        """Do C{steps} (C{protocols/_bulkfiles.py}), awaiting each; their outcome."""
        runner = StepRunner(steps)
        while (step := runner.next()) is not None:
            try:
                if isinstance(step, Call):
                    runner.succeeded(await self.root.callRemote(step.name, *step.args))
                elif isinstance(step, Receive):
                    runner.succeeded(await self.receive(step.stream, step.sink))
                else:
                    assert isinstance(step, Hash)
                    runner.succeeded(await self._loop.run_in_executor(None, step.compute))
            except Exception as error:
                runner.failed(error)
        assert runner.outcome is not None
        return runner.outcome


async def connect(
    address: str | tuple[str, int], *, interface: type | None = None, options: ClientOptions = CLIENT_DEFAULTS
) -> AsyncBulkConnection:
    """
    Connect to the chunkwire bulk server at C{address} on the running loop:
    as L{protocols.asyncioclient.connect}, with the same arguments, for an
    L{AsyncBulkConnection}.

    @raise ValueError: the options have C{bulk} (Twisted's clients' settings; this client has its own).
    """
    options.refuseBulk("protocols.asynciobulk.connect")
    (host, port), context = connectTarget(address, options)
    connection = await _open(
        (host, port), f"{host}:{port}", context, None, options, interface=interface, connectionClass=AsyncBulkConnection
    )
    assert isinstance(connection, AsyncBulkConnection)
    return connection


__all__ = ["AsyncBulkConnection", "FileTransfer", "connect", "fileStream"]
