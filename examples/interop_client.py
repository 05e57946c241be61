"""The interop test client: runs the named interop cases against a chunkwire server and says which pass.

    python examples/interop_client.py --server 127.0.0.1:8790 --login-server 127.0.0.1:8791
    python examples/interop_client.py --server 127.0.0.1:8790 --case empty_call --case ping
    python examples/interop_client.py --list

The server is any implementation of the interop service (docs/interop.md;
examples/interop_server.py serves Python's).  Each case opens its own
connections, checks what docs/interop.md says it must observe, and closes
them; the client prints one line per case, "case NAME: pass" or "case NAME:
FAIL: reason", in the order given (all cases, in the order of --list, by
default), and exits with status 1 if any case failed.

--server is the endpoint served to anyone; --login-server the one that
requires logins (the login cases), by default the --server host with the
port after --server's; --certificate-server the TLS endpoint of certificate
logins, by default the port two after --server's.  The login cases log in
with the public test credentials (user "interop", password
"interop-password", token "interop-token", whose avatar is that user)
unless --user, --password and --token give others.  The certificate cases
need --ca-dir (the CA certificates that issued the server's certificate)
and --client-pem (the key and certificate of the user), which
examples/interop_server.py prints when it starts.  A case that has no
result within --case-timeout seconds fails.  --login-timeout is the login
server's login timeout, which login_timeout checks (10 s by default).

Most cases use the Python client as an application would; the cases about
what a server must refuse or say on the wire (deadline_enforced, the
bulk_* and login_* cases after refused_object_mid_stream) write their bytes
themselves on a RawPeer connection, since the Python client keeps the rules.
login_throttle runs last: it leaves this address's throttle bucket full for
about 20 s.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any

from _errors import CommandLineParser, addDebugArgument, explain, runCommand
from twisted.cred.credentials import UsernamePassword
from twisted.internet import defer
from twisted.internet.defer import CancelledError, Deferred, DeferredList
from twisted.internet.endpoints import clientFromString, connectProtocol
from twisted.internet.error import ConnectionClosed, ConnectionDone, ConnectionLost
from twisted.internet.protocol import Protocol
from twisted.internet.task import deferLater
from twisted.python.failure import Failure

from framing import Limits, PeerError, Registry
from framing.slicing import DEFAULT_REGISTRY
from framing.wire import (
    ABORT,
    BODY_KINDS,
    BYTES,
    CLOSE,
    ERROR,
    INT,
    NEG,
    OPEN,
    PING,
    PONG,
    PREAMBLE,
    SIMPLE,
    STRING,
    decode_header,
    encode_header,
)
from protocols import bulk, rpc
from protocols.auth import BearerToken, ClientCertificate, LoginRefused
from protocols.interop import (
    APPLICATION_ERROR,
    CANCELLED,
    TEST_PASSWORD,
    TEST_TOKEN,
    TEST_USER,
    WAITING,
    ApplicationError,
    pattern,
)
from protocols.options import ClientOptions
from protocols.rpc import TLSHandshakeFailed

DEFAULT_SERVER = "127.0.0.1:8790"
EVENTUALLY = 20.0
"""Seconds a case waits for something the server does in its own time (a RELEASE, a cancel seen there)."""
UNKNOWN_OBJECT = 1_000_000_000
"""An export id no interop server has given out."""
LARGE = 4 << 20
"""Bytes of the large call, each way."""
IN_FLIGHT = 64
"""Calls of the gather, all waiting at once."""
PIPELINED = 1000
"""Echo calls sent before any answer is read."""
HOLD = 60_000
"""Milliseconds a hold sleeps unless released or cancelled: far past any case."""
GRACE = 30_000
"""Milliseconds of goaway_drain's grace: the case ends long before, whatever the load."""
CALL_TIMEOUT = 1.0
"""The caller's timeout in timeout_on_sleeping_server, in seconds."""
STREAM_SIZE = 256 << 20
CLIENT_LIMITS = Limits(max_bytes_length=16 << 20, max_string_length=1 << 20, max_connection_memory=64 << 20)
"""
What the client accepts from the server under test: the largest body any
case needs (a 4 MiB call's answer, bulk frames of a few MiB) with room to
spare, so a server that answers with hundreds of MiB is refused at the
header instead of being held (the case then fails), and one connection
holds at most 64 MiB for it."""
STREAMS = bulk.BulkOptions()
"""Every connection to the server under test carries bulk streams, with the default options."""
"""Bytes of the stream cancelled once its first piece arrived: never all sent."""
FILE_SIZE = 6 << 20
"""Bytes of the file uploaded and downloaded, each cut halfway."""
ITEMS = 1000
"""Items of the object streams, each way: several windows' worth (a chunkwire receiver grants 256 at first)."""
CONTEXT_TIMEOUT = 30.0
"""Seconds of deadline_and_metadata's deadline: far past the case."""
SHORT_DEADLINE = 1000
"""Milliseconds of deadline_enforced's hold deadline."""
OVERRUN = 16 << 20
"""Bytes past the server's initial window that bulk_flow_control's one frame announces."""
THROTTLE_ATTEMPTS = 40
"""SCRAM starts login_throttle sends at most before one must be refused at once."""
RAW_LIMIT = 1 << 20
"""
Bytes a raw case keeps of what the server sent (L{RawPeer}): a server
answering a raw case says a few small messages; one that sends more (a
flood) fails the case, its connection closed, rather than growing this
client (a flooding server took it 50 MiB past its bound).
"""


@dataclass
class Unregistered:
    """A type only this client registers: the server refuses it (unknown-type) and stays in step."""

    marker: int = 0


REGISTRY = Registry(DEFAULT_REGISTRY)
REGISTRY.register(Unregistered, "interop.unregistered")


class CaseFailed(Exception):
    """What a case observed is not what docs/interop.md says it must be."""


class Run:
    """
    One case's run: where the servers are, the credentials, and the
    connections the case opened (all closed when it ends).

    @ivar prefix: starts every key and file name of this run, so that
        clients checking one server at once do not meet.
    """

    def __init__(self, reactor: Any, args: argparse.Namespace, name: str) -> None:
        self.reactor = reactor
        self.closeTimeout = min(EVENTUALLY, args.case_timeout)
        self.server = endpointOf(args.server)
        self.loginServer = endpointOf(args.login_server or nextPort(args.server))
        self.certificateServer = args.certificate_server or nextPort(args.server, 2)
        self.caDirectory, self.clientPEM = args.ca_dir, args.client_pem
        self.user, self.password, self.token = args.user, args.password, args.token
        self.prefix = f"{name}-{os.getpid()}-{os.urandom(4).hex()}"
        self.loginTimeout: float = args.login_timeout
        self.roots: list[rpc.RemoteReference] = []
        self.raws: list[RawPeer] = []
        self.endpoint = self.server
        """The endpoint the case connected to last (a connection's error names it)."""

    def key(self, name: str = "") -> str:
        """A key of this run's own."""
        return f"{self.prefix}{'-' if name else ''}{name}"

    async def connect(self, callLimits: rpc.CallLimits | None = None) -> rpc.RemoteReference:
        """A new connection to --server (carrying bulk streams); its root."""
        self.endpoint = self.server
        root = await rpc.connect(
            self.reactor,
            self.server,
            options=ClientOptions(registry=REGISTRY, callLimits=callLimits, limits=CLIENT_LIMITS, bulk=STREAMS),
        )
        self.roots.append(root)
        return root

    async def login(self, credentials: Any) -> rpc.RemoteReference:
        """A new connection to --login-server, logged in with C{credentials}; its root (the avatar)."""
        self.endpoint = self.loginServer
        root = await rpc.connect(
            self.reactor,
            self.loginServer,
            options=ClientOptions(credentials=credentials, limits=CLIENT_LIMITS, bulk=STREAMS),
        )
        self.roots.append(root)
        return root

    def tlsEndpoint(self, withCertificate: bool) -> str:
        """
        The C{ssl:} client description of --certificate-server, trusting
        --ca-dir and presenting --client-pem if C{withCertificate}.

        @raise CaseFailed: the options it needs were not given.
        """
        if self.caDirectory is None or (withCertificate and self.clientPEM is None):
            raise CaseFailed("give --ca-dir and --client-pem (examples/interop_server.py prints them)")
        host, port = parseAddress(self.certificateServer)
        description = f"ssl:host={quote(host)}:port={port}:caCertsDir={quote(self.caDirectory)}:hostname={quote(host)}"
        if withCertificate:
            assert self.clientPEM is not None
            description += f":certKey={quote(self.clientPEM)}:privateKey={quote(self.clientPEM)}"
        return description

    async def loginTLS(self, withCertificate: bool) -> rpc.RemoteReference:
        """A new TLS connection to --certificate-server, logged in with its certificate; its root."""
        description = self.endpoint = self.tlsEndpoint(withCertificate)
        root = await rpc.connect(
            self.reactor,
            description,
            options=ClientOptions(credentials=ClientCertificate(), limits=CLIENT_LIMITS, bulk=STREAMS),
        )
        self.roots.append(root)
        return root

    async def connectUnlogged(self) -> rpc.RemoteReference:
        """
        A new connection to --login-server that does not log in: a plain
        RPC one, so that the call is the first thing sent (a bulk peer would
        send its HELLO first).
        """
        self.endpoint = self.loginServer
        root = await rpc.connect(self.reactor, self.loginServer, options=ClientOptions(limits=CLIENT_LIMITS))
        self.roots.append(root)
        return root

    async def raw(self, endpoint: str) -> RawPeer:
        """A new connection to C{endpoint} (a Twisted client description) that writes bytes as given (L{RawPeer})."""
        self.endpoint = endpoint
        peer = RawPeer(self.reactor)
        client = clientFromString(self.reactor, endpoint)  # type: ignore[no-untyped-call]
        await connectProtocol(client, peer)  # type: ignore[no-untyped-call]
        self.raws.append(peer)
        return peer

    async def close(self) -> None:
        """Close every connection the case opened, and wait (a while) until they are closed."""
        for peer in self.raws:
            if peer.transport is not None and not peer.closed.called:
                peer.transport.abortConnection()
        closing = [root.broker.disconnect() for root in self.roots]
        waiting = DeferredList(closing, consumeErrors=True)
        waiting.addTimeout(self.closeTimeout, self.reactor)
        try:
            await waiting
        except (defer.TimeoutError, CancelledError):
            pass


@dataclass(frozen=True)
class Case:
    """A named case: what it proves (for --list), and its body."""

    name: str
    proves: str
    body: Callable[[Run], Coroutine[Any, Any, None]]


CASES: dict[str, Case] = {}


def case(
    name: str, proves: str
) -> Callable[[Callable[[Run], Coroutine[Any, Any, None]]], Callable[[Run], Coroutine[Any, Any, None]]]:
    """Register the decorated coroutine function as the case C{name}."""

    def add(body: Callable[[Run], Coroutine[Any, Any, None]]) -> Callable[[Run], Coroutine[Any, Any, None]]:
        CASES[name] = Case(name, proves, body)
        return body

    return add


# -- what the cases check with -----------------------------------------------------------------


def shown(value: Any, limit: int = 80) -> str:
    """C{value}'s repr, cut short."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def described(error: BaseException) -> str:
    """An error as a case's reason says it."""
    return f"{type(error).__name__}: {error}"


def expect(condition: bool, reason: str) -> None:
    """Fail the case with C{reason} unless C{condition}."""
    if not condition:
        raise CaseFailed(reason)


async def answer(call: Deferred[Any], what: str) -> Any:
    """The answer of C{call}; a failure fails the case, naming C{what} was called."""
    try:
        return await call
    except (CaseFailed, CancelledError, defer.TimeoutError):
        raise  # (the case's own end: its timeout, never something the server did)
    except Exception as error:
        raise CaseFailed(f"{what} failed with {described(error)}") from error


async def fails(call: Deferred[Any], kind: type[BaseException] | tuple[type[BaseException], ...], what: str) -> Any:
    """
    The error C{call} fails with, which must be a C{kind}; an answer or
    another error fails the case.  The case's own timeout (the call
    cancelled) is never the failure expected: no evidence of anything.
    """
    try:
        result = await call
    except kind as error:
        if kind is not CancelledError and isinstance(error, (CaseFailed, CancelledError, defer.TimeoutError)):
            raise  # (unless the case cancelled the call itself, its cancelling is its timeout's)
        return error
    except (CaseFailed, CancelledError, defer.TimeoutError):
        raise
    except Exception as error:
        raise CaseFailed(f"{what} failed with {described(error)}, not a {kindName(kind)}") from error
    raise CaseFailed(f"{what} answered {shown(result)}, expected a failure ({kindName(kind)})")


def kindName(kind: type[BaseException] | tuple[type[BaseException], ...]) -> str:
    """The name of an expected failure's type (or types: "A or B")."""
    return " or ".join(each.__name__ for each in (kind if isinstance(kind, tuple) else (kind,)))


async def allAnswers(calls: Iterable[Deferred[Any]], what: str) -> list[Any]:
    """The answers of all C{calls}, in order; the first failure fails the case."""
    results = await DeferredList(list(calls), consumeErrors=True)
    for ok, value in results:
        if not ok:
            raise CaseFailed(f"{what} failed with {described(value.value)}")
    return [value for _, value in results]


async def eventually(reactor: Any, check: Callable[[], Awaitable[Any]], what: str) -> None:
    """
    Ask C{check} until it returns C{True}, for up to L{EVENTUALLY}
    seconds (a generous deadline, not a measure); it returns anything else
    to say what it saw meanwhile.
    """
    deadline = time.monotonic() + EVENTUALLY
    while True:
        seen = await check()
        if seen is True:
            return
        if time.monotonic() > deadline:
            raise CaseFailed(f"{what} not seen within {EVENTUALLY:g} s (last seen: {shown(seen)})")
        await deferLater(reactor, 0.02)


async def holdStateIs(root: rpc.RemoteReference, key: str, wanted: str) -> Any:
    """C{True} if the hold of C{key} is in state C{wanted}, else the state it is in."""
    state = await answer(root.callRemote("holdState", key), "holdState")
    return True if state == wanted else state


# -- raw connections: what a server must refuse, written byte by byte -------------------------------


@dataclass
class Raw:
    """A container read off the wire: its open type (C{"ERROR"} for an ERROR token) and its items."""

    name: str
    items: list[Any]


def parsed(data: bytes) -> list[Any]:
    """
    The whole top-level things in C{data}, a server's stream from its
    preamble: atoms, L{Raw} containers (nested as read), and each ERROR
    token as C{Raw("ERROR", [text])}.  An unfinished object at the end, PING
    and PONG are left out.  Costs one pass over C{data}.
    """
    if not data.startswith(PREAMBLE):
        return []
    things: list[Any] = []
    stack: list[Raw] = []
    pos, end = len(PREAMBLE), len(data)
    while pos < end:
        header = decode_header(data, pos, end)
        if header is None:
            break
        kind, value, length = header
        pos += length
        body = b""
        if kind in BODY_KINDS:
            if pos + value > end:
                break
            body, pos = data[pos : pos + value], pos + value
        if kind in (PING, PONG):
            continue
        if kind == OPEN:
            stack.append(Raw(body.decode("ascii", "replace"), []))
            continue
        if kind == ERROR:
            things.append(Raw("ERROR", [body.decode("utf-8", "replace")]))
            continue
        if kind == ABORT:
            stack.clear()
            continue
        if kind == CLOSE:
            if not stack:
                break
            thing: Any = stack.pop()
        elif kind == INT:
            thing = value
        elif kind == NEG:
            thing = -1 - value
        elif kind == STRING:
            thing = body.decode("utf-8", "replace")
        elif kind == SIMPLE:
            thing = (None, False, True)[value] if value < 3 else ("SIMPLE", value)
        else:
            thing = bytes(body)
        (stack[-1].items if stack else things).append(thing)
    return things


def errorText(things: list[Any]) -> str | None:
    """The text of the first ERROR token among C{things}, or C{None}."""
    return next((thing.items[0] for thing in things if isinstance(thing, Raw) and thing.name == "ERROR"), None)


def rpcMessage(things: list[Any], tag: int, requestId: int) -> Raw | None:
    """The first RPC message of C{tag} (1 ANSWER, 2 FAIL) for C{requestId} among C{things}, or C{None}."""
    for thing in things:
        if isinstance(thing, Raw) and thing.name == "rpc" and thing.items[:2] == [tag, requestId]:
            return thing
    return None


def answered(things: list[Any], requestId: int) -> Raw | None:
    """The ANSWER or FAIL of C{requestId} among C{things}, or C{None}."""
    return rpcMessage(things, 1, requestId) or rpcMessage(things, 2, requestId)


def bulkHello(things: list[Any]) -> Raw | None:
    """The peer's bulk HELLO (C{bulk.ctl} op 5) among C{things}, or C{None}."""
    return next((t for t in things if isinstance(t, Raw) and t.name == "bulk.ctl" and t.items[:1] == [5]), None)


def loginReply(things: list[Any]) -> Raw | None:
    """The server's first C{login} message among C{things}, or C{None}."""
    return next((thing for thing in things if isinstance(thing, Raw) and thing.name == "login"), None)


def tInt(value: int) -> bytes:
    return encode_header(INT, value)


def tStr(text: str) -> bytes:
    body = text.encode("utf-8")
    return encode_header(STRING, len(body)) + body


def tBytes(body: bytes) -> bytes:
    return encode_header(BYTES, len(body)) + body


NONE = encode_header(SIMPLE, 0)


def tObject(name: str, *items: bytes) -> bytes:
    """OPEN C{name}, the C{items} (already encoded), CLOSE."""
    body = name.encode("ascii")
    return encode_header(OPEN, len(body)) + body + b"".join(items) + encode_header(CLOSE, 0)


def tCall(requestId: int, target: int, method: str, *args: bytes, context: bytes = NONE) -> bytes:
    """A CALL, its keyword arguments None (or C{context}, an encoded call context)."""
    return tObject("rpc", tInt(0), tInt(requestId), tInt(target), tStr(method), context, *args)


def tContext(milliseconds: int) -> bytes:
    """A call context with a deadline of C{milliseconds} and no keyword arguments or metadata (12.7)."""
    return tObject("tuple", NONE, tInt(milliseconds), NONE)


def tHello(window: int = 0) -> bytes:
    """The client's bulk HELLO: sha256, and C{window} bytes of initial window."""
    return tObject("bulk.ctl", tInt(5), tInt(0), tStr("sha256"), tInt(window))


def tLogin(verb: str, mechanism: str, payload: bytes) -> bytes:
    return tObject("login", tStr(verb), tStr(mechanism), tBytes(payload))


class RawPeer(Protocol):
    """
    A connection that writes the bytes a case gives it and keeps what the
    server sends (the first L{RAW_LIMIT} bytes: past them it closes the
    connection), to check what a server must refuse or say on the wire
    (which the Python client, keeping the rules, would never send).

    @ivar closed: fires (with C{None}) when the connection is closed.
    """

    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor
        self.data = bytearray()
        self.overflowed = False
        self.closed: Deferred[None] = Deferred()
        self._waiting: list[Deferred[None]] = []

    def dataReceived(self, data: bytes) -> None:
        if self.overflowed:
            return
        if len(self.data) + len(data) > RAW_LIMIT:
            # More than any answer to a raw case: kept no more, and the connection closed.
            self.overflowed = True
            transport: Any = self.transport
            transport.abortConnection()
        else:
            self.data += data
        self._wake()

    def connectionLost(self, reason: Failure | None = None) -> None:
        if not self.closed.called:
            self.closed.callback(None)
        self._wake()

    def _wake(self) -> None:
        waiting, self._waiting = self._waiting, []
        for each in waiting:
            each.callback(None)

    def send(self, data: bytes) -> None:
        """Write C{data} as it is."""
        transport: Any = self.transport
        transport.write(data)

    def things(self) -> list[Any]:
        """What the server sent so far (L{parsed})."""
        return parsed(bytes(self.data))

    async def until(self, check: Callable[[list[Any]], Any], what: str, seconds: float = EVENTUALLY) -> Any:
        """
        What C{check} returns for the server's things once it returns
        anything true; fails the case if the connection closes first, or
        after C{seconds} (a deadline for a broken server, not a measure).
        """
        deadline = time.monotonic() + seconds
        while True:
            seen = check(self.things())
            if seen:
                return seen
            if self.overflowed:
                raise CaseFailed(f"{what}: not seen in the first {RAW_LIMIT} bytes the server sent (it sent more)")
            if self.closed.called:
                raise CaseFailed(f"{what}: not seen before the server closed the connection (it sent {self.shown()})")
            left = deadline - time.monotonic()
            if left <= 0:
                raise CaseFailed(f"{what}: not seen within {seconds:g} s (the server sent {self.shown()})")
            woken: Deferred[None] = Deferred()
            self._waiting.append(woken)
            woken.addTimeout(left, self.reactor)
            try:
                await woken
            except defer.TimeoutError:
                pass

    async def untilClosed(self, what: str, seconds: float = EVENTUALLY) -> list[Any]:
        """The server's things once it has closed the connection; fails the case if it does not within C{seconds}."""
        closed = self.closed
        if not closed.called:
            waiting: Deferred[None] = Deferred()

            def wake(_: None) -> None:
                if not waiting.called:
                    waiting.callback(None)

            closed.addCallback(wake)
            waiting.addTimeout(seconds, self.reactor)
            try:
                await waiting
            except defer.TimeoutError:
                raise CaseFailed(f"{what}: the server did not close the connection within {seconds:g} s") from None
        return self.things()

    def shown(self) -> str:
        return shown(self.things(), 200)


# -- the cases, in the order they run by default -----------------------------------------------


@case("empty_call", "a call with no arguments is answered with None")
async def emptyCall(run: Run) -> None:
    root = await run.connect()
    result = await answer(root.callRemote("empty"), "empty()")
    expect(result is None, f"empty() answered {shown(result)}, not None")


@case("large_call", "a 4 MiB byte string goes up in a call and comes back in its answer, unchanged")
async def largeCall(run: Run) -> None:
    root = await run.connect()
    data = os.urandom(LARGE)
    result = await answer(root.callRemote("echo", data), "echo(4 MiB)")
    expect(type(result) is bytes, f"echo answered a {type(result).__name__}, not bytes")
    expect(result == data, f"echo answered {len(result)} bytes that are not the {len(data)} sent")


@case("many_in_flight", "64 calls wait on the server at once, and 1000 pipelined calls get their own answers")
async def manyInFlight(run: Run) -> None:
    root = await run.connect()
    key = run.key()
    gathered = await allAnswers([root.callRemote("gather", key, IN_FLIGHT) for _ in range(IN_FLIGHT)], "gather")
    expect(gathered == [IN_FLIGHT] * IN_FLIGHT, f"gather answered {shown(gathered)}")
    echoed = await allAnswers([root.callRemote("echo", i) for i in range(PIPELINED)], "echo")
    expect(echoed == list(range(PIPELINED)), f"the pipelined echoes answered {shown(echoed)}")


@case("remote_error_registered", "a registered error arrives as itself, with its details")
async def remoteErrorRegistered(run: Run) -> None:
    root = await run.connect()
    call = root.callRemote("raiseRegistered", "refused on purpose", 7)
    error = await fails(call, ApplicationError, "raiseRegistered")
    got = (error.message, error.code)
    expect(got == ("refused on purpose", 7), f"{APPLICATION_ERROR} came with details {shown(got)}")


@case("remote_error_violation", "an argument the method's constraint refuses fails the call as a Violation")
async def remoteErrorViolation(run: Run) -> None:
    root = await run.connect()
    error = await fails(root.callRemote("shortText", "x" * 17), rpc.RemoteViolation, "shortText(17 bytes)")
    got = (error.code, error.where)
    expect(got == ("body-too-large", "args[0]"), f"the Violation's details were {shown(got)}")
    result = await answer(root.callRemote("shortText", "x" * 16), "shortText(16 bytes)")
    expect(result == "x" * 16, f"shortText(16 bytes) answered {shown(result)}")


@case("remote_error_method_failure", "a method's own unregistered failure arrives as a RemoteError with its message")
async def remoteErrorMethodFailure(run: Run) -> None:
    root = await run.connect()
    error = await fails(root.callRemote("raiseUnregistered", "failed on purpose"), rpc.RemoteError, "raiseUnregistered")
    expect(type(error) is rpc.RemoteError, f"raiseUnregistered failed as a {type(error).__name__}, not a RemoteError")
    reserved = ("Violation", "NoSuchMethod", "NoSuchObject", APPLICATION_ERROR)
    expect(error.remoteType not in reserved, f"the failure's type name is {error.remoteType!r}")
    expect(error.message == "failed on purpose", f"the failure's message is {shown(error.message)}")


@case("unknown_method", "a call to a method the object lacks fails as NoSuchMethod; the connection stays up")
async def unknownMethod(run: Run) -> None:
    root = await run.connect()
    await fails(root.callRemote("noSuchMethodHere"), rpc.NoSuchMethod, "noSuchMethodHere()")
    result = await answer(root.callRemote("empty"), "empty() after it")
    expect(result is None, f"empty() after it answered {shown(result)}")


@case("unknown_object", "a call to an export id never given out fails as NoSuchObject; the connection stays up")
async def unknownObject(run: Run) -> None:
    root = await run.connect()
    call = root.broker.callRemote(UNKNOWN_OBJECT, "empty", (), {})
    await fails(call, rpc.NoSuchObject, f"a call to export {UNKNOWN_OBJECT}")
    result = await answer(root.callRemote("empty"), "empty() after it")
    expect(result is None, f"empty() after it answered {shown(result)}")


class Callback(rpc.Referenceable):
    """What the client passes to callBack: the server calls C{called(value)} on it."""

    def __init__(self) -> None:
        self.values: list[Any] = []

    @rpc.remote
    def called(self, value: int) -> int:
        self.values.append(value)
        return value + 1


@case("callback_and_release", "the server calls back a reference the client passed, then RELEASEs it")
async def callbackAndRelease(run: Run) -> None:
    root = await run.connect()
    broker = root.broker
    before = broker.exportCount
    callback = Callback()
    result = await answer(root.callRemote("callBack", callback, 41), "callBack(ref, 41)")
    expect(callback.values == [41], f"the server called back with {shown(callback.values)}, not [41]")
    expect(result == 42, f"callBack answered {shown(result)}, not the callback's answer 42")

    async def released() -> Any:
        return True if broker.exportCount == before else f"{broker.exportCount - before} export(s) held"

    await eventually(run.reactor, released, "the server's RELEASE of the callback")


@case("call_for_no_answer", "calls for no answer run, and get no answer even when they fail")
async def callForNoAnswer(run: Run) -> None:
    root = await run.connect()
    key = run.key()
    root.callRemoteOnly("raiseUnregistered", "no one hears of this failure")
    root.callRemoteOnly("noSuchMethodHere")
    root.callRemoteOnly("record", key, "noted")
    result = await answer(root.callRemote("recorded", key), "recorded(key)")
    expect(result == "noted", f"recorded(key) answered {shown(result)}, not what record() was given")
    expect(root.broker.isConnected(), "the connection was closed")


@case("cancel_before_answer", "a call cancelled while it runs ends there, and is not answered")
async def cancelBeforeAnswer(run: Run) -> None:
    root = await run.connect()
    key = run.key()
    held = root.callRemote("hold", key, HOLD)
    expect(await holdStateIs(root, key, WAITING) is True, "the hold is not waiting on the server")
    held.cancel()
    await fails(held, CancelledError, "the cancelled hold")
    await eventually(run.reactor, lambda: holdStateIs(root, key, CANCELLED), "the server's cancel of the hold")


class Pieces(bulk.Sink):
    """
    A stream's pieces as they arrive, which must be in order (from any first offset).

    @ivar data: the bytes kept, from C{first}.
    @ivar first: the offset of the first piece, or C{None} before it.
    @ivar end: where the bytes kept end, or C{None} before the first piece.
    @ivar gap: a piece arrived out of order (then no more is kept).
    @ivar stopped: if set (by C{onPiece}), later pieces are released unkept.
    """

    sequential = False
    # The case checks what it kept itself: a stream of some ranges of a file
    # announces the whole file's size, and carries only those ranges.
    verifies = True

    def __init__(self, onPiece: Callable[[Pieces], None] | None = None) -> None:
        self.data = bytearray()
        self.first: int | None = None
        self.end: int | None = None
        self.gap = False
        self.stopped = False
        self.onPiece = onPiece

    def write(self, offset: int, data: Any, release: Callable[[int], None]) -> None:
        if self.first is None:
            self.first = self.end = offset
        if offset != self.end:
            self.gap = self.stopped = True
        if not self.stopped:
            self.data += data
            self.end = offset + len(data)
            if self.onPiece is not None:
                self.onPiece(self)
        release(len(data))


@case("cancel_after_answer_starts", "a stream result cancelled by its receiver after its first piece ends there")
async def cancelAfterAnswerStarts(run: Run) -> None:
    root = await run.connect()
    key = run.key()
    incoming = await answer(root.callRemote("stream", key, STREAM_SIZE), "stream(key, 256 MiB)")
    expect(isinstance(incoming, bulk.IncomingStream), f"stream() answered {shown(incoming)}, not a stream")
    expect(incoming.size == STREAM_SIZE, f"the stream announced {incoming.size} bytes, not {STREAM_SIZE}")
    first: Deferred[None] = Deferred()

    def seen(pieces: Pieces) -> None:
        pieces.stopped = True
        first.callback(None)

    pieces = Pieces(seen)
    receiving = incoming.receive(pieces)
    await first
    expect(pieces.first == 0 and len(pieces.data) > 0, f"the first piece is at {pieces.first}, of {len(pieces.data)}")
    expect(bytes(pieces.data) == pattern(0, len(pieces.data)), "the first piece is not the interop pattern")
    incoming.cancel("the interop client has seen enough")
    await fails(receiving, bulk.StreamReset, "receiving the cancelled stream")

    async def cancelled() -> Any:
        state = await answer(root.callRemote("streamState", key), "streamState")
        return True if state == CANCELLED else state

    await eventually(run.reactor, cancelled, "the server's end of the cancelled stream")


@case("timeout_on_sleeping_server", "a call past the caller's timeout fails with CallTimedOut, and the server is told")
async def timeoutOnSleepingServer(run: Run) -> None:
    timed = await run.connect(callLimits=rpc.CallLimits(callTimeout=CALL_TIMEOUT))
    key = run.key()
    await fails(timed.callRemote("hold", key, HOLD), rpc.CallTimedOut, "the hold past the caller's timeout")
    root = await run.connect()
    await eventually(run.reactor, lambda: holdStateIs(root, key, CANCELLED), "the server's cancel of the hold")


@case("ping", "a PING is answered with its PONG")
async def ping(run: Run) -> None:
    root = await run.connect()
    seconds = await answer(root.broker.connection.sendPing(), "the ping")
    expect(isinstance(seconds, float) and seconds >= 0, f"the ping's round trip is {shown(seconds)}")


@case("goaway_drain", "after GOAWAY the call in flight is answered, no new call is sent, the connection closes")
async def goAwayDrain(run: Run) -> None:
    draining = await run.connect()
    other = await run.connect()
    key = run.key()
    held = draining.callRemote("hold", key, HOLD)
    expect(await holdStateIs(draining, key, WAITING) is True, "the hold is not waiting on the server")
    result = await answer(draining.callRemote("goAway", GRACE), f"goAway({GRACE})")
    expect(result is None, f"goAway answered {shown(result)}, not None")
    await fails(draining.callRemote("empty"), rpc.GoingAway, "a new call on the draining connection")
    released = await answer(other.callRemote("release", key, "finished"), "release(key) on another connection")
    expect(released is True, "release found no hold waiting")
    result = await answer(held, "the hold in flight")
    expect(result == "finished", f"the hold in flight answered {shown(result)}, not the released value")
    reason = await draining.broker.whenDisconnected()
    expect(isinstance(reason, ConnectionDone), f"the draining connection ended with {described(reason)}")
    result = await answer(other.callRemote("empty"), "empty() on another connection")
    expect(result is None, f"empty() on another connection answered {shown(result)}")


@case("login_scram", "a SCRAM-SHA-256 login with the right password reaches the user's avatar")
async def loginScram(run: Run) -> None:
    credentials = UsernamePassword(run.user.encode("utf-8"), run.password.encode("utf-8"))
    root = await answer(Deferred.fromCoroutine(run.login(credentials)), "the login")
    name = await answer(root.callRemote("whoami"), "whoami()")
    expect(name == run.user, f"whoami() answered {shown(name)}, not {run.user!r}")


@case("login_scram_refused", "SCRAM-SHA-256 logins with a wrong password or an unknown user are refused alike")
async def loginScramRefused(run: Run) -> None:
    for user, password in ((run.user, run.password + "-wrong"), (run.user + "-unknown", run.password)):
        credentials = UsernamePassword(user.encode("utf-8"), password.encode("utf-8"))
        await fails(Deferred.fromCoroutine(run.login(credentials)), LoginRefused, f"the login as {user!r}")


@case("login_token", "a bearer-token login reaches the avatar the token belongs to")
async def loginToken(run: Run) -> None:
    root = await answer(Deferred.fromCoroutine(run.login(BearerToken(run.token.encode("utf-8")))), "the login")
    name = await answer(root.callRemote("whoami"), "whoami()")
    expect(name == run.user, f"whoami() answered {shown(name)}, not {run.user!r}")


@case("login_token_refused", "a bearer-token login with an unknown token is refused")
async def loginTokenRefused(run: Run) -> None:
    wrong = BearerToken((run.token + "-wrong").encode("utf-8"))
    await fails(Deferred.fromCoroutine(run.login(wrong)), LoginRefused, "the login with a wrong token")


@case("login_certificate", "a TLS client certificate from the server's CA logs in as its common name")
async def loginCertificate(run: Run) -> None:
    run.tlsEndpoint(withCertificate=True)
    root = await answer(Deferred.fromCoroutine(run.loginTLS(withCertificate=True)), "the login")
    name = await answer(root.callRemote("whoami"), "whoami()")
    expect(name == run.user, f"whoami() answered {shown(name)}, not {run.user!r}")


@case("login_certificate_refused", "a TLS client without a client certificate is not let in")
async def loginCertificateRefused(run: Run) -> None:
    run.tlsEndpoint(withCertificate=False)
    # The evidence: the TLS handshake (or the login after it) refused, or the connection cut during it; not a
    # refused connection (nothing listening), a plain close with nothing said, or this side's own timeout.
    refusals = (TLSHandshakeFailed, LoginRefused, ConnectionLost)
    await fails(Deferred.fromCoroutine(run.loginTLS(withCertificate=False)), refusals, "a login with no certificate")


@case("login_required", "a call before logging in is not answered: the login server closes the connection")
async def loginRequired(run: Run) -> None:
    root = await run.connectUnlogged()
    # The evidence: the call fails because the server closed the connection (after an ERROR saying why: a
    # PeerError), not with an answer, a refusal of the call, garbage this side could not read (its own
    # ProtocolError) or this side's own timeout.
    await fails(root.callRemote("whoami"), (ConnectionClosed, PeerError), "whoami() without a login")
    closed = root.broker.whenDisconnected()
    closed.addTimeout(EVENTUALLY, run.reactor)
    await closed


@case("bulk_upload_download_resume", "an upload and a download, each cut halfway, resume from what was held")
async def bulkUploadDownloadResume(run: Run) -> None:
    data = os.urandom(FILE_SIZE)
    size, half = len(data), len(data) // 2
    digest = hashlib.sha256(data).digest()
    name, version = f"interop-{run.key()}.bin", "interop-1"
    opening = (name, size, version, ["sha256"])
    first = await run.connect()
    files = await answer(first.callRemote("files"), "files()")
    opened = await answer(files.callRemote("openUpload", *opening), "openUpload")
    expect(opened == {"held": [], "algorithm": "sha256"}, f"openUpload of a new file answered {shown(opened)}")
    stream = bulk.Stream(size=size, digest=None)
    uploading = files.callRemote("upload", name, stream)
    stream.write(data[:half])

    async def halfSent() -> Any:
        return True if stream.sentBytes >= half else f"{stream.sentBytes} bytes sent"

    await eventually(run.reactor, halfSent, "the first half of the upload sent")

    def halfHeld(files: rpc.RemoteReference, when: str) -> Callable[[], Awaitable[Any]]:
        async def check() -> Any:
            reopened = await answer(files.callRemote("openUpload", *opening), f"openUpload {when}")
            return True if reopened == {"held": [[0, half]], "algorithm": "sha256"} else reopened

        return check

    # Sent is not held: a close while the server's acknowledgements are
    # unread here becomes a reset, which drops what the server's kernel has
    # not yet handed it.  So the cut comes once the server says it holds
    # the first half; the case proves that what is held survives the cut.
    await eventually(run.reactor, halfHeld(files, "before the cut"), "the first half held by the server")
    await first.broker.disconnect()  # the cut, halfway through the stream
    await fails(uploading, Exception, "the upload cut halfway")

    second = await run.connect()
    files = await answer(second.callRemote("files"), "files()")
    await eventually(run.reactor, halfHeld(files, "after the cut"), "the first half held by the server after the cut")
    secondHalf = bulk.Stream(data, ranges=[(half, size)], digest=None)
    held = await answer(files.callRemote("upload", name, secondHalf), "upload of the second half")
    expect(held == {"held": size}, f"upload of the second half answered {shown(held)}")
    finished = await answer(files.callRemote("finishUpload", name, digest), "finishUpload")
    expect(
        finished.get("size") == size and finished.get("digest") == digest.hex(),
        f"finishUpload answered {shown(finished)}",
    )

    info = await answer(files.callRemote("stat", name, ["sha256"]), "stat")
    expect(
        info.get("size") == size and info.get("digest") == digest.hex() and info.get("algorithm") == "sha256",
        f"stat answered {shown(info)}",
    )
    enough: Deferred[None] = Deferred()

    def cutWhenHalf(pieces: Pieces) -> None:
        if pieces.end is not None and pieces.end >= half:
            pieces.stopped = True  # what arrives after this is not kept: the cut is here
            enough.callback(None)

    kept = Pieces(cutWhenHalf)
    incoming = await answer(files.callRemote("download", name, info["version"], [[0, size]]), "download")
    receiving = incoming.receive(kept)
    await enough
    await second.broker.disconnect()  # the cut, halfway through the download
    await fails(receiving, Exception, "the download cut halfway")
    expect(kept.first == 0 and not kept.gap, "the download's pieces did not arrive in order from 0")
    start = len(kept.data)
    expect(start < size, "the whole file arrived before the cut")

    third = await run.connect()
    files = await answer(third.callRemote("files"), "files()")
    incoming = await answer(files.callRemote("download", name, info["version"], [[start, size]]), "download")
    rest = Pieces()
    await answer(incoming.receive(rest), "the resumed download")
    expect(
        rest.first == start and rest.end == size and not rest.gap,
        f"the resumed download held {shown(rest.first)}..{shown(rest.end)}, not {start}..{size}",
    )
    whole = bytes(kept.data) + bytes(rest.data)
    expect(hashlib.sha256(whole).digest() == digest, "the downloaded file's SHA-256 is not the uploaded file's")


@case("refused_object_mid_stream", "objects the server refuses between calls leave the stream in step")
async def refusedObjectMidStream(run: Run) -> None:
    root = await run.connect()
    before = root.callRemote("echo", 1)
    root.broker.sendObject(Unregistered(1))  # a whole top-level object of an unknown type
    refused = root.callRemote("echo", [1, [2, Unregistered(2), [3]], 4])  # a call holding one, nested
    after = root.callRemote("echo", 3)
    expect(await answer(before, "echo(1)") == 1, "echo(1) before the refused objects did not answer 1")
    error = await fails(refused, rpc.RemoteViolation, "echo(an unknown type)")
    expect(error.code == "unknown-type", f"the refusal's code is {error.code!r}, not 'unknown-type'")
    expect(await answer(after, "echo(3)") == 3, "echo(3) after the refused objects did not answer 3")
    expect(root.broker.isConnected(), "the connection was closed")


@case("object_stream_result", "a result streamed as objects arrives whole, in order, under the client's credit")
async def objectStreamResult(run: Run) -> None:
    root = await run.connect()
    stream = await answer(root.callRemote("count", ITEMS), f"count({ITEMS})")
    got: list[Any] = []
    try:
        async for item in stream:
            got.append(item)
    except Exception as error:
        raise CaseFailed(f"the stream of count({ITEMS}) failed after {len(got)} items: {described(error)}") from error
    expect(got == list(range(ITEMS)), f"count({ITEMS}) streamed {shown(got)}")
    expect(root.broker.isConnected(), "the connection was closed")


@case("object_stream_argument", "an object stream passed as an argument is taken whole under the server's credit")
async def objectStreamArgument(run: Run) -> None:
    root = await run.connect()

    async def numbers() -> Any:
        for number in range(ITEMS):
            yield number

    total = await answer(root.callRemote("total", numbers()), f"total({ITEMS} integers)")
    expect(total == sum(range(ITEMS)), f"total answered {shown(total)}, not {sum(range(ITEMS))}")


@case("deadline_and_metadata", "a call's deadline and metadata reach the method; a plain call carries neither")
async def deadlineAndMetadata(run: Run) -> None:
    root = await run.connect()
    key = run.key()
    with rpc.callContext(timeout=CONTEXT_TIMEOUT, metadata={"interop-key": key}, clock=run.reactor):
        calling = root.callRemote("context")
    seen = await answer(calling, "context() with a deadline and metadata")
    left = seen.get("milliseconds") if isinstance(seen, dict) else None
    limit = int(CONTEXT_TIMEOUT * 1000)
    expect(type(left) is int and 0 < left <= limit, f"context() saw {shown(seen)}: not 1 to {limit} ms left")
    expect(seen.get("metadata") == {"interop-key": key}, f"context() saw the metadata {shown(seen.get('metadata'))}")
    plain = await answer(root.callRemote("context"), "context() without a context")
    expect(plain == {"milliseconds": None, "metadata": {}}, f"a plain call's context() answered {shown(plain)}")


@case("deadline_enforced", "a call of deadline 0 does not run; the server fails a call whose deadline passes")
async def deadlineEnforced(run: Run) -> None:
    peer = await run.raw(run.server)
    key = run.key()
    peer.send(
        PREAMBLE
        + tCall(1, 0, "record", tStr(key), tStr("ran"), context=tContext(0))
        + tCall(2, 0, "recorded", tStr(key))
        + tCall(3, 0, "hold", tStr(run.key("held")), tInt(HOLD), context=tContext(SHORT_DEADLINE))
    )
    first = await peer.until(lambda things: answered(things, 1), "the answer to record() of deadline 0")
    expect(first.items[:3] == [2, 1, "chunkwire.DeadlineExceeded"], f"record() of deadline 0 got {shown(first)}")
    second = await peer.until(lambda things: answered(things, 2), "the answer to recorded()")
    expect(second.items == [1, 2, None], f"recorded() answered {shown(second)}: the call of deadline 0 ran")
    # No CANCEL is sent for the hold: only the server's own clock can end it.
    third = await peer.until(lambda things: answered(things, 3), "the answer to the hold past its deadline")
    expect(third.items[:3] == [2, 3, "chunkwire.DeadlineExceeded"], f"the hold past its deadline got {shown(third)}")


@case("bulk_hello_answered", "the server answers a bulk HELLO with its own, before answering the call after it")
async def bulkHelloAnswered(run: Run) -> None:
    peer = await run.raw(run.server)
    peer.send(PREAMBLE + tHello() + tCall(1, 0, "empty"))
    things = await peer.until(lambda things: answered(things, 1) and things, "the answer to empty()")
    hello = bulkHello(things)
    expect(hello is not None, f"the server answered empty() without a HELLO before it (it sent {peer.shown()})")
    assert hello is not None
    expect(things.index(hello) < things.index(answered(things, 1)), "the server's HELLO came after its answer")
    expect(
        len(hello.items) == 4 and type(hello.items[2]) is str and type(hello.items[3]) is int,
        f"the server's HELLO is {shown(hello)}",
    )


async def stillServing(run: Run) -> None:
    """Fail the case unless a new connection's empty() is answered (the server and its other connections go on)."""
    other = await run.connect()
    result = await answer(other.callRemote("empty"), "empty() on another connection")
    expect(result is None, f"empty() on another connection answered {shown(result)}")


@case("bulk_stream_before_hello", "a stream announced before the client's HELLO is refused (hello-missing), no more")
async def bulkStreamBeforeHello(run: Run) -> None:
    peer = await run.raw(run.server)
    stream = tObject("bulk.stream", tInt(1), tInt(10), NONE)
    peer.send(PREAMBLE + tCall(1, 0, "empty", stream) + tCall(2, 0, "empty"))
    refused = await peer.until(lambda things: answered(things, 1), "the answer to empty(a stream before HELLO)")
    details = refused.items[5] if refused.items[:3] == [2, 1, "Violation"] and len(refused.items) == 6 else None
    code = details.items[0] if isinstance(details, Raw) and details.items else None
    expect(code == "hello-missing", f"empty(a stream before HELLO) was answered {shown(refused)}")
    after = await peer.until(lambda things: answered(things, 2), "the answer to empty() after it")
    expect(after.items == [1, 2, None], f"empty() after it was answered {shown(after)}")


@case("bulk_stream_id_reused", "a stream id announced twice ends the connection, ERROR 'stream-id-reused: ...'")
async def bulkStreamIdReused(run: Run) -> None:
    peer = await run.raw(run.server)
    stream = tObject("bulk.stream", tInt(1), tInt(10), NONE)
    peer.send(PREAMBLE + tHello() + tCall(1, 0, "empty", stream) + tCall(2, 0, "empty", stream))
    things = await peer.untilClosed("the connection of the reused stream id")
    text = errorText(things)
    expect(text is not None, f"the server closed without an ERROR (it sent {peer.shown()})")
    expect(str(text).startswith("stream-id-reused: "), f"the ERROR says {shown(text)}, not 'stream-id-reused: ...'")
    await stillServing(run)


@case("bulk_flow_control", "a data frame past its stream's credit ends the connection, ERROR 'flow-control: ...'")
async def bulkFlowControl(run: Run) -> None:
    peer = await run.raw(run.server)
    peer.send(PREAMBLE + tHello() + tCall(1, 0, "files"))
    hello = await peer.until(bulkHello, "the server's HELLO")
    window = hello.items[3] if len(hello.items) == 4 and type(hello.items[3]) is int else None
    expect(window is not None, f"the server's HELLO is {shown(hello)}")
    assert window is not None
    files = await peer.until(lambda things: answered(things, 1), "the answer to files()")
    reference = files.items[2] if files.items[0] == 1 and len(files.items) == 3 else None
    expect(isinstance(reference, Raw) and reference.name == "rpc.ref", f"files() answered {shown(files)}")
    assert isinstance(reference, Raw)
    export = reference.items[0]
    # One frame whose BYTES header announces the initial window and 16 MiB more, before any of its data:
    # past any credit the server can have granted, since nothing of the stream has been consumed.  The
    # upload is that size (within it, so that only the credit is broken), and stays unfinished on the server.
    length = size = window + OVERRUN
    name = f"interop-{run.key()}.bin"
    digests = tObject("list", tStr("sha256"))
    peer.send(tCall(2, export, "openUpload", tStr(name), tInt(size), tStr("interop-1"), digests))
    opened = await peer.until(lambda things: answered(things, 2), "the answer to openUpload()")
    expect(opened.items[0] == 1, f"openUpload() answered {shown(opened)}")
    frame = tObject("bulk.data", tInt(1), tInt(0))[:-1] + encode_header(BYTES, length) + bytes(4096)
    peer.send(tCall(3, export, "upload", tStr(name), tObject("bulk.stream", tInt(1), tInt(size), NONE)) + frame)
    things = await peer.untilClosed("the connection of the frame past its credit")
    text = errorText(things)
    expect(text is not None, f"the server closed without an ERROR (it sent {peer.shown()})")
    expect(str(text).startswith("flow-control: "), f"the ERROR says {shown(text)}, not 'flow-control: ...'")
    await stillServing(run)


@case("login_limits", "a login message past the pre-login limits ends the connection with an ERROR, no login reply")
async def loginLimits(run: Run) -> None:
    breaking = {
        "a payload of 2049 bytes": tLogin("start", "TOKEN", b"x" * 2049),
        "a mechanism name of 33 bytes": tLogin("start", "T" * 33, b""),
        "a container inside the message": tObject("login", tStr("start"), tStr("TOKEN"), tObject("list")),
        "a fourth item": tObject("login", tStr("start"), tStr("TOKEN"), tBytes(b""), tBytes(b"")),
    }
    for what, message in breaking.items():
        peer = await run.raw(run.loginServer)
        peer.send(PREAMBLE + message)
        things = await peer.untilClosed(f"the login connection sent {what}")
        expect(errorText(things) is not None, f"after {what} the server closed without an ERROR ({peer.shown()})")
        expect(loginReply(things) is None, f"the server answered {what} with {shown(loginReply(things))}")


@case("login_timeout", "a connection that does not log in is closed at the timeout, ERROR 'login-timeout: ...'")
async def loginTimeout(run: Run) -> None:
    peer = await run.raw(run.loginServer)
    started = time.monotonic()
    peer.send(PREAMBLE)
    things = await peer.untilClosed("the connection that never logs in", run.loginTimeout + EVENTUALLY)
    took = time.monotonic() - started
    text = errorText(things)
    expect(text is not None, f"the server closed without an ERROR ({peer.shown()})")
    expect(str(text).startswith("login-timeout: "), f"the ERROR says {shown(text)}, not 'login-timeout: ...'")
    expect(took >= 0.8 * run.loginTimeout, f"closed after {took:.1f} s, before the {run.loginTimeout:g} s timeout")


@case("login_throttle", "attempts from one address are refused at once past the throttle; a trusted user still gets in")
async def loginThrottle(run: Run) -> None:
    credentials = UsernamePassword(run.user.encode("utf-8"), run.password.encode("utf-8"))
    await answer(Deferred.fromCoroutine(run.login(credentials)), "the test user's first login")
    name = f"interop-throttle-{os.urandom(4).hex()}"
    for attempt in range(1, THROTTLE_ATTEMPTS + 1):
        peer = await run.raw(run.loginServer)
        first = f"n,,n={name},r={os.urandom(12).hex()}".encode("ascii")
        peer.send(PREAMBLE + tLogin("start", "SCRAM-SHA-256", first))
        reply = await peer.until(loginReply, f"the server's reply to SCRAM start {attempt}")
        assert peer.transport is not None
        peer.transport.abortConnection()
        verb = reply.items[0] if reply.items else None
        if verb == "refused":
            break
        expect(verb == "challenge", f"SCRAM start {attempt} was answered {shown(reply)}")
    else:
        raise CaseFailed(f"{THROTTLE_ATTEMPTS} SCRAM starts from one address were all challenged, none refused at once")
    root = await answer(Deferred.fromCoroutine(run.login(credentials)), "the test user's login once throttled")
    result = await answer(root.callRemote("whoami"), "whoami()")
    expect(result == run.user, f"whoami() answered {shown(result)}")


# -- running them ------------------------------------------------------------------------------

_HOST_PORT = re.compile(r"^(?:\[(?P<v6>[0-9a-fA-F:.]+)\]|(?P<host>[\w.\-]+)):(?P<port>\d{1,5})$")


def parseAddress(address: str) -> tuple[str, int]:
    """C{(host, port)} of C{"HOST:PORT"} (C{"[::1]:8790"} for an IPv6 address)."""
    match = _HOST_PORT.match(address.strip())
    if match is None:
        raise ValueError(f"{address!r} is not HOST:PORT (e.g. 127.0.0.1:8790, [::1]:8790)")
    return match.group("v6") or match.group("host"), int(match.group("port"))


def endpointOf(address: str) -> str:
    """The Twisted client endpoint description of C{"HOST:PORT"}."""
    host, port = parseAddress(address)
    return f"tcp:host={quote(host)}:port={port}"


def nextPort(address: str, step: int = 1) -> str:
    """C{"HOST:PORT"} with the port C{step} after C{address}'s."""
    host, port = parseAddress(address)
    return f"[{host}]:{port + step}" if ":" in host else f"{host}:{port + step}"


def quote(value: str) -> str:
    """C{value} escaped for one field of an endpoint description."""
    return value.replace("\\", "\\\\").replace(":", "\\:").replace("=", "\\=")


async def runCase(reactor: Any, args: argparse.Namespace, name: str) -> str | None:
    """Run case C{name}; C{None} if it passed, else why it failed."""
    run = Run(reactor, args, name)
    running = Deferred.fromCoroutine(CASES[name].body(run))
    running.addTimeout(args.case_timeout, reactor)
    try:
        await running
    except CaseFailed as failed:
        return str(failed)
    except defer.TimeoutError:
        return f"no result within {args.case_timeout:g} s"
    except Exception as error:
        return explain(error, run.endpoint)
    finally:
        await run.close()
    return None


async def runAll(reactor: Any, args: argparse.Namespace) -> None:
    names = args.case or list(CASES)
    failed = 0
    for name in names:
        reason = await runCase(reactor, args, name)
        if reason is None:
            print(f"case {name}: pass", flush=True)
        else:
            failed += 1
            print(f"case {name}: FAIL: {' '.join(reason.split())}", flush=True)
    if failed:
        raise SystemExit(1)


def main(argv: list[str]) -> None:
    parser = CommandLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--server", default=DEFAULT_SERVER, metavar="HOST:PORT", help="the interop server (default %(default)s)"
    )
    parser.add_argument(
        "--login-server",
        metavar="HOST:PORT",
        help="the interop server's login endpoint (default: --server's host, the port after --server's)",
    )
    parser.add_argument(
        "--certificate-server",
        metavar="HOST:PORT",
        help="the interop server's TLS endpoint of certificate logins (default: the port two after --server's)",
    )
    parser.add_argument(
        "--ca-dir", metavar="DIR", help="the certificate cases: the CA certificates (*.pem) that issued the server's"
    )
    parser.add_argument(
        "--client-pem", metavar="FILE", help="the certificate cases: the key and certificate (PEM) of --user"
    )
    parser.add_argument(
        "--case",
        action="append",
        choices=list(CASES),
        metavar="NAME",
        help="run this case (repeatable; default: every case, in --list's order)",
    )
    parser.add_argument("--list", action="store_true", help="list the cases and what each proves, then exit")
    parser.add_argument("--user", default=TEST_USER, help="the user of the login cases (default %(default)s)")
    parser.add_argument("--password", default=TEST_PASSWORD, help="that user's password (default %(default)s)")
    parser.add_argument(
        "--token", default=TEST_TOKEN, help="a bearer token of that user for the login cases (default %(default)s)"
    )
    parser.add_argument(
        "--login-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="the login server's login timeout, which login_timeout checks (default %(default)g)",
    )
    parser.add_argument(
        "--case-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds a case may take before it fails (default %(default)s)",
    )
    addDebugArgument(parser)
    args = parser.parse_args(argv)
    if args.list:
        for each in CASES.values():
            print(f"{each.name}: {each.proves}")
        return
    for address in (args.server, args.login_server, args.certificate_server):
        if address is not None:
            try:
                parseAddress(address)
            except ValueError as error:
                parser.error(str(error))
    runCommand(lambda reactor: runAll(reactor, args), endpointOf(args.server), args.debug)


if __name__ == "__main__":
    main(sys.argv[1:])
