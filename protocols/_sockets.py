# -*- test-case-name: tests.protocols.test_coalescing_parts,tests.protocols.test_backpressure -*-
"""What chunkwire knows about Twisted's own socket connections.

Contract: this is the one module that reads the inside of Twisted's
connections (a C{FileDescriptor}'s C{dataBuffer}, C{offset},
C{_tempDataLen}, C{_writeDisconnected}, C{bufferSize}, C{SEND_LIMIT}; a
TLS wrapper's C{_appSendBuffer}),
so that a Twisted upgrade that moves them breaks here and nowhere else.
Each function costs a few attribute reads (L{sendNow}: one system call);
none blocks, none raises for a connection it does not know (it answers
C{None}, 0 or C{False}, or L{sendNow} gives back all it was given, and the
caller takes Twisted's usual path), and none keeps a reference to the
connection it was given.
"""

from __future__ import annotations

import select
from typing import Any

from twisted.internet import tcp
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.interfaces import ITCPTransport


def tuneForBulk(transport: Any, readSize: int | None, sendLimit: int | None) -> int | None:
    """
    Have a Twisted socket connection read C{readSize} bytes per reactor turn
    (its C{bufferSize}) and hand its socket up to C{sendLimit} per turn (its
    C{SEND_LIMIT}, 128 KiB by default: a frame past it waits in user space
    for several turns, and a small call written after it waits with it),
    each unless C{None}; its read size now, or C{None} for a transport that
    is not such a connection (left alone).
    """
    if not (hasattr(transport, "bufferSize") and hasattr(transport, "socket")):
        return None
    if readSize is not None:
        transport.bufferSize = readSize
    if sendLimit is not None and hasattr(transport, "SEND_LIMIT"):
        transport.SEND_LIMIT = sendLimit
    bufferSize: int = transport.bufferSize
    return bufferSize


def _loadSocketConnections() -> list[type]:
    classes: list[type] = [tcp.Server, tcp.Client]
    try:
        from twisted.internet import unix
    except ImportError:  # no AF_UNIX on this platform
        return classes
    return [*classes, unix.Server, unix.Client]


# Connections whose sockets sendNow may write to directly.
SOCKET_CONNECTIONS: frozenset[type] = frozenset(_loadSocketConnections())

# Buffers given to one sendmsg: within every system's IOV_MAX.
MAX_IOV = 64


def queuedIn(transport: Any) -> int | None:
    """
    The bytes C{transport} holds that its socket has not taken yet, or
    C{None} if it cannot say.

    Twisted's socket connections (every C{FileDescriptor}) keep them in
    C{dataBuffer} past C{offset}, plus C{_tempDataLen}; its TLS wrapper keeps
    what was written before the handshake in C{_appSendBuffer} and the rest
    in the connection under it; chunkwire's in-memory transports count them
    in C{outgoingBytes}.
    """
    queued = 0
    for _ in range(4):  # a TLS wrapper over a TCP connection is two levels
        data = getattr(transport, "dataBuffer", None)
        if data is not None:
            held: int = len(data) - transport.offset + transport._tempDataLen
            return queued + held
        outgoing = getattr(transport, "outgoingBytes", None)
        if isinstance(outgoing, int):
            return queued + outgoing
        waiting = getattr(transport, "_appSendBuffer", None)
        if waiting is not None:
            queued += sum(map(len, waiting))
        transport = getattr(transport, "transport", None)
        if transport is None:
            break
    return None


def ownBufferSize(transport: Any) -> int:
    """
    How much C{transport} buffers before it pauses its producer (Twisted's
    C{bufferSize}, 64 KiB on TCP), or 0 if it does not say.

    A transport reports that its buffer drained only to a producer it paused,
    which it does only past this size; so a low-water mark below it could
    wait for a report that never comes.
    """
    for _ in range(4):
        size = getattr(transport, "bufferSize", None)
        if isinstance(size, int):
            return size
        transport = getattr(transport, "transport", None)
        if transport is None:
            break
    return 0


def setNoDelay(transport: Any) -> bool:
    """
    Turn on C{TCP_NODELAY} if C{transport} is (or wraps) a TCP connection.

    Each message leaves in one write, so Nagle's algorithm can only delay it:
    with it on, a small message written after an unacknowledged one waits
    for that ACK (a whole round trip, see the bzr HPSS thread).

    @return: whether the option was set.
    """
    if not ITCPTransport.providedBy(transport):
        return False
    try:
        # UNIX-socket transports claim ITCPTransport too (they share the TCP
        # code); only an IP address means there is a TCP socket underneath.
        if not isinstance(transport.getHost(), (IPv4Address, IPv6Address)):
            return False
        transport.setTcpNoDelay(True)
    except (OSError, AttributeError):
        # A socket already closed, or a wrapper that claims TCP without a socket.
        return False
    return True


def bytesWaiting(transport: Any) -> bool:
    """
    Whether bytes (or the peer's close) wait unread in the socket of
    C{transport} (or of the connection it wraps) now: one C{select} system
    call with no wait.  C{False} for a connection it does not know.
    """
    for _ in range(4):
        if type(transport) in SOCKET_CONNECTIONS:
            try:
                return bool(select.select([transport.fileno()], [], [], 0)[0])
            except (OSError, ValueError):  # (closed meanwhile)
                return False
        transport = getattr(transport, "transport", None)
        if transport is None:
            break
    return False


def sendNow(transport: Any, blocks: list[bytes], size: int) -> list[bytes]:
    """
    Send C{blocks} (C{size} bytes in all) straight to C{transport}'s socket,
    without blocking, if it is a plain socket connection of Twisted's own
    with nothing waiting to be sent; return what is left to write the usual
    way: nothing, what the socket did not take, or all of C{blocks} when the
    socket cannot be written to directly.

    Twisted's own C{write} always waits for the reactor to report the socket
    writable, which costs two C{epoll_ctl} calls and a reactor turn per
    message even when the socket could take the bytes now; on a
    request/response connection that is most of the cost of a small call.
    Only the exact classes are trusted (their buffer attributes are known),
    never once TLS has started on them, and never when something replaced
    C{write} on the instance (a recorder in a test, say): that write is
    then the one to call.  An error is left for Twisted to find on its next
    attempt, so the connection is closed as for any other write.
    """
    # Nothing waits in Twisted's buffer when _tempDataLen is 0 and dataBuffer is empty: FileDescriptor.doWrite
    # sets it back to b"" once it has sent all of it, so it need not be measured against the offset.  (A
    # dataBuffer sent to its end and not emptied, if Twisted ever left one, only sends this write its way.)
    if not (
        type(transport) in SOCKET_CONNECTIONS
        and "write" not in transport.__dict__
        and transport.connected
        and not transport.disconnecting
        and not transport._writeDisconnected
        and not transport.TLS
        and not transport._tempDataLen
        and not transport.dataBuffer
    ):
        return blocks
    try:
        if len(blocks) == 1:
            sent = transport.socket.send(blocks[0])
        else:
            # Within every system's IOV_MAX; the rest, if any, is written later.
            sent = transport.socket.sendmsg(blocks[:MAX_IOV])
    except OSError:
        return blocks
    if sent == size:
        return []  # (the commonest case: taken whole)
    for index, block in enumerate(blocks):
        if sent < len(block):
            rest = blocks[index:]
            if sent:
                rest[0] = block[sent:]
            return rest
        sent -= len(block)
    return []
