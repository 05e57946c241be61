# -*- test-case-name: tests.test_exports,tests.faults.test_bulk_faults,tests.benchmarks.test_bulk_floor -*-
"""Streamed bulk transfer on chunkwire RPC connections.

A L{Stream} is a byte stream that travels as an argument or the result of a
remote call, on the same connection as the calls, and arrives as an
L{IncomingStream} that the receiver hands to a sink::

    from protocols import bulk, rpc

    class Store(rpc.Referenceable):
        @rpc.remote
        async def upload(self, name, stream):          # stream: bulk.IncomingStream
            result = await stream.receive(f"/srv/{name}")  # a path, file, IConsumer or callable
            return result.hexdigest                     # verified (result.algorithm: blake3 or sha256)

        @rpc.remote
        def download(self, name):
            return bulk.Stream(f"/srv/{name}")          # a path, file, bytes, iterator, producer

    streams = bulk.BulkOptions()
    await rpc.serve(reactor, "tcp:8770", Store(), options=rpc.ServerOptions(bulk=streams))
    root = await rpc.connect(reactor, "tcp:host=127.0.0.1:port=8770", options=rpc.ClientOptions(bulk=streams))
    digest = await root.callRemote("upload", "a.iso", bulk.Stream("a.iso"))
    incoming = await root.callRemote("download", "a.iso")
    await incoming.receive("copy.iso")

Both ends carry bulk: a L{BulkOptions} as the C{bulk} of their options
(or of a C{Broker}).  Every stream is checked end to end by a digest unless
sent with C{digest=None}; L{BulkService} builds resumable file transfer on this.

Cost: per frame four headers, two dict lookups and one transport write; per
piece received O(1); memory per stream its window on the receiving side, one
chunk plus what is in flight on the sending side.

Design: docs/design/bulk.md
"""

from framing.bulk._digests import (
    BLAKE3,
    DEFAULT_DIGEST,
    NEGOTIATED,
    DigestUnavailable,
    IntegrityError,
    availableDigests,
    newHash,
)
from framing.bulk._errors import (
    DigestRefused,
    FlowControlError,
    HelloMissing,
    IllegalTransition,
    StreamIdReused,
    StreamReset,
    TooManyStreams,
)
from framing.bulk._ranges import RangeSet
from framing.rpc._signatures import registerHint
from framing.slicing._constraints import ANY

from .._allocator import allocatorSteady, steadyAllocator
from ._channel import BulkChannel, bulkOf, callingBroker, callingChannel
from ._integrity import OrderedHasher
from ._interfaces import IReceivingStream, ISendingStream, IStreamHost
from ._options import ADAPTIVE_READ_SIZE, PLAIN_READ_SIZE, STEADY_READ_SIZE, BulkOptions
from ._outcome import TransferResult
from ._quotas import FileBudget, FileLimits
from ._receiving import IncomingStream, Receiver
from ._sending import Stream
from ._sinks import CallbackSink, ConsumerSink, FileSink, OpenFileSink, Sink
from ._sources import BytesSource, FileSource, SeekableSource, StreamSource
from ._streams import StreamArg, asIncoming

# A stream travels on the bulk channel, not as a value: its hint checks nothing.
registerHint(Stream, ANY)
registerHint(IncomingStream, ANY)

# The file service's methods take and give streams: imported once their hints mean something.
from ._files import BulkService, FileResult, TransferProgress, fetchFile, sendFile  # noqa: E402

__all__ = [
    "BLAKE3",
    "DEFAULT_DIGEST",
    "NEGOTIATED",
    "ADAPTIVE_READ_SIZE",
    "PLAIN_READ_SIZE",
    "STEADY_READ_SIZE",
    "DigestRefused",
    "DigestUnavailable",
    "availableDigests",
    "BulkChannel",
    "BulkOptions",
    "BytesSource",
    "CallbackSink",
    "ConsumerSink",
    "FileSink",
    "FileSource",
    "FlowControlError",
    "HelloMissing",
    "IReceivingStream",
    "ISendingStream",
    "IStreamHost",
    "IllegalTransition",
    "IncomingStream",
    "IntegrityError",
    "OpenFileSink",
    "OrderedHasher",
    "RangeSet",
    "Receiver",
    "SeekableSource",
    "Sink",
    "Stream",
    "StreamArg",
    "StreamIdReused",
    "StreamReset",
    "StreamSource",
    "TooManyStreams",
    "TransferResult",
    "bulkOf",
    "callingBroker",
    "callingChannel",
    "asIncoming",
    "allocatorSteady",
    "steadyAllocator",
    "BulkService",
    "FileBudget",
    "FileLimits",
    "FileResult",
    "TransferProgress",
    "fetchFile",
    "newHash",
    "sendFile",
]
