"""How each peer is driven, shared by the receive and small-token benchmarks.

Each C{*_receiver(results)} returns a C{feed(chunk)} callable that does what
a protocol's C{dataReceived} would do and appends every completed top-level
object to C{results}; each C{*_wire(objects)} returns that peer's bytes for
C{objects}, produced by the peer's own encoder.  The set-ups follow
C{research/anchors-receive.md}: limits raised where a peer has one, nothing
else changed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from io import BytesIO
from typing import Any

Feed = Callable[[bytes], None]

# What each receiver imports, so a worker can import it before measuring.
CHUNKWIRE = ("framing",)
INT32 = ("twisted.internet.testing", "twisted.protocols.basic")
TWISTED_BANANA = ("twisted.internet.testing", "twisted.spread.banana")
FOOLSCAP = ("foolscap.storage",)
MSGPACK = ("msgpack",)
AMP = ("twisted.internet.testing", "twisted.protocols.amp", "zope.interface")


def feed_chunks(feed: Feed, wire: bytes, chunk: int) -> None:
    """Deliver C{wire} to C{feed} in C{chunk}-byte pieces, each a fresh C{bytes} as a socket gives them."""
    view = memoryview(wire)
    to_bytes = bytes
    for i in range(0, len(wire), chunk):
        feed(to_bytes(view[i : i + chunk]))


# -- chunkwire ----------------------------------------------------------


def chunkwire_wire(objects: Sequence[Any]) -> bytes:
    from framing import BlockBuffer, Encoder
    from framing.wire import PREAMBLE

    encoder = Encoder()
    buf = BlockBuffer()
    buf.write(PREAMBLE)
    for obj in objects:
        encoder.encode_into(obj, buf)
    return buf.take()


def chunkwire_receiver(results: list[Any]) -> Feed:
    from framing import Decoder

    decode = Decoder().feed
    extend = results.extend

    def feed(chunk: bytes) -> None:
        extend(decode(chunk))

    return feed


# -- Twisted Int32StringReceiver ----------------------------------------


def int32_wire(frames: Sequence[bytes]) -> bytes:
    import struct

    pack = struct.Struct("!I").pack
    return b"".join(pack(len(f)) + f for f in frames)


def int32_receiver(results: list[Any], max_length: int) -> Feed:
    from twisted.internet.testing import StringTransport
    from twisted.protocols.basic import Int32StringReceiver

    class Receiver(Int32StringReceiver):
        MAX_LENGTH = max_length

    receiver = Receiver()
    receiver.stringReceived = results.append  # type: ignore[method-assign]
    receiver.makeConnection(StringTransport())
    return receiver.dataReceived


# -- twisted.spread.banana ----------------------------------------------


def _raise_twisted_banana_limit(size: int) -> None:
    # dataReceived and _encode read the module global, never the instance's sizeLimit.
    from twisted.spread import banana

    banana.SIZE_LIMIT = max(banana.SIZE_LIMIT, 2 * size + 1024)


def twisted_banana_wire(objects: Sequence[Any], largest: int = 0) -> bytes:
    from twisted.internet.testing import StringTransport
    from twisted.spread import banana

    _raise_twisted_banana_limit(largest)
    sender = banana.Banana(isClient=1)
    transport = StringTransport()
    sender.makeConnection(transport)
    sender._selectDialect(b"none")
    transport.clear()
    for obj in objects:
        sender.sendEncoded(obj)
    return transport.value()


def twisted_banana_receiver(results: list[Any], largest: int = 0) -> Feed:
    from twisted.internet.testing import StringTransport
    from twisted.spread import banana

    _raise_twisted_banana_limit(largest)
    receiver = banana.Banana(isClient=1)
    receiver.makeConnection(StringTransport())
    receiver._selectDialect(b"none")
    receiver.expressionReceived = results.append
    return receiver.dataReceived


# -- Foolscap -----------------------------------------------------------


def foolscap_wire(objects: Sequence[Any]) -> bytes:
    from foolscap import storage

    out = BytesIO()
    sender = storage.StorageBanana()
    sender.transport = storage.SerializerTransport(out)
    sender.connectionMade()
    for obj in objects:
        sender.send(obj)  # fires synchronously for bytes, ints and lists
    return out.getvalue()


def foolscap_receiver(results: list[Any]) -> Feed:
    from foolscap import storage

    append = results.append

    class Receiver(storage.StorageBanana):
        def receiveChild(self, obj: Any, ready_deferred: Any = None) -> None:
            append(obj)

    receiver = Receiver()
    receiver.transport = storage.SerializerTransport(BytesIO())
    receiver.connectionMade()
    return receiver.dataReceived


# -- msgpack ------------------------------------------------------------


def msgpack_wire(objects: Sequence[Any]) -> bytes:
    import msgpack

    packer = msgpack.Packer(use_bin_type=True)
    return b"".join(packer.pack(obj) for obj in objects)


def msgpack_receiver(results: list[Any], largest: int = 0) -> Feed:
    import msgpack

    # The default max_buffer_size (100 MiB) caps one message.
    unpacker = msgpack.Unpacker(max_buffer_size=max(2 * largest + 1024, 100 * 1024 * 1024))
    unpack_feed = unpacker.feed
    extend = results.extend

    def feed(chunk: bytes) -> None:
        unpack_feed(chunk)
        extend(unpacker)

    return feed


# -- AMP ----------------------------------------------------------------


def amp_wire(boxes: Sequence[dict[bytes, bytes]]) -> bytes:
    from twisted.protocols import amp

    return b"".join(amp.AmpBox(box).serialize() for box in boxes)


def amp_receiver(results: list[Any]) -> Feed:
    from twisted.internet.testing import StringTransport
    from twisted.protocols import amp
    from zope.interface import implementer

    @implementer(amp.IBoxReceiver)
    class Sink:
        def startReceivingBoxes(self, sender: Any) -> None:
            pass

        def stopReceivingBoxes(self, reason: Any) -> None:
            pass

    sink = Sink()
    sink.ampBoxReceived = results.append  # type: ignore[attr-defined]
    protocol = amp.BinaryBoxProtocol(sink)
    protocol.makeConnection(StringTransport())
    return protocol.dataReceived
