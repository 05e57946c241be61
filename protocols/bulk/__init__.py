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

    await bulk.serve(reactor, "tcp:8770", Store())
    root = await bulk.connect(reactor, "tcp:host=127.0.0.1:port=8770")
    digest = await root.callRemote("upload", "a.iso", bulk.Stream("a.iso"))
    incoming = await root.callRemote("download", "a.iso")
    await incoming.receive("copy.iso")

L{protocols.bulk.files} builds the bulk-transfer service on this: resumable,
striped file transfer (C{BulkService}, C{sendFile}, C{fetchFile}), used by
C{examples/bulk_server.py} and C{examples/bulk_client.py}.

Design
======

B{Wire} (L{framing.bulk.wire}).  A stream is announced inside the RPC
message that carries it (OPEN C{"bulk.stream"}: id, size, digest name).  Its
bytes travel in data frames, each an ordinary top-level object (OPEN
C{"bulk.data"}: stream id, offset, one BYTES body) written with B{one
transport write per frame}; small control messages (OPEN C{"bulk.ctl"})
carry credit, the end of a stream with its size and digest, the receiver's
verdict, and cancellation either way.  Because each frame is its own
object, an RPC message is written between two frames as soon as it is
sent: it never waits behind a whole transfer, only behind the bytes already
in flight.  Stream ids are chosen by the sender, so every control message
travels one way only and names the sender's id.

B{Receiving without collecting.}  The decoder streams a frame's body instead
of collecting it: the frame's unslicer takes it through the decoder's
streamed-body hooks (C{begin_body}, C{body_piece}, C{end_body}), so each socket read is
handed to the stream's sink as it comes (the very C{bytes} the transport
read, copied only where a read also holds the next frame's header), and a
file sink writes it with one C{os.pwrite}.  A receiver holds no more than
its window per stream, whatever the frame and stream sizes.

B{Flow control} (L{protocols.bulk.sending}, L{protocols.bulk.receiving}), per stream, as HTTP/2 does it:
every stream starts with the receiver's initial window
(L{BulkOptions.initialWindow}, stated in its HELLO), so the sender sends at
once and the first byte arrives half a round trip after the call; what
arrives before the application calls C{receive()} is held, up to that
window, and dropped (the sender told, the reason logged) if nobody
receives it within L{BulkOptions.unreadTimeout}.  The receiver grants the
rest of its window when it starts receiving, then more in steps of at
least C{grantStep} as its sink releases pieces; the sender never has more
than its credit in flight.  A slow consumer (a paused C{IConsumer}, a callback still
running) releases nothing, so its stream stops after one window and the
others and the calls go on; the sender's data also waits for the
transport's own back-pressure (the channel is the transport's push
producer).  There is no connection-wide window: a receiver's memory is its
own choice, the sum of the windows of the streams it chose to receive.
Defaults (L{BulkOptions}): 1 MiB chunks, a 1.875 MiB window (half that for
a receiver verifying in the reactor thread), credit in steps of a quarter
window; the window is under two chunks so that a dropped connection loses
(and a resume resends) less than two chunks, and a call waits behind about
a millisecond of data at most.  On TCP the bulk connection reads 1 MiB per
reactor turn once L{steadyAllocator} has fixed malloc's thresholds (L{serve}
and L{connect} do it, unless told not to), 512 KiB otherwise, and hands the
socket up to 1 MiB per turn (Twisted's 64 KiB and
128 KiB make a frame wait in user space for several turns, and a call with
it).

B{Integrity} (L{protocols.bulk.integrity}).  Every stream is checked end to
end unless sent with C{digest=None}, with the first digest of the sender's
list (L{BulkOptions.digests}: BLAKE3 when the C{blake3} package is installed,
then SHA-256) that the receiver also lists; each side states its list once
per connection in a HELLO, and a stream whose digest the other side lacks
fails with L{DigestUnavailable} before any data moves.  The sender hashes what it
sends, the receiver what it receives, the END message carries the sender's
digest, and the receiver's sink is told the data is complete only after the
two matched (a file arrives under a temporary name and is renamed into place
then).  A mismatch fails both ends with L{IntegrityError} and the sink drops
what it holds.  L{OrderedHasher} hashes bytes in order from the buffers that
carried them and reads back (from the file) what arrived out of order, so
every byte is hashed once; it can run in a worker thread (C{hashlib}
releases the GIL), but inline measured faster with both ends on two cores.

B{Resume and striping} (L{protocols.bulk.files}).  An L{Assembly} keeps a
partial file and a sidecar recording the byte ranges it holds (a
L{RangeSet}: sorted disjoint ranges, O(1) to extend at the tail, a binary
search elsewhere; repeats and overlaps are absorbed).  After a dropped
connection the sender asks which ranges are missing and sends only those;
C{--streams N} splits the missing ranges over N connections.  The digest of
the whole file is checked at the end, then the file is renamed into place.

B{Costs}.  Per frame: four headers, two dict lookups, one write.  Per piece
received: O(1).  Memory per stream: its window on the receiving side, one
chunk plus what is in flight on the sending side.  See
C{tests/benchmarks/bench_bulk.py} for throughput, memory and call latency
beside a raw Twisted producer, Int32StringReceiver and Foolscap.

B{Modules, one job each}.  C{sources.py}: what a L{Stream} reads from,
behind one L{StreamSource} interface.  C{sending.py}: L{Stream} and its
transition table; C{receiving.py}: L{IncomingStream}, L{Receiver} and its
transition table.  C{interfaces.py}: L{IStreamHost}, the only thing a
stream may ask of its connection, and what the channel may ask of a
stream.  C{channel.py}: L{BulkChannel} (the streams of one connection, by
id) and L{BulkBroker}; C{scheduling.py}: which stream sends the next frame.
C{files.py}: the file service and its client helpers.

Both ends of a connection must be L{BulkBroker}s (made by L{serve},
L{connect} or L{BulkBrokerFactory}).
"""

from framing.bulk.digests import BLAKE3, DEFAULT_DIGEST, NEGOTIATED, availableDigests
from framing.bulk.errors import (
    DigestRefused,
    DigestUnavailable,
    FlowControlError,
    HelloMissing,
    IllegalTransition,
    IntegrityError,
    StreamIdReused,
    StreamReset,
    TooManyStreams,
)
from framing.bulk.ranges import RangeSet
from framing.rpc.signatures import registerHint
from framing.slicing.constraints import ANY

from .allocator import allocatorSteady, steadyAllocator
from .channel import BulkBroker, BulkBrokerFactory, BulkChannel, bulkOf, callingBroker, callingChannel, connect, serve
from .integrity import OrderedHasher
from .interfaces import IReceivingStream, ISendingStream, IStreamHost
from .options import ADAPTIVE_READ_SIZE, PLAIN_READ_SIZE, STEADY_READ_SIZE, BulkOptions
from .outcome import TransferResult
from .receiving import IncomingStream, Receiver
from .sending import Stream
from .sinks import CallbackSink, ConsumerSink, FileSink, OpenFileSink, Sink
from .sources import BytesSource, FileSource, SeekableSource, StreamSource
from .streams import StreamArg, asIncoming

# A stream travels on the bulk channel, not as a value: its hint checks nothing.
registerHint(Stream, ANY)
registerHint(IncomingStream, ANY)

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
    "BulkBroker",
    "BulkBrokerFactory",
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
    "connect",
    "asIncoming",
    "serve",
    "allocatorSteady",
    "steadyAllocator",
]
