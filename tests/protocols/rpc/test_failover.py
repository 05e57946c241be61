"""The Twisted client of several addresses (rpc.reconnecting given a list) against server processes."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Coroutine
from typing import Any

from twisted.internet.error import ConnectionDone, ConnectionLost
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import deferLater
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from framing.rpc._addresses import PICK_FIRST, ROUND_ROBIN, AddressState, NoAddressReady
from framing.wire import PREAMBLE
from protocols._mismatch import ClosedBeforePreamble
from protocols.options import ClientOptions
from protocols.rpc import reconnecting
from protocols.rpc._context import callContext
from protocols.rpc._failover import FailoverClient
from tests.processes import figure
from tests.protocols.failover import HANG, Server, startServers, stopAll, wasRecorded

from ..helpers import pytestTest, trialTest

Body = Callable[[Any], Coroutine[Any, Any, None]]


def withServers(
    count: int, policy: str, scenario: Callable[[Any, list[Server], FailoverClient], Any], silence: float = 60.0
) -> Body:
    """
    A test body: C{count} servers, a client of them all under C{policy} (with
    C{silence} as its C{silenceTimeout}), C{scenario} run, all stopped after.
    """

    async def body(reactor: Any) -> None:
        servers = await deferToThread(startServers, count)
        client = reconnecting(
            reactor,
            [server.address for server in servers],
            options=ClientOptions(policy=policy, timeout=HANG, moveTimeout=HANG, silenceTimeout=silence),
        )
        try:
            await scenario(reactor, servers, client)
        finally:
            await client.stopService()
            await deferToThread(stopAll, servers)

    body.__doc__ = scenario.__doc__
    body.__name__ = scenario.__name__
    return body


async def roundRobinSpreads(reactor: Any, servers: list[Server], client: FailoverClient) -> None:
    """round_robin keeps a connection to every address, and nine calls reach all three servers."""
    await client.whenConnected()
    # round_robin spreads over ready connections only: wait until all three are.
    end = time.monotonic() + HANG
    while {address.state for address in client.book.addresses} != {AddressState.READY}:
        assert time.monotonic() < end, "not every address became ready"
        await deferLater(reactor, 0.01)
    names = set()
    for _ in range(9):
        names.add(await client.callRemote("whoami"))
    assert names == {"s0", "s1", "s2"}, names


async def pickFirstSticks(reactor: Any, servers: list[Server], client: FailoverClient) -> None:
    """pick_first connects to the first address alone and sends every call there."""
    await client.whenConnected()
    names = {await client.callRemote("whoami") for _ in range(5)}
    assert names == {"s0"}, names
    states = [address.state for address in client.book.addresses]
    assert states == [AddressState.READY, AddressState.IDLE, AddressState.IDLE], states


def killMoves(index: int) -> Callable[[Any, list[Server], FailoverClient], Any]:
    async def scenario(reactor: Any, servers: list[Server], client: FailoverClient) -> None:
        await client.whenConnected()
        for _ in range(6):
            await client.callRemote("whoami")
        killed = servers[index]
        gone = await deferToThread(killed.kill)
        names = [await client.callRemote("whoami") for _ in range(6)]
        moved = time.monotonic() - gone
        assert killed.name not in names, names
        figure(f"twisted {client.book.policy}: six calls answered by the others {moved * 1000:.1f} ms after the kill")

    scenario.__doc__ = "A server killed, the next calls go to the others, none failing."
    return scenario


async def drainMovesNewCalls(reactor: Any, servers: list[Server], client: FailoverClient) -> None:
    """A server's GOAWAY: a call in flight finishes there; new calls go to another server."""
    await client.whenConnected()
    assert await client.callRemote("whoami") == "s0"
    inFlight = client.callRemote("held", "inflight")
    await deferToThread(servers[0].waitFor, "record inflight")
    await deferToThread(servers[0].drain)
    # The server answers a call that crossed its GOAWAY on the wire (it says "draining" once the GOAWAY is
    # written, not read): the next call moves once the client has read it.
    end = time.monotonic() + HANG
    while client.goAways == 0:
        assert time.monotonic() < end, "the client never read the GOAWAY"
        await deferLater(reactor, 0.01)
    assert await client.callRemote("record", "after-drain") == "s1"
    servers[0].release()
    assert await inFlight == "s0"
    assert not wasRecorded(servers[0], "after-drain")
    assert client.goAways == 1


async def sentCallNotResent(reactor: Any, servers: list[Server], client: FailoverClient) -> None:
    """A call written to a server that then dies fails with the connection's loss, and no other server receives it."""
    await client.whenConnected()
    hanging = client.callRemote("hang", "once")
    await deferToThread(servers[0].waitFor, "record once")
    await deferToThread(servers[0].kill)
    try:
        await hanging
    except (ConnectionDone, ConnectionLost):
        pass
    else:
        raise AssertionError("the call to the killed server returned")
    assert await client.callRemote("whoami") == "s1"
    assert not wasRecorded(servers[1], "once") and not wasRecorded(servers[2], "once")


async def cutOffServer(reactor: Any, servers: list[Server], client: FailoverClient) -> None:
    """
    A server that goes silent (SIGSTOP: its connection stays open, as a host
    cut off): the call written there fails once the silence bound passes,
    not sent again; the next call goes to another server.
    """
    await client.whenConnected()
    assert await client.callRemote("whoami") == "s0"
    servers[0].pause()
    try:
        started = time.monotonic()
        try:
            await client.callRemote("record", "silent")
        except (ConnectionDone, ConnectionLost):
            pass
        else:
            raise AssertionError("the call to the silent server returned")
        assert await client.callRemote("whoami") == "s1"
        moved = time.monotonic() - started
    finally:
        servers[0].resume()
    assert not wasRecorded(servers[1], "silent") and not wasRecorded(servers[2], "silent")
    figure(f"twisted pick_first, silenceTimeout 1 s: a call to another server {moved:.2f} s after one went silent")


async def noneReady(reactor: Any, servers: list[Server], client: FailoverClient) -> None:
    """Every server gone: a call fails with NoAddressReady at its deadline, having sent nothing."""
    await client.whenConnected()
    for server in servers:
        await deferToThread(server.kill)
    with callContext(timeout=0.5, clock=reactor):
        waiting = client.callRemote("whoami")
    try:
        await waiting
    except NoAddressReady as error:
        assert len(error.errors) == 2, error.errors
    else:
        raise AssertionError("a call with no server ready returned")


class _Mute(Protocol):
    """A server that is no chunkwire server: it keeps what it receives, says nothing, and may close."""

    def __init__(self, listener: _MuteListener) -> None:
        self.listener = listener

    def connectionMade(self) -> None:
        self.listener.connections.append(self)

    def dataReceived(self, data: bytes) -> None:
        self.listener.received += data
        if self.listener.closeOnData:
            self.transport.loseConnection()

    def connectionLost(self, reason: Any = None) -> None:
        self.listener.closed += 1


class _MuteListener(Factory):
    def __init__(self, closeOnData: bool) -> None:
        self.closeOnData = closeOnData
        self.received = b""
        self.connections: list[_Mute] = []
        self.closed = 0

    def buildProtocol(self, addr: Any) -> _Mute:
        return _Mute(self)


def unheard(closeOnData: bool) -> Body:
    async def body(reactor: Any) -> None:
        listener = _MuteListener(closeOnData)
        port = reactor.listenTCP(0, listener, interface="127.0.0.1")
        client = reconnecting(reactor, [("127.0.0.1", port.getHost().port)], options=ClientOptions(policy=ROUND_ROBIN))
        try:
            with callContext(timeout=0.5, clock=reactor):
                waiting = client.callRemote("whoami")
            try:
                await waiting
            except NoAddressReady as error:
                if closeOnData:
                    assert any(isinstance(e, ClosedBeforePreamble) for _, e in error.errors), error.errors
            else:
                raise AssertionError("a call with no server ready returned")
            assert listener.connections, "the client never connected"
            assert listener.received.startswith(PREAMBLE), listener.received
            # Only the client's preamble (and nothing after it: no CALL) reached the server.
            assert listener.received == PREAMBLE * (len(listener.received) // len(PREAMBLE)), listener.received
        finally:
            await client.stopService()
            await port.stopListening()
        end = time.monotonic() + HANG
        while listener.closed < len(listener.connections):
            assert time.monotonic() < end, "a connection the client was setting up outlived stopService"
            await deferLater(reactor, 0.01)

    body.__name__ = "closedBeforePreamble" if closeOnData else "silentServer"
    body.__doc__ = (
        "A server that closes before its preamble is not ready: the call waits, fails with NoAddressReady "
        "naming ClosedBeforePreamble, and was never written."
        if closeOnData
        else "A server that accepts and says nothing is not ready: the call fails with NoAddressReady, never "
        "written, and stopService closes the connection still waiting for the preamble."
    )
    return body


async def nameWithSeveralAddresses(reactor: Any) -> None:
    """A host name counts as all its addresses: 'localhost' gives each of getaddrinfo's, and calls get through."""
    (server,) = await deferToThread(startServers, 1)
    expected = {info[4][:2] for info in socket.getaddrinfo("localhost", server.port, type=socket.SOCK_STREAM)}
    client = reconnecting(
        reactor, [f"localhost:{server.port}"], options=ClientOptions(policy=ROUND_ROBIN, timeout=HANG)
    )
    try:
        assert await client.callRemote("whoami") == "s0"
        targets = {address.target for address in client.book.addresses}
        assert targets == expected, (targets, expected)
    finally:
        await client.stopService()
        await deferToThread(server.stop)


BODIES = {
    "nameWithSeveralAddresses": nameWithSeveralAddresses,
    "roundRobinSpreads": withServers(3, ROUND_ROBIN, roundRobinSpreads),
    "pickFirstSticks": withServers(3, PICK_FIRST, pickFirstSticks),
    "killMovesPickFirst": withServers(3, PICK_FIRST, killMoves(0)),
    "killMovesRoundRobin": withServers(3, ROUND_ROBIN, killMoves(1)),
    "drainMovesNewCalls": withServers(3, PICK_FIRST, drainMovesNewCalls),
    "sentCallNotResent": withServers(3, PICK_FIRST, sentCallNotResent),
    "noneReady": withServers(2, ROUND_ROBIN, noneReady),
    "cutOffServer": withServers(3, PICK_FIRST, cutOffServer, silence=1.0),
    "closedBeforePreamble": unheard(True),
    "silentServer": unheard(False),
}


class FailoverTests(TestCase):
    """Calls move from a server that dies or drains to another; a call written is never sent twice."""

    test_roundRobinSpreads = trialTest(BODIES["roundRobinSpreads"])
    test_pickFirstSticks = trialTest(BODIES["pickFirstSticks"])
    test_killMovesPickFirst = trialTest(BODIES["killMovesPickFirst"])
    test_killMovesRoundRobin = trialTest(BODIES["killMovesRoundRobin"])
    test_drainMovesNewCalls = trialTest(BODIES["drainMovesNewCalls"])
    test_sentCallNotResent = trialTest(BODIES["sentCallNotResent"])
    test_noneReady = trialTest(BODIES["noneReady"])
    test_cutOffServer = trialTest(BODIES["cutOffServer"])
    test_nameWithSeveralAddresses = trialTest(BODIES["nameWithSeveralAddresses"])
    test_closedBeforePreamble = trialTest(BODIES["closedBeforePreamble"])
    test_silentServer = trialTest(BODIES["silentServer"])


test_round_robin_spreads = pytestTest(BODIES["roundRobinSpreads"])
test_pick_first_sticks = pytestTest(BODIES["pickFirstSticks"])
test_kill_moves_pick_first = pytestTest(BODIES["killMovesPickFirst"])
test_kill_moves_round_robin = pytestTest(BODIES["killMovesRoundRobin"])
test_drain_moves_new_calls = pytestTest(BODIES["drainMovesNewCalls"])
test_sent_call_not_resent = pytestTest(BODIES["sentCallNotResent"])
test_none_ready = pytestTest(BODIES["noneReady"])
test_cut_off_server = pytestTest(BODIES["cutOffServer"])
test_name_with_several_addresses = pytestTest(BODIES["nameWithSeveralAddresses"])
test_closed_before_preamble = pytestTest(BODIES["closedBeforePreamble"])
test_silent_server = pytestTest(BODIES["silentServer"])
