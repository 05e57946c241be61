# -*- test-case-name: tests.protocols.test_interop,tests.protocols.bulk.test_owners,tests.protocols.rpc.test_streams -*-
"""The interop test service: one fixed RPC root that every implementation's clients and servers check each other with.

An implementation in another language runs the named cases of
C{docs/interop.md} against this service (C{examples/interop_server.py}) and
serves it for C{examples/interop_client.py}; this module is the service's one
definition (typed and checked with C{protocols}, not inside an
example).  The root is L{InteropService}; its methods, results and errors
are the table "The service" in C{docs/interop.md} (each method's docstring
here says it in Python terms).  A logged-in connection's root
(L{InteropRealm}) is an L{Avatar} answering C{whoami()}.

Contract: every method answers in O(1) (C{echo} in the size of its value,
C{gather} in its count), and what the service keeps is bounded: at most
L{MAX_KEYS} keys and L{MAX_TABLE_BYTES} of values in each table (the
oldest forgotten first), at most
L{MAX_WAITING} holds and gather calls waiting at once (past that a call
fails with L{ApplicationError}, code L{TOO_MANY_WAITING}); every waiting
call ends by its own deadline.  The service is for tests: it lets any
client make calls sleep, and it should not be exposed beyond a test
network.
"""

from __future__ import annotations

import math
import os
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Annotated, Any

from twisted.cred.portal import IRealm
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure
from zope.interface import implementer

from framing._budget import held_bytes

from . import bulk, rpc
from .auth._interfaces import IRemoteRoot
from .bulk._files import BulkService

__all__ = [
    "APPLICATION_ERROR",
    "ApplicationError",
    "Avatar",
    "InteropRealm",
    "InteropService",
    "PatternSource",
    "TEST_PASSWORD",
    "TEST_TOKEN",
    "TEST_USER",
    "pattern",
]

TEST_USER = "interop"
"""The user name of the test credentials (a SCRAM-SHA-256 user, and the avatar id of L{TEST_TOKEN})."""
TEST_PASSWORD = "interop-password"
"""L{TEST_USER}'s password.  Public, as every test credential here: serve them on test networks only."""
TEST_TOKEN = "interop-token"
"""The bearer token of L{TEST_USER}."""

APPLICATION_ERROR = "chunkwire.interop.ApplicationError"
"""The wire type name of L{ApplicationError}; its details are C{(message, code)}."""

SHORT_TEXT = 16
"""The most bytes C{shortText}'s argument may hold."""
MAX_KEY = 128
"""The most characters of a key."""
MAX_KEYS = 10_000
"""The most keys each of the service's tables remembers."""
MAX_TABLE_BYTES = 64 * 1024 * 1024
"""The most bytes the values of each of the service's tables hold together (64 MiB)."""
MAX_WAITING = 1_000
"""The most holds, and the most gather calls, waiting at once."""
MAX_HOLD = 600_000
"""The longest hold, in milliseconds."""
MAX_GATHER = 1_000
"""The largest count of a gather."""
GATHER_TIMEOUT = 30.0
"""Seconds a gather waits for its other calls."""
MAX_STREAM = 1 << 40
MAX_ITEMS = 1_000_000
"""Most integers C{count} streams."""
"""The largest stream C{stream} sends, in bytes."""

# ApplicationError's codes
RAISED = 1
"""C{raiseRegistered} raised it (the code is the caller's, this is only the default)."""
GATHER_TIMED_OUT = 2
"""A gather's other calls did not come in time."""
TOO_MANY_WAITING = 3
"""Too many holds or gathers wait already."""

# holdState's answers
WAITING, RELEASED, ELAPSED, CANCELLED, UNKNOWN = "waiting", "released", "elapsed", "cancelled", "unknown"
# streamState's answers (and CANCELLED, UNKNOWN)
SENDING, DONE, FAILED = "sending", "done", "failed"

Key = Annotated[str, rpc.MaxLength(MAX_KEY)]
Milliseconds = Annotated[int, rpc.Range(0, MAX_HOLD)]

PATTERN_PERIOD = 251
"""L{pattern}'s byte at offset I{i} is I{i} mod 251 (a prime: a shifted or repeated block does not match)."""
_PATTERN = bytes(range(PATTERN_PERIOD)) * (1 + (1 << 20) // PATTERN_PERIOD + 1)


class ApplicationError(Exception):
    """
    The interop service's own error, registered on both sides as
    L{APPLICATION_ERROR}, so it arrives as itself: a FAIL whose details are
    C{(message, code)}.

    @ivar message: what went wrong.
    @ivar code: which case of it (L{RAISED}, L{GATHER_TIMED_OUT}, L{TOO_MANY_WAITING}, or the caller's own).
    """

    def __init__(self, message: str, code: int = RAISED) -> None:
        super().__init__(message, code)
        self.message = message
        self.code = code

    def __str__(self) -> str:
        return self.message


rpc.registerError(ApplicationError, APPLICATION_ERROR)


def pattern(offset: int, length: int) -> bytes:
    """
    C{length} bytes of the interop pattern from C{offset}: byte I{i} is
    I{i} mod 251.  What C{stream} sends, and what a client can check any
    piece of; cost O(length).
    """
    pieces = []
    while length > 0:
        start = offset % PATTERN_PERIOD
        take = min(length, len(_PATTERN) - PATTERN_PERIOD)
        pieces.append(_PATTERN[start : start + take])
        offset += take
        length -= take
    return b"".join(pieces)


class PatternSource(bulk.SeekableSource):
    """L{pattern}'s first C{size} bytes as a random-access stream source: nothing is held, every read is made."""

    def __init__(self, size: int) -> None:
        self.size = size

    def read(self, offset: int, length: int) -> bytes:
        """L{pattern}'s bytes from C{offset}, fewer only at the end."""
        return pattern(offset, max(0, min(length, self.size - offset)))


class _Table:
    """
    Key to value, remembering the most recently set keys: at most
    L{MAX_KEYS} of them, holding at most L{MAX_TABLE_BYTES} together (by
    L{framing._budget.held_bytes}, the memory they hold: a list of small ints
    about 36 bytes an item, where its wire bodies count 1),
    the oldest forgotten first; the newest is always kept (a call's value is
    already bounded by the connection's object limits).
    """

    def __init__(self) -> None:
        self._values: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self.bytes = 0

    def set(self, key: str, value: Any) -> None:
        values = self._values
        size = held_bytes((value,))
        old = values.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        values[key] = (value, size)
        self.bytes += size
        while len(values) > 1 and (len(values) > MAX_KEYS or self.bytes > MAX_TABLE_BYTES):
            self.bytes -= values.popitem(last=False)[1][1]

    def get(self, key: str, default: Any = None) -> Any:
        held = self._values.get(key)
        return default if held is None else held[0]


class _Hold:
    """One waiting hold: its call's Deferred and its timer."""

    def __init__(self, answer: Deferred[Any], timer: Any) -> None:
        self.answer = answer
        self.timer = timer


class _Gathering:
    """The calls of one gather key waiting for the rest, and their shared deadline."""

    def __init__(self, count: int, timer: Any) -> None:
        self.count = count
        self.timer = timer
        self.waiting: list[Deferred[int]] = []


class InteropService(rpc.Referenceable):
    """
    The interop service's root: see the module docstring for its methods.

    @ivar clock: the C{IReactorTime} holds and gathers are timed on.
    @ivar fileService: the L{BulkService} C{files()} hands out.
    """

    def __init__(self, clock: Any, directory: str | os.PathLike[str]) -> None:
        """
        @param clock: an C{IReactorTime} (the reactor).
        @param directory: the directory the file service serves (made if missing).
        """
        self.clock = clock
        self.fileService = BulkService(directory, reactor=clock)
        self._recorded = _Table()
        self._holdStates = _Table()
        self._streamStates = _Table()
        self._holds: dict[str, _Hold] = {}
        self._gatherings: dict[str, _Gathering] = {}
        self._gathered = 0

    # -- calls and answers -----------------------------------------------------------------

    @rpc.remote
    def empty(self) -> None:
        """Answer C{None}."""

    @rpc.remote
    def echo(self, value: Any) -> Any:
        """Answer C{value}, whatever it is."""
        return value

    @rpc.remote
    def shortText(self, text: Annotated[str, rpc.MaxLength(SHORT_TEXT)]) -> str:
        """Answer C{text}: the constraint refuses a longer one before this runs."""
        return text

    @rpc.remote
    def raiseRegistered(self, message: Annotated[str, rpc.MaxLength(1000)], code: int) -> None:
        """Fail with L{ApplicationError}C{(message, code)}."""
        raise ApplicationError(message, code)

    @rpc.remote
    def raiseUnregistered(self, message: Annotated[str, rpc.MaxLength(1000)]) -> None:
        """Fail with an exception of a type no one registered, whose message is C{message}."""
        raise RuntimeError(message)

    # -- many calls at once ----------------------------------------------------------------

    @rpc.remote
    def gather(self, key: Key, count: Annotated[int, rpc.Range(1, MAX_GATHER)]) -> Deferred[int]:
        """
        Answer C{count} once C{count} calls of this key wait here at once.

        @raise ApplicationError: code L{GATHER_TIMED_OUT} after
            L{GATHER_TIMEOUT} seconds without them all, or
            L{TOO_MANY_WAITING}.
        """
        if self._gathered >= MAX_WAITING:
            raise ApplicationError("too many gather calls wait already", TOO_MANY_WAITING)
        gathering = self._gatherings.get(key)
        if gathering is None:
            timer = self.clock.callLater(GATHER_TIMEOUT, self._gatherTimedOut, key)
            gathering = self._gatherings[key] = _Gathering(count, timer)
        elif gathering.count != count:
            raise ApplicationError(f"the gather {key!r} is of {gathering.count} calls, not {count}", RAISED)
        waiting: Deferred[int] = Deferred(lambda d: self._leaveGathering(key, d))
        gathering.waiting.append(waiting)
        self._gathered += 1
        if len(gathering.waiting) == count:
            del self._gatherings[key]
            gathering.timer.cancel()
            self._gathered -= count
            for each in gathering.waiting:
                each.callback(count)
        return waiting

    def _leaveGathering(self, key: str, waiting: Deferred[int]) -> None:
        gathering = self._gatherings.get(key)
        if gathering is not None and waiting in gathering.waiting:
            gathering.waiting.remove(waiting)
            self._gathered -= 1

    def _gatherTimedOut(self, key: str) -> None:
        gathering = self._gatherings.pop(key)
        self._gathered -= len(gathering.waiting)
        error = ApplicationError(
            f"only {len(gathering.waiting)} of {gathering.count} calls came within {GATHER_TIMEOUT:g} s",
            GATHER_TIMED_OUT,
        )
        for each in gathering.waiting:
            each.errback(error)

    # -- references ------------------------------------------------------------------------

    @rpc.remote
    async def callBack(self, callback: rpc.RemoteReference, value: Any) -> Any:
        """
        Call C{callback.called(value)} and answer what it answered; the
        reference is dropped when this ends, so its RELEASE goes to the caller.
        """
        try:
            return await callback.callRemote("called", value)
        finally:
            del callback

    @rpc.remote
    def files(self) -> BulkService:
        """The resumable file service, as a reference."""
        return self.fileService

    # -- calls for no answer ---------------------------------------------------------------

    @rpc.remote
    def record(self, key: Key, value: Any) -> None:
        """Remember C{value} under C{key} (for C{recorded})."""
        self._recorded.set(key, value)

    @rpc.remote
    def recorded(self, key: Key) -> Any:
        """What C{record} remembered under C{key}, or C{None}."""
        return self._recorded.get(key)

    # -- sleeping, cancelling, draining ----------------------------------------------------

    @rpc.remote
    def hold(self, key: Key, milliseconds: Milliseconds) -> Deferred[Any]:
        """
        Answer the value of C{release(key, value)}, or C{None} once
        C{milliseconds} pass; a cancel (CANCEL, or the caller's timeout)
        ends it, which C{holdState} then says.

        @raise ApplicationError: code L{TOO_MANY_WAITING}, or another hold of C{key} waits.
        """
        if key in self._holds:
            raise ApplicationError(f"a hold of {key!r} waits already", RAISED)
        if len(self._holds) >= MAX_WAITING:
            raise ApplicationError("too many holds wait already", TOO_MANY_WAITING)
        answer: Deferred[Any] = Deferred(lambda _: self._cancelHold(key))
        timer = self.clock.callLater(milliseconds / 1000, self._elapsed, key)
        self._holds[key] = _Hold(answer, timer)
        self._holdStates.set(key, WAITING)
        return answer

    def _endHold(self, key: str, state: str) -> _Hold | None:
        held = self._holds.pop(key, None)
        if held is not None:
            self._holdStates.set(key, state)
            if held.timer.active():
                held.timer.cancel()
        return held

    def _cancelHold(self, key: str) -> None:
        self._endHold(key, CANCELLED)

    def _elapsed(self, key: str) -> None:
        held = self._endHold(key, ELAPSED)
        if held is not None:
            held.answer.callback(None)

    @rpc.remote
    def release(self, key: Key, value: Any) -> bool:
        """End the hold of C{key}, which answers C{value}; whether one was waiting."""
        held = self._endHold(key, RELEASED)
        if held is None:
            return False
        held.answer.callback(value)
        return True

    @rpc.remote
    def holdState(self, key: Key) -> str:
        """How the hold of C{key} is: waiting, released, elapsed, cancelled, or unknown."""
        state: str = self._holdStates.get(key, UNKNOWN)
        return state

    @rpc.remote
    def goAway(self, milliseconds: Milliseconds) -> None:
        """Send GOAWAY, with a grace of C{milliseconds}, on the connection this call came on."""
        rpc.currentBroker().drain.goAway(milliseconds / 1000)

    # -- object streams, deadlines, metadata ------------------------------------------------

    @rpc.remote
    def count(self, n: Annotated[int, rpc.Range(0, MAX_ITEMS)]) -> Iterator[int]:
        """The integers 0 to C{n} - 1 as an object stream (pulled one ITEM's worth at a time, under credit)."""
        yield from range(n)

    @rpc.remote
    async def total(self, items: AsyncIterator[int]) -> int:
        """The sum of the integers the caller streams (each checked to be an int as it arrives)."""
        total = 0
        async for item in items:
            total += item
        return total

    @rpc.remote
    def context(self) -> dict[str, Any]:
        """The call's deadline (milliseconds left, rounded up, or C{None}) and metadata, as this side read them."""
        call = rpc.currentCall()
        left = call.timeRemaining()
        return {"milliseconds": None if left is None else math.ceil(left * 1000), "metadata": dict(call.metadata)}

    # -- streams ---------------------------------------------------------------------------

    @rpc.remote
    def stream(self, key: Key, size: Annotated[int, rpc.Range(0, MAX_STREAM)]) -> bulk.Stream:
        """A stream of C{size} bytes of L{pattern}, without a digest; C{streamState(key)} says how it ends."""
        stream = bulk.Stream(PatternSource(size), digest=None)
        self._streamStates.set(key, SENDING)
        stream.whenDone().addBoth(self._streamEnded, key)
        return stream

    def _streamEnded(self, result: Any, key: str) -> None:
        if not isinstance(result, Failure):
            state = DONE
        elif isinstance(result.value, bulk.StreamReset) and result.value.code == "cancelled":
            state = CANCELLED
        else:
            state = FAILED
        self._streamStates.set(key, state)

    @rpc.remote
    def streamState(self, key: Key) -> str:
        """How the stream of C{key} is: sending, done, cancelled (by its receiver), failed, or unknown."""
        state: str = self._streamStates.get(key, UNKNOWN)
        return state


class Avatar(rpc.Referenceable):
    """
    The root of a logged-in connection to the interop service.

    @ivar avatarId: the id the login proved.
    """

    def __init__(self, avatarId: str) -> None:
        self.avatarId = avatarId

    @rpc.remote
    def whoami(self) -> str:
        """The avatar id the login proved."""
        return self.avatarId


@implementer(IRealm)
class InteropRealm:
    """Gives each login an L{Avatar} of its own id."""

    def requestAvatar(self, avatarId: Any, mind: Any, *interfaces: Any) -> tuple[Any, Any, Callable[[], None]]:
        """C{(IRemoteRoot, Avatar(avatarId), logout)}."""
        if IRemoteRoot not in interfaces:
            raise NotImplementedError(f"this realm only makes IRemoteRoot avatars, not {list(interfaces)!r}")
        name = avatarId.decode("utf-8") if isinstance(avatarId, bytes) else str(avatarId)
        return IRemoteRoot, Avatar(name), _nothing


def _nothing() -> None:
    return None
