# -*- test-case-name: tests.framing.rpc.test_session,tests.framing.rpc.test_clientstreams -*-
"""The client's side of one RPC connection, sans-IO: calls in, bytes out; bytes in, settled calls out.

Contract: a L{ClientSession} is everything a chunkwire RPC client does on
one connection except waiting (L{protocols.blocking} and
L{protocols.asyncioclient} wait over it): an
L{framing.rpc._connection.RpcConnection} (C{rpc}) and its codec.
L{start} is the preamble; L{call}, L{callOnly}, L{cancel} and L{ping}
return their message's bytes; L{receive} takes bytes and returns the calls
it settled, as C{(waiter, result, error)} triples, leaving what is due
back in L{dataToSend}.  Bad input never raises out of L{receive}: a broken
stream, an answer to no call or a message refused before its id ends the
session (L{failure}; an ERROR to send, L{farewell}) and settles every
pending call, as do more than C{maxRefusals} refusals within 10 s.
L{end} and L{judgeSilence} end it for what the I/O layer saw.  No I/O,
no threads, no timer (the refusal rate alone reads C{clock}).

Cost: a call is one table entry and one encoding; each received ANSWER one
type test, one tag test and one dict pop, any other message one index more
(L{framing.rpc._dispatch}); nothing grows with the connection's age.

Design: docs/design/rpc-session.md
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from operator import itemgetter
from typing import Any, Generic, Protocol, TypeVar

from framing import Decoder, Encoder, Limits, ProtocolError, Registry, Violation, _core
from framing._encoder import error_token, open_token
from framing._errors import PeerError
from framing._ledger import Ledger
from framing._pings import PingTable
from framing._refusals import MAX_REFUSALS, REFUSAL_INTERVAL, RefusalRate
from framing.wire import PREAMBLE

from ._calltable import CallTable
from ._clientstreams import ClientObjectStreams
from ._connection import RpcConnection, Shell
from ._dispatch import Control
from ._errors import (
    ClosedBeforePreamble,
    ConnectionLost,
    ConnectionOverBudget,
    MessageRefused,
    RuleBroken,
    ServerSilent,
)
from ._exports import DEFAULT_MAX_IMPORTS, ExportTable, References
from ._incoming import DEFAULT_MAX_RUNNING, IncomingCall, IncomingCalls, failure, refusalCode, withoutDetails
from ._interfaces import ExportedReference
from ._streams import FlowMessage, ReceiveWindow
from ._streamtable import ReceivedStream, SentStream
from ._wire import ANSWER, NO_ANSWER, OPEN_TYPE, Message

Waiter = TypeVar("Waiter")

Settled = tuple[Any, Any, "BaseException | None"]
"""A call settled by the server's bytes or the session's end: C{(waiter, result, error)}."""

_CALL_OPENING = open_token(OPEN_TYPE)
"""The OPEN token every RPC message starts with (L{framing.rpc._wire.MessageSlicer}'s C{record_name})."""

UNSENT = "unsent"
"""
The ledger account (L{ClientSession.ledger}) of the bytes an I/O layer holds
for the server and has not handed to the kernel yet: the blocking client's
outbox, the asyncio transport's write buffer.  Mostly the replies the
server's own messages ask for (PONGs, the FAILs of its calls), so a server
that sends and reads nothing grows it; the I/O layer stops reading while
the ledger is over its budget, or, when it cannot wait (the blocking
client's readers are its callers), ends the session (L{ClientSession.overBudget}).
"""


class SessionExtension(Protocol):
    """
    A layer riding on a session's connection beside RPC (the bulk streams
    of L{framing.bulk._streams}): its types, what it adds to this side's
    messages, the top-level objects it takes, its own output and its end.
    """

    def install(self, registry: Registry, encoder: Encoder) -> None:
        """Add its types to the connection's C{registry}; C{encoder} is the connection's."""

    def messageEncoded(self, data: bytes, requestId: int = NO_ANSWER) -> bytes:
        """
        A message of this side was encoded whole as C{data} (the CALL of
        C{requestId}, if it waits for an answer): the bytes to send for it
        (with what it adds).
        """

    def callFailed(self, requestId: int, cancelled: bool) -> None:
        """Call C{requestId} of this side failed (C{cancelled}: its caller gave up on it)."""

    def messageDropped(self) -> None:
        """The message being encoded failed: undo what encoding it did."""

    controlTypes: tuple[type, ...]
    """The types of the top-level objects it takes (L{received}), none of them an RPC message."""

    def received(self, obj: Any) -> object:
        """A top-level object of one of its L{controlTypes} (what it returns is dropped)."""

    def takeSettled(self) -> list[Settled]:
        """What the extension settled since last asked (waiters of its own, as calls' are); once."""

    def piecesToSend(self) -> list[bytes]:
        """Its bytes waiting to be sent, in order, as pieces (a data frame's body by reference, not joined); once."""

    def ended(self, reason: BaseException) -> list[Settled]:
        """The session ended with C{reason}: what that settles."""


class _Broken:
    """The end of what one read decoded when the stream broke: the L{ProtocolError}, routed after the rest."""

    __slots__ = ("error",)

    def __init__(self, error: ProtocolError) -> None:
        self.error = error


class _Probed:
    """The PONG of a probe came: its streams, judged where it stands among a read's objects."""

    __slots__ = ("producers",)

    def __init__(self, producers: list[SentStream]) -> None:
        self.producers = producers


UNSCOPED: Any = object()
"""L{ClientSession.call}'s C{sent} for a call made in no scope: its CALL carries C{kwargs or None}."""


def _ignored(requestId: int, what: str) -> None:
    """The late answer of a call given up on (L{Shell.ignored}): nothing to settle."""


class SessionState(enum.Enum):
    """Where a client session stands."""

    WANT_PREAMBLE = "want-preamble"
    """Connected; the server's preamble has not all come yet (calls may be sent already)."""
    OPEN = "open"
    """Calls are made and answered."""
    GOING_AWAY = "going-away"
    """The server sent GOAWAY: the calls in flight are answered, no new call is sent."""
    ENDED = "ended"
    """The connection is over (L{ClientSession.failure} says why): every call failed, none is sent."""


# (module names: one global lookup each on the per-call paths, rather than an attribute of the enum class)
_WANT_PREAMBLE, _OPEN, _GOING_AWAY, _ENDED = (
    SessionState.WANT_PREAMBLE,
    SessionState.OPEN,
    SessionState.GOING_AWAY,
    SessionState.ENDED,
)


class ClientSession(Generic[Waiter]):
    """
    The client's side of one RPC connection (see the module docstring).

    @ivar peer: the server's address as errors name it (C{"host:port"}).
    @ivar state: the L{SessionState}.
    @ivar failure: why the session ended, once it has (C{None} before).
    @ivar pingSent: a PING was sent and nothing was heard since.
    @ivar pings: this side's PINGs waiting for their PONGs (a L{framing._pings.PingTable}).
    @ivar references: the L{framing.rpc._exports.References}, or C{None}
        without C{makeReference}.
    @ivar incomingCalls: the server's calls to this side's exports; those in
        its C{waiting} are the I/O layer's to run and settle (L{answerCall}).
    @ivar rpc: the L{framing.rpc._connection.RpcConnection} it is built on.
    @ivar pending: the calls waiting for their answers (C{rpc.calls}).
    @ivar ledger: the L{framing._ledger.Ledger} of what this side holds for
        the server, against C{Limits.max_connection_memory}; its I/O layer
        sets C{on_full}; closed when the session ends.
    @ivar drain: the server's GOAWAY (C{rpc.drain}).
    @ivar closing: the session ended itself after the server's GOAWAY
        (L{closeIfDrained}): its output is still to be sent.
    @ivar farewell: once the session ended for a rule the server broke, the
        ERROR saying why, for the I/O layer to send if it goes at once
        (wire format 12.4); C{b""} otherwise.
    @ivar output: the bytes due to the server, in order (L{dataToSend} takes them).

    Design: docs/design/rpc-session.md
    """

    def __init__(
        self,
        peer: str,
        *,
        limits: Limits | None = None,
        registry: Registry | None = None,
        maxPending: int | None = None,
        makeReference: Callable[[int, tuple[str, ...]], Any] | None = None,
        owner: Any = None,
        released: Callable[[], None] | None = None,
        maxImports: int | None = DEFAULT_MAX_IMPORTS,
        maxRunning: int | None = DEFAULT_MAX_RUNNING,
        extension: SessionExtension | None = None,
        makeStream: Callable[[ClientObjectStreams, int, ReceiveWindow], ReceivedStream] | None = None,
        streamDropped: Callable[[], None] | None = None,
        streamSending: Callable[[SentStream], None] | None = None,
        maxRefusals: int | None = MAX_REFUSALS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """
        @param peer: see L{peer}.
        @param limits: what this side accepts from the server.
        @param registry: the application's types beyond the built-in ones (not changed).
        @param maxPending: most calls that may wait at once (L{framing.rpc._errors.TooManyPendingCalls} past it).
        @param makeReference: C{makeReference(exportId, interfaceNames)}, the
            client's reference to an object the server exports; C{None}: no references either way.
        @param owner: the client's connection (its references' C{connection}).
        @param released: told when a reference died with a RELEASE due; it must neither block nor encode.
        @param maxImports: most of the server's references held at once.
        @param maxRunning: most of the server's calls waiting or running here at once.
        @param extension: a layer beside RPC on the connection (bulk streams), or C{None}.
        @param makeStream: the client's reader of a stream of objects the
            server sends; C{None}: a bare L{ReceivedStream}.
        @param streamDropped: told when a reader was dropped unfinished; as C{released}.
        @param streamSending: told when a stream this side sends in a call's
            arguments goes live and when it is over; C{None}: such streams are refused.
        @param maxRefusals: refusals within 10 s past which the session ends
            (L{framing._refusals.TooManyRefusals}); C{None}: never.
        @param clock: the seconds the refusal rate counts by (C{time.monotonic}).
        """
        self.peer = peer
        self.state = _WANT_PREAMBLE
        self.failure: BaseException | None = None
        self.pingSent = False
        # The connection's registry (the RPC messages, the references), its call table, its drain and its dispatch,
        # built as the Twisted broker's are.  Each pending call's waiter is kept with the method's name, for the
        # errors that name the call; its extension is told of each call failed by the server's word or given up
        # (a stream the CALL carried).
        self.rpc: RpcConnection[tuple[Waiter, str]] = RpcConnection(
            registry,
            maxPending=maxPending,
            nameOf=itemgetter(1),
            callFailed=None if extension is None else extension.callFailed,
        )
        connectionRegistry = self.rpc.registry
        self.references: References | None = None
        exports = ExportTable()
        self._died: list[Any] = []
        if makeReference is not None:
            exports = self.references = References(owner, makeReference, maxImports=maxImports, released=released)
            self.rpc.carryReferences(exports, ExportedReference)
            self._died = exports.died
        self.incomingCalls = IncomingCalls(exports, maxRunning)
        self._encoder = Encoder(connectionRegistry)
        # What is due to the server, in order (see the class docstring).
        self.output: list[bytes] = []
        # Object streams the server sends: their messages are top-level objects of their own, so a call
        # without a stream never meets this part (no hook per call); its CREDITs go into the output.
        self.objectStreams = ClientObjectStreams(self.output, makeStream, died=streamDropped, sending=streamSending)
        self.objectStreams.install(connectionRegistry, self._encoder)
        self._streamsDropped = self.objectStreams.dropped
        self.extension = extension
        if extension is not None:
            extension.install(connectionRegistry, self._encoder)
        self._decoder = Decoder(limits, connectionRegistry)
        self._feed: Callable[[bytes], list[Any]] = self._decoder.feed  # (bound once: one lookup per read)
        self.closing = False
        self.farewell = b""
        # GOAWAY's state and the rule of when the session closes after it (see drained).
        self.drain = self.rpc.drain
        # What this side holds for the server (its I/O layer's outbox, automatic replies, stream items):
        # one budget, whose owner (the I/O layer) sets on_full and stops reading past it.
        self.ledger = Ledger(self._decoder.limits.max_connection_memory)
        self.objectStreams.ledger = self.incomingCalls.ledger = self.ledger
        # What the decoder holds between reads too: an answer that would not fit is refused, never half held.
        self._decoder.charge_to(self.ledger)
        self.incomingCalls.registry = connectionRegistry
        self.pending: CallTable[tuple[Waiter, str]] = self.rpc.calls
        self._preambleLeft = len(PREAMBLE)
        # A whole CALL of built-in arguments in one C call (the compiled core; None: the pure one), as
        # Encoder.tokens writes a Message, less its lookups: the session's registry writes Messages so.
        self._encodeParts = _core.parts_encoder()
        self._maxDepth = self._encoder.limits.max_depth
        # The refusals the server earned (see the module docstring).
        self.refusals = RefusalRate(maxRefusals, REFUSAL_INTERVAL, clock)
        # This side's PINGs in flight, numbered from 1 as the Twisted connection's are: a probe's waits with the
        # streams it asks about (_probe), a silence PING with None (ping).
        self.pings: PingTable[list[SentStream] | None] = PingTable()
        # What the read being routed settles: the handlers add to it; receive returns it and starts a new one.
        self._settled: list[Settled] = []
        # Something is due after each read's objects: the extension's, or (the server sent GOAWAY) the drain check.
        self._readTail = extension is not None
        # Every RPC connection's routing (framing.rpc._connection), the server's calls to this session's handlers
        # and the connection's rules reporting to it (its "handlers" section); besides the extension's objects, its
        # controls take the object streams' messages and receive's own marks.
        controls: dict[type, Control] = {
            FlowMessage: self._flowReceived,
            _Broken: self._streamBroken,
            _Probed: self._probed,
        }
        if extension is not None:
            controls.update(dict.fromkeys(extension.controlTypes, extension.received))
        shell: Shell[tuple[Waiter, str]] = Shell(
            callReceived=self.callReceived,
            cancelReceived=self.cancelReceived,
            callRefused=self.callRefused,
            answered=self._answered,
            failed=self._callFailed,
            ignored=_ignored,
            goneAway=self._goneAway,
            refused=self.refused,
            ruleBroken=self.ruleBroken,
            peerName=self._peerName,
        )
        self._handlers = self.rpc.route(shell, controls).messages

    # -- what the I/O layer asks ---------------------------------------------

    def __len__(self) -> int:
        """How many calls wait for their answer."""
        return len(self.pending)

    @property
    def ready(self) -> bool:
        """The server's preamble came (or the session ended: then L{failure} says why)."""
        return self.state is not _WANT_PREAMBLE

    @property
    def acceptsCalls(self) -> bool:
        """Whether a new call may be made: no GOAWAY from the server, and the session not ended."""
        return self.state is _OPEN or self.state is _WANT_PREAMBLE

    @property
    def drained(self) -> bool:
        """
        The server sent GOAWAY and nothing is in flight either way: no call
        of this side waits for its answer, none of the server's waits or
        runs here, no object stream is open in either direction.  The
        session then ends itself (L{closeIfDrained}), and its I/O layer
        sends what is due and closes the connection (C{docs/wire-format.md}
        12.1: the receiver of GOAWAY closes as soon as it is idle, so no CALL
        is on the wire at the close): the rule of L{framing.rpc._drain.Drain.closes},
        which the Twisted broker's drain (L{protocols.rpc._drain}) asks too.
        """
        return self.state is _GOING_AWAY and self.drain.closes(
            len(self.pending), self.incomingCalls.runningCount, self.objectStreams.streamCount
        )

    def closeIfDrained(self) -> list[Settled]:
        """
        If the session L{drained}, end it (L{closing}): what is in the
        output stays there, for the I/O layer to send before it closes the
        connection, as it does on any end.  The session asks itself after
        each read and each answer to the server's calls; an I/O layer asks
        when a stream it sends ended.

        @return: what the end settled (as L{end}).
        """
        if not self.drained:
            return []
        output = self.output[:]
        settled = self.end(ConnectionLost(f"{self.peer} is going away (GOAWAY), nothing was in flight: closed here"))
        self.closing = True
        self.output.extend(output)
        return settled

    def peerClosed(self) -> ConnectionLost:
        """
        Why the session ends when the server closed the connection cleanly
        (for the I/O layer to L{end} it with): L{ClosedBeforePreamble} if not
        a byte came from it (a TLS server reached without TLS), else
        L{ConnectionLost}.
        """
        if self.state is _WANT_PREAMBLE and self._preambleLeft == len(PREAMBLE):
            return ClosedBeforePreamble(self.peer)
        return ConnectionLost(f"{self.peer} closed the connection")

    def start(self) -> bytes:
        """The bytes to send first on the connection: the preamble."""
        return PREAMBLE

    def dataToSend(self) -> bytes:
        """What is due to the server (PONGs, answers to its calls, RELEASEs, a PING); once."""
        output = self.output
        if self._died or self._streamsDropped or self.extension is not None:
            self._gather()
        if not output:
            return b""
        data = b"".join(output)
        output.clear()
        return data

    def piecesToSend(self) -> list[bytes]:
        """
        L{dataToSend} as the pieces to write in order, not joined: for a
        writer with scatter-gather (C{sendmsg}), which spares a copy of
        each bulk data frame's body; once.
        """
        if self._died or self._streamsDropped or self.extension is not None:
            self._gather()
        output = self.output
        if not output:
            return []
        pieces = output[:]  # (the list itself is shared with what appends to it)
        output.clear()
        return pieces

    def _gather(self) -> None:
        """Into L{output}: the RELEASEs of references that died, CANCELs of streams dropped, the extension's bytes."""
        if self._died:
            self._queueReleases()
        if self._streamsDropped:
            self.objectStreams.cancelDropped()
        extension = self.extension
        if extension is not None and self.state is not _ENDED:
            self.output.extend(extension.piecesToSend())

    # -- calling -------------------------------------------------------------

    def call(
        self,
        waiter: Waiter,
        target: int,
        name: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        sent: Any = UNSCOPED,
    ) -> tuple[int, bytes]:
        """
        Make a call to method C{name} of export C{target}; C{waiter} is
        settled with its answer (L{receive}, L{end}).  Made in a scope (a
        deadline, metadata), the CALL carries C{sent} in its keyword
        arguments' place: L{framing.rpc._context.sentWith}'s, which also
        says the time left, which the I/O layer keeps, giving up on the call
        (L{cancel}) when it passes; in none (L{UNSCOPED}), C{kwargs or None}.

        @return: its request id, and the bytes of its CALL to send whole.
        @raise framing.rpc.DeadReferenceError: the session ended, or the server is going away (L{GoingAway}).
        @raise TypeError: C{name} is no str.
        @raise framing.rpc._errors.TooManyPendingCalls: too many calls wait already.
        @raise framing.EncodingError: an argument cannot be sent (nothing is kept).
        """
        table = self.pending
        if not table:
            # The server's silence counts only while calls wait: from now, when none did.
            self.pingSent = False
        if sent is UNSCOPED:
            sent = kwargs or None  # (sentWith's rule for a call in no scope, in line: the per-call path)
        # (refused once GOAWAY came or the session ended; its request id is fields[1], read where needed)
        fields = table.call((waiter, name), target, name, sent, args)
        encodeParts = self._encodeParts
        try:
            # Arguments of built-in types alone: the whole CALL in one C call, the bytes Encoder.encode writes.
            data = None if encodeParts is None else encodeParts(fields, self._maxDepth, _CALL_OPENING)
            if data is None:
                # (the pure core, or not built-in types alone: a stream argument among them perhaps, live once
                # encoded whole)
                data = self._encoder.encode(Message(fields))
                if self.objectStreams.announcing:
                    data += self._probe(self.objectStreams.committed())
        except BaseException:
            table.take(fields[1])
            self.objectStreams.rolledBack()
            if self.extension is not None:
                self.extension.messageDropped()
            raise
        if self.extension is not None:
            data = self.extension.messageEncoded(data, fields[1])
        return fields[1], data

    def callOnly(
        self,
        target: int,
        name: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        sent: Any = UNSCOPED,
    ) -> bytes:
        """
        The bytes of a CALL to method C{name} of export C{target} for no
        answer, carrying C{sent} as for L{call} (raises as L{call}).
        """
        if sent is UNSCOPED:
            sent = kwargs or None
        message = Message(self.pending.callOnly(target, name, sent, args))
        extension = self.extension
        if extension is None:
            return self._encode(message)
        try:
            data = self._encode(message)
        except BaseException:
            extension.messageDropped()
            raise
        return extension.messageEncoded(data)

    def abandon(self, requestId: int) -> Waiter | None:
        """Forget call C{requestId}, whose CALL was never sent (sending failed); its waiter, if it was pending."""
        entry = self.pending.take(requestId)
        return None if entry is None else entry[0]

    def cancel(self, requestId: int) -> bytes:
        """
        Give up on call C{requestId} (its caller stopped waiting: cancelled,
        timed out): the bytes of the CANCEL to send, its late answer then
        ignored (the extension told: L{CallTable.giveUp}); C{b""} if it is no
        longer pending (its answer came meanwhile) or the session ended.
        """
        given = self.pending.giveUp(requestId)  # (once the session ended, no call is pending)
        if given is None or given[1] is None:
            return b""
        data = self._encode(given[1])
        extension = self.extension
        if extension is not None:
            data += b"".join(extension.piecesToSend())
        return data

    def ping(self) -> bytes:
        """
        The bytes of a PING (a live server answers it with a PONG even while
        its method runs), numbered as all of this side's PINGs are, from 1.
        """
        self.pingSent = True
        return self.pings.send(None)

    def judgeSilence(self, quiet: float, silenceTimeout: float) -> list[Settled]:
        """
        The server has said nothing for C{quiet} seconds while calls waited:
        past half of C{silenceTimeout}, a PING waits in the output (once per
        silence); past all of it, the session ends with L{ServerSilent}.

        @return: the calls settled (all of them if the session ended).
        """
        if self.state is _ENDED:
            return []
        if quiet >= silenceTimeout:
            return self.end(ServerSilent(f"nothing from {self.peer} for {quiet:.1f} s (PING unanswered)"))
        if quiet >= silenceTimeout / 2 and not self.pingSent:
            self.output.append(self.ping())
        return []

    def _encode(self, message: Message) -> bytes:
        encoder = self._encoder
        data = encoder.tokens(message)
        if data is not None:
            return data
        try:
            data = encoder.encode(message)
        except BaseException:
            self.objectStreams.rolledBack()
            raise
        if self.objectStreams.announcing:
            data += self._probe(self.objectStreams.committed())
        return data

    def _probe(self, producers: list[SentStream]) -> bytes:
        """
        The PING that follows a message announcing C{producers}
        (C{docs/wire-format.md} 14.6): when its PONG is back, those the
        server gave no credit were not taken, and are closed
        (L{framing.rpc._streamtable.ObjectStreamTable.probed}).  Its
        bytes go right after the message's own (before what an extension
        adds to them).
        """
        return self.pings.send(producers)

    # -- receiving -----------------------------------------------------------

    def receive(self, data: bytes) -> list[Settled]:
        """
        Bytes from the server: the calls they settle, in order (see the
        module docstring); replies, and what else became due (the RELEASEs
        of references that died, the extension's bytes), wait in L{output}
        for L{dataToSend}.  A broken stream ends the session (L{failure})
        after what came before the break.

        Each top-level object, in order, goes where every RPC endpoint's
        routing sends it (L{framing.rpc._dispatch.Dispatch}, to the
        handlers below); nothing once the session ended.  The commonest
        message, an ANSWER to a pending call, is taken in line (what
        L{answerReceived} does with it): one type test, one tag test and
        one dict pop; any other message is one index more and its handler.
        """
        if self.state is not _OPEN:
            if self.state is _ENDED:
                return []
            if self._preambleLeft:
                # The server's preamble, still coming: the session is open once it all came.  (The decoder checks
                # it in the feed below: a wrong one breaks the stream there, which ends the session.)
                self._preambleLeft = max(self._preambleLeft - len(data), 0)
                if not self._preambleLeft:
                    self.state = _OPEN
        self.pingSent = False
        settled = self._settled
        try:
            feed = self._feed  # (read, then called: a method-style call on an instance attribute is never specialised)
            received = feed(data)
        except ProtocolError as error:
            # What came before the break, then the break itself (_streamBroken), routed as the rest.
            received = [*(getattr(error, "results", None) or ()), _Broken(error)]
        if self._decoder.control_events:
            self._controlEvents(received)
        pending = self.pending
        for obj in received:
            if type(obj) is Message:
                if obj[0] == ANSWER:
                    entry = pending.pop(obj[1], None)  # (answerReceived, in line; CallTable.take)
                    if entry is not None:
                        settled.append((entry[0], obj[2], None))
                        continue
                if self.state is _ENDED:
                    break
                self._handlers[obj[0]](obj)
            elif self.state is _ENDED:
                break
            else:
                self.rpc.dispatch.received(obj)
        self._settled = []
        if self._readTail:
            # (after the read's objects: once the server sent GOAWAY the session ends when nothing is in flight;
            # what the extension settled and its bytes)
            if self.state is _GOING_AWAY:
                settled.extend(self.closeIfDrained())
            extension = self.extension
            if extension is not None:
                settled.extend(extension.takeSettled())
            self._gather()
        elif self._died or self._streamsDropped:
            self._gather()
        return settled

    def _controlEvents(self, received: list[Any]) -> None:
        """
        The PINGs and PONGs a read brought: a PONG for each PING, into the
        output before the replies to the read's objects (as the Twisted
        connection writes them); each PONG of a probe (L{_probe}) judged
        after those objects, by a L{_Probed} put after them in C{received}
        (a CREDIT that came before the PONG counts).
        """
        pongs, answered, _ = self.pings.control_events(self._decoder.control_events)
        self.output.extend(pongs)
        for producers in answered:
            if producers is not None:
                received.append(_Probed(producers))

    # -- handlers and reactions (framing.rpc._connection.Shell), of the read being received ----

    def callReceived(self, message: Message) -> None:
        """The server's CALL: admitted (waiting in C{incomingCalls} for the I/O layer), or refused (L{_refuseCall})."""
        refused = self.incomingCalls.received(message)
        if refused is not None:
            self._refuseCall(message[1], refused)

    def _answered(self, entry: tuple[Waiter, str], result: Any) -> None:
        """A call answered (L{Shell.answered}: an ANSWER not taken in line by L{receive}): settled with C{result}."""
        self._settled.append((entry[0], result, None))

    def _callFailed(self, entry: tuple[Waiter, str], error: BaseException) -> None:
        """A call failed (L{Shell.failed}: a FAIL, a refused answer; the extension told by L{CallTable}): settled."""
        self._settled.append((entry[0], None, error))

    def cancelReceived(self, message: Message) -> None:
        """A CANCEL: the server gave up on its call (L{framing.rpc._incoming.IncomingCalls.cancelled})."""
        self.incomingCalls.cancelled(message[1])

    def _goneAway(self) -> None:
        """
        The server's GOAWAY (L{Shell.goneAway}; its calls stopped by the
        connection): after this read and each later one the session ends if
        it L{drained}.
        """
        self.state = _GOING_AWAY
        self._readTail = True

    def callRefused(self, refused: MessageRefused) -> None:
        """The server's CALL, refused while decoding it after its id: L{_refuseCall}."""
        self._refuseCall(refused.requestId, refused.violation)

    def refused(self, violation: Violation) -> None:
        """Any other refusal (an object this client does not take, a refused CANCEL, RELEASE or GOAWAY): counted."""
        self._refused()

    def ruleBroken(self, error: RuleBroken, received: Any) -> None:
        """The server broke a rule that ends the connection (C{received} is what broke it): the session ends."""
        self._settled.extend(self.end(error))

    def _flowReceived(self, message: FlowMessage) -> None:
        """A message of an object stream; one breaking the stream's rules ends the session."""
        try:
            self.objectStreams.received(message, self._settled)
        except ProtocolError as error:
            self._settled.extend(self.end(error))

    def _streamBroken(self, broken: _Broken) -> None:
        """The stream broke after what came before in its read: the session ends."""
        self._settled.extend(self.end(broken.error))

    def _probed(self, probed: _Probed) -> None:
        """A probe's PONG came: its streams without credit are closed (L{ClientObjectStreams.probeAnswered})."""
        self.objectStreams.probeAnswered(probed.producers, self._settled)

    def _peerName(self) -> str:
        """The server's address, as the errors naming a call say it (L{CallTable.failed}, L{CallTable.refused})."""
        return self.peer

    def _refuseCall(self, requestId: int, error: Exception) -> None:
        """
        The server's call C{requestId} was refused with C{error}
        (L{framing.rpc._incoming.CallAdmission.admit}, or its decoding): a
        broken rule (L{framing.rpc._errors.DuplicateRequestId}) ends the
        session; else its FAIL goes in the output, unless it asked for no
        answer, and it counts as a refusal (L{_refused}) when
        L{framing.rpc._incoming.refusalCode} names one.
        """
        if isinstance(error, RuleBroken):
            self._settled.extend(self.end(error))
            return
        if (refusalCode(error) is not None and self._refused()) or requestId == NO_ANSWER:
            return
        self.output.append(self._encode(failure(requestId, error)))

    def _refused(self) -> bool:
        """Count one refusal; past the rate, end the session (L{framing._refusals.TooManyRefusals}) and say so."""
        refusals = self.refusals
        if not refusals.note():
            return False
        self._settled.extend(self.end(refusals.too_many()))
        return True

    # -- references and the server's calls -----------------------------------

    def answerCall(self, call: IncomingCall, result: Any = None, error: BaseException | None = None) -> list[Settled]:
        """
        The server's C{call} (taken from C{incomingCalls.waiting}) ended with
        C{result}, or C{error}: its ANSWER or FAIL waits in the output (none
        for a call for no answer or one cancelled, or once the session ended).
        A result that cannot be sent is a FAIL saying why.

        @return: what ending the session settled, if this call was the last
            thing in flight after the server's GOAWAY (L{closeIfDrained}).
        """
        message = self.incomingCalls.settle(call, result, error)
        if message is None or self.state is _ENDED:
            return self.closeIfDrained()
        try:
            data = self._encode(message)
        except Exception as encodingError:
            if isinstance(encodingError, Violation):
                encodingError.where = "result" + encodingError.where
            failed = failure(call.requestId, encodingError)
            try:
                data = self._encode(failed)
            except Exception:
                data = self._encode(withoutDetails(failed))
        self.output.append(data)
        return self.closeIfDrained()

    def expireCall(self, call: IncomingCall) -> list[Settled]:
        """
        The deadline of the server's C{call} (taken from
        C{incomingCalls.waiting}) passed while it runs, by the I/O layer's
        clock: its FAIL C{DeadlineExceeded} waits in the output, its work
        is stopped if the I/O layer can (L{IncomingCall.stop}), and its own
        end sends nothing (L{framing.rpc._incoming.IncomingCalls.expired};
        nothing if it was answered or cancelled, or the session ended).

        @return: what ending the session settled, if this call was the last
            thing in flight after the server's GOAWAY (L{closeIfDrained}).
        """
        message = self.incomingCalls.expired(call)
        if message is not None and self.state is not _ENDED:
            self.output.append(self._encode(message))
        return self.closeIfDrained()

    def release(self, reference: Any) -> bytes:
        """The bytes of C{reference}'s RELEASE, released now by its holder; C{b""} if none is due."""
        references = self.references
        if references is None or self.state is _ENDED:
            return b""
        message = references.release(reference)
        return b"" if message is None else self._encode(message)

    def _queueReleases(self) -> None:
        """The RELEASEs of the references that died, into the output."""
        references = self.references
        if references is not None:
            messages = references.releases()
            if self.state is not _ENDED:
                self.output.extend(self._encode(message) for message in messages)

    # -- ending --------------------------------------------------------------

    def overBudget(self) -> list[Settled]:
        """
        The ledger went over its budget and the I/O layer will not wait
        for it to drain: end the session with L{ConnectionOverBudget},
        naming what was held by account; the calls settled (as L{end}).
        """
        if self.state is _ENDED:
            return []
        ledger = self.ledger
        held = ", ".join(f"{account} {count}" for account, count in sorted(ledger.accounts().items()) if count)
        return self.end(
            ConnectionOverBudget(
                f"this side held {ledger.held} bytes for {self.peer} ({held}), past the connection's budget of "
                f"{ledger.budget} bytes (Limits.max_connection_memory): the server sends more than it reads"
            )
        )

    def end(self, reason: BaseException) -> list[Settled]:
        """
        End the session with C{reason} (once; later calls settle nothing):
        every pending call is settled with C{reason}, naming the call.
        Nothing is sent after, not what was due, but for a rule the server
        broke (a L{ProtocolError} this side found, not the server's own
        ERROR) the ERROR saying why, L{farewell}: the bytes the Twisted
        connection sends then (L{framing._encoder.error_token}).
        """
        if self.state is _ENDED:
            return []
        self.state = _ENDED
        self.failure = reason
        # (its handlers are this session's methods: forgotten, so that nothing refers back to it)
        self.rpc.end()
        self._handlers = ()
        self.output.clear()
        if isinstance(reason, ProtocolError) and not isinstance(reason, PeerError):
            self.farewell = error_token(reason)
        self.ledger.close()
        self.incomingCalls.end()
        if self.references is not None:
            self.references.end()
        settled: list[Settled] = [(entry[0], None, error) for entry, error in self.pending.lost(reason, self._peerName)]
        self.pings.clear()  # (a probe's streams end with the table's, below)
        settled.extend(self.objectStreams.ended(reason))
        if self.extension is not None:
            settled.extend(self.extension.ended(reason))
        return settled
