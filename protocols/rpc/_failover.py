# -*- test-case-name: tests.protocols.rpc.test_failover -*-
"""The Twisted client of one service at several addresses: L{FailoverClient}, what reconnecting() gives for a list.

Contract: the policy, backoff and send-at-most-once rule are
L{framing.rpc._addresses.AddressBook}'s; this module resolves the names
(the reactor's C{nameResolver}), connects and logs in, follows each
connection's GOAWAY and loss, and keeps connections up as the policy says.
A connection is ready once the server's preamble is in (and the login and
the preparation are done).  A call goes to a ready connection; with none
it waits, at most to its C{callContext} deadline or C{moveTimeout}, then
fails with L{framing.rpc._addresses.NoAddressReady}, sent nowhere.  A call refused
before it was written goes to another address; one written is never sent
again.

Cost: per call, the policy's pick (O(1)), one coroutine step and one
C{select} with no wait on the picked socket; the connections' events are
O(addresses) each.

Design: docs/design/rpc-twisted.md
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP6ClientEndpoint, clientFromString
from twisted.internet.interfaces import IResolutionReceiver
from twisted.internet.task import LoopingCall, deferLater
from twisted.logger import Logger
from zope.interface import implementer

from framing.rpc._addresses import Address, AddressBook, Send
from framing.rpc._errors import DeadReferenceError
from framing.rpc._referenceable import Referenceable
from protocols.blocking import parseAddress

from .._deadline import DeadlineEndpoint, heard
from .._sockets import bytesWaiting
from ..auth._client import ClientLogin
from ..options import CLIENT_DEFAULTS, ClientOptions
from ._broker import Broker
from ._context import scope
from ._options import clientFactory, gateLogins
from ._refs import RemoteReference

_log = Logger()


def isDescription(address: Any) -> bool:
    """
    Whether C{address} is a client endpoint description (C{"tcp:HOST:PORT"},
    C{"ssl:..."}, C{"unix:..."}), one address as it is, rather than
    C{"host:port"}, which is resolved into each of its addresses.
    """
    if not isinstance(address, str):
        return False
    kind, separator, rest = address.partition(":")
    return bool(separator) and kind.replace("-", "").isalpha() and not rest.isdigit()


@implementer(IResolutionReceiver)
class _Resolution:
    """The addresses a name resolved to, collected for a Deferred."""

    def __init__(self) -> None:
        self.found: list[tuple[str, int]] = []
        self.done: Deferred[list[tuple[str, int]]] = Deferred()

    def resolutionBegan(self, resolution: Any) -> None:
        pass

    def addressResolved(self, address: Any) -> None:
        self.found.append((address.host, address.port))

    def resolutionComplete(self) -> None:
        self.done.callback(self.found)


async def resolveAll(reactor: Any, addresses: Iterable[Any]) -> list[Any]:
    """
    The targets of C{addresses}, in order: each C{"host:port"} or C{(host,
    port)} as every address its name resolves to (C{(ip, port)}, by the
    reactor's C{nameResolver}), a description or an endpoint object as it
    is.  A name that resolves to nothing is kept as it is (its attempts
    fail and back off).
    """
    targets: list[Any] = []
    for address in addresses:
        if not isinstance(address, (str, tuple)) or isDescription(address):
            targets.append(address)
            continue
        host, port = parseAddress(address)
        receiver = _Resolution()
        reactor.nameResolver.resolveHostName(receiver, host, port, addressTypes=[IPv4Address, IPv6Address])
        found = await receiver.done
        targets.extend(found or [(host, port)])
    return targets


class FailoverClient:
    """
    Connections to one service at several addresses, kept up as a policy
    says, and calls sent to one of them (see the module docstring).  The
    same use as L{protocols.rpc.ReconnectingClient}: L{whenConnected},
    L{callRemote}, L{isConnected}, L{stopService}.

    @ivar book: the L{framing.rpc._addresses.AddressBook} (its addresses' states, for tests and metrics).
    @ivar moveTimeout: seconds a call waits for a ready connection (at most; its deadline may be sooner).
    @ivar goAways: how many GOAWAYs the servers sent this client.
    @ivar loginFailure: why the last login failed, or C{None}.
    """

    def __init__(
        self,
        reactor: Any,
        addresses: list[Any],
        *,
        root: Referenceable | None = None,
        options: ClientOptions = CLIENT_DEFAULTS,
        prepareConnection: Callable[[RemoteReference], object] | None = None,
    ) -> None:
        """
        Arguments as L{protocols.rpc.reconnecting}'s; the options'
        C{silenceTimeout}: seconds a server may stay silent while calls
        wait on its connection (it is pinged at half of it; after all of it
        the connection is aborted, its calls fail and new ones go
        elsewhere), as the clients without Twisted bound it; C{None}: no bound.
        """
        self._reactor = reactor
        self.silenceTimeout = options.silenceTimeout
        self._addresses = list(addresses)
        self._prepare = prepareConnection
        self._timeout = options.timeout
        self.moveTimeout = options.moveTimeout
        self.goAways = 0
        self.loginFailure: BaseException | None = None
        self.book: AddressBook[Broker] = AddressBook(
            [repr(address) for address in addresses], options.policy, options.backoff
        )
        self._factory = clientFactory(reactor, root, options)
        gateLogins(self._factory, options.credentials)
        self._resolved: Deferred[None] | None = None
        self._waiters: list[Deferred[None]] = []
        self._timer: Any = None
        self._running = False
        # Connections made but not ready yet (waiting for the server's preamble, a login, the preparation).
        self._settingUp: set[Any] = set()

    # -- the service ---------------------------------------------------------

    def startService(self) -> None:
        """Resolve the names, then connect as the policy says (L{protocols.rpc.reconnecting} has done it)."""
        if self._running:
            return
        self._running = True
        self._resolved = Deferred.fromCoroutine(self._resolve())

    async def _resolve(self) -> None:
        self.book.setTargets(await resolveAll(self._reactor, self._addresses))
        self._kick()

    def stopService(self) -> Deferred[None]:
        """Stop connecting, close every connection, fail the calls waiting for one; fires once all are closed."""
        self._running = False
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        lost: list[Deferred[Any]] = []
        for address in self.book.addresses:
            broker = address.connection
            if broker is not None:
                lost.append(broker.whenDisconnected())
                broker.disconnect()
        for connection in list(self._settingUp):
            # (its setting up fails with the loss, and _connected drops what is left)
            connection.transport.abortConnection()
        self._change()
        done: Deferred[None] = Deferred()
        remaining = [len(lost)]

        def one(_: object) -> None:
            remaining[0] -= 1
            if remaining[0] == 0:
                done.callback(None)

        if not lost:
            done.callback(None)
        for waiting in lost:
            waiting.addBoth(one)
        return done

    # -- connecting -----------------------------------------------------------

    def _kick(self) -> None:
        """Start the attempts the policy asks for now; wake at the soonest backoff's end."""
        if not self._running:
            return
        for address in self.book.connectNow(self._reactor.seconds()):
            self._attempt(address)
        self._schedule()

    def _schedule(self) -> None:
        wake = self.book.wakeAt()
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        if wake is not None and self._running:
            self._timer = self._reactor.callLater(max(wake - self._reactor.seconds(), 0.0), self._kick)

    def _endpoint(self, target: Any) -> Any:
        if isinstance(target, tuple):
            host, port = target
            kind = TCP6ClientEndpoint if ":" in host else TCP4ClientEndpoint
            endpoint = kind(self._reactor, host, port)
        elif isinstance(target, str):
            endpoint = clientFromString(self._reactor, target)  # type: ignore[no-untyped-call]
        else:
            endpoint = target
        if self._timeout is None:
            return endpoint
        return DeadlineEndpoint(endpoint, self._reactor, self._timeout, _loginOf)

    def _attempt(self, address: Address[Broker]) -> None:
        """Connect to C{address} (and log in, and prepare); tell the book how it went."""
        connecting: Deferred[Any] = maybeDeferred(self._endpoint(address.target).connect, self._factory)
        connecting.addCallback(lambda connection: Deferred.fromCoroutine(self._made(connection))).addCallbacks(
            self._connected, self._failed, callbackArgs=(address,), errbackArgs=(address,)
        )

    async def _made(self, connection: Any) -> tuple[Broker, RemoteReference]:
        self._settingUp.add(connection)
        try:
            return await self._setUp(connection)
        finally:
            self._settingUp.discard(connection)

    async def _setUp(self, connection: Any) -> tuple[Broker, RemoteReference]:
        login = connection.receiver
        if isinstance(login, ClientLogin):
            try:
                root = await login.done
            except BaseException as failure:
                self.loginFailure = failure
                login.connection.transport.loseConnection()
                raise
            self.loginFailure = None
            broker = login.broker
        else:
            broker = _brokerOf(connection)
            # Ready once the server has spoken, as the clients without Twisted are: a call is not written to a
            # connection the kernel accepted for a server that died before its preamble.
            await heard(broker.connection, self._reactor)
            root = broker.rootReference()
        if self._prepare is not None:
            try:
                await maybeDeferred(self._prepare, root)
            except BaseException:
                broker.disconnect()
                raise
        return broker, root

    def _connected(self, made: tuple[Broker, RemoteReference], address: Address[Broker]) -> None:
        broker = made[0]
        if not self._running or not broker.isConnected():
            broker.disconnect()
            self.book.connectFailed(address, DeadReferenceError("lost while connecting"), self._reactor.seconds())
            self._kick()
            return
        self.book.connected(address, broker)
        broker.drain.goneAway.append(lambda _: self._drained(address, broker))
        broker.whenDisconnected().addBoth(self._lost, address, broker)
        self._watchSilence(broker)
        self._change()
        self._kick()

    def _failed(self, failure: Any, address: Address[Broker]) -> None:
        _log.info("connecting to {address} failed: {error}", address=address.target, error=failure.value)
        self.book.connectFailed(address, failure.value, self._reactor.seconds())
        self._change()
        self._kick()

    def _drained(self, address: Address[Broker], broker: Broker) -> None:
        self.goAways += 1
        if address.connection is broker:
            self.book.drained(address)
        self._kick()

    def _lost(self, reason: object, address: Address[Broker], broker: Broker) -> None:
        if address.connection is broker:
            self.book.lost(address, reason if isinstance(reason, BaseException) else None)
        self._change()
        self._kick()

    def _watchSilence(self, broker: Broker) -> None:
        """
        Every half C{silenceTimeout} while calls wait on C{broker}'s
        connection, a PING; no PONG within the other half: the server is
        cut off (or stopped), and the connection is aborted.  One timer per
        connection; nothing sent while no call waits.
        """
        silence = self.silenceTimeout
        if silence is None:
            return
        watch = LoopingCall(self._pingIfWaiting, broker, silence / 2)
        watch.clock = self._reactor
        watch.start(silence / 2, now=False)
        broker.whenDisconnected().addBoth(lambda _: watch.stop() if watch.running else None)

    def _pingIfWaiting(self, broker: Broker, bound: float) -> None:
        if not broker.pendingCount or not broker.isConnected():
            return
        pong: Deferred[float] = broker.connection.sendPing()
        timer = self._reactor.callLater(bound, self._silent, broker, bound * 2)
        pong.addBoth(_cancelTimer, timer).addErrback(lambda _: None)  # (lost meanwhile: _lost says so)

    def _silent(self, broker: Broker, silence: float) -> None:
        _log.warn(
            "{peer} silent for {silence} s with calls waiting: aborting",
            peer=broker.connection.peerName(),
            silence=silence,
        )
        transport = broker.connection.transport
        if transport is not None:
            transport.abortConnection()

    # -- waiting --------------------------------------------------------------

    def _change(self) -> None:
        """Wake whatever waits for a connection."""
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.called:
                waiter.callback(None)

    def _nextChange(self, until: float | None) -> Deferred[None]:
        waiter: Deferred[None] = Deferred()
        self._waiters.append(waiter)
        if until is not None:
            timer = self._reactor.callLater(max(until - self._reactor.seconds(), 0.0), self._wake, waiter)
            waiter.addBoth(_cancelTimer, timer)
        return waiter

    @staticmethod
    def _wake(waiter: Deferred[None]) -> None:
        if not waiter.called:
            waiter.callback(None)

    # -- calling --------------------------------------------------------------

    def isConnected(self) -> bool:
        """Whether some connection is ready for new calls now."""
        return self.book.hasReady

    def whenConnected(self) -> Deferred[RemoteReference]:
        """The root of a ready connection, once there is one (the policy's pick)."""
        return Deferred.fromCoroutine(self._readyRoot())

    async def _readyRoot(self) -> RemoteReference:
        if self._resolved is not None:
            await self._resolved
        while True:
            address = self.book.pick()
            if address is not None and address.connection is not None:
                return address.connection.rootReference()
            if not self._running:
                raise DeadReferenceError("the client was stopped")
            await self._nextChange(None)

    def callRemote(self, _name: str, /, *args: Any, **kwargs: Any) -> Deferred[Any]:
        """
        Call C{_name} on the root of a ready connection (see the module docstring).

        @return: as L{RemoteReference.callRemote}; or failing with
            L{framing.rpc._addresses.NoAddressReady} when no connection was
            ready in the call's time (nothing sent).
        """
        return Deferred.fromCoroutine(self._call(_name, args, kwargs))

    async def _call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self._resolved is not None:
            await self._resolved
        now = self._reactor.seconds()
        deadline = now + self.moveTimeout
        current = scope.get()
        if current is not None and current.deadline is not None:
            deadline = min(deadline, current.deadline)
        route = self.book.route(name, deadline)
        looked = False
        while True:
            if not self._running:
                raise DeadReferenceError(f"cannot call {name!r}: the client was stopped")
            step = route.step(self._reactor.seconds())
            if not isinstance(step, Send):
                for address in step.connect:
                    self._attempt(address)
                self._schedule()
                await self._nextChange(step.until)
                continue
            broker = step.connection
            if not broker.isConnected() or broker.drain.draining:
                route.notSent(step.address, DeadReferenceError("draining or over"), not broker.isConnected())
                self._kick()
                continue
            if not looked and bytesWaiting(broker.connection.transport):
                # What the server sent first (a GOAWAY, its close, which the kernel may know already) is read
                # before the call is written: one reactor turn, once per call.
                looked = True
                await deferLater(self._reactor, 0)
                continue
            answer = broker.rootReference().callRemote(name, *args, **kwargs)
            refused = _refusedAtOnce(answer)
            if refused is not None:
                route.notSent(step.address, refused, not broker.isConnected())
                self._kick()
                continue
            route.sent()
            return await answer


def _refusedAtOnce(answer: Deferred[Any]) -> DeadReferenceError | None:
    """
    The L{DeadReferenceError} C{answer} failed with at once (the call was
    refused before it was written: the connection is over or draining), taken
    out of it; C{None} if it did not (the call was written, or failed otherwise).
    """
    refused: list[DeadReferenceError] = []

    def take(failure: Any) -> object:
        if isinstance(failure.value, DeadReferenceError):
            refused.append(failure.value)
            return None
        return failure

    if answer.called:
        answer.addErrback(take)
    return refused[0] if refused else None


def _cancelTimer(result: object, timer: Any) -> object:
    if timer.active():
        timer.cancel()
    return result


def _loginOf(connection: Any) -> Deferred[Any] | None:
    """The login a new client connection is making (its receiver is a L{ClientLogin} until done), or C{None}."""
    receiver = getattr(connection, "receiver", None)
    return receiver.done if isinstance(receiver, ClientLogin) else None


def _brokerOf(connection: Any) -> Broker:
    broker = connection.receiver
    if not isinstance(broker, Broker):
        raise TypeError(f"{connection!r} delivers to {broker!r}, not a Broker")
    return broker
