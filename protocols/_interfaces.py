# -*- test-case-name: tests.protocols.test_receiver,tests.protocols.rpc.test_extensions -*-
"""The seams of the Twisted layer, as zope interfaces.

Contract: a L{protocols.TokenProtocol} owns the connection (framing, the
transport, hold and release around each read, pings) and hands what it
decodes to one L{IObjectReceiver}; it sends for whoever holds it, as an
L{IObjectSender}.  The RPC broker is such a receiver, and loads
L{IBrokerExtension}s (bulk streams) instead of being subclassed.  Nothing
here costs anything per object beyond one method call.
"""

from __future__ import annotations

from zope.interface import Attribute, Interface


class IObjectSender(Interface):  # type: ignore[misc]
    """What a receiver may do with its connection (a L{protocols.TokenProtocol})."""

    transport = Attribute("The connection's L{protocols.CoalescingTransport}.")
    failure = Attribute("The Failure that dropped the connection for a protocol error, or None.")

    def sendObject(obj):  # type: ignore[no-untyped-def]
        """Encode C{obj} and queue it whole, in one write (shared while a read is handled)."""

    def sendStream(chunks):  # type: ignore[no-untyped-def]
        """Send the concatenation of C{chunks} as one streamed byte string; returns a Deferred."""

    def sendPing():  # type: ignore[misc, no-untyped-def]
        """Send a PING; returns a Deferred that fires with the round-trip time in seconds."""


class IObjectReceiver(Interface):  # type: ignore[misc]
    """
    Takes the objects a connection decodes.  The connection calls
    L{startReceiving} once, then L{objectReceived} and L{objectRefused} in
    stream order, then L{stopReceiving} once.  A receiver may also have
    C{connectionDropped(reason)}: called once when the connection is dropped
    for a L{framing.ProtocolError} (C{reason} wraps it), before
    L{stopReceiving}, which waits for the socket's close; it fails at once
    what waits on the peer's answers (the RPC broker's calls in flight).
    """

    def startReceiving(sender):  # type: ignore[no-untyped-def]
        """The connection is up: C{sender} (an L{IObjectSender}) sends on it."""

    def objectReceived(obj):  # type: ignore[no-untyped-def]
        """The peer sent C{obj}."""

    def objectRefused(violation):  # type: ignore[no-untyped-def]
        """The decoder refused one object (a L{framing.Violation}); the connection stays up."""

    def stopReceiving(reason):  # type: ignore[no-untyped-def]
        """The connection is gone, for C{reason} (a Failure)."""


class IBrokerExtension(Interface):  # type: ignore[misc]
    """
    Something an RPC broker loads for one connection (the bulk channel):
    it adds types to the connection's registry, takes the received objects
    of its own types, and hears of the connection's start and end.
    """

    controlTypes = Attribute(
        "The exact types of received objects that go to L{controlReceived} instead of RPC dispatch."
    )

    def install(broker, registry):  # type: ignore[no-untyped-def]
        """Called once, before the connection starts: register slicers and unslicers in C{registry}."""

    def connectionMade():  # type: ignore[misc, no-untyped-def]
        """The broker's connection is up."""

    def controlReceived(obj):  # type: ignore[no-untyped-def]
        """A received object of one of L{controlTypes}."""

    def connectionLost(reason):  # type: ignore[no-untyped-def]
        """The broker's connection is gone (after the broker failed its pending calls)."""

    # Optional: a broker calls it only on the extensions that define it.
    def callSent(call, outgoing):  # type: ignore[no-untyped-def]
        """
        Optional.  A call is about to be encoded and sent: C{call} is its
        L{Deferred} (it fails if the call fails, is cancelled or times out,
        or the connection is lost), and C{outgoing} the
        L{framing._outgoing.Outgoing} its message is encoded with, which the
        slicers of its arguments register on; C{outgoing} is rolled back and
        C{call} never fires if the message cannot be encoded.  The bulk
        extension fails the streams sent as a call's arguments this way.
        """


class IConnectionObserver(Interface):  # type: ignore[misc]
    """
    Watches one connection from outside, through public state only (the
    guard's timeouts and caps).  Added with
    L{protocols.TokenProtocol.addObserver}; each call is made once per read
    or per change, never per object.
    """

    def connectionStarted(protocol):  # type: ignore[no-untyped-def]
        """The connection is up (its preamble is queued, the receiver started)."""

    def dataArrived(length):  # type: ignore[no-untyped-def]
        """
        C{length} bytes were read from the peer and held undecoded (reading
        is paused, or the connection was dropped); L{dataDecoded} follows
        if they are decoded later.
        """

    def dataDecoded(length, completed, controlBytes):  # type: ignore[no-untyped-def]
        """
        C{length} bytes held when they arrived went through the decoder,
        completing C{completed} top-level objects (refusals included);
        C{controlBytes} of them were PINGs and PONGs.
        """

    def dataRead(length, completed, controlBytes):  # type: ignore[no-untyped-def]
        """
        C{length} bytes were read from the peer and went through the decoder
        at once (the commonest read): L{dataArrived} and L{dataDecoded} in
        one call, made once the read is decoded and its objects delivered.
        """

    def sendBacklogChanged(backlogged):  # type: ignore[no-untyped-def]
        """Reading stopped (C{True}) or started again (C{False}) because of bytes waiting for the peer."""

    def connectionEnded(reason):  # type: ignore[no-untyped-def]
        """The connection is gone."""
