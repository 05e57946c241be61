# -*- test-case-name: tests.protocols.test_blocking,tests.protocols.test_blocking_typed -*-
"""A blocking RPC client without Twisted: one socket, calls that block and return, safe from several threads.

    from framing.rpc._limits import CallLimits
    from protocols.blocking import connect
    from protocols.options import ClientOptions

    with connect("127.0.0.1:8760", options=ClientOptions(callLimits=CallLimits(callTimeout=10))) as connection:
        connection.root.callRemote("put", "greeting", "hello")
        assert connection.root.callRemote("get", "greeting") == "hello"

Importing it loads no Twisted.  The protocol is the sans-IO
L{framing.rpc._session.ClientSession}; this module reads, writes and waits.

Contract: a call returns its result or raises what the Twisted client's
Deferred fails with (L{RemoteError}, a registered type, L{framing.Violation},
L{framing.rpc.CallTimedOut}, L{DeadlineExceeded}, the reason the connection ended).
Threads share the connection and read in turn (no thread of its own), so
between calls nothing reads: the server's calls, PINGs and GOAWAY wait for
the next call or L{BlockingConnection.serve}.  Nothing is sent under the
connection's lock; what waits is charged to the ledger
(L{framing.rpc._session.UNSENT}).  References, callbacks, typed interfaces,
logins and TLS behave as on Twisted; object streams arrive as
L{BlockingStream} (this client sends none); bulk is
L{protocols.blockingbulk}'s.

Cost: one thread calling in turn pays no thread switch; a send is one
non-blocking system call; each timeout is noticed at most an eighth late.

Design: docs/design/clients-without-twisted.md
"""

from __future__ import annotations

import inspect
import select
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeGuard, cast, overload

from framing.rpc._addresses import AddressBook, Wait, attemptTimeout, retire
from framing.rpc._clientstreams import ClientObjectStreams
from framing.rpc._context import Scope, callBound, sentWith, timeUp
from framing.rpc._errors import (
    ConnectionLost,
    ConnectTimedOut,
    DeadlineExceeded,
    DeadReferenceError,
    ServerSilent,
)
from framing.rpc._incoming import IncomingCall
from framing.rpc._interception import CallInterception
from framing.rpc._interfaces import ExportedReference, TypedProxy
from framing.rpc._session import UNSENT, ClientSession, SessionExtension, Settled
from framing.rpc._signatures import RemoteMethod, registerReference
from framing.rpc._streams import ReceiveWindow
from framing.rpc._streamtable import ReceivedStream
from framing.rpc._wire import (
    ROOT_ID,
)
from protocols._clientcontext import answering, calling, itemBound, scopeReader
from protocols._clientcontext import callContext as callContext  # (re-exported: deadlines and metadata of calls)
from protocols._clientcontext import currentCall as currentCall  # (re-exported: what the server's call carried)
from protocols.options import CLIENT_DEFAULTS, ClientOptions

if TYPE_CHECKING:
    import ssl  # (loaded where TLS is used: a plain connection's start does not pay for it)

    # (The login machinery loads when a connection logs in or follows an object URL: a plain one never does.)
    from framing.login._urls import HintAttempts

__all__ = [
    "BlockingConnection",
    "BlockingFailover",
    "BlockingReference",
    "BlockingStream",
    "BlockingTypedReference",
    "callContext",
    "connect",
    "connectURL",
    "currentCall",
    "tlsContext",
]

_READ_SIZE = 256 * 1024
"""Bytes asked of one C{recv}: an answer of up to this size is read in one system call."""

_TIMEOUTS_CHANGED = object()
"""A connection's C{_tickBound} when its timeouts changed since its read timeout was last kept (no wait's bound)."""

_GATHER = 64
"""Pieces given to one C{sendmsg} at most (far below C{IOV_MAX}; a bulk frame is three)."""


def _size(pieces: Sequence[bytes | memoryview]) -> int:
    """The bytes C{pieces} hold in all (C{map}: no generator frame resumed per piece)."""
    return sum(map(len, pieces))


def _after(pieces: list[bytes | memoryview], count: int) -> list[bytes | memoryview]:
    """What is left of C{pieces} once their first C{count} bytes went: whole pieces dropped, a cut one as a view."""
    index = 0
    while index < len(pieces) and count >= len(pieces[index]):
        count -= len(pieces[index])
        index += 1
    left = pieces[index:]
    if count:
        left[0] = memoryview(left[0])[count:]
    return left


def _owned(pieces: list[bytes | memoryview]) -> list[bytes]:
    """
    C{pieces} to keep in the outbox: a cut one (a view, which holds its
    whole piece) copied, so that each holds only the bytes it has left,
    what the ledger is charged.  Cost: a copy of at most one piece.
    """
    return [piece if type(piece) is bytes else bytes(piece) for piece in pieces]


class _Waiter:
    """One call's answer, as the reading thread leaves it for the calling one."""

    # Defaults as class attributes, no __init__: making one (once per call) runs no Python function.  A call
    # stores done on its waiter at once all the same: the wait's first test then reads the instance's own
    # value, specialized; a value the instance lacks is read the generic way (CPython 3.11), ~170 instructions.
    done = False
    result: Any = None
    error: BaseException | None = None


def _timeval(seconds: float) -> bytes:
    """C{seconds} as the C{struct timeval} of SO_RCVTIMEO and SO_SNDTIMEO (0: no timeout)."""
    whole = int(seconds)
    return struct.pack("ll", whole, int((seconds - whole) * 1_000_000))


def parseAddress(address: str | tuple[str, int]) -> tuple[str, int]:
    """
    C{(host, port)} from C{"host:port"}, C{"[v6 address]:port"} or a C{(host, port)} tuple.

    @raise ValueError: something else (a Twisted endpoint description among them).
    """
    if isinstance(address, tuple):
        host, port = address
        return host, int(port)
    name, separator, digits = address.rpartition(":")
    if not separator or not name or not digits.isdigit() or "=" in address:
        raise ValueError(f"expected an address as 'host:port', got {address!r}")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    return name, int(digits)


class BlockingReference(ExportedReference):
    """
    An object the server exports, called from any thread.

    @ivar connection: the L{BlockingConnection} it is called on.
    """

    connection: BlockingConnection

    def callRemote(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """
        Call remote method C{name} and block until its answer: its result, or
        its error raised (see the module docstring for which).
        """
        return self.connection.call(self.exportId, name, args, kwargs)

    def callRemoteOnly(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Call remote method C{name} for no answer: sent, and nothing waits (its failure is logged by the server)."""
        self.connection.callOnly(self.exportId, name, args, kwargs)


class BlockingTypedReference(TypedProxy):
    """
    A L{BlockingReference} seen through a remote interface, as
    L{BlockingReference.typed} makes it: each of the interface's methods is
    a method here, which checks its arguments as the server will (a refused
    one raises the L{framing.Violation} here, C{where} naming it, and
    nothing is sent), calls and blocks, and checks the result against the
    result constraint (a refused result raises the L{framing.Violation}, at
    C{"result..."}).  A method the interface lacks is an C{AttributeError};
    through L{callRemote}, a L{NoSuchMethod}.  The checks and the attribute
    lookup are L{framing.rpc._interfaces.TypedProxy}'s (shared with the
    asyncio client); this class only blocks.

    @ivar remoteReference: the reference called.
    @ivar remoteInterface: the interface.
    """

    remoteReference: BlockingReference

    def _typedMethod(self, declared: RemoteMethod, answered: Callable[[Any], Any] | None) -> Callable[..., Any]:
        """The proxy's method for C{declared}: check, call and block, check the result."""
        name, check, reference = declared.name, declared.checkArguments, self.remoteReference

        def call(*args: Any, **kwargs: Any) -> Any:
            if check is not None:
                check(args, kwargs)
            result = reference.callRemote(name, *args, **kwargs)
            return result if answered is None else answered(result)

        call.__name__ = call.__qualname__ = name
        return call


registerReference(BlockingReference, BlockingTypedReference)


class BlockingStream(ReceivedStream):
    """
    A stream of objects the server sent in a result, read as a plain
    iterator (C{for item in connection.root.callRemote("count", 10)}): each
    C{next} takes an item held, or reads the socket on this thread (as a
    call waits for its answer) until one comes; credit goes back to the
    server as items are taken.  L{close} (or leaving a C{with} block, or
    dropping the stream unfinished, as breaking out of a C{for} loop over
    it does) sends CANCEL.  The stream's end is C{StopIteration}; the
    producer's error, a refused item (typed streams) or the connection's
    end is raised after the items that came before it.

    @ivar connection: the L{BlockingConnection} it came on.
    """

    connection: BlockingConnection

    def __iter__(self) -> BlockingStream:
        return self

    def __next__(self) -> Any:
        return self.connection.nextItem(self)

    def close(self) -> None:
        """Stop reading: the items held are dropped, the server's producer is cancelled (nothing if it is over)."""
        self.connection.cancelStream(self)

    def __enter__(self) -> BlockingStream:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


class BlockingConnection:
    """
    One connection to a chunkwire RPC server, as L{connect} makes it; a
    context manager that closes it.  The protocol is its
    L{framing.rpc._session.ClientSession}'s; this class reads, writes and
    waits.

    @ivar root: the server's root object, a L{BlockingReference}.
    @ivar peer: C{"host:port"} of the server, for errors.
    """

    def __init__(
        self,
        sock: socket.socket,
        peer: str,
        options: ClientOptions = CLIENT_DEFAULTS,
        *,
        extension: SessionExtension | None = None,
    ) -> None:
        """
        Use C{sock}, a connected socket whose preamble is not sent yet (L{connect} makes it).

        @param options: the L{ClientOptions} (what this side accepts, its
            call limits and timeouts, the metadata of its calls, its interceptors).
        @param extension: a layer beside RPC on the connection (the bulk streams of L{protocols.blockingbulk}).
        """
        # With interceptors, every call takes the scoped path (_callInScope), which tells them.
        self._interception = CallInterception(options.interceptors) if options.interceptors else None
        callTimeout, silenceTimeout = options.callTimeout, options.silenceTimeout
        self.peer = peer
        self._callTimeout = callTimeout
        self._silenceTimeout = silenceTimeout
        self.root = BlockingReference(self, ROOT_ID)
        self._socket = sock
        # Bytes asked of one recv (a bulk connection asks more: protocols.blockingbulk).  On the instance, not
        # the class: CPython 3.11 specializes no read of a class attribute through an instance (~190 instructions
        # a read, a call's).
        self._readSize = _READ_SIZE
        # The scope of each call: the callContext block's, over the connection's metadata (ClientOptions.metadata).
        self._scopeNow = scopeReader(Scope(None, dict(options.metadata)) if options.metadata else None)
        hooks = (self._newReference, self._referenceDied, self._newStream, None)
        self._session: ClientSession[_Waiter] = options.session(peer, self, extension, hooks)
        # _lock guards the session and the fields below; _changed wakes the waiting callers.
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        # Callers waiting on _changed: with none (one thread calling), a reader wakes nobody, at no cost.
        self._sleepers = 0
        # One message at a time on the socket, whole.  Its holder never waits for _lock.  Nothing is sent
        # while _lock is held: what the session has to send while it is (replies, bulk frames a GRANT
        # allowed) waits in _outbox, in order, and the thread that put it there sends it once it released
        # _lock (_flushOutbox), or the next message's sender first.
        self._sendLock = threading.Lock()
        # Pieces, in order (a bulk frame's body by reference: sent with sendmsg, never joined), each holding
        # only its own bytes (a piece cut by a send is kept as a copy of its rest: _owned), as charged (UNSENT).
        self._outbox: list[bytes] = []
        self._reading = False
        self._shut = False
        # When the server's silence began, as the first read that timed out since it was last heard
        # saw it (that read waited a whole tick); None: heard since, or no call waited before this wait.
        # Kept so, a read that brings bytes costs no clock reading.
        self._quietSince: float | None = None
        # The socket stays in blocking mode: a read or a send is then one system call (a Python
        # timeout would add a poll() to each, and settimeout() an ioctl).  Timeouts come from
        # the kernel instead: SO_RCVTIMEO wakes the reader every tick (_keepTick) to look at the
        # call's deadline and the server's silence; SO_SNDTIMEO bounds a send the server never reads.
        sock.settimeout(None)
        self._tickFor: tuple[float | None, ...] | None = None
        self._tick = 0.0
        # The bound of the wait the tick was last kept for (_keepTick), or _TIMEOUTS_CHANGED: a read looks at
        # it alone, whose bound is the same object on every read of a wait (None for most), and the timeouts'
        # setters make it stale.
        self._tickBound: object = _TIMEOUTS_CHANGED
        if silenceTimeout is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _timeval(silenceTimeout))
        # Sends never block but where TLS must (its records go whole): what the socket does not take at once
        # is sent as it drains, within the call's time (_sendRest).
        self._dontWait = 0 if _isTLS(sock) else socket.MSG_DONTWAIT
        self._readWaits, self._sendWaits = _waits(sock)
        # Every charge to the ledger is made under _lock (the outbox's, _queue); past its budget the connection ends.
        self._session.ledger.on_full = self._ledgerFull

    @property
    def callTimeout(self) -> float | None:
        """Seconds a call waits for its answer, or C{None}; settable (the calls made after heed it)."""
        return self._callTimeout

    @callTimeout.setter
    def callTimeout(self, seconds: float | None) -> None:
        self._callTimeout = seconds
        self._tickBound = _TIMEOUTS_CHANGED

    @property
    def silenceTimeout(self) -> float | None:
        """
        Seconds the server may stay silent while a call waits (or reads
        nothing this side sends), or C{None}; settable (the next read and
        send heed it).
        """
        return self._silenceTimeout

    @silenceTimeout.setter
    def silenceTimeout(self, seconds: float | None) -> None:
        self._silenceTimeout = seconds
        self._tickBound = _TIMEOUTS_CHANGED
        # A send the server does not read is bounded by the same silence (0: no bound), as at connecting.
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _timeval(seconds or 0.0))

    # -- connecting ----------------------------------------------------------

    def start(self, timeout: float | None) -> None:
        """
        Send the preamble and wait, up to C{timeout} seconds, for the server's.

        @raise ServerSilent: no preamble in time (the connection is closed).
        @raise framing.ProtocolError: the server does not speak chunkwire.
        """
        session = self._session
        with self._sendLock:
            self._socket.sendall(session.start())
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while not session.ready:
                if deadline is not None and time.monotonic() >= deadline:
                    self._end(ServerSilent(f"no chunkwire preamble from {self.peer} within {timeout:g} s"))
                    break
                self._readTurn(timeout)
                if self._outbox:
                    self._sendAside(deadline)
            failure = session.failure
        if failure is not None:
            raise failure

    # -- calling -------------------------------------------------------------

    def call(self, target: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Call method C{name} of export C{target} and block until its answer (see L{BlockingReference.callRemote})."""
        scopeNow = self._scopeNow  # (read, then called: a method call's lookup would search the class first)
        scope = scopeNow()
        if scope is not None or self._interception is not None:
            return self._callInScope(target, name, args, kwargs, scope)
        waiter = _Waiter()
        waiter.done = False  # (on the instance: see _Waiter)
        # The lock, as on the rest of a call's path, is taken and released by hand: a with block costs twice
        # the instructions (two bound methods made, __exit__'s arguments packed).  Held for the session's
        # call: the reading thread's receive uses the same call table and encoder.
        lock = self._lock
        lock.acquire()
        try:
            session = self._session
            if not session.pending:
                # The server's silence counts only while calls wait: from now, when none did.
                self._quietSince = None
            requestId, data = session.call(waiter, target, name, args, kwargs)
        finally:
            lock.release()
        return self._exchange(data, waiter, requestId, name)

    def _callInScope(
        self, target: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], scope: Scope | None
    ) -> Any:
        """
        L{call} inside a L{callContext} (C{scope}), or on a connection with
        interceptors (C{framing/rpc/_interception.py}): these are told first (a
        refusal raises, nothing is sent), the metadata they add goes with
        the call, and they are told once of its end; an exception that is no
        C{Exception} (a C{KeyboardInterrupt}) is its caller giving up
        (L{framing.rpc._interception.CANCELLED}).
        """
        interception = self._interception
        if interception is None:
            return self._scopedCall(target, name, args, kwargs, scope)
        entry, sending = interception.startCall(name, self.peer, None, scope)
        try:
            result = self._scopedCall(target, name, args, kwargs, scope if sending is None else sending)
        except BaseException as error:
            interception.callSettled(entry, error, not isinstance(error, Exception))
            raise
        interception.callSettled(entry, None, False)
        return result

    def _scopedCall(
        self, target: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], scope: Scope | None
    ) -> Any:
        """
        A call whose CALL carries C{scope}'s time left and metadata, its wait
        ending at the deadline with L{DeadlineExceeded}.
        """
        deadline = None if scope is None else scope.deadline
        sent, _ = sentWith(name, kwargs, scope, time.monotonic)
        waiter = _Waiter()
        waiter.done = False  # (on the instance: see _Waiter)
        with self._lock:
            session = self._session
            if not session.pending:
                self._quietSince = None
            requestId, data = session.call(waiter, target, name, args, kwargs, sent)
        return self._exchange(data, waiter, requestId, name, deadline)

    def callOnly(self, target: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Call method C{name} of export C{target} for no answer (see L{BlockingReference.callRemoteOnly})."""
        sent, _ = sentWith(name, kwargs, self._scopeNow(), time.monotonic)
        with self._lock:
            data = self._session.callOnly(target, name, args, kwargs, sent)
        self._sendMessage(data)

    def _sendMessage(self, data: bytes) -> None:
        """Send one message's C{data} in one C{sendall}, after the outbox; a socket error ends the connection."""
        self._exchange(data, None, None, "")

    def _wait(self, waiter: _Waiter, requestId: int | None, name: str, callDeadline: float | None = None) -> Any:
        """Block until C{waiter}'s answer came (see L{_exchange}, which sends nothing here)."""
        return self._exchange(None, waiter, requestId, name, callDeadline)

    def _exchange(
        self,
        data: bytes | None,
        waiter: _Waiter | None,
        requestId: int | None,
        name: str,
        callDeadline: float | None = None,
    ) -> Any:
        """
        Send C{data} (one message: a call's CALL, or none), then block until
        C{waiter}'s answer came (none: return at once), reading the socket
        in turn with other callers, or until its time ran out: C{callTimeout},
        or the C{callDeadline} of its L{callContext} (on C{time.monotonic})
        if earlier.  The time counts from the call's start: a send the
        server does not take waits no longer than the call may (what it
        left unsent stays first in the outbox, and the call fails at its
        time as it would waiting for its answer).  A C{requestId} of
        C{None}: no call (a stream's end is waited for), no C{callTimeout}:
        the server's silence bounds the wait.  The two halves of a call in
        one function: its commonest path, one thread calling, is then this
        function's frame and L{_readTurn}'s.

        @raise ConnectionLost: (or the reason it ended) sending failed; the
            connection is ended, and the call C{requestId} forgotten.
        """
        lock = self._lock
        callTimeout = self._callTimeout if requestId is not None else None
        bound = None  # (set only when the bound is the deadline's: callBound's byDeadline)
        if callDeadline is None:
            # (callBound's rule without a deadline, in line: the commonest call pays no call for it)
            deadline = None if callTimeout is None else time.monotonic() + callTimeout
        else:
            now = time.monotonic()
            seconds, byDeadline = callBound(callDeadline - now, callTimeout)
            deadline = None if seconds is None else now + seconds
            if byDeadline:
                # A deadline is a bound of the reads too: a tick of an eighth of the time it has left now.
                bound = max(callDeadline - now, 0.0)
        if data is not None:
            # One message at a time on the socket, whole, after what the reading thread left in the outbox.
            # The send lock, not _lock: a send may wait (on a server that stops reading until this side
            # reads), and the reading thread must then still take _lock to go on reading.
            failed = None
            sendLock = self._sendLock
            try:
                sendLock.acquire()
                try:
                    if self._outbox:
                        change = self._sendQueued(self._takeOutbox(), data, deadline)
                    else:
                        # Never a blocking send: what the socket does not take at once is sent as it drains,
                        # within the call's time (_sendQueued); the commonest message goes whole in this call.
                        try:
                            left = data[self._socket.send(data, self._dontWait) :]
                        except BlockingIOError:
                            left = data
                        change = self._sendQueued([], left, deadline) if left else 0
                except OSError as error:
                    failed = self._sendFailed(error)
                finally:
                    sendLock.release()
            except BaseException:
                if requestId is not None:
                    with lock:
                        self._session.abandon(requestId)
                raise
            if failed is not None:
                # (ended here, the send lock released: its holder never waits for _lock)
                with lock:
                    self._end(failed)
                    if requestId is not None:
                        self._session.abandon(requestId)
                    raise self._session.failure  # type: ignore[misc]
            if change:
                with lock:
                    self._settleUnsent(change)
            if self._outbox:
                self._flushOutbox(deadline)
        if waiter is None:
            return None  # (a message for no answer, sent)
        cancel = None
        session = self._session
        # Held while deciding who reads (released by _readTurn during its recv, by _sleep while asleep).
        lock.acquire()  # (_changed's lock: taken directly)
        try:
            while not waiter.done:
                if deadline is not None and deadline <= time.monotonic():
                    cancel = session.cancel(requestId) if requestId is not None else b""
                    break
                if self._reading:
                    self._sleep(None if deadline is None else deadline - time.monotonic())
                    continue
                self._readTurn(bound)
                if self._outbox:
                    self._sendAside(deadline)
                if session.incomingCalls.waiting:
                    self._serveCalls(deadline)
        finally:
            lock.release()
        if cancel is not None:
            if cancel:
                # Queued, and sent only as far as the socket takes it now: the caller's time is up.
                self._sendCancel(cancel, time.monotonic())
            raise timeUp(name, bound is not None, callTimeout)
        if waiter.error is not None:
            raise waiter.error
        return waiter.result

    def _sendQueued(self, queued: list[bytes], data: bytes, deadline: float | None) -> int:
        """
        Send C{queued} (taken from the outbox, so charged to the ledger),
        then C{data} (C{_sendLock} held), until C{deadline}: what is left
        then goes back first in the outbox.  The change in the bytes the
        outbox holds, for the ledger (settled once the send lock is released).
        """
        left = self._sendRest([*queued, data] if data else queued, deadline)
        if left:
            self._outbox[0:0] = left  # (first: the rest of a message cut at the deadline)
        return _size(left) - _size(queued)

    def _sendRest(self, queued: list[bytes], deadline: float | None) -> list[bytes]:
        """
        Send C{queued}, in order, which the socket did not take at once
        (C{_sendLock} held), as the server reads, until C{deadline}
        (C{time.monotonic}); what is left then (L{_owned}: a piece cut by
        a send, copied), C{[]} once all went.  Each
        send is one C{sendmsg} of up to L{_GATHER} pieces, none joined (a
        TLS socket, which has no C{sendmsg}: joined, sent as one).  Each
        wait is one C{poll} for room, bounded by the deadline and by the
        server's silence: no byte taken for C{silenceTimeout} is a
        C{TimeoutError} (the connection then ends with L{ServerSilent}).
        The socket stays blocking for the reader; each send here is
        C{MSG_DONTWAIT}.
        """
        sock = self._socket
        dontWait = self._dontWait
        pieces: list[bytes | memoryview] = [b"".join(queued)] if not dontWait and len(queued) > 1 else [*queued]
        unsent = _size(pieces)
        poller = None
        takenAt = None
        while True:
            try:
                if dontWait:
                    count = sock.sendmsg(pieces[:_GATHER], (), dontWait)
                else:
                    count = sock.send(pieces[0])
            except BlockingIOError:
                count = 0
            if count == unsent:
                return []  # (the commonest send, a read's GRANT or an answer, whole at once: no clock read)
            now = time.monotonic()
            if count:
                pieces = _after(pieces, count)
                unsent -= count
                takenAt = now
            elif takenAt is None:
                takenAt = now  # (the silence counts from the first send the socket did not take whole)
            wait = None if deadline is None else deadline - now
            silence = self._silenceTimeout
            if silence is not None:
                quiet = takenAt + silence - now
                if quiet <= 0:
                    raise TimeoutError(f"nothing taken for {silence:g} s")
                wait = quiet if wait is None else min(wait, quiet)
            if wait is not None and wait <= 0:
                return _owned(pieces)
            if poller is None:
                poller = select.poll()
                poller.register(sock, select.POLLOUT)
            poller.poll(None if wait is None else max(wait * 1000, 1.0))

    def _queue(self, *pieces: bytes) -> None:
        """
        Put C{pieces} at the end of the outbox (C{_lock} held), charged to the
        session's ledger; past its budget the connection ends
        (L{framing.rpc._errors.ConnectionOverBudget}: see L{_ledgerFull}).
        """
        self._outbox.extend(pieces)
        self._session.ledger.charge(UNSENT, _size(pieces))

    def _settleUnsent(self, change: int) -> None:
        """The outbox holds C{change} bytes more (or fewer) than the ledger was told (C{_lock} held)."""
        ledger = self._session.ledger
        if change > 0:
            ledger.charge(UNSENT, change)
        elif change < 0:
            ledger.release(UNSENT, min(-change, ledger.holding(UNSENT)))

    def _ledgerFull(self, full: bool) -> None:
        """
        The session's ledger went over its budget (C{full}; C{_lock} held:
        every charge is made under it): end the connection.  This client
        cannot stop reading to wait for the server to drain what it holds,
        its readers being its waiting callers, so it fails at once with a
        clear error rather than hold more.
        """
        if full:
            self._apply(self._session.overBudget())

    def _takeOutbox(self) -> list[bytes]:
        """What the reading thread left to send, in order, as pieces (C{_sendLock} held; list pops are atomic)."""
        outbox = self._outbox
        pieces = []
        while outbox:
            pieces.append(outbox.pop(0))
        return pieces

    def _readTurn(self, bound: float | None) -> None:
        """
        Be the reading thread for one C{recv} (C{_lock} held, no other
        thread reading; released during the C{recv}), apply what it brought
        (answers settled, the server's calls queued, replies put in the
        outbox: the caller sends them after the turn, see L{_sendAside}),
        then wake the threads that sleep.  Nothing came within a tick: the
        server's silence is judged.  The commonest turn (bytes came, nothing
        to send back) calls nothing but C{recv} and the session's C{receive}.

        @param bound: the waiting thread's own bound on its wait, for the read's tick (see L{_keepTick}).
        """
        session = self._session
        lock = self._lock
        self._reading = True
        try:
            if bound is not self._tickBound:
                self._keepTick(bound)
            if session.failure is not None:
                return
            failed = None
            # Released during the recv (other threads make their calls meanwhile), taken again to apply it.
            lock.release()
            try:
                chunk = self._socket.recv(self._readSize)
            except OSError as error:
                chunk, failed = b"", error
            finally:
                lock.acquire()
            if not chunk:
                self._readFailed(failed)
                return
            self._quietSince = None
            settled = session.receive(chunk)
            for waiter, result, raised in settled:
                waiter.result = result
                waiter.error = raised
                waiter.done = True
            if session.output or session.failure is not None:
                self._apply(())
        finally:
            self._reading = False
            if self._sleepers:
                self._changed.notify_all()

    def _sleep(self, seconds: float | None) -> None:
        """
        Wait (holding C{_lock}) until the reading thread wakes this one, or
        C{seconds} pass.  The reader wakes the others only when one sleeps
        (C{_sleepers}): the commonest use, one thread calling, then costs no
        C{notify_all}.
        """
        self._sleepers += 1
        try:
            self._changed.wait(seconds)
        finally:
            self._sleepers -= 1

    def _sendCancel(self, data: bytes, deadline: float | None = None) -> None:
        """
        Send C{data} (a CANCEL, a RELEASE, an answer to the server's call)
        after the outbox, waiting for the socket to take it until
        C{deadline} (C{None}: the server's silence bounds it); what it did
        not take by then stays in the outbox, sent with the next thing sent.
        A lost connection is seen later.
        """
        with self._lock:
            if self._shut:
                return
            self._queue(data)
        self._flushOutbox(deadline)

    # -- reading (one thread at a time, holding _lock but while in recv) -------

    def _keepTick(self, bound: float | None) -> None:
        """
        Keep the socket's receive timeout at an eighth of the shortest bound
        in force (C{callTimeout}, C{silenceTimeout}, and C{bound}: the
        connecting timeout, or the time a call's deadline left it when its
        wait began), so that each is noticed at most that late; no bound, no
        timeout.  One C{setsockopt} when the bounds change, none per read.
        """
        self._tickBound = bound
        bounds = (self._callTimeout, self._silenceTimeout, bound)
        if bounds == self._tickFor:
            return
        self._tickFor = bounds
        given = [bound for bound in bounds if bound is not None]
        tick = self._tick = max(min(given) / 8, 0.001) if given else 0.0
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _timeval(tick))

    def _readFailed(self, error: OSError | None) -> None:
        """
        A C{recv} brought nothing (C{_lock} held): its tick passed in
        silence (the server's silence is then judged), the server closed
        the connection (C{error} C{None}), or the read failed.
        """
        if isinstance(error, self._readWaits):
            # (SO_RCVTIMEO passed: EAGAIN from a blocking socket; from a TLS one, SSL_ERROR_WANT_READ)
            silence = self._silenceTimeout
            if silence is not None:
                now = time.monotonic()
                quietSince = self._quietSince
                if quietSince is None:
                    quietSince = self._quietSince = now - self._tick
                self._apply(self._session.judgeSilence(now - quietSince, silence))
        elif error is None:
            self._end(self._session.peerClosed())
        else:
            self._end(ConnectionLost(f"reading from {self.peer} failed: {error}"))

    def _apply(self, settled: list[Settled] | tuple[()]) -> None:
        """
        Do what the session decided (C{_lock} held): hand each settled call
        its outcome, put what it asks to send in the outbox (sent once
        C{_lock} is released: L{_flushOutbox}), and if it ended, shut the
        socket and wake every waiting caller.
        """
        for waiter, result, error in settled:
            waiter.result = result
            waiter.error = error
            waiter.done = True
        session = self._session
        pieces = session.piecesToSend()
        if pieces:
            self._queue(*pieces)  # (sent once _lock is released: see _flushOutbox)
        if session.failure is not None and not self._shut:
            self._shut = True
            if not (session.closing and self._outbox):
                if session.farewell:
                    self._sayWhy(session.farewell)
                self._outbox.clear()  # (nothing is sent after the end...)
                self._shutdown()
            # (... but what is due when the session closed after GOAWAY: _flushOutbox shuts the socket after it)
            self._changed.notify_all()

    def _sayWhy(self, farewell: bytes) -> None:
        """
        Send C{farewell}, the ERROR telling the server the rule it broke
        (C{_lock} held), if it goes at once and whole messages only went
        before it (the outbox empty, no other thread sending): a courtesy
        the connection's end never waits for.
        """
        sendLock = self._sendLock
        if self._outbox or not sendLock.acquire(blocking=False):
            return
        try:
            sock = self._socket
            if not self._dontWait:
                sock.settimeout(0.0)  # (TLS: no MSG_DONTWAIT; the socket is shut next)
            sock.send(farewell, self._dontWait)
        except OSError:
            pass
        finally:
            sendLock.release()

    def _shutdown(self) -> None:
        """Shut the socket both ways (the connection ended); the file descriptor stays until L{close}."""
        try:
            self._socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _end(self, reason: BaseException) -> None:
        """End the connection with C{reason} (C{_lock} held): every waiting call fails with it, once."""
        self._apply(self._session.end(reason))

    def _sendAside(self, deadline: float | None) -> None:
        """
        Send the outbox, as the reading thread does after a turn that left
        something in it (C{_lock} held on entry and exit, released while
        sending; the reading turn is over, so another waiting thread reads
        meanwhile, and the server, which may stop reading until this side
        reads, is read).
        """
        lock = self._lock
        lock.release()
        try:
            self._flushOutbox(deadline)
        finally:
            lock.acquire()

    def _flushOutbox(self, deadline: float | None = None) -> None:
        """
        Send the outbox, in order, until the socket took it all or
        C{deadline} (C{time.monotonic}) passed, whatever is left then
        staying first in it (C{_lock} not held: a send that waits holds no
        lock but the send lock, so the other threads still read and call;
        C{deadline} C{None}: bounded by the server's silence alone).  If
        another thread holds the send lock, nothing: a holder sends the
        outbox before releasing it and looks again after (what is added
        meanwhile is then its to send).  A failure ends the connection.
        """
        sendLock = self._sendLock
        while self._outbox and sendLock.acquire(blocking=False):
            failed = None
            taken = 0
            left: list[bytes] = []
            try:
                while self._outbox:
                    pieces = self._takeOutbox()
                    taken += _size(pieces)
                    left = self._sendRest(pieces, deadline)
                    if left:
                        self._outbox[0:0] = left
                        break
            except OSError as error:
                failed = self._sendFailed(error)
            finally:
                sendLock.release()
            with self._lock:
                self._settleUnsent((_size(left) if left else 0) - taken)
                if failed is not None:
                    self._end(failed)
                elif self._shut and not self._outbox:
                    # (the session closed after GOAWAY with this due: sent, the socket is shut now)
                    self._shutdown()
            if left or failed is not None:
                return

    def _sendFailed(self, error: OSError) -> BaseException:
        """Why the connection ends when a send failed with C{error}: the server read nothing for too long, or else."""
        if isinstance(error, self._sendWaits):
            return ServerSilent(f"{self.peer} read nothing this side sent for {self._silenceTimeout:g} s")
        return ConnectionLost(f"sending to {self.peer} failed: {error}")

    # -- streams of objects ---------------------------------------------------

    def _newStream(self, streams: ClientObjectStreams, streamId: int, window: ReceiveWindow) -> BlockingStream:
        """The session's stream factory: a stream the server sends, as this client reads it."""
        stream = BlockingStream(streams, streamId, window)
        stream.connection = self
        return stream

    def nextItem(self, stream: BlockingStream) -> Any:
        """
        The next item of C{stream} (see L{BlockingStream}): taken if held,
        else read for on this thread, in turn with the other waiting threads,
        until the deadline of the enclosing C{callContext} or C{callTimeout}
        seconds (L{framing.rpc._streamtable.itemWaitBound}).

        @raise StopIteration: the stream ended (or was closed here).
        @raise framing.rpc._errors.DeadlineExceeded: (or L{framing.rpc.CallTimedOut}) no item in time: the
            stream is cancelled, and fails with it from now on.
        """
        streams = self._session.objectStreams
        bound = itemBound(stream.streamId, self._callTimeout)
        while True:
            waiter = None
            with self._lock:
                if stream.buffer:
                    try:
                        item = streams.take(stream)
                    finally:
                        data = self._session.dataToSend()
                        if data:
                            self._queue(data)
                    break
                if stream.error is not None:
                    raise stream.error
                if stream.ended:
                    raise StopIteration
                waiter = stream.waiter = _Waiter()
                if not self._session.pending:
                    # Nothing else waits: the server's silence counts from now (as for a call).
                    self._quietSince = None
            if bound is None:
                self._wait(waiter, None, "a stream")
                continue
            try:
                self._wait(waiter, None, "a stream", bound[0])
            except DeadlineExceeded:
                with self._lock:
                    if stream.waiter is waiter and not waiter.done:
                        streams.timedOut(stream, bound[1])
                    data = self._session.dataToSend()
                if data:
                    self._sendCancel(data)
                if stream.error is bound[1]:
                    raise bound[1] from None
        if self._outbox:
            self._flushOutbox()  # (the credit taking it gave back: sent now, _lock released)
        return item

    def cancelStream(self, stream: BlockingStream) -> None:
        """Stop reading C{stream}: CANCEL sent if it was not over."""
        with self._lock:
            self._session.objectStreams.cancel(stream)
            data = self._session.dataToSend()
        if data:
            self._sendCancel(data)

    # -- references and the server's calls to this side ---------------------

    def _newReference(self, exportId: int, interfaceNames: tuple[str, ...]) -> BlockingReference:
        """The session's reference factory: an object the server exports, as this client calls it."""
        return BlockingReference(self, exportId, interfaceNames)

    def _referenceDied(self) -> None:
        """
        A reference died with a RELEASE due (told on whatever thread the
        garbage collector ran, maybe one holding a lock here): send it now if
        the connection is free, else it goes with what is sent next.
        """
        if not self._lock.acquire(blocking=False):
            return
        try:
            self._apply([])
        finally:
            self._lock.release()
        if self._outbox and not self._reading:
            # (told where the garbage collector ran: sent as far as the socket takes it now, the rest with the
            # next thing sent; while a thread reads, it sends the outbox after its turn)
            self._flushOutbox(time.monotonic())

    def releaseReference(self, reference: BlockingReference) -> None:
        """Send C{reference}'s RELEASE now (see L{framing.rpc._interfaces.ExportedReference.release})."""
        with self._lock:
            data = self._session.release(reference)
        if data:
            self._sendCancel(data)  # (sent as a CANCEL is: a lost connection is seen by the next call)

    def serve(self, seconds: float | None) -> int:
        """
        Read on this thread until the server has called this side's
        callbacks (served here: docs/design/clients-without-twisted.md), or for
        C{seconds} (C{None}: no bound): for a thread with no call of its own
        to make that waits for the server's calls.  Other threads' calls go
        on meanwhile.  C{while connection.serve(60): ...} serves for as long
        as the server calls.

        @return: how many of the server's calls were served (0: none came within C{seconds}).
        @raise ConnectionLost: (or the reason it ended) the connection ended.
        """
        deadline = None if seconds is None else time.monotonic() + seconds
        session = self._session
        with self._changed:
            if not session.pending:
                self._quietSince = None
            while session.failure is None:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return 0
                if self._reading:
                    self._sleep(remaining)
                    continue
                self._readTurn(seconds)
                if self._outbox:
                    self._sendAside(deadline)
                served = len(session.incomingCalls.waiting)
                if served:
                    self._serveCalls(deadline)
                    return served
            failure = session.failure
        raise failure

    def _serveCalls(self, deadline: float | None) -> None:
        """
        Run the server's calls just read (C{_lock} held on entry and exit,
        released while each runs: a callback may call the server back,
        from this thread or another), and send each one's answer, waiting
        for the socket no later than C{deadline} (the serving thread's own).
        A call whose call context's deadline passed by the time it returned
        is answered with L{DeadlineExceeded} instead (wire format 12.7; it
        cannot be stopped sooner: L{ClientSession.expireCall}).
        """
        session = self._session
        calls = session.incomingCalls.take()
        read = time.monotonic()  # (a call context's deadline counts from the read)
        self._lock.release()
        try:
            for call in calls:
                with answering(call, read):
                    result, error = _run(call)
                with self._lock:
                    milliseconds = call.milliseconds
                    if milliseconds is not None and time.monotonic() >= read + milliseconds / 1000:
                        # Its deadline passed while it ran (no thread stops it): DeadlineExceeded, not its end.
                        session.expireCall(call)
                    settled = session.answerCall(call, result, error)
                    if self._shut:
                        continue
                    data = session.dataToSend()
                    if data:
                        self._queue(data)
                self._flushOutbox(deadline)
                if session.closing:
                    # (the last thing in flight after the server's GOAWAY: the session ended, its answer sent)
                    with self._lock:
                        self._apply(settled)
        finally:
            self._lock.acquire()

    # -- its state, for a client of several addresses -------------------------

    def refresh(self) -> None:
        """
        Take what the server sent while no call read (a GOAWAY, the
        connection's close), without waiting: one read turn if bytes wait
        and no other thread is reading.  Cost: one C{poll} system call (and
        the read, if bytes wait).
        """
        with self._lock:
            if self._reading or self._session.failure is not None:
                return
            try:
                waiting = bool(select.select([self._socket], [], [], 0)[0])
            except (OSError, ValueError):
                waiting = True  # (a closed socket: the read turn says so)
            if waiting:
                self._readTurn(None)
                if self._outbox:
                    self._sendAside(None)

    @property
    def acceptsCalls(self) -> bool:
        """Whether a new call may be sent: no GOAWAY from the server (as far as read), the connection not over."""
        return self._session.acceptsCalls

    @property
    def ended(self) -> bool:
        """Whether the connection is over (every call on it failed or answered)."""
        return self._session.failure is not None

    @property
    def idle(self) -> bool:
        """Whether no call waits for its answer on this connection."""
        return not self._session.pending

    # -- closing -------------------------------------------------------------

    def close(self) -> None:
        """Close the connection: waiting calls fail with L{ConnectionLost}, later ones with L{DeadReferenceError}."""
        with self._lock:
            self._end(ConnectionLost(f"the connection to {self.peer} was closed by this side"))
        self._socket.close()

    def abort(self) -> None:
        """
        End the connection from anywhere: another thread, or a signal
        handler that interrupted this connection's own thread.  It only
        shuts the socket down (no lock taken, nothing sent): the call or
        read blocked on it then fails with L{ConnectionLost}, and so does
        every later one; L{close} still releases the socket.
        """
        self._shutdown()

    def __enter__(self) -> BlockingConnection:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


def _run(call: IncomingCall) -> tuple[Any, BaseException | None]:
    """Run the server's C{call} here: C{(result, None)}, or C{(None, its exception)}."""
    try:
        result = call.run()
    except Exception as error:
        return None, error
    if inspect.isawaitable(result):
        close = getattr(result, "close", None)
        if close is not None:
            close()  # (never awaited: no warning)
        return None, TypeError(f"{call.name} is a coroutine method: the blocking client runs plain methods only")
    return result, None


def tlsContext(*, caFile: str | None = None, certificate: str | None = None, key: str | None = None) -> ssl.SSLContext:
    """
    A client TLS context for L{connect}'s C{tls}: TLS 1.2 or later, the
    server's certificate checked against C{caFile}'s CAs (the system's if
    C{None}) and its name against the host connected to (a server
    certificate of C{protocols/auth/_authority.py} names C{localhost},
    127.0.0.1 and ::1).  Nothing here turns checking off: a server with a
    key of its own and no CA is reached through its object URL
    (L{connectURL}), which pins the key instead.

    @param caFile: a PEM file of the CA certificates to trust.
    @param certificate: a PEM file holding this client's certificate (and
        its key, unless C{key} names another file): what a
        L{framing.login.ClientCertificate} login presents.
    @param key: the PEM file of the certificate's private key, if apart.
    """
    import ssl

    context = ssl.create_default_context(cafile=caFile)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if certificate is not None:
        context.load_cert_chain(certificate, key)
    return context


def _isTLS(sock: socket.socket) -> TypeGuard[ssl.SSLSocket]:
    """Whether C{sock} is a TLS socket (none can be while C{ssl} is not loaded: it loads where TLS is used)."""
    tls = sys.modules.get("ssl")
    return tls is not None and isinstance(sock, tls.SSLSocket)


def _waits(sock: socket.socket) -> tuple[tuple[type[OSError], ...], tuple[type[OSError], ...]]:
    """
    What a read and a send on C{sock} raise when its timeout passed or it
    would block, not failing: on a TLS socket, C{SSL_ERROR_WANT_READ} and
    C{SSL_ERROR_WANT_WRITE} too.
    """
    plain = (TimeoutError, BlockingIOError)
    if not _isTLS(sock):
        return plain, plain
    import ssl

    return (*plain, ssl.SSLWantReadError), (*plain, ssl.SSLWantWriteError)


def _secured(
    sock: socket.socket, tls: ssl.SSLContext, hostname: str | None, peer: str, timeout: float | None
) -> socket.socket:
    """
    C{sock} with TLS, its handshake done within C{timeout} (the socket's
    timeout, as L{connect} made it).

    @raise ServerSilent: no handshake in time.
    @raise ssl.SSLError: the handshake failed (C{ssl.SSLCertVerificationError}:
        the server's certificate is not trusted, or names another host).
    """
    try:
        return tls.wrap_socket(sock, server_hostname=hostname)
    except TimeoutError as error:
        raise ServerSilent(f"no TLS handshake with {peer} within {timeout:g} s") from error


def _logIn(sock: socket.socket, credentials: Any, peer: str, timeout: float | None) -> None:
    """
    Log in on C{sock} with C{credentials} (the preamble exchanged, no call
    made yet): the sans-IO L{ByteExchange} says what to send and judges
    what the server answers; this only carries the bytes, within C{timeout}.

    @raise framing.login.LoginFailed: refused (L{framing.login.LoginRefused}), the
        server not verified, or the exchange broken (the server sent more
        than the login before the first call, among others).
    @raise ServerSilent: no answer within C{timeout}.
    @raise ConnectionLost: the server closed the connection.
    """
    from framing.login._exchange import ByteExchange

    login = ByteExchange(credentials)
    waiting = _waits(sock)[0]
    deadline = None if timeout is None else time.monotonic() + timeout
    sock.sendall(login.start())
    while not login.done:
        if deadline is not None and time.monotonic() >= deadline:
            raise ServerSilent(f"no answer to the login from {peer} within {timeout:g} s")
        try:
            chunk = sock.recv(login.readSize)
        except waiting:
            continue  # (the socket's receive timeout, a tick: look at the deadline)
        except OSError as error:
            raise ConnectionLost(f"reading from {peer} failed during the login: {error}") from error
        if not chunk:
            raise ConnectionLost(f"{peer} closed the connection during the login")
        reply = login.receive(chunk)
        if reply:
            sock.sendall(reply)


@overload
def connect(
    address: str | tuple[str, int], *, interface: type | None = None, options: ClientOptions = CLIENT_DEFAULTS
) -> BlockingConnection: ...


@overload
def connect(
    address: list[str | tuple[str, int]] | list[str] | list[tuple[str, int]],
    *,
    options: ClientOptions = CLIENT_DEFAULTS,
) -> BlockingFailover: ...


def connect(
    address: str | tuple[str, int] | list[str | tuple[str, int]] | list[str] | list[tuple[str, int]],
    *,
    interface: type | None = None,
    options: ClientOptions = CLIENT_DEFAULTS,
) -> BlockingConnection | BlockingFailover:
    """Connect to the chunkwire RPC server at C{address} (C{"host:port"} or
    C{(host, port)}), over TLS if the options ask, log in if they give
    credentials, and return the connection, whose C{root} is the server's
    root object (for this login; seen through C{interface} if given).

    @param interface: the root's remote interface
        (L{framing.rpc.RemoteInterface}): C{root} is then its
        L{BlockingTypedReference}.
    @param options: the L{ClientOptions}; C{timeout} bounds connecting, the
        TLS handshake, the server's preamble and the login, each.
    @raise ConnectTimedOut: no TCP connection within the C{timeout}.
    @raise ServerSilent: connected, but no preamble within the C{timeout}.
    @raise OSError: the connection was refused, or the name did not resolve.
    @raise framing.ProtocolError: the server does not speak chunkwire.
    @raise ssl.SSLError: the TLS handshake failed.
    @raise framing.login.LoginFailed: the login failed.
    @raise ValueError: the options have C{bulk}, which this client would
        not use (refused before connecting; L{protocols.blockingbulk.connect}
        carries streams).

    A list of addresses makes a L{BlockingFailover} instead (the options'
    C{policy}, C{moveTimeout} and C{backoff}; no C{interface}).

    Design: docs/design/clients-without-twisted.md
    """
    options.refuseBulk("protocols.blocking.connect", "protocols.blockingbulk.connect")
    if isinstance(address, list):
        if interface is not None:
            raise TypeError("a client of several addresses takes no interface: type its calls at the call site")
        return BlockingFailover(address, options=options)
    (host, port), context = connectTarget(address, options)
    return _open((host, port), f"{host}:{port}", host, context, None, options, interface)


def urlAttempts(url: str, options: ClientOptions) -> tuple[HintAttempts, ClientOptions]:
    """
    What a C{connectURL} (this module's, or L{protocols.asyncioclient}'s)
    tries: the URL's hints in order, and the options it logs in with there
    (the URL's name as the credentials).

    @raise framing.login._urls.InvalidURL: C{url} is not a canonical object URL.
    @raise ValueError: C{options} have credentials.
    """
    from framing.login._exchange import ObjectName
    from framing.login._urls import HintAttempts, ObjectURL

    options.refuseCredentials("connectURL")
    attempts = HintAttempts(ObjectURL.parse(url))
    return attempts, replace(options, credentials=ObjectName(attempts.url.name))


def connectTarget(
    address: str | tuple[str, int], options: ClientOptions
) -> tuple[tuple[str, int], ssl.SSLContext | None]:
    """
    What a C{connect} (this module's, or L{protocols.asyncioclient}'s) is
    asked: the C{(host, port)} of C{address}, and the TLS context the
    options' C{tls} means (C{None}: plain TCP).

    @raise UnsupportedCredentials: no login mechanism takes the options'
        C{credentials} (refused before connecting).
    @raise ValueError: C{address} is not an address.
    """
    return parseAddress(address), tlsOf(options)


def tlsOf(options: ClientOptions) -> ssl.SSLContext | None:
    """
    The TLS context C{options} ask for (C{None}: plain TCP), once their
    C{credentials} are known to be usable.

    @raise UnsupportedCredentials: no login mechanism takes them (refused before connecting).
    """
    if options.credentials is not None:
        from framing.login._exchange import clientMechanism

        clientMechanism(options.credentials)
    tls = options.tls
    return None if tls is False else tlsContext() if tls is True else tls


def _open(
    target: tuple[str, int] | str,
    peer: str,
    hostname: str | None,
    tls: ssl.SSLContext | None,
    pin: str | None,
    options: ClientOptions,
    interface: type | None = None,
    connectionClass: Callable[..., BlockingConnection] = BlockingConnection,
) -> BlockingConnection:
    """
    Connect to C{target} (C{(host, port)}, or a UNIX socket's path), with
    TLS if C{tls} (checking the server's name against C{hostname}, or its
    key's hash against C{pin}, before anything is sent), exchange
    preambles, log in with the options' C{credentials} if given; a
    connection of C{connectionClass}, its root seen through C{interface}.
    """
    timeout = options.timeout
    try:
        if isinstance(target, str):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            try:
                sock.connect(target)
            except BaseException:
                sock.close()
                raise
        else:
            sock = socket.create_connection(target, timeout=timeout)
    except TimeoutError as error:
        raise ConnectTimedOut(f"no connection to {peer} within {timeout:g} s") from error
    try:
        if not isinstance(target, str):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is not None:
            sock = _secured(sock, tls, hostname, peer, timeout)
            if pin is not None:
                _checkPin(sock, pin)
        connection = connectionClass(sock, peer, options)
        connection.start(timeout)
        if options.credentials is not None:
            _logIn(sock, options.credentials, peer, timeout)
    except BaseException:
        sock.close()
        raise
    if interface is not None:
        connection.root = connection.root.typed(interface)
    return connection


def pinnedContext() -> ssl.SSLContext:
    """
    A client TLS context that trusts no CA and checks no name: the server's
    key is checked by its hash instead (L{_checkPin}), once the handshake is
    done and before anything is sent.  (The handshake itself still makes the
    server prove it holds that key: its signature is checked whatever the
    verify mode.)
    """
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _checkPin(sock: socket.socket, pin: str) -> None:
    """
    @raise KeyMismatch: the server's certificate holds another key than
        the one C{pin} hashes (nothing has been sent to it).
    """
    from framing.login._urls import checkPresentedKey

    checkPresentedKey(sock.getpeercert(binary_form=True) if _isTLS(sock) else None, pin)


def connectURL(
    url: str, *, interface: type | None = None, options: ClientOptions = CLIENT_DEFAULTS
) -> BlockingConnection:
    """
    Connect to the object a self-authenticating URL names
    (C{chunkwire://KEYHASH@HINTS/NAME}, see C{framing/login/_urls.py}), as the
    Twisted client's C{rpc.connectURL} does: over TLS, the server's key
    hash compared with the URL's before anything is sent (no CA, no host
    name), then logged in by the URL's name; the hints are tried in order
    until one connects.  The connection's C{root} is exactly that object.
    Other arguments as for L{connect} (the options' C{tls} and
    C{credentials} are the URL's); C{timeout} is each hint's.

    @raise framing.login._urls.InvalidURL: C{url} is not a canonical object URL.
    @raise framing.login._urls.KeyMismatch: the server holds another key
        (the name was not sent).
    @raise framing.login.LoginRefused: the server knows no such name (or no longer).
    @raise OSError: the last hint's connection error (L{ConnectTimedOut} among them).
    @raise ValueError: the options have credentials, or C{bulk} (see L{connect}).
    """
    options.refuseBulk("protocols.blocking.connectURL", "protocols.blockingbulk.connect")
    attempts, named = urlAttempts(url, options)
    for target, hint in attempts:
        try:
            return _open(target, hint, None, pinnedContext(), attempts.url.keyHash, named, interface)
        except Exception as error:
            attempts.failed(error)
    raise attempts.failure()


def resolveAll(addresses: Sequence[str | tuple[str, int]], timeout: float | None) -> list[tuple[tuple[str, int], str]]:
    """
    Every IP address of C{addresses} (C{"host:port"} or C{(host, port)}),
    in order, with the name it was found under (for TLS's check): each
    host name resolved by C{socket.getaddrinfo} in a thread of its own,
    waited for at most C{timeout} seconds, so a name with several addresses
    counts as several.  A name that does not resolve in time is kept as it
    is (its connection attempts fail, and back off, as a refused one's).
    """
    targets: list[tuple[tuple[str, int], str]] = []
    for address in addresses:
        host, port = parseAddress(address)
        targets.extend((target, host) for target in _resolved(host, port, timeout) or [(host, port)])
    return targets


def _resolved(host: str, port: int, timeout: float | None) -> list[tuple[str, int]]:
    """C{host}'s addresses from C{getaddrinfo} on a thread, or none if it fails or takes over C{timeout} seconds."""
    found: list[tuple[str, int]] = []

    def resolve() -> None:
        try:
            for *_, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
                found.append((str(sockaddr[0]), int(sockaddr[1])))
        except OSError:
            pass

    thread = threading.Thread(target=resolve, name=f"resolve {host}", daemon=True)
    thread.start()
    thread.join(timeout)
    return [] if thread.is_alive() else found


class FailoverReference:
    """The root of a L{BlockingFailover}: each call goes to one of the service's servers (see there)."""

    def __init__(self, failover: BlockingFailover) -> None:
        self.failover = failover

    def callRemote(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Call remote method C{name} on the root of a ready server and block until its answer."""
        return self.failover.call(name, args, kwargs)


class BlockingFailover:
    """A client of one service at several addresses (L{connect} given a list):
    the policy, backoff and send-at-most-once rule are
    C{framing/rpc/_addresses.py}'; this class resolves, connects (on the calling
    thread) and waits.  A context manager that closes every connection.

    Contract: a call goes to a ready connection picked by the policy; with
    none ready it connects and waits, at most to its L{callContext} deadline
    or C{moveTimeout}, then raises L{protocols.rpc.NoAddressReady},
    having sent nothing.  A GOAWAY or close seen before the call is written
    (L{BlockingConnection.refresh}) sends it elsewhere; a call once written
    is never sent again (it raises the connection's error).

    Cost: per call, the policy's pick (O(1)), one C{poll} on the picked
    connection, and a look at the draining connections (O(addresses)).

    Design: docs/design/clients-without-twisted.md

    @ivar root: the service's root object, a L{FailoverReference}.
    @ivar book: the L{framing.rpc._addresses.AddressBook} (its addresses' states, for tests and metrics).
    """

    def __init__(
        self,
        addresses: Sequence[str | tuple[str, int]],
        *,
        options: ClientOptions = CLIENT_DEFAULTS,
        connectionClass: Callable[..., BlockingConnection] = BlockingConnection,
    ) -> None:
        """
        Resolve C{addresses} (see L{connect}, which makes this for a list);
        C{connectionClass}: the class of the connections made.

        @raise UnsupportedCredentials: no login mechanism takes the options' C{credentials}.
        """
        self.moveTimeout = options.moveTimeout
        self._tls = tlsOf(options)
        self._options = options
        self._connectionClass = connectionClass
        resolved = resolveAll(addresses, options.timeout)
        self._hostnames = dict(resolved)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self.book: AddressBook[BlockingConnection] = AddressBook(
            [target for target, _ in resolved], options.policy, options.backoff
        )
        self.root = FailoverReference(self)
        self._closed = False

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Send the call C{name} to a ready server (see the class docstring) and block until its answer."""
        now = time.monotonic()
        scope = calling.get()
        deadline = now + self.moveTimeout
        if scope is not None and scope.deadline is not None:
            deadline = min(deadline, scope.deadline)
        route = self.book.route(name, deadline)
        while True:
            with self._lock:
                if self._closed:
                    raise DeadReferenceError(f"cannot call {name!r}: the client was closed")
                for connection in retire(self.book):
                    connection.close()
                step = route.step(time.monotonic())
            if isinstance(step, Wait):
                self._connectOrWait(step)
                continue
            connection = step.connection
            connection.refresh()
            if not connection.acceptsCalls:
                with self._lock:
                    route.notSent(step.address, DeadReferenceError("draining or over"), connection.ended)
                    self._changed.notify_all()
                continue
            try:
                return connection.call(ROOT_ID, name, args, kwargs)
            except DeadReferenceError as error:  # (raised before anything was written: the session refused it)
                with self._lock:
                    route.notSent(step.address, error, connection.ended)

    def _connectOrWait(self, step: Wait[BlockingConnection]) -> None:
        """Connect to the addresses C{step} names, in turn, on this thread; else wait, to C{step.until}."""
        if not step.connect:
            with self._lock:
                remaining = None if step.until is None else step.until - time.monotonic()
                if remaining is None or remaining > 0:
                    self._changed.wait(remaining)
            return
        for address in step.connect:
            host, port = cast("tuple[str, int]", address.target)
            options = replace(
                self._options, timeout=attemptTimeout(self._options.timeout, step.until, time.monotonic())
            )
            hostname = self._hostnames.get((host, port), host)
            try:
                connection = _open(
                    (host, port), f"{host}:{port}", hostname, self._tls, None, options, None, self._connectionClass
                )
            except Exception as error:  # (refused, timed out, TLS, login: the address backs off)
                with self._lock:
                    self.book.connectFailed(address, error, time.monotonic())
                    self._changed.notify_all()
                continue
            with self._lock:
                if self._closed:
                    connection.close()
                    self.book.lost(address)
                else:
                    self.book.connected(address, connection)
                self._changed.notify_all()

    def close(self) -> None:
        """Close every connection; calls waiting fail as L{BlockingConnection.close} says, later ones at once."""
        with self._lock:
            self._closed = True
            for address in self.book.addresses:
                if address.connection is not None:
                    address.connection.close()
                    self.book.lost(address)
            self._changed.notify_all()

    def __enter__(self) -> BlockingFailover:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
