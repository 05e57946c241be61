# -*- test-case-name: tests.protocols.test_lifetime,tests.protocols.rpc.test_stream_lifetime -*-
"""How a connection ends: dropped for a protocol error, and freed without the garbage collector.

L{dropConnection} is the one way a connection is dropped for a
L{ProtocolError}: the peer is told why, and the protocol's C{failure} is the reason the connection ended.
The close is polite (what is queued is sent first), but bounded: a
connection not ended C{config.dropGrace} seconds later (a peer that reads
nothing never takes the bytes queued for it) is aborted.  Cost: one timer
per dropped connection, cancelled by C{connectionLost}.

Contract: after L{breakCycles}, a protocol, its transport wrapper, decoder
and encoder are freed by reference counting as soon as the last outside
reference goes, instead of waiting for a cyclic garbage collection (which,
after a flood, kept a gigabyte of half-built objects alive).  It runs at the
end of C{TokenProtocol.connectionLost} and costs O(1) plus the objects it
frees.  A spent decoder or encoder must not be used again.
"""

from __future__ import annotations

from typing import Any

from twisted.python.failure import Failure

from framing import ProtocolError
from framing._encoder import error_token
from framing._errors import PeerError, error_token_text
from framing.wire import PREAMBLE

from ._logs import escape


def dropConnection(protocol: Any, error: ProtocolError, logged: bool = False) -> Failure:
    """
    Drop C{protocol}'s connection for C{error}: log it if C{logged}, stop
    delivering, fail its queued streams and drop the messages not yet
    written, tell the peer why in an ERROR token
    (L{framing._encoder.error_token}, the clients' session's too; unless
    the peer sent the error), close, and abort it if it is not
    closed C{protocol.config.dropGrace} seconds later (on the protocol's
    clock: C{protocol.lingering} is that timer, which C{connectionLost}
    cancels).  C{protocol.failure} is then the reason the connection ended,
    whatever reason the transport gives (C{TokenProtocol.lossReason} reads
    it).  A preamble still held (nothing was written yet: C{holdPreamble}
    keeps it to the end of the turn, and a drop in that turn came first)
    goes out before the ERROR, in the same write, as wire format 5's
    grammar has it (C{preamble ... [ERROR]}): else the peer reads the
    ERROR where the preamble belongs and reports a bad preamble instead of
    the reason.  Nothing is written after the ERROR, by this or anything
    sent later (the transport is sealed: wire format 4.8 makes the ERROR
    the last token).  Applications call
    L{protocols.TokenProtocol.dropConnection}, which does this once and
    then stops the receiver.

    @return: the L{Failure} wrapping C{error} (now C{protocol.failure}).
    """
    if logged:
        protocol.log.warn(
            "Dropping connection from {peer}: {error}",
            peer=protocol.peerName(),
            code=error.code,
            error=escape(error_token_text(error)),
        )
    # The traceback's frames would hold the protocol (and what it decoded)
    # in a cycle; where in our code a peer's bytes broke the stream says
    # nothing the code and message do not.
    error.__traceback__ = None
    failure = Failure(error)  # type: ignore[no-untyped-call]
    protocol.failure = failure
    protocol.inbound.stop()
    transport = protocol.transport
    held = transport.bytesWritten == 0  # (the connection's first bytes are its preamble: still held)
    transport.abandonStreams(failure)
    if held:
        transport.write(PREAMBLE)
    if not isinstance(error, PeerError):
        transport.write(error_token(error))
    # Set before the close, which may end the connection at once (connectionLost then cancels it).
    grace = protocol.config.dropGrace
    protocol.lingering = protocol.config.reactor().callLater(grace, abortLingering, protocol, grace)
    transport.loseConnection()
    transport.seal()
    return failure


def abortLingering(protocol: Any, grace: float) -> None:
    """A dropped connection is still open C{grace} seconds later (its peer does not read): abort it."""
    protocol.lingering = None
    transport = protocol.transport
    protocol.log.warn(
        "{peer}: {pending} bytes still unsent {grace} s after the connection was dropped; aborting it",
        peer=protocol.peerName(),
        pending=getattr(transport, "pendingBytes", "?"),
        grace=grace,
    )
    transport.abortConnection()


def breakCycles(protocol: Any) -> None:
    """
    Drop the references that make a closed connection's objects a cycle:
    its config (whose registry's slicers may refer to the receiver); the
    transport's reading observer (a bound method of the protocol's
    L{protocols._inbound.Inbound}); and the decoder's and encoder's state,
    whose parts refer to each other (the scanner's sink is its decoder, and
    each keeps tables of its own bound methods).
    """
    state = vars(protocol)
    # The config may hold a registry whose slicers refer back to the connection's receiver.
    state.pop("config", None)
    state.pop("registry", None)
    transport = getattr(protocol, "transport", None)
    if transport is not None and getattr(transport, "readingObserver", None) is not None:
        transport.readingObserver = None
    for name in ("decoder", "encoder"):
        spent = state.get(name)
        if spent is not None:
            vars(spent).clear()
