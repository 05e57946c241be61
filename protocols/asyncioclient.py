# -*- test-case-name: tests.protocols.test_asyncioclient,tests.protocols.test_asyncioclient_streams -*-
"""An asyncio RPC client without Twisted: calls awaited on the standard event loop, many in flight on one connection.

    from framing.rpc._limits import CallLimits
    from protocols.asyncioclient import connect
    from protocols.options import ClientOptions

    options = ClientOptions(callLimits=CallLimits(callTimeout=10))

    async def main() -> None:
        async with await connect("127.0.0.1:8760", options=options) as connection:
            await connection.root.callRemote("put", "greeting", "hello")
            assert await connection.root.callRemote("get", "greeting") == "hello"

Importing it loads no Twisted.  The protocol is the sans-IO
L{framing.rpc._session.ClientSession}; this module is the asyncio transport
and futures around it.

Contract: a call raises what the Twisted client's Deferred fails with;
any number are in flight, answered in any order.  Calls made while others
wait are written together on the loop's next turn (or at
L{COALESCE_BYTES}), in order.  Cancelling an awaited call sends CANCEL.
While the write buffer is over its high-water mark new calls wait; reading
pauses while the ledger (L{framing.rpc._session.UNSENT}) is over budget.
Callbacks run on the loop (a coroutine as a task); object streams arrive
as L{AsyncStream}, and an async iterable argument is sent as one.

Cost: a sequential caller pays no extra loop turn; the silence timer
runs only while something waits.

Design: docs/design/clients-without-twisted.md
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import select
import socket
import ssl
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any, TypeVar, cast, overload

from framing.login._errors import LoginFailed
from framing.login._exchange import ByteExchange
from framing.login._urls import KeyMismatch, checkPresentedKey
from framing.rpc._addresses import AddressBook, Wait, attemptTimeout, retire
from framing.rpc._clientstreams import ClientObjectStreams
from framing.rpc._context import Scope, callBound, sentWith, timeUp
from framing.rpc._errors import (
    ConnectionLost,
    ConnectTimedOut,
    DeadReferenceError,
    ServerSilent,
)
from framing.rpc._incoming import IncomingCall
from framing.rpc._interception import CallInterception
from framing.rpc._interfaces import ExportedReference, TypedProxy
from framing.rpc._session import UNSENT, ClientSession, SessionExtension, Settled
from framing.rpc._signatures import RemoteMethod, registerReference
from framing.rpc._streams import ReceiveWindow
from framing.rpc._streamtable import ReceivedStream, SentStream
from framing.rpc._wire import ROOT_ID
from protocols._clientcontext import answering, calling, itemBound, scopeReader
from protocols._clientcontext import callContext as callContext  # (re-exported: deadlines and metadata of calls)
from protocols._clientcontext import currentCall as currentCall  # (re-exported: what the server's call carried)
from protocols.blocking import connectTarget, parseAddress, pinnedContext, tlsOf, urlAttempts
from protocols.blocking import tlsContext as tlsContext  # (re-exported: the contexts for connect's tls)
from protocols.options import CLIENT_DEFAULTS, ClientOptions

__all__ = [
    "AsyncConnection",
    "AsyncFailover",
    "AsyncReference",
    "AsyncStream",
    "AsyncTypedReference",
    "callContext",
    "connect",
    "connectURL",
    "currentCall",
    "tlsContext",
]

_Future = asyncio.Future
_T = TypeVar("_T")
"""What a stream's waiter settles with (L{AsyncConnection.awaitStream})."""

CLOSE_GRACE = 10.0
"""Seconds a connection that ended waits for its transport to send what it holds before it is aborted
(L{AsyncConnection.closeGrace}): a server that reads nothing cannot keep it, or L{AsyncConnection.close}, for good."""

COALESCE_BYTES = 64 * 1024
"""Bytes of gathered messages past which they are written at once, without waiting for the loop's next turn:
the transport's default high-water mark, so that gathering never hides more than that from back-pressure."""


class AsyncReference(ExportedReference):
    """
    An object the server exports, called from coroutines.

    @ivar connection: the L{AsyncConnection} it is called on.
    """

    connection: AsyncConnection

    async def callRemote(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Call remote method C{name}: its result, or its error raised (see the module docstring for which)."""
        return await self.connection.call(self.exportId, name, args, kwargs)

    async def callRemoteOnly(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Call remote method C{name} for no answer: sent (once the transport takes it), and nothing waits."""
        await self.connection.callOnly(self.exportId, name, args, kwargs)


class AsyncTypedReference(TypedProxy):
    """
    An L{AsyncReference} seen through a remote interface, as
    L{AsyncReference.typed} makes it: each of the interface's methods is a
    coroutine function here, which checks its arguments as the server will
    (a refused one raises the L{framing.Violation}, C{where} naming it, and
    nothing is sent), calls and awaits, and checks the result against the
    result constraint (a refused result raises the L{framing.Violation}, at
    C{"result..."}).  A method the interface lacks is an C{AttributeError};
    through C{callRemote}, a L{NoSuchMethod}, raised before anything is
    awaited.  The checks and the lookup are
    L{framing.rpc._interfaces.TypedProxy}'s, shared with the blocking client;
    this class only awaits.

    @ivar remoteReference: the reference called.
    @ivar remoteInterface: the interface.
    """

    remoteReference: AsyncReference

    def _typedMethod(self, declared: RemoteMethod, answered: Callable[[Any], Any] | None) -> Callable[..., Any]:
        """The proxy's method for C{declared}: check (before the coroutine is even awaited), call, check the result."""
        name, check, connection, target = (
            declared.name,
            declared.checkArguments,
            self.remoteReference.connection,
            self.remoteReference.exportId,
        )

        async def waitFor(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            result = await connection.call(target, name, args, kwargs)
            return result if answered is None else answered(result)

        def call(*args: Any, **kwargs: Any) -> Any:
            if check is not None:
                check(args, kwargs)
            return waitFor(args, kwargs)

        call.__name__ = call.__qualname__ = name
        return call


registerReference(AsyncReference, AsyncTypedReference)


class AsyncStream(ReceivedStream):
    """
    A stream of objects the server sent in a result, read as an async
    iterator (C{async for item in await connection.root.callRemote("watch")}):
    C{__anext__} takes an item held, or waits for the server's next ITEM;
    credit goes back to the server as items are taken.  L{aclose} (or
    C{contextlib.aclosing}, or cancelling a task waiting on it, or dropping
    the stream unfinished, as breaking out of C{async for} over it does)
    sends CANCEL.  The producer's error, a refused item (typed streams) or
    the connection's end is raised after the items that came before it.
    Several streams and calls go on at once on one connection.

    @ivar connection: the L{AsyncConnection} it came on.
    """

    connection: AsyncConnection

    def __aiter__(self) -> AsyncStream:
        return self

    async def __anext__(self) -> Any:
        return await self.connection.nextItem(self)

    async def aclose(self) -> None:
        """Stop reading: the items held are dropped, the server's producer is cancelled (nothing if it is over)."""
        self.connection.cancelStream(self)


def _expire(waiter: asyncio.Future[Any], error: BaseException) -> None:
    """A consumer's wait for a stream's next item ran out of time (L{AsyncConnection.nextItem})."""
    if not waiter.done():
        waiter.set_exception(error)


class _ClientProtocol(asyncio.Protocol):
    """The asyncio protocol of one L{AsyncConnection}: passes each event on to it."""

    def __init__(self, connection: AsyncConnection) -> None:
        self.connection = connection

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.connection.connectionMade(transport)  # type: ignore[arg-type]

    def data_received(self, data: bytes) -> None:
        self.connection.dataReceived(data)

    def eof_received(self) -> bool:
        return False  # (the transport closes; connection_lost follows)

    def connection_lost(self, exc: Exception | None) -> None:
        self.connection.connectionLost(exc)

    def pause_writing(self) -> None:
        self.connection.pauseWriting()

    def resume_writing(self) -> None:
        self.connection.resumeWriting()


class AsyncConnection:
    """
    One connection to a chunkwire RPC server, as L{connect} makes it; an
    async context manager that closes it.  Use it from the event loop it
    was made on (asyncio objects are not thread-safe).

    @ivar root: the server's root object, an L{AsyncReference}.
    @ivar peer: C{"host:port"} of the server, for errors.
    @ivar callTimeout: seconds a call waits for its answer (drain included), or C{None}.
    @ivar silenceTimeout: seconds the server may stay silent while calls or streams wait, or C{None}.
    @ivar closeGrace: seconds the connection, once ended, lets its transport
        send what it holds before aborting it (L{CLOSE_GRACE} by default).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        peer: str,
        options: ClientOptions = CLIENT_DEFAULTS,
        *,
        pin: str | None = None,
        extension: SessionExtension | None = None,
    ) -> None:
        """
        A connection not connected yet: L{connect} gives L{protocol} to the
        loop's C{create_connection}.

        @param options: the L{ClientOptions} (what this side accepts, its
            call limits and timeouts, the metadata of its calls, its interceptors).
        @param pin: the hash of the key the server's TLS certificate must
            hold (L{framing.login._urls.certificateKeyHash}), checked once the
            handshake is done and before anything is sent; C{None}: none.
        @param extension: a layer beside RPC on the connection (the bulk streams of L{protocols.asynciobulk}).
        """
        self._interception = CallInterception(options.interceptors) if options.interceptors else None
        callTimeout, silenceTimeout = options.callTimeout, options.silenceTimeout
        # The scope of each call: the callContext block's, over the connection's metadata (ClientOptions.metadata).
        self._scopeNow = scopeReader(Scope(None, dict(options.metadata)) if options.metadata else None)
        self.peer = peer
        self.callTimeout = callTimeout
        self.silenceTimeout = silenceTimeout
        self.root = AsyncReference(self, ROOT_ID)
        self.protocol = _ClientProtocol(self)
        self._loop = loop
        hooks = (self._newReference, self._referenceDied, self._newStream, self._streamSending)
        self._session: ClientSession[_Future[Any]] = options.session(peer, self, extension, hooks)
        self._transport: asyncio.WriteTransport | None = None
        self._ready: _Future[None] = loop.create_future()
        self._closed: _Future[None] = loop.create_future()
        self._paused = False
        # Reading stopped (the transport's pause_reading): while the ledger is over its budget.
        self._readingPaused = False
        self._session.ledger.on_full = self._ledgerFull
        self.closeGrace: float = CLOSE_GRACE
        self._abortTimer: asyncio.TimerHandle | None = None
        self._drainWaiters: list[_Future[None]] = []
        self._shut = False
        self._lastHeard = loop.time()
        self._silenceTimer: asyncio.TimerHandle | None = None
        # Stream waits under way (an item awaited, a transfer's end): the server's silence bounds them too.
        self._streamWaits = 0
        # Messages gathered for one write at the loop's next turn (see the module docstring), and their size.
        self._gathered: list[bytes] = []
        self._gatheredBytes = 0
        self._pin = pin
        # The login under way (L{logIn}): the bytes read go to it, not to the session, until it is done.
        self._login: ByteExchange | None = None
        self._loggedIn: _Future[None] | None = None
        # The server's calls to this side's callbacks that run as tasks (coroutine methods), kept from collection.
        self._callTasks: set[asyncio.Future[Any]] = set()
        self._releaseScheduled = False
        # The tasks pulling the streams this side sends in calls' arguments, kept from collection.
        self._producing: set[asyncio.Task[None]] = set()

    @property
    def waitingToSend(self) -> int:
        """How many calls wait for the transport's buffer to drain before they are sent."""
        return sum(1 for waiter in self._drainWaiters if not waiter.done())

    @property
    def bufferedBytes(self) -> int:
        """Bytes sent and not yet taken by the kernel (the transport's write buffer)."""
        transport = self._transport
        return 0 if transport is None else transport.get_write_buffer_size()

    def writeLimits(self) -> tuple[int, int]:
        """The transport's low and high water marks: calls wait while its buffer is above the high one."""
        transport = self._transport
        return (0, 0) if transport is None else transport.get_write_buffer_limits()

    # -- the transport's events ----------------------------------------------

    def connectionMade(self, transport: asyncio.WriteTransport) -> None:
        """Connected (the TLS handshake done, if any): check the server's key if pinned, then send the preamble."""
        self._transport = transport
        if self._pin is not None:
            sslObject = transport.get_extra_info("ssl_object")
            try:
                checkPresentedKey(None if sslObject is None else sslObject.getpeercert(True), self._pin)
            except KeyMismatch as mismatch:
                self._end(mismatch)  # (nothing was sent)
                return
        transport.write(self._session.start())

    def dataReceived(self, data: bytes) -> None:
        """Bytes from the server: settle the calls they answer, send what they ask."""
        self._lastHeard = self._loop.time()
        if self._login is not None:
            self._loginReceived(self._login, data)
            return
        session = self._session
        self._apply(session.receive(data))
        if session.incomingCalls.waiting:
            self._serveCalls()
        if self._paused:
            # The buffer is past its high-water mark: what the replies added is held for the server (past the
            # budget, reading stops: _ledgerFull).
            session.ledger.settle(UNSENT, self.bufferedBytes)
        if session.ready and not self._ready.done():
            self._ready.set_result(None)

    def connectionLost(self, reason: Exception | None) -> None:
        """The connection is over: every waiting call fails (if nothing ended the session before)."""
        if self._abortTimer is not None:
            self._abortTimer.cancel()
            self._abortTimer = None
        if reason is None:
            self._end(self._session.peerClosed())
        else:
            self._end(ConnectionLost(f"the connection to {self.peer} failed: {reason}"))
        if not self._closed.done():
            self._closed.set_result(None)

    def pauseWriting(self) -> None:
        """
        The transport's buffer is full: new calls wait (L{_writable}), and
        what it holds is charged to the session's ledger until it drained
        (past the budget, nothing more is read: L{_ledgerFull}).
        """
        self._paused = True
        self._session.ledger.settle(UNSENT, self.bufferedBytes)

    def resumeWriting(self) -> None:
        """The transport's buffer drained: the calls waiting for it go on, one message each, and reading resumes."""
        self._paused = False
        self._session.ledger.settle(UNSENT, self.bufferedBytes)
        self._keepReading()
        self._wakeWriters()

    def _ledgerFull(self, full: bool) -> None:
        """The session's ledger went over its budget (C{full}) or back within it: stop or resume reading."""
        self._keepReading()

    def _keepReading(self) -> None:
        """Read while the session's ledger is within its budget; else not."""
        transport = self._transport
        if transport is None or self._shut:
            return
        stop = self._session.ledger.full
        if stop is self._readingPaused:
            return
        self._readingPaused = stop
        reading: Any = transport  # (a ReadTransport too: the loop's socket and TLS transports are both)
        if stop:
            reading.pause_reading()
        else:
            reading.resume_reading()

    @property
    def readingPaused(self) -> bool:
        """C{True} while nothing is read from the server (the ledger is over its budget: see L{_ledgerFull})."""
        return self._readingPaused

    # -- calling -------------------------------------------------------------

    async def call(self, target: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """
        Call method C{name} of export C{target} and wait for its answer (see
        L{AsyncReference.callRemote}).  On a connection with interceptors
        (C{framing/rpc/_interception.py}) these are told first (a refusal raises,
        nothing is sent), the metadata they add goes with the call, and they
        are told once of its end (C{asyncio.CancelledError}: its caller gave
        up, L{framing.rpc._interception.CANCELLED}).
        """
        scope = self._scopeNow()
        interception = self._interception
        entry = None
        if interception is not None:
            entry, sending = interception.startCall(name, self.peer, None, scope)
            if sending is not None:
                scope = sending
        try:
            loop = self._loop
            callTimeout = self.callTimeout
            if self._paused:
                await self._writable(name, None if callTimeout is None else loop.time() + callTimeout, scope)
            session = self._session
            if not session.pending:
                # The server's silence counts only while calls wait: from now, when none did.
                self._lastHeard = loop.time()
            future: _Future[Any] = loop.create_future()
            left = None
            if scope is None:
                requestId, data = session.call(future, target, name, args, kwargs)
            else:
                # Inside a callContext: the time left (DeadlineExceeded if none, nothing sent) and the metadata go.
                sent, left = sentWith(name, kwargs, scope, time.monotonic)
                requestId, data = session.call(future, target, name, args, kwargs, sent)
            self._write(data, len(session.pending) > 1)
            if self._silenceTimer is None and self.silenceTimeout is not None:
                self._watchSilence()
            timer = None
            seconds, byDeadline = callBound(left, callTimeout)
            if seconds is not None:
                timer = loop.call_later(seconds, self._timeUp, future, requestId, name, byDeadline, callTimeout)
            try:
                result = await future
            except asyncio.CancelledError:
                # Given up by its caller (cancelled, or its own timeout): the server is told.
                self._cancel(requestId)
                raise
            finally:
                if timer is not None:
                    timer.cancel()
        except BaseException as error:
            if interception is not None and entry is not None:
                interception.callSettled(entry, error, isinstance(error, asyncio.CancelledError))
            raise
        if interception is not None and entry is not None:
            interception.callSettled(entry, None, False)
        return result

    async def callOnly(self, target: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Call method C{name} of export C{target} for no answer (see L{AsyncReference.callRemoteOnly})."""
        scope = self._scopeNow()
        if self._paused:
            callTimeout = self.callTimeout
            await self._writable(name, None if callTimeout is None else self._loop.time() + callTimeout, scope)
        sent, _ = sentWith(name, kwargs, scope, time.monotonic)
        self._write(self._session.callOnly(target, name, args, kwargs, sent), bool(self._session))

    def _timeUp(
        self, future: _Future[Any], requestId: int, name: str, byDeadline: bool, callTimeout: float | None
    ) -> None:
        """
        Call C{requestId}'s time ran out (L{framing.rpc._context.callBound}): the
        server is told, the caller gets L{framing.rpc._context.timeUp}'s error.
        """
        if future.done():
            return
        self._cancel(requestId)
        future.set_exception(timeUp(name, byDeadline, callTimeout))

    def _cancel(self, requestId: int) -> None:
        """Send the CANCEL of call C{requestId} if it still waited (its answer may have come meanwhile)."""
        data = self._session.cancel(requestId)
        if data:
            self._write(data, False)

    def _write(self, data: bytes, gather: bool) -> None:
        """
        Write C{data}: at once, unless messages gathered before it wait (they
        go first) or C{gather} (other calls wait: more will come this turn),
        in which case it joins them for the loop's next turn.
        """
        gathered = self._gathered
        if not gathered and not gather:
            if not self._shut:
                self._transport.write(data)  # type: ignore[union-attr]
            return
        if not gathered:
            self._loop.call_soon(self._flush)
        gathered.append(data)
        self._gatheredBytes += len(data)
        if self._gatheredBytes >= COALESCE_BYTES:
            self._flush()

    def _flush(self) -> None:
        """Write the gathered messages in one write (nothing if the connection ended meanwhile)."""
        gathered = self._gathered
        if not gathered:
            return
        data = b"".join(gathered)
        gathered.clear()
        self._gatheredBytes = 0
        if not self._shut:
            self._transport.write(data)  # type: ignore[union-attr]

    async def _writable(self, name: str, deadline: float | None, scope: Scope | None = None) -> None:
        """
        Wait until the transport takes more (or the connection ended: the
        call then fails as a call on a dead connection does); past
        C{deadline} (on the loop's clock), raise L{framing.rpc.CallTimedOut}; past the
        deadline of C{scope} (a L{callContext}'s) if earlier, L{framing.rpc.DeadlineExceeded}.
        """
        loop = self._loop
        now = loop.time()
        left = None if scope is None or scope.deadline is None else scope.deadline - time.monotonic()
        seconds, byDeadline = callBound(left, None if deadline is None else deadline - now)
        deadline = None if seconds is None else now + seconds
        expired = timeUp(name, byDeadline, self.callTimeout)
        while self._paused and not self._shut:
            waiter: _Future[None] = loop.create_future()
            self._drainWaiters.append(waiter)
            timer = None
            if deadline is not None:
                timer = loop.call_at(deadline, self._drainTimedOut, waiter, expired)
            try:
                await waiter
            finally:
                if timer is not None:
                    timer.cancel()

    def _drainTimedOut(self, waiter: _Future[None], expired: BaseException) -> None:
        if not waiter.done():
            waiter.set_exception(expired)

    def _wakeWriters(self) -> None:
        waiters, self._drainWaiters = self._drainWaiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    # -- the server's silence ------------------------------------------------

    async def awaitStream(self, waiter: _Future[_T]) -> _T:
        """
        Await C{waiter}, which a stream settles (its next item, a transfer's
        end): the server's silence bounds the wait as it bounds a call's, so
        a server gone quiet mid-stream ends it with L{ServerSilent} rather
        than leave it waiting for good.
        """
        if not self._session.pending and not self._streamWaits:
            # The server's silence counts only while something waits: from now, when nothing did.
            self._lastHeard = self._loop.time()
        self._streamWaits += 1
        if self._silenceTimer is None and self.silenceTimeout is not None:
            self._watchSilence()
        try:
            return await waiter
        finally:
            self._streamWaits -= 1

    def _watchSilence(self) -> None:
        """Look at the server's silence every eighth of C{silenceTimeout}, while calls or streams wait."""
        silence = self.silenceTimeout
        if silence is not None and not self._shut:
            self._silenceTimer = self._loop.call_later(silence / 8, self._judgeSilence)

    def _judgeSilence(self) -> None:
        self._silenceTimer = None
        session = self._session
        if (not session.pending and not self._streamWaits) or self.silenceTimeout is None:
            return
        self._apply(session.judgeSilence(self._loop.time() - self._lastHeard, self.silenceTimeout))
        self._watchSilence()

    # -- what the session decided --------------------------------------------

    def _apply(self, settled: list[Settled]) -> None:
        """Settle each call's future, send what the session asks to send, and close if it ended."""
        for future, result, error in settled:
            if not future.done():
                if error is None:
                    future.set_result(result)
                else:
                    future.set_exception(error)
        session = self._session
        data = session.dataToSend()
        if data:
            self._write(data, False)
        failure = session.failure
        if failure is not None and not self._shut:
            if session.closing:
                self._flush()  # (closed after GOAWAY, nothing in flight: what is due goes first)
            self._shut = True
            if self._transport is not None:
                if session.farewell:
                    # (the ERROR telling the server the rule it broke, after the whole messages the transport holds)
                    self._transport.write(session.farewell)
                self._transport.close()
                # What it holds is sent within the grace, or dropped: a server that reads nothing keeps no socket.
                self._abortTimer = self._loop.call_later(self.closeGrace, self._transport.abort)
            if self._silenceTimer is not None:
                self._silenceTimer.cancel()
                self._silenceTimer = None
            if not self._ready.done():
                self._ready.set_exception(failure)
            self._loginOver(failure)
            self._wakeWriters()

    def _end(self, reason: BaseException) -> None:
        """End the connection with C{reason}: every waiting call fails with it, once."""
        self._apply(self._session.end(reason))

    # -- streams of objects ---------------------------------------------------

    def _newStream(self, streams: ClientObjectStreams, streamId: int, window: ReceiveWindow) -> AsyncStream:
        """The session's stream factory: a stream the server sends, as this client reads it."""
        stream = AsyncStream(streams, streamId, window)
        stream.connection = self
        return stream

    async def nextItem(self, stream: AsyncStream) -> Any:
        """
        The next item of C{stream} (see L{AsyncStream}): taken if held, else
        awaited, until the deadline of the enclosing C{callContext} or
        C{callTimeout} seconds (L{framing.rpc._streamtable.itemWaitBound}).

        @raise StopAsyncIteration: the stream ended (or was closed here).
        @raise framing.rpc._errors.DeadlineExceeded: (or L{framing.rpc.CallTimedOut}) no item in time: the
            stream is cancelled, and fails with it from now on.
        """
        streams = self._session.objectStreams
        bound = itemBound(stream.streamId, self.callTimeout)
        while True:
            if stream.buffer:
                try:
                    return streams.take(stream)
                finally:
                    if not self._shut:
                        self._apply([])  # (a CREDIT, a step at a time; CANCEL for a refused item)
            if stream.error is not None:
                raise stream.error
            if stream.ended:
                raise StopAsyncIteration
            waiter: _Future[Any] = self._loop.create_future()
            stream.waiter = waiter
            timer = None
            if bound is not None:
                timer = self._loop.call_later(max(bound[0] - time.monotonic(), 0.0), _expire, waiter, bound[1])
            try:
                await self.awaitStream(waiter)
            except asyncio.CancelledError:
                # The consumer's task was cancelled while it waited: so is the stream.
                stream.waiter = None
                self.cancelStream(stream)
                raise
            except BaseException as error:
                if bound is None or error is not bound[1]:
                    raise
                streams.timedOut(stream, error)
                if not self._shut:
                    self._apply([])  # (its CANCEL)
                raise
            finally:
                if timer is not None:
                    timer.cancel()

    def _streamSending(self, producer: SentStream) -> None:
        """
        A stream this side sends went live (a task pulls its source under
        the server's credit) or is over (cancelled by the server, or the
        connection ended: its task is cancelled, unless it is the one ending it).
        """
        if producer.over:
            task = producer.handle
            if task is not None and task is not asyncio.current_task():
                task.cancel()
            return
        task = self._loop.create_task(self._produce(producer))
        producer.handle = task
        self._producing.add(task)
        task.add_done_callback(self._producing.discard)

    async def _produce(self, producer: SentStream) -> None:
        """Pull C{producer}'s source while the server's credit allows, one ITEM per item; then END or ERROR."""
        streams = self._session.objectStreams
        iterator = producer.source.__aiter__()
        try:
            while not producer.over:
                if not producer.window.open():
                    waiter: _Future[Any] = self._loop.create_future()
                    producer.waiter = waiter
                    await waiter
                    continue
                if self._paused:
                    await self._writable("a stream", None)
                try:
                    item = await iterator.__anext__()
                except StopAsyncIteration:
                    streams.endSending(producer)
                except Exception as error:
                    streams.failSending(producer, error)
                else:
                    streams.itemReady(producer, item)
                data = self._session.dataToSend()
                if data and not self._shut:
                    self._write(data, True)  # (gathered: the items of one turn leave in one write)
        except asyncio.CancelledError:
            pass  # the server cancelled the stream, or the connection ended
        finally:
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
        # The last thing in flight after the server's GOAWAY, perhaps: the session then ends, what is due sent.
        settled = self._session.closeIfDrained()
        if self._session.closing and not self._shut:
            self._apply(settled)

    def cancelStream(self, stream: AsyncStream) -> None:
        """Stop reading C{stream}: CANCEL sent if it was not over."""
        self._session.objectStreams.cancel(stream)
        if not self._shut:
            self._apply([])

    # -- references and the server's calls to this side ---------------------

    def _newReference(self, exportId: int, interfaceNames: tuple[str, ...]) -> AsyncReference:
        """The session's reference factory: an object the server exports, as this client calls it."""
        return AsyncReference(self, exportId, interfaceNames)

    def _referenceDied(self) -> None:
        """
        A reference died with a RELEASE due (told on whatever thread the
        garbage collector ran, maybe inside an encode): sent on the loop's next turn.
        """
        if self._releaseScheduled:
            return
        self._releaseScheduled = True
        try:
            self._loop.call_soon_threadsafe(self._sendReleases)
        except RuntimeError:
            pass  # (the loop is closed: so is the connection)

    def _sendReleases(self) -> None:
        self._releaseScheduled = False
        if not self._shut:
            self._apply([])

    def releaseReference(self, reference: AsyncReference) -> None:
        """Send C{reference}'s RELEASE now (see L{framing.rpc._interfaces.ExportedReference.release})."""
        data = self._session.release(reference)
        if data:
            self._write(data, False)

    def _serveCalls(self) -> None:
        """
        Run the server's calls just read, on the loop: a plain method here
        and now, a coroutine method (or one returning an awaitable) as a
        task; each one's answer is sent when it ends.  A task is cancelled
        by the server's CANCEL, and when its call context's deadline passes
        (counted from the read), which is answered with L{DeadlineExceeded}
        (wire format 12.3, 12.7: L{ClientSession.expireCall}).
        """
        read = time.monotonic()  # (a call context's deadline counts from the read)
        for call in self._session.incomingCalls.take():
            with answering(call, read):
                try:
                    result = call.run()
                except Exception as error:
                    self._answer(call, None, error)
                    continue
                # (a task started here keeps the call's context: currentCall, the deadline its calls carry)
                task = asyncio.ensure_future(result) if inspect.isawaitable(result) else None
            if task is not None:
                self._callTasks.add(task)
                call.stop = task.cancel  # (by the server's CANCEL, or the deadline: IncomingCalls)
                timer = None
                if call.milliseconds is not None:
                    timer = self._loop.call_later(call.milliseconds / 1000, self._expire, call)
                task.add_done_callback(functools.partial(self._callEnded, call, timer))
            else:
                self._answer(call, result, None)

    def _expire(self, call: IncomingCall) -> None:
        """The deadline of the server's C{call} passed while it runs: L{DeadlineExceeded} sent, its task cancelled."""
        settled = self._session.expireCall(call)
        if not self._shut:
            self._apply(settled)

    def _callEnded(self, call: IncomingCall, timer: asyncio.TimerHandle | None, task: asyncio.Future[Any]) -> None:
        self._callTasks.discard(task)
        if timer is not None:
            timer.cancel()
        if task.cancelled():
            self._answer(call, None, asyncio.CancelledError(f"{call.name} was cancelled on this side"))
            return
        error = task.exception()
        self._answer(call, None if error is not None else task.result(), error)

    def _answer(self, call: IncomingCall, result: Any, error: BaseException | None) -> None:
        """Send the answer of the server's C{call} (nothing once the connection ended)."""
        settled = self._session.answerCall(call, result, error)
        if not self._shut:
            self._apply(settled)

    # -- connecting and closing ----------------------------------------------

    async def waitReady(self, timeout: float | None) -> None:
        """
        Wait up to C{timeout} seconds for the server's preamble.

        @raise ServerSilent: none came in time (the connection is closed).
        @raise framing.ProtocolError: the server does not speak chunkwire.
        """
        ready = self._ready
        if timeout is not None and not ready.done():
            why = f"no chunkwire preamble from {self.peer} within {timeout:g} s"
            timer = self._loop.call_later(timeout, self._end, ServerSilent(why))
            try:
                await ready
            finally:
                timer.cancel()
        else:
            await ready

    async def logIn(self, credentials: Any, timeout: float | None) -> None:
        """
        Log in with C{credentials} (the preamble exchanged, no call made
        yet), within C{timeout} seconds: the sans-IO L{ByteExchange} says
        what to send and judges what the server answers; this only carries
        the bytes.

        @raise framing.login.LoginFailed: refused (L{framing.login.LoginRefused}),
            the server not verified, or the exchange broken.
        @raise ServerSilent: no answer within C{timeout}.
        @raise ConnectionLost: the connection ended meanwhile.
        """
        login = ByteExchange(credentials)
        if self._shut:
            raise self._session.failure or ConnectionLost(f"the connection to {self.peer} is over")
        loggedIn: _Future[None] = self._loop.create_future()
        self._login, self._loggedIn = login, loggedIn
        self._transport.write(login.start())  # type: ignore[union-attr]
        timer = None
        if timeout is not None:
            why = ServerSilent(f"no answer to the login from {self.peer} within {timeout:g} s")
            timer = self._loop.call_later(timeout, self._loginOver, why)
        try:
            await loggedIn
        finally:
            if timer is not None:
                timer.cancel()

    def _loginReceived(self, login: ByteExchange, data: bytes) -> None:
        """Bytes from the server during the login: the exchange's, and its replies sent."""
        try:
            reply = login.receive(data)
        except LoginFailed as failure:
            self._loginOver(failure)
            return
        if reply:
            self._transport.write(reply)  # type: ignore[union-attr]
        if login.done:
            self._loginOver(None)

    def _loginOver(self, failure: BaseException | None) -> None:
        """The login under way (if any) ends: logged in if C{failure} is C{None}, else failed with it."""
        loggedIn = self._loggedIn
        self._login = self._loggedIn = None
        if loggedIn is None or loggedIn.done():
            return
        if failure is None:
            loggedIn.set_result(None)
        else:
            loggedIn.set_exception(failure)

    @property
    def acceptsCalls(self) -> bool:
        """Whether a new call may be sent: no GOAWAY from the server, the connection not over."""
        return self._session.acceptsCalls

    async def refresh(self) -> None:
        """
        Let the loop read what the server sent before a new call is written
        (a GOAWAY, the server's close, which the kernel may know already):
        while bytes wait in the socket, yield to the loop, two turns at
        most.  Cost: one C{select} with no wait when none wait.
        """
        transport = self._transport
        sock = None if transport is None else transport.get_extra_info("socket")
        for _ in range(2):
            if sock is None or self._session.failure is not None:
                return
            try:
                if not select.select([sock.fileno()], [], [], 0)[0]:
                    return
            except (OSError, ValueError):
                return
            await asyncio.sleep(0)

    @property
    def ended(self) -> bool:
        """Whether the connection is over (every call on it failed or answered)."""
        return self._session.failure is not None

    @property
    def idle(self) -> bool:
        """Whether no call waits for its answer on this connection."""
        return not self._session.pending

    async def close(self) -> None:
        """
        Close the connection: waiting calls fail with L{ConnectionLost},
        later ones with L{DeadReferenceError}.  Returns once the transport
        is closed: what it held sent, or aborted after L{closeGrace} seconds.
        """
        self._end(ConnectionLost(f"the connection to {self.peer} was closed by this side"))
        if self._transport is not None:
            await self._closed

    async def __aenter__(self) -> AsyncConnection:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.close()


@overload
async def connect(
    address: str | tuple[str, int], *, interface: type | None = None, options: ClientOptions = CLIENT_DEFAULTS
) -> AsyncConnection: ...


@overload
async def connect(
    address: list[str | tuple[str, int]] | list[str] | list[tuple[str, int]],
    *,
    options: ClientOptions = CLIENT_DEFAULTS,
) -> AsyncFailover: ...


async def connect(
    address: str | tuple[str, int] | list[str | tuple[str, int]] | list[str] | list[tuple[str, int]],
    *,
    interface: type | None = None,
    options: ClientOptions = CLIENT_DEFAULTS,
) -> AsyncConnection | AsyncFailover:
    """Connect to the chunkwire RPC server at C{address} (C{"host:port"} or
    C{(host, port)}) on the running event loop, over TLS if the options
    ask, log in if they give credentials, and return the connection, whose
    C{root} is the server's root object (for this login; seen through
    C{interface} if given).  The arguments are L{protocols.blocking.connect}'s.

    @param interface: the root's remote interface: C{root} is then its
        L{AsyncTypedReference}.
    @raise ConnectTimedOut: no TCP connection (or TLS handshake) within the C{timeout}.
    @raise ServerSilent: connected, but no preamble within the C{timeout}.
    @raise OSError: the connection was refused, or the name did not resolve.
    @raise framing.ProtocolError: the server does not speak chunkwire.
    @raise ssl.SSLError: the TLS handshake failed.
    @raise ConnectionLost: the server ended the connection before the login was over.
    @raise framing.login.LoginFailed: the login failed.
    @raise ValueError: the options have C{bulk}, which this client would
        not use (refused before connecting; L{protocols.asynciobulk.connect}
        carries streams).

    A list of addresses makes an L{AsyncFailover} instead (no C{interface}).

    Design: docs/design/clients-without-twisted.md
    """
    options.refuseBulk("protocols.asyncioclient.connect", "protocols.asynciobulk.connect")
    if isinstance(address, list):
        if interface is not None:
            raise TypeError("a client of several addresses takes no interface: type its calls at the call site")
        return await AsyncFailover.resolving(address, options)
    (host, port), context = connectTarget(address, options)
    return await _open((host, port), f"{host}:{port}", context, None, options, interface=interface)


async def connectURL(
    url: str, *, interface: type | None = None, options: ClientOptions = CLIENT_DEFAULTS
) -> AsyncConnection:
    """
    Connect to the object a self-authenticating URL names
    (C{chunkwire://KEYHASH@HINTS/NAME}, see C{framing/login/_urls.py}), as
    L{protocols.blocking.connectURL} does: over TLS, the server's key hash
    compared with the URL's once the handshake is done and before anything
    is sent (no CA, no host name), then logged in by the URL's name; the
    hints are tried in order until one connects.  The connection's C{root}
    is exactly that object.  Other arguments as for L{connect} (the
    options' C{tls} and C{credentials} are the URL's); C{timeout} is each hint's.

    @raise framing.login._urls.InvalidURL: C{url} is not a canonical object URL.
    @raise framing.login._urls.KeyMismatch: the server holds another key (nothing was sent).
    @raise framing.login.LoginRefused: the server knows no such name (or no longer).
    @raise OSError: the last hint's connection error (L{ConnectTimedOut} among them).
    @raise ValueError: the options have credentials, or C{bulk} (see L{connect}).
    """
    options.refuseBulk("protocols.asyncioclient.connectURL", "protocols.asynciobulk.connect")
    attempts, named = urlAttempts(url, options)
    for target, hint in attempts:
        try:
            return await _open(target, hint, pinnedContext(), attempts.url.keyHash, named, interface=interface)
        except Exception as error:
            attempts.failed(error)
    raise attempts.failure()


async def _open(
    target: tuple[str, int] | str,
    peer: str,
    tls: ssl.SSLContext | None,
    pin: str | None,
    options: ClientOptions,
    serverName: str | None = None,
    *,
    interface: type | None = None,
    connectionClass: Callable[..., AsyncConnection] = AsyncConnection,
) -> AsyncConnection:
    """
    Connect to C{target} (C{(host, port)}, or a UNIX socket's path), with
    TLS if C{tls} (the server's name checked against the host, or its key
    against C{pin} before anything is sent), exchange preambles, log in
    with the options' C{credentials} if given; a connection of
    C{connectionClass}, its root seen through C{interface}.
    """
    loop = asyncio.get_running_loop()
    timeout = options.timeout
    credentials = options.credentials
    connection = connectionClass(loop, peer, options, pin=pin)
    # A pinned key checks no name: no SNI either ("" sends none).  (serverName: the name an address was resolved from.)
    hostname = "" if pin is not None else serverName
    if isinstance(target, str):
        connecting = loop.create_unix_connection(
            lambda: connection.protocol, target, ssl=tls, server_hostname=hostname if tls else None
        )
    else:
        host, port = target
        connecting = loop.create_connection(
            lambda: connection.protocol, host, port, ssl=tls, server_hostname=hostname if tls else None
        )
    try:
        await asyncio.wait_for(connecting, timeout)
    except asyncio.TimeoutError as error:
        raise ConnectTimedOut(f"no connection to {peer} within {timeout:g} s") from error
    try:
        await connection.waitReady(timeout)
        if credentials is not None:
            await connection.logIn(credentials, timeout)
    except BaseException:
        await connection.close()
        raise
    if interface is not None:
        connection.root = connection.root.typed(interface)
    return connection


async def resolveAll(
    addresses: Sequence[str | tuple[str, int]], timeout: float | None
) -> list[tuple[tuple[str, int], str]]:
    """
    Every IP address of C{addresses} (C{"host:port"} or C{(host, port)}), in
    order, with the name it was found under (for TLS's check), by the
    loop's C{getaddrinfo} (at most C{timeout} seconds a name): a name with
    several addresses counts as several; one that does not resolve in time
    is kept as it is (its attempts fail and back off).
    """
    loop = asyncio.get_running_loop()
    targets: list[tuple[tuple[str, int], str]] = []
    for address in addresses:
        host, port = parseAddress(address)
        found: list[tuple[str, int]] = []
        try:
            infos = await asyncio.wait_for(loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), timeout)
            found = [(str(info[4][0]), int(info[4][1])) for info in infos]
        except (OSError, asyncio.TimeoutError):
            pass
        targets.extend((target, host) for target in found or [(host, port)])
    return targets


class AsyncFailoverReference:
    """The root of an L{AsyncFailover}: each call goes to one of the service's servers."""

    def __init__(self, failover: AsyncFailover) -> None:
        self.failover = failover

    async def callRemote(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Call remote method C{name} on the root of a ready server and wait for its answer."""
        return await self.failover.call(name, args, kwargs)


class AsyncFailover:
    """A client of one service at several addresses (L{connect} given a list),
    on the running loop: the policy, backoff and send-at-most-once rule are
    C{framing/rpc/_addresses.py}'; this class connects (a task per attempt) and
    waits.  An async context manager that closes every connection.

    Contract: a call goes to a ready connection picked by the policy; with
    none ready it waits, at most to its L{callContext} deadline or
    C{moveTimeout}, then raises L{protocols.rpc.NoAddressReady},
    having sent nothing.  A connection that received GOAWAY or ended takes
    no new call; a call once written is never sent again.

    Cost: per call, the policy's pick (O(1)), one C{select} with no wait on
    the picked connection's socket (L{AsyncConnection.refresh}) and a look
    at the draining connections (O(addresses)).

    Design: docs/design/clients-without-twisted.md

    @ivar root: the service's root object, an L{AsyncFailoverReference}.
    @ivar book: the L{framing.rpc._addresses.AddressBook}.
    """

    def __init__(
        self,
        targets: list[tuple[tuple[str, int], str]],
        options: ClientOptions = CLIENT_DEFAULTS,
        connectionClass: Callable[..., AsyncConnection] = AsyncConnection,
    ) -> None:
        """
        Connections to C{targets} (resolved: see L{resolving}) with C{options},
        each of C{connectionClass}.

        @raise UnsupportedCredentials: no login mechanism takes the options' C{credentials}.
        """
        self.moveTimeout = options.moveTimeout
        self._tls = tlsOf(options)
        self._options = options
        self._connectionClass = connectionClass
        self._hostnames = dict(targets)
        self._loop = asyncio.get_running_loop()
        self.book: AddressBook[AsyncConnection] = AddressBook(
            [target for target, _ in targets], options.policy, options.backoff
        )
        self.root = AsyncFailoverReference(self)
        self._changed: asyncio.Future[None] = self._loop.create_future()
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    @classmethod
    async def resolving(
        cls,
        addresses: Sequence[str | tuple[str, int]],
        options: ClientOptions,
        connectionClass: Callable[..., AsyncConnection] = AsyncConnection,
    ) -> AsyncFailover:
        """The client of C{addresses}, each name resolved (L{resolveAll}) within the options' C{timeout}."""
        tlsOf(options)  # (credentials no mechanism takes are refused before resolving)
        return cls(await resolveAll(addresses, options.timeout), options, connectionClass)

    async def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Send the call C{name} to a ready server (see the class docstring) and wait for its answer."""
        loop = self._loop
        scope = calling.get()
        deadline = loop.time() + self.moveTimeout
        if scope is not None and scope.deadline is not None:
            # (the scope's deadline is on time.monotonic, the loop's clock by default)
            deadline = min(deadline, loop.time() + scope.deadline - time.monotonic())
        route = self.book.route(name, deadline)
        while True:
            if self._closed:
                raise DeadReferenceError(f"cannot call {name!r}: the client was closed")
            for connection in retire(self.book):
                self._spawn(connection.close())
            step = route.step(loop.time())
            if isinstance(step, Wait):
                await self._connectOrWait(step)
                continue
            connection = step.connection
            await connection.refresh()
            if not connection.acceptsCalls:
                route.notSent(step.address, DeadReferenceError("draining or over"), connection.ended)
                continue
            try:
                return await connection.call(ROOT_ID, name, args, kwargs)
            except DeadReferenceError as error:  # (raised before anything was written: the session refused it)
                route.notSent(step.address, error, connection.ended)

    def _spawn(self, work: Any) -> None:
        task = self._loop.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _change(self) -> None:
        """Wake the calls waiting for a connection."""
        if not self._changed.done():
            self._changed.set_result(None)
        self._changed = self._loop.create_future()

    async def _connectOrWait(self, step: Wait[AsyncConnection]) -> None:
        """Start an attempt for each address C{step} names, then wait for a change, to C{step.until} at the latest."""
        for address in step.connect:
            self._spawn(self._attempt(address, step.until))
        changed = self._changed
        timeout = None if step.until is None else max(step.until - self._loop.time(), 0.0)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(changed), timeout)

    async def _attempt(self, address: Any, until: float | None) -> None:
        """Connect to C{address} (and log in), within the connect timeout and C{until}; tell the book."""
        host, port = cast("tuple[str, int]", address.target)
        options = self._options
        if until is not None:
            options = replace(options, timeout=attemptTimeout(options.timeout, until, self._loop.time()))
        try:
            hostname = self._hostnames.get((host, port), host)
            connection = await _open(
                (host, port),
                f"{host}:{port}",
                self._tls,
                None,
                options,
                hostname,
                connectionClass=self._connectionClass,
            )
        except Exception as error:  # (refused, timed out, TLS, login: the address backs off)
            self.book.connectFailed(address, error, self._loop.time())
        else:
            if self._closed:
                await connection.close()
                self.book.lost(address)
            else:
                self.book.connected(address, connection)
        self._change()

    async def close(self) -> None:
        """Close every connection; calls waiting fail as L{AsyncConnection.close} says, later ones at once."""
        self._closed = True
        for address in self.book.addresses:
            if address.connection is not None:
                connection = address.connection
                self.book.lost(address)
                await connection.close()
        for task in list(self._tasks):
            task.cancel()
        self._change()

    async def __aenter__(self) -> AsyncFailover:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.close()
