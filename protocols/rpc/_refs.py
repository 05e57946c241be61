# -*- test-case-name: tests.protocols.rpc.test_ref_vectors,tests.protocols.test_blocking_refs -*-
"""References across one connection: L{RemoteReference}, and how references travel.

Contract: a L{Referenceable} in an argument or a result is sent as OPEN
C{"rpc.ref"}, the sender's export id, the names of the remote interfaces its
class implements (none for most), CLOSE; the receiver turns it into the one
L{RemoteReference} it holds for that id on that connection (a new one if
none is alive), which keeps those names in C{interfaceNames}.  A reference
without names is exactly what peers that predate interface names send, so
old and new peers read each other's plain references.  A L{RemoteReference} sent back over its own connection is
sent as OPEN C{"rpc.yourref"}, the id, CLOSE, and arrives as the original
object.  Sending a L{RemoteReference} over any other connection is an
L{framing.EncodingError}: only the side that exports an object can hand it
on.  How long exports live is the connection's reference table's business
(see L{protocols.rpc._tables}); everything here is O(1) per reference.
Nothing here imports the broker: a reference needs only a L{Caller}, the
slicers only L{References}.  The slicers, the unslicers and the import
record are sans-IO (L{framing.rpc._references}, shared with the clients
without Twisted), re-exported here.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from twisted.internet.defer import Deferred

# How references travel is sans-IO (framing.rpc._references), shared with the clients without Twisted;
# re-exported here, where the Twisted layer has always had it.
from framing.rpc._references import MAX_INTERFACE_NAME as MAX_INTERFACE_NAME
from framing.rpc._references import MAX_INTERFACE_NAMES as MAX_INTERFACE_NAMES
from framing.rpc._references import ImportRecord as ImportRecord
from framing.rpc._references import ReferenceableSlicer as ReferenceableSlicer
from framing.rpc._references import References as References
from framing.rpc._references import ReferenceUnslicer as ReferenceUnslicer
from framing.rpc._references import RemoteReferenceSlicer as RemoteReferenceSlicer
from framing.rpc._references import YourReferenceUnslicer as YourReferenceUnslicer
from framing.rpc._signatures import REF_OPEN_TYPE as REF_OPEN_TYPE
from framing.rpc._signatures import YOURREF_OPEN_TYPE as YOURREF_OPEN_TYPE
from framing.rpc._signatures import RefOf as RefOf  # the reference constraint, sans-IO since the blocking client


class CallSender(Protocol):
    """
    What a connection's calls are sent through (a broker's C{sender}): its
    L{protocols.rpc._calls.OutgoingCalls}, or what stands in front of them
    (L{protocols.rpc.Broker.sendThrough}: interceptors).
    """

    def callRemote(self, target: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Deferred[Any]:
        """Send a call to the peer's export C{target}."""

    def callRemoteOnly(self, target: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Send a call for no answer to the peer's export C{target}."""


class Caller(Protocol):
    """What a L{RemoteReference} needs of its connection (a L{protocols.rpc.Broker} is one)."""

    @property
    def sender(self) -> CallSender:
        """What the connection's calls are sent through, now (read at each call)."""

    def isConnected(self) -> bool:
        """Whether calls can be sent."""

    def whenDisconnected(self) -> Deferred[BaseException]:
        """Fires with the exception that ended the connection."""


T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class HasRemoteProxy(Protocol[T_co]):
    """
    What L{RemoteReference.typed} takes: a remote interface, whose
    C{remoteProxy} class method makes a proxy typed as the interface.  (A
    C{type[T]} parameter would not do: mypy refuses to pass a protocol class
    as one.)
    """

    def remoteProxy(self, reference: RemoteReference, /) -> T_co:
        """A proxy for C{reference}."""


class RemoteReference:
    """
    A callable handle on an object the other side of one connection exports.

    There is at most one live L{RemoteReference} per object per connection,
    so references compare (and hash) by identity, and the same remote object
    received twice is the same L{RemoteReference}.  When the last one is
    dropped, the exporting side is told, and forgets the object once no
    other reference to it is in flight.

    @ivar broker: the connection it belongs to (a L{protocols.rpc.Broker}).
    @ivar exportId: the id the other side exports the object under.
    @ivar interfaceNames: the names of the remote interfaces the object's
        class implements, as its side sent them (see
        L{protocols.rpc._interfaces}); empty for the root, whose interface the
        caller names (C{typed}, C{connect(..., interface=...)}).
    """

    __slots__ = ("broker", "exportId", "interfaceNames", "__weakref__")

    def __init__(self, broker: Caller, exportId: int, interfaceNames: tuple[str, ...] = ()) -> None:
        # Any, not Caller: applications use the whole Broker (disconnect, logFailure).
        self.broker: Any = broker
        self.exportId = exportId
        self.interfaceNames = interfaceNames

    def callRemote(self, _name: str, /, *args: Any, **kwargs: Any) -> Deferred[Any]:
        """
        Call the remote method C{_name} with C{args} and C{kwargs}.

        The call is one message in one write.  The returned L{Deferred} can be
        awaited in a coroutine run by C{Deferred.fromCoroutine} or
        C{ensureDeferred}, cancelled (the other side is told, and cancels the
        method's own Deferred or coroutine), and bounded with
        C{addTimeout(seconds, reactor)}.

        @return: a L{Deferred} firing with the method's result, or failing
            with a L{protocols.rpc.RemoteError} (or a registered exception
            type), L{protocols.rpc.DeadReferenceError} if the connection is not
            up, an L{framing.EncodingError} if an argument cannot be sent, a
            L{framing.Violation} if this side refused the answer, the reason
            the connection was lost, or C{CancelledError}.
        """
        call: Deferred[Any] = self.broker.sender.callRemote(self.exportId, _name, args, kwargs)
        return call

    def callRemoteOnly(self, _name: str, /, *args: Any, **kwargs: Any) -> None:
        """
        Call the remote method C{_name} with C{args} and C{kwargs}, for no
        answer: fire and forget.

        The call is one message in one write, like L{callRemote}'s, and
        nothing of it is kept here: no pending call, no timeout, no
        L{Deferred}.  The other side runs the method and drops its result;
        if the method fails, or the call is refused (no such method, an
        argument its constraints refuse), that is logged there, with the
        method's name and this side as the peer, and never sent back.  So
        nothing tells this side whether the method ran: use L{callRemote}
        when that matters.

        @raise protocols.rpc.DeadReferenceError: the connection is not up
            (raised at once rather than dropped silently: a caller that
            cannot be told later is told now).
        @raise framing.EncodingError: an argument cannot be sent; nothing
            was sent.
        """
        self.broker.sender.callRemoteOnly(self.exportId, _name, args, kwargs)

    def typed(self, interface: HasRemoteProxy[T]) -> T:
        """
        A proxy that calls this reference's methods as C{interface}
        declares them, with their constraints checked on this side (see
        L{protocols.rpc._interfaces.TypedReference}); typed as C{interface}
        for mypy.

        @param interface: a L{protocols.rpc.RemoteInterface} subclass.
        """
        return interface.remoteProxy(self)

    def isConnected(self) -> bool:
        """Whether calls through this reference can still be sent."""
        connected: bool = self.broker.isConnected()
        return connected

    def whenDisconnected(self) -> Deferred[BaseException]:
        """A L{Deferred} firing with the exception that ended this reference's connection, once it ends."""
        lost: Deferred[BaseException] = self.broker.whenDisconnected()
        return lost

    def __repr__(self) -> str:
        return f"<RemoteReference {self.exportId} on {self.broker!r}>"
