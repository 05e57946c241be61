# -*- test-case-name: tests.protocols.rpc.test_stream_lifetime,tests.protocols.test_backpressure -*-
"""Serving and connecting on Twisted endpoint strings, and a reconnecting client.

Contract: L{serve} listens on any server endpoint description
(C{"tcp:8760"}, C{"ssl:..."}, C{"unix:..."}); L{connect} connects once to a
client endpoint description and gives the server's root as a
L{RemoteReference}; L{reconnecting} keeps a connection up with Twisted's
C{ClientService} and its backoff policy.  Calls made through a reconnecting
client while it is between connections fail at once with
L{DeadReferenceError}: nothing is queued, so nothing is sent twice or late.
The one exception is a server's GOAWAY (L{protocols.rpc._drain}): the client
reconnects at once, and calls made until the next connection is up wait
for it (at most C{moveTimeout} seconds) and are sent there; none of them
was sent before, so none is sent twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar, overload

from twisted.internet.defer import Deferred, fail, maybeDeferred, succeed
from twisted.internet.endpoints import clientFromString, serverFromString
from twisted.internet.error import ConnectionDone, ConnectionLost
from twisted.internet.task import deferLater
from twisted.logger import Logger
from twisted.python.failure import Failure

from framing.login._errors import LoginFailed
from framing.rpc._drain import DrainDeadlineExceeded, GoingAway
from framing.rpc._errors import DeadReferenceError
from framing.rpc._limits import CLIENT_CALL_LIMITS, SERVER_CALL_LIMITS
from framing.rpc._referenceable import Referenceable

from .._deadline import DeadlineEndpoint
from ..auth._client import ClientLogin, ObjectName, mechanismFor
from ..auth._server import Authenticator
from ..options import CLIENT_DEFAULTS, ClientOptions
from ._broker import Broker, BrokerFactory
from ._failover import FailoverClient
from ._listening import ListeningPort, ServingPort
from ._options import SERVER_DEFAULTS, ServerOptions, clientFactory, gateLogins
from ._refs import HasRemoteProxy, RemoteReference

T = TypeVar("T")


def serverFactory(
    root: Referenceable | None = None, *, options: ServerOptions = SERVER_DEFAULTS, clock: Any = None
) -> BrokerFactory:
    """
    A factory of brokers exposing C{root} (or the avatar of each login), to
    listen with any endpoint (C{serverFromString(reactor,
    description).listen(factory)}); its C{disconnectAll()} closes every
    connection, for a clean shutdown.  Arguments as for L{serve}; C{clock}
    is the reactor (C{None}: the global one).  With the options' C{bulk},
    each connection carries streams, and its calls back to the client have
    L{CLIENT_CALL_LIMITS} by default (no timeout: one may carry a long
    stream); the process is left as it is (L{serve} prepares it).

    @raise ValueError: both a root and logins, or neither.
    """
    callLimits = options.callLimits or (SERVER_CALL_LIMITS if options.bulk is None else CLIENT_CALL_LIMITS)
    return BrokerFactory(
        root,
        clock=clock,
        tracebacks=options.tracebacks,
        limits=options.limits,
        registry=options.registry,
        callLimits=callLimits,
        gate=loginGate(root, options, clock),
        interceptors=options.interceptors,
        guard=options.guard,
        bulk=options.bulk,
    )


def loginGate(root: Referenceable | None, options: ServerOptions, clock: Any) -> Callable[[Broker], object] | None:
    """
    The gate of a server's brokers: C{None} for an open server (a C{root}),
    else an L{Authenticator}'s guard over the options' portal and name table.

    @raise ValueError: both a root and a login were given, or neither.
    """
    if root is not None and options.hasLogins:
        raise ValueError("give either a root (an open server) or a portal or names (a server with logins), not both")
    if root is None and not options.hasLogins:
        raise ValueError("a server needs a root, or ServerOptions with a portal or a name table")
    if root is not None:
        return None
    return Authenticator(
        options.portal, options.names, clock=clock, timeout=options.loginTimeout, throttle=options.throttle
    ).guard


def serve(
    reactor: Any,
    description: str | Any,
    root: Referenceable | None = None,
    *,
    options: ServerOptions = SERVER_DEFAULTS,
) -> Deferred[ListeningPort]:
    """
    Expose C{root} on the server endpoint C{description}, or let clients
    log in through the C{portal} or by an object's name in the C{names} of
    C{options}.

    @param description: a server endpoint description, or an
        C{IStreamServerEndpoint}.
    @param root: a L{Referenceable}; its L{remote} methods are what clients
        may call, and each connection gets the same object.  Anyone who can
        connect can call it: give C{ServerOptions(portal=...)} instead to
        know who calls.
    @param options: the L{ServerOptions}: tracebacks, limits, registry,
        call limits, interceptors, the guard (on by default), logins, and
        C{bulk}: with a L{protocols.bulk.BulkOptions} every connection
        carries streams too (see L{serverFactory}), and the process is
        prepared for them first (L{protocols.bulk.BulkOptions.prepareProcess}:
        the steady allocator, unless its C{steadyAllocator} is C{False}).
        The guard does not count a stream paused by flow control as idle.
    @return: a L{Deferred} firing with the listening port.
    @raise ValueError: both a root and a login, or neither.
    """
    factory = serverFactory(root, options=options, clock=reactor)
    if options.bulk is not None:
        options.bulk.prepareProcess()
    return listenWith(reactor, description, factory)


def listenWith(reactor: Any, description: str | Any, factory: BrokerFactory) -> Deferred[ListeningPort]:
    """
    Listen on the server endpoint C{description} (or endpoint object) with a
    factory of brokers: fires with a L{ServingPort}, which drains.
    """
    endpoint = serverFromString(reactor, description) if isinstance(description, str) else description  # type: ignore[no-untyped-call]
    listening: Deferred[Any] = endpoint.listen(factory)
    return listening.addCallback(lambda port: ServingPort(port, factory))


def clientEndpointWithin(
    reactor: Any,
    description: str | Any,
    timeout: float | None,
    ready: Callable[[Any], Deferred[Any] | None] | None = None,
) -> Any:
    """
    The client endpoint C{description} (a description, or an endpoint
    object), whose connections must be ready within C{timeout} seconds
    (L{DeadlineEndpoint}; C{None}: no deadline).

    @param ready: what a connection waits for beyond the peer's preamble (see L{DeadlineEndpoint}).
    """
    endpoint = clientFromString(reactor, description) if isinstance(description, str) else description  # type: ignore[no-untyped-call]
    if timeout is None:
        return endpoint
    return DeadlineEndpoint(endpoint, reactor, timeout, ready)


def connectWith(
    reactor: Any, description: str | Any, factory: BrokerFactory, timeout: float | None = None
) -> Deferred[RemoteReference]:
    """
    Connect to the client endpoint C{description} with a factory of brokers;
    fire with the peer's root.  The client's brokers keep reading however
    much waits to be sent (see L{protocols.TokenProtocol.sendBackPressure}).

    @param timeout: seconds to connect and hear the server's preamble
        (L{DeadlineEndpoint}); C{None}: no deadline.
    """
    factory.sendBackPressure = False
    endpoint = clientEndpointWithin(reactor, description, timeout)
    connected: Deferred[Any] = endpoint.connect(factory)
    return connected.addCallback(_connectedRoot)


def loginWith(
    reactor: Any,
    description: str | Any,
    factory: BrokerFactory,
    credentials: Any,
    timeout: float | None = None,
) -> Deferred[Any]:
    """
    Connect to the client endpoint C{description} (or endpoint object) with
    a factory of brokers, log in with C{credentials}, and fire with the
    root the server gives this login.

    @param timeout: seconds to connect, hear the server's preamble and log
        in (L{DeadlineEndpoint}); C{None}: no deadline.
    @raise UnsupportedCredentials: no mechanism takes C{credentials}.
    """
    mechanism = mechanismFor(credentials)
    logins: list[ClientLogin] = []
    factory.gate = lambda broker: logins.append(ClientLogin(broker, mechanism))
    factory.sendBackPressure = False
    endpoint = clientEndpointWithin(reactor, description, timeout, _loginOf)
    connected: Deferred[Any] = endpoint.connect(factory)
    return connected.addCallback(lambda _: logins[-1].done)


def _loginOf(connection: Any) -> Deferred[Any] | None:
    """The login a new client connection is making (its receiver is a L{ClientLogin} until done), or C{None}."""
    receiver = getattr(connection, "receiver", None)
    return receiver.done if isinstance(receiver, ClientLogin) else None


def connectWithFactory(
    reactor: Any,
    description: str | Any,
    factory: BrokerFactory,
    options: ClientOptions,
    interface: HasRemoteProxy[Any] | None = None,
) -> Deferred[Any]:
    """
    What every way of connecting once does with its factory of brokers:
    connect (and log in with the options' C{credentials}, if given) within
    their C{timeout}, and fire with the server's root, or its typed proxy
    for C{interface}.
    """
    if options.credentials is not None:
        connected = loginWith(reactor, description, factory, options.credentials, options.timeout)
    else:
        connected = connectWith(reactor, description, factory, options.timeout)
    if interface is not None:
        return connected.addCallback(interface.remoteProxy)
    return connected


@overload
def login(
    reactor: Any,
    description: str | Any,
    credentials: Any,
    *,
    root: Referenceable | None = None,
    interface: None = None,
    options: ClientOptions = CLIENT_DEFAULTS,
) -> Deferred[RemoteReference]: ...


@overload
def login(
    reactor: Any,
    description: str | Any,
    credentials: Any,
    *,
    root: Referenceable | None = None,
    interface: HasRemoteProxy[T],
    options: ClientOptions = CLIENT_DEFAULTS,
) -> Deferred[T]: ...


def login(
    reactor: Any,
    description: str | Any,
    credentials: Any,
    *,
    root: Referenceable | None = None,
    interface: HasRemoteProxy[Any] | None = None,
    options: ClientOptions = CLIENT_DEFAULTS,
) -> Deferred[Any]:
    """
    Connect to a server with logins and log in: L{connect} with
    C{credentials} (which replace the options' own).

    @param credentials: C{twisted.cred.credentials.UsernamePassword}
        (SCRAM-SHA-256: the password never crosses the wire),
        L{protocols.auth.BearerToken}, C{Anonymous()}, or
        L{protocols.auth.ClientCertificate} (with an C{ssl:} endpoint
        presenting one).
    @return: a L{Deferred} firing with the L{RemoteReference} to this
        login's root (the realm's avatar), or its typed proxy for
        C{interface}, or failing with L{protocols.auth.LoginRefused} (the
        same for every reason), L{protocols.auth.ServerNotVerified},
        L{protocols._deadline.ConnectTimeout}, or the connection's error.  Other arguments as
        for L{connect}.
    """
    options = replace(options, credentials=credentials)
    return connectWithFactory(reactor, description, clientFactory(reactor, root, options), options, interface)


@overload
def connectURL(
    reactor: Any,
    url: str,
    *,
    root: Referenceable | None = None,
    interface: None = None,
    options: ClientOptions = CLIENT_DEFAULTS,
) -> Deferred[RemoteReference]: ...


@overload
def connectURL(
    reactor: Any,
    url: str,
    *,
    root: Referenceable | None = None,
    interface: HasRemoteProxy[T],
    options: ClientOptions = CLIENT_DEFAULTS,
) -> Deferred[T]: ...


def connectURL(
    reactor: Any,
    url: str,
    *,
    root: Referenceable | None = None,
    interface: HasRemoteProxy[Any] | None = None,
    options: ClientOptions = CLIENT_DEFAULTS,
) -> Deferred[Any]:
    """
    Connect to the object a self-authenticating URL names
    (C{chunkwire://KEYHASH@HINTS/NAME}, see L{protocols.auth._urls}).  The
    server's TLS key must hash to the URL's C{KEYHASH}, checked in the TLS
    handshake, before the name is sent; the location hints are tried in
    order until one connects.  The URL's name is the login: the options
    have no C{credentials}.  Other arguments as for L{connect}; the
    options' C{timeout} is each hint's.

    @return: a L{Deferred} firing with the L{RemoteReference} to exactly
        that object (or its typed proxy for C{interface}), or failing with
        L{framing.login._urls.InvalidURL}, L{protocols.auth.LoginRefused}
        (an unknown or revoked name), L{protocols.auth._urls.KeyMismatch}
        (the server's key is not the URL's: the handshake failed before the
        name was sent), or the last hint's connection error
        (L{protocols._deadline.ConnectTimeout} among them).
    @raise ValueError: the options have C{credentials}.
    """
    options.refuseCredentials("connectURL")
    factory = partial(clientFactory, reactor, root, options)
    connected = Deferred.fromCoroutine(_connectURL(reactor, url, factory, options.timeout))
    if interface is not None:
        return connected.addCallback(interface.remoteProxy)
    return connected


async def _connectURL(
    reactor: Any, url: str, factory: Callable[[], BrokerFactory], timeout: float | None
) -> RemoteReference:
    from framing.login._urls import ObjectURL

    from ..auth._urls import clientEndpoint, pinnedClientOptions

    parsed = ObjectURL.parse(url)
    failure: Exception | None = None
    for hint in parsed.hints:
        options = pinnedClientOptions(parsed.keyHash)
        endpoint = clientEndpoint(reactor, parsed, hint, options=options)
        try:
            reference: RemoteReference = await loginWith(reactor, endpoint, factory(), ObjectName(parsed.name), timeout)
            return reference
        except LoginFailed:
            raise
        except Exception as error:
            # A server with another key fails the handshake: say so, not how TLS reported it.
            failure = options.mismatches[-1] if options.mismatches else error
    assert failure is not None
    raise failure


@overload
def connect(
    reactor: Any,
    description: str | Any,
    *,
    root: Referenceable | None = None,
    interface: None = None,
    options: ClientOptions = CLIENT_DEFAULTS,
) -> Deferred[RemoteReference]: ...


@overload
def connect(
    reactor: Any,
    description: str | Any,
    *,
    root: Referenceable | None = None,
    interface: HasRemoteProxy[T],
    options: ClientOptions = CLIENT_DEFAULTS,
) -> Deferred[T]: ...


def connect(
    reactor: Any,
    description: str | Any,
    *,
    root: Referenceable | None = None,
    interface: HasRemoteProxy[Any] | None = None,
    options: ClientOptions = CLIENT_DEFAULTS,
) -> Deferred[Any]:
    """Connect to the server at the client endpoint C{description}.

    Every way of connecting (L{login}, L{reconnecting} but for
    C{interface}, L{connectURL} but for the credentials) takes these
    arguments, meaning the same.
    A call made in the same reactor turn shares its write with the preamble.
    Close the connection with C{ref.broker.disconnect()}.

    Design: docs/design/rpc-twisted.md

    @param description: a client endpoint description, or an
        C{IStreamClientEndpoint}.
    @param root: an object the server may call back through its own root
        reference; usually callbacks are passed as arguments instead.
    @param interface: a L{protocols.rpc.RemoteInterface} the server's root
        implements: fire with C{root.typed(interface)} instead.
    @param options: the L{ClientOptions}; past its C{timeout} the connection
        is dropped and the wait fails with L{protocols._deadline.ConnectTimeout}.
        With C{bulk} (a L{protocols.bulk.BulkOptions}) the connection carries
        streams, and the process is prepared for them first, as by L{serve}.
    @return: a L{Deferred} firing with the L{RemoteReference} to the
        server's root (or its typed proxy); without credentials, once
        connected, before the server's preamble arrives.
    """
    return connectWithFactory(reactor, description, clientFactory(reactor, root, options), options, interface)


def _connectedRoot(connection: Any) -> RemoteReference:
    """The peer's root, on the broker receiving from C{connection} (just made)."""
    return _brokerOf(connection).rootReference()


def _brokerOf(connection: Any) -> Broker:
    broker = connection.receiver
    if not isinstance(broker, Broker):
        raise TypeError(f"{connection!r} delivers to {broker!r}, not a Broker")
    return broker


class ReconnectingClient:
    """
    A connection to an RPC server that is made again whenever it is lost,
    with Twisted's C{ClientService} and a backoff policy.

    References obtained through one connection die with it (their calls fail
    with L{DeadReferenceError}); get the new root from L{whenConnected}, and
    redo per-connection set-up (subscriptions, callbacks) in
    C{prepareConnection}.

    @ivar service: the C{ClientService} doing the work.
    @ivar loginFailure: why the last login failed (with C{credentials}),
        or C{None} once one succeeds; a refused login is tried again after
        the backoff like a refused connection.
    @ivar moveTimeout: seconds a call made after a GOAWAY waits for the
        next connection before it fails with L{GoingAway}.
    @ivar goAways: how many GOAWAYs the server sent this client (each one a
        move to a new connection).
    """

    _log = Logger()

    def __init__(
        self,
        reactor: Any,
        description: str | Any,
        *,
        root: Referenceable | None = None,
        options: ClientOptions = CLIENT_DEFAULTS,
        retryPolicy: Callable[[int], float] | None = None,
        prepareConnection: Callable[[RemoteReference], object] | None = None,
    ) -> None:
        """
        @param options: the L{ClientOptions}, as for L{connect}: with
            C{credentials}, log in on every connection (as L{login}); the
            connection counts as made once the login succeeds.  C{timeout}
            is each attempt's (one that runs out is dropped with
            L{protocols._deadline.ConnectTimeout} and counts as failed, so
            the next one waits the backoff); C{moveTimeout} is how long a
            call made after a GOAWAY waits for the next connection.
        @param retryPolicy: seconds to wait after the Nth failed attempt in a
            row; C{backoffPolicy()} (1 s growing to 60 s, with jitter) if
            C{None}.
        @param prepareConnection: called with the new root reference on every
            connection, before L{whenConnected} waiters see it; it may return
            a L{Deferred}, and if it fails the connection is dropped and
            retried.
        """
        self._prepare = prepareConnection
        self._reactor = reactor
        self.loginFailure: BaseException | None = None
        self._broker: Any = None
        self.moveTimeout = options.moveTimeout
        self.goAways = 0
        # Calls waiting for the connection after a GOAWAY; None: no GOAWAY to follow.
        self._moving: list[Deferred[Broker]] | None = None
        # Here, not at the module's top: twisted.application and automat (13 modules) are for a
        # reconnecting client only, not for a one-shot client such as bulk_client.py.
        from twisted.application.internet import ClientService, backoffPolicy

        self._retryPolicy = retryPolicy if retryPolicy is not None else backoffPolicy()
        # Preparations failed in a row (see _retryDelay).
        self._preparationFailures = 0
        # The step of the connection being prepared (see _connected), until it ends.
        self._preparing: Deferred[None] | None = None
        factory = clientFactory(reactor, root, options)
        gateLogins(factory, options.credentials)
        endpoint = clientEndpointWithin(reactor, description, options.timeout, _loginOf)
        self.service = ClientService(
            endpoint,
            factory,  # type: ignore[arg-type]
            retryPolicy=self._retryDelay,
            clock=reactor,
            prepareConnection=self._prepareConnection,
        )

    def _prepareConnection(self, connection: Any) -> object:
        # A ClientLogin stands in front of the broker until its login succeeds.
        login = connection.receiver
        if isinstance(login, ClientLogin):
            return login.done.addCallbacks(
                self._loggedIn, self._loginFailed, callbackArgs=(login.broker,), errbackArgs=(login,)
            )
        broker = _brokerOf(connection)
        return self._connected(broker, broker.rootReference())

    def _loggedIn(self, root: RemoteReference, broker: Broker) -> object:
        self.loginFailure = None
        return self._connected(broker, root)

    def _connected(self, broker: Broker, root: RemoteReference) -> Deferred[None]:
        """
        A new connection (logged in if need be): prepare it, then send the
        calls waiting since a GOAWAY.

        The step this returns never fails, and it ends no later than the
        connection does: C{ClientService} has no transition for a
        connection lost while this step runs, nor for one still open after
        the step failed (it would log C{NoTransition} when the connection
        goes, as it did whenever a server drained while a client was
        preparing).  A failed preparation closes the connection instead, and
        the retry after it waits the backoff (see L{_retryDelay}).
        """
        self._broker = broker
        broker.drain.goneAway.append(self._goneAway)
        prepared: Deferred[Any] = maybeDeferred(self._prepare, root) if self._prepare is not None else succeed(None)
        prepared.addCallbacks(self._moved, self._prepareFailed, callbackArgs=(broker,), errbackArgs=(broker,))
        step: Deferred[None] = Deferred()
        self._preparing = step
        lost = broker.whenDisconnected()
        lost.addCallbacks(_settle, lambda failure: None, callbackArgs=(step,))
        prepared.addCallback(_settle, step).addCallback(lambda _: lost.cancel())
        return step

    def _moved(self, result: object, broker: Broker) -> None:
        self._preparationFailures = 0
        if not broker.isConnected():
            # Lost while preparing: the calls waiting since a GOAWAY wait for the next connection.
            return
        waiting, self._moving = self._moving, None
        for waiter in waiting or ():
            if not waiter.called:
                waiter.callback(broker)

    def _prepareFailed(self, failure: Failure, broker: Broker) -> None:
        """Preparing a connection failed: close it, and try again after the backoff."""
        self._preparationFailures += 1
        if self._broker is broker:
            self._broker = None
        # A drain or a lost connection is expected while servers restart: not worth a warning.
        expected = isinstance(
            failure.value, (DeadReferenceError, DrainDeadlineExceeded, ConnectionDone, ConnectionLost)
        )
        log = self._log.info if expected else self._log.warn
        log("preparing a new connection failed, trying again later: {error}", error=failure.value)
        broker.disconnect()

    def _goneAway(self, broker: Broker) -> None:
        """The server sent GOAWAY: reconnect as soon as this connection closes (it does once its calls are done)."""
        self.goAways += 1
        if self._moving is None:
            self._moving = []

    def _retryDelay(self, attempt: int) -> float:
        # A connection whose preparation failed counted as made (see _connected), which restarts the
        # service's count: add the failed preparations, so that a server that keeps failing them is
        # retried with a growing backoff, not in a loop.
        attempt += self._preparationFailures
        # The first attempt after a GOAWAY is made at once: the server asked to be left.
        if self._moving is not None and attempt == 1:
            return 0.0
        return self._retryPolicy(attempt)

    def _nextConnection(self, name: str) -> Deferred[Broker]:
        assert self._moving is not None
        waiter: Deferred[Broker] = Deferred()
        self._moving.append(waiter)
        timeout = GoingAway(f"cannot call {name!r}: no new connection within {self.moveTimeout:g} s of a GOAWAY")
        timer = self._reactor.callLater(self.moveTimeout, _failIfWaiting, waiter, timeout)
        waiter.addBoth(_stopTimer, timer)
        return waiter

    def _loginFailed(self, failure: Failure, login: ClientLogin) -> None:
        # Failing this step would leave ClientService waiting while it still
        # holds the connection (it then meets the connection's loss in a
        # state with no transition for it): succeed, close the connection,
        # and let the service try again after its backoff.
        self.loginFailure = failure.value
        self._log.warn("login failed, trying again later: {error}", error=failure.value)
        login.connection.transport.loseConnection()

    def startService(self) -> None:
        """Start connecting (L{reconnecting} has already done it)."""
        self.service.startService()

    def stopService(self) -> Deferred[None]:
        """Stop reconnecting and close the connection; fires once it is closed.  Calls waiting for a connection fail."""
        waiting, self._moving = self._moving, None
        for waiter in waiting or ():
            _failIfWaiting(waiter, GoingAway("the reconnecting client was stopped"))
        preparing, self._preparing = self._preparing, None
        if preparing is not None:
            # End a preparation still running first: the service then holds the connection, closes it and
            # waits for its loss.  Stopped mid-preparation it would cancel the step and stop at once, and
            # the connection's loss would come later to a stopped service (Twisted's ClientService logs
            # "NoTransition: _clientDisconnected in Stopped", seen after a kv watch through a drain).
            _settle(None, preparing)
        return self.service.stopService()

    def whenConnected(self, failAfterFailures: int | None = None) -> Deferred[RemoteReference]:
        """
        The root of the current connection, or of the next one.

        @param failAfterFailures: fail after that many failed attempts in a
            row instead of waiting on (C{None}: wait until stopped).
        """
        return Deferred.fromCoroutine(self._connectedRoot(failAfterFailures))

    async def _connectedRoot(self, failAfterFailures: int | None) -> RemoteReference:
        while True:
            connection: Any = await self.service.whenConnected(failAfterFailures)
            # A lost connection's receiver is no broker any more.
            broker = connection.receiver
            if isinstance(broker, Broker) and broker.isConnected():
                if not broker.drain.draining:
                    return broker.rootReference()
                if self._moving is not None:
                    broker = await self._nextConnection("whenConnected")
                    return broker.rootReference()
            # The service hears that a connection was lost just after the
            # broker does; code woken by the broker may ask before that.
            # By the next reactor turn the service knows.
            await deferLater(self._reactor, 0)

    def isConnected(self) -> bool:
        """Whether a connection is up now, and not draining."""
        broker = self._broker
        return broker is not None and broker.isConnected() and not broker.drain.draining

    def callRemote(self, _name: str, /, *args: Any, **kwargs: Any) -> Deferred[Any]:
        """
        Call C{_name} on the current connection's root.

        @return: as L{RemoteReference.callRemote}; fails at once with
            L{DeadReferenceError} while there is no connection.
        """
        broker = self._broker
        if broker is not None and broker.isConnected() and not broker.drain.draining:
            reference: RemoteReference = broker.rootReference()
            return reference.callRemote(_name, *args, **kwargs)
        if self._moving is not None:
            # Sent as if made now, on the next connection (or waiting again, should that one drain too).
            return self._nextConnection(_name).addCallback(lambda _: self.callRemote(_name, *args, **kwargs))
        return fail(DeadReferenceError(f"cannot call {_name!r}: not connected (reconnecting)"))


def _settle(result: object, step: Deferred[None]) -> None:
    """End C{step} (the preparation of a connection), once: on its result or on the connection's loss."""
    if not step.called:
        step.callback(None)


def _failIfWaiting(waiter: Deferred[Any], error: BaseException) -> None:
    if not waiter.called:
        waiter.errback(error)


def _stopTimer(result: object, timer: Any) -> object:
    if timer.active():
        timer.cancel()
    return result


@overload
def reconnecting(
    reactor: Any,
    description: str | Any,
    *,
    root: Referenceable | None = None,
    options: ClientOptions = CLIENT_DEFAULTS,
    retryPolicy: Callable[[int], float] | None = None,
    prepareConnection: Callable[[RemoteReference], object] | None = None,
) -> ReconnectingClient: ...


@overload
def reconnecting(
    reactor: Any,
    description: list[Any],
    *,
    root: Referenceable | None = None,
    options: ClientOptions = CLIENT_DEFAULTS,
    prepareConnection: Callable[[RemoteReference], object] | None = None,
) -> FailoverClient: ...


def reconnecting(
    reactor: Any,
    description: str | Any | list[Any],
    *,
    root: Referenceable | None = None,
    options: ClientOptions = CLIENT_DEFAULTS,
    retryPolicy: Callable[[int], float] | None = None,
    prepareConnection: Callable[[RemoteReference], object] | None = None,
) -> ReconnectingClient | FailoverClient:
    """
    A started L{ReconnectingClient} for the client endpoint C{description}
    (logging in with the options' C{credentials} on each connection, if
    given).  Wait for L{ReconnectingClient.whenConnected}; stop with
    L{ReconnectingClient.stopService}.  C{root} and C{options} mean what
    they mean for L{connect} (C{timeout} is each attempt's); type the root
    with C{root.typed(interface)} where L{ReconnectingClient.whenConnected}
    or C{prepareConnection} gives it.

    A list of addresses instead (C{"host:port"} or C{(host, port)}, each
    name counted as every address it resolves to; or endpoint descriptions
    and objects, one address each) gives a started
    L{protocols.rpc._failover.FailoverClient}, used the same way, which
    keeps connections up as the options' C{policy} says (C{"pick_first"}:
    one, to the first address that connects; C{"round_robin"}: one to each,
    calls taken in turn), each address backing off on its own (their
    C{backoff} instead of C{retryPolicy}); a server that drains, dies or is
    cut off has new calls move to another within C{moveTimeout} seconds or
    the call's deadline; a call is never sent twice.  A server cut off is
    noticed by C{silenceTimeout} (a PING at half of it while calls wait,
    the connection aborted after all of it): the calls written there fail,
    new ones go elsewhere.
    """
    client: ReconnectingClient | FailoverClient
    if isinstance(description, list):
        client = FailoverClient(reactor, description, root=root, options=options, prepareConnection=prepareConnection)
    else:
        client = ReconnectingClient(
            reactor,
            description,
            root=root,
            options=options,
            retryPolicy=retryPolicy,
            prepareConnection=prepareConnection,
        )
    client.startService()
    return client
