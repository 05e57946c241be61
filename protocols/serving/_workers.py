# -*- test-case-name: tests.protocols.serving.test_workers,tests.protocols.serving.test_own_workers -*-
"""One port, several worker processes: a supervisor binds once and hands the socket over.

Contract: a L{Supervisor} binds each listening address once (or once per
worker with C{reusePort}), never accepts on it itself, and starts C{count}
workers that inherit the socket, told so by C{--adopt FD:FAMILY[:haproxy]}
(L{protocols.serving._service.adoptedEndpoint}); a TLS listener's key is
read by the workers only.  A worker that exits is restarted after a back-off
(0.1 s doubling to 10 s), each exit logged.  Stopping the supervisor stops
every worker (SIGTERM, then closing its stdin after L{STDIN_AFTER} s, SIGKILL
after C{grace} plus L{KILL_MARGIN} s) while each drains, and closes the
supervisor's own listening sockets at once so new connections are refused
rather than queued.  The supervisor never touches a connection.

Design: docs/design/serving.md
"""

from __future__ import annotations

import os
import re
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from twisted.application.service import Service
from twisted.internet.defer import Deferred, gatherResults, succeed
from twisted.internet.endpoints import serverFromString
from twisted.internet.protocol import ProcessProtocol
from twisted.python.failure import Failure

from .._logs import NamedLogger
from ..rpc._drain import DEFAULT_GRACE

STEADY = 5.0
"""Seconds after which a worker counts as having started well: its next restart waits the shortest back-off."""

STDIN_AFTER = 1.0
"""Seconds after its SIGTERM when a worker still running is also told to stop by its stdin's end."""
KILL_MARGIN = 10.0
"""Seconds past the grace time after which a worker that has not exited is killed."""

SHAREABLE = ("tcp", "tcp6", "unix")
"""The endpoint kinds whose listening socket can be handed to workers (also under C{haproxy:}, and under TLS)."""

TLS_KINDS = ("ssl", "chunkwire-tls")
"""The TLS endpoint kinds whose plain socket the supervisor binds and whose TLS each worker does."""

_FAMILY_NAMES = {socket.AF_INET: "inet", socket.AF_INET6: "inet6", socket.AF_UNIX: "unix"}


def backoff(failures: int) -> float:
    """Seconds to wait before the restart after C{failures} quick exits in a row (0.1 s doubling, at most 10 s)."""
    return float(min(0.1 * 2 ** min(failures, 10), 10.0))


@dataclass
class Listener:
    """
    One listening address, bound by the supervisor.

    @ivar description: the endpoint description it was bound from.
    @ivar haproxy: whether connections start with a PROXY header (C{haproxy:}).
    @ivar tls: the C{chunkwire-tls:} description each worker serves TLS with, or C{None} for a plain listener.
    @ivar sockets: one socket shared by every worker, or one per worker (C{SO_REUSEPORT}).
    @ivar ports: Twisted ports kept open (never read) for the sockets bound through an endpoint.
    """

    description: str
    haproxy: bool
    tls: str | None = None
    sockets: list[socket.socket] = field(default_factory=list)
    ports: list[Any] = field(default_factory=list)

    def adoptArgument(self, worker: int) -> str:
        """The C{--adopt} value of this listener for worker number C{worker}."""
        sock = self.sockets[worker % len(self.sockets)]
        suffix = ":haproxy" if self.haproxy else ""
        if self.tls is not None:
            suffix += ":" + self.tls
        return f"{sock.fileno()}:{_FAMILY_NAMES[sock.family]}{suffix}"

    @property
    def address(self) -> Any:
        """The address bound (the first socket's), e.g. to learn the port chosen for C{tcp:0}."""
        return self.sockets[0].getsockname()

    def close(self) -> None:
        for port in self.ports:
            port.stopListening()
        for sock in self.sockets:
            sock.close()


def _split(description: str) -> tuple[bool, str, str, str | None]:
    """
    Whether C{description} is under C{haproxy:}, the kind and description
    of the plain socket to bind, and the C{chunkwire-tls:} description of a
    TLS one (C{None} if plain).

    @raise ValueError: a kind that cannot be shared, or an C{ssl:} option
        that cannot be carried to the workers (L{protocols.auth._tlsendpoints.asTLSDescription}).
    """
    from ..auth._tlsendpoints import asTLSDescription, plainPart

    haproxy = description.startswith("haproxy:")
    inner = description[len("haproxy:") :] if haproxy else description
    kind = inner.split(":", 1)[0].lower()
    tls = None
    if kind in TLS_KINDS:
        tls = asTLSDescription(inner)
        inner = plainPart(tls)[0]
        kind = inner.split(":", 1)[0].lower()
    if kind not in SHAREABLE:
        raise ValueError(
            "workers can share tcp:, tcp6: and unix: listeners (optionally under haproxy:, ssl: or chunkwire-tls:),"
            f" not {description!r}"
        )
    return haproxy, kind, inner, tls


def bind(reactor: Any, description: str, count: int = 1, reusePort: bool = False) -> Listener:
    """
    Bind C{description} for C{count} workers: one socket through Twisted's
    own endpoint (never read here), or C{count} sockets with C{SO_REUSEPORT};
    for a TLS description, its plain socket (the workers do the TLS).

    @raise ValueError: an endpoint kind that cannot be shared, or
        C{reusePort} where the platform or the kind has none.
    """
    haproxy, kind, inner, tls = _split(description)
    listener = Listener(description, haproxy, tls)
    if reusePort:
        listener.sockets = _reusePortSockets(reactor, kind, inner, count)
        return listener
    port = serverFromString(reactor, inner).listen(_NoConnections())  # type: ignore[no-untyped-call]
    listening: list[Any] = []
    port.addCallback(listening.append)
    (twistedPort,) = listening  # TCP and UNIX endpoints listen synchronously.
    # The supervisor must never accept: the workers do.
    twistedPort.stopReading()
    listener.ports.append(twistedPort)
    listener.sockets.append(twistedPort.socket)
    return listener


def _reusePortSockets(reactor: Any, kind: str, inner: str, count: int) -> list[socket.socket]:
    if kind == "unix" or not hasattr(socket, "SO_REUSEPORT"):
        raise ValueError(f"SO_REUSEPORT is not available for {inner!r} on this platform")
    family, host, port, backlog = _tcpAddress(kind, inner)
    sockets: list[socket.socket] = []
    for _ in range(count):
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        port = sock.getsockname()[1]  # tcp:0: the others join the port the first one got
        sock.listen(backlog)
        sock.setblocking(False)
        sockets.append(sock)
    return sockets


def _tcpAddress(kind: str, description: str) -> tuple[int, str, int, int]:
    """
    The family, host, port and backlog of a C{tcp:} or C{tcp6:} server
    description (C{tcp:8760:interface=127.0.0.1:backlog=50}; C{\\:} is a
    colon inside a value, as in Twisted's descriptions).

    @raise ValueError: no port, or an argument a TCP endpoint does not take.
    """
    parts = [part.replace("\\:", ":") for part in re.split(r"(?<!\\):", description)][1:]
    positional = [part for part in parts if "=" not in part]
    options = dict(part.split("=", 1) for part in parts if "=" in part)
    port = options.pop("port", positional[0] if positional else None)
    unknown = set(options) - {"interface", "backlog"}
    if port is None or not str(port).isdigit() or unknown:
        raise ValueError(f"{description!r}: a tcp: description with a port, and only interface= and backlog=")
    family = socket.AF_INET6 if kind == "tcp6" else socket.AF_INET
    host = options.get("interface") or ("::" if kind == "tcp6" else "0.0.0.0")
    return family, host, int(port), int(options.get("backlog", 50))


class _NoConnections:
    """The factory of a port the supervisor binds but never reads: it is never asked for a protocol."""

    def doStart(self) -> None:
        pass

    def doStop(self) -> None:
        pass

    def buildProtocol(self, addr: Any) -> None:
        return None


class _WorkerProcess(ProcessProtocol):
    def __init__(self, supervisor: Supervisor, slot: int) -> None:
        self.supervisor = supervisor
        self.slot = slot
        self.ended: Deferred[None] = Deferred()

    def processEnded(self, reason: Failure) -> None:
        self.supervisor.workerEnded(self, reason)
        self.ended.callback(None)


class Supervisor(Service):
    """
    Runs C{count} worker processes on listening sockets bound once.

    @ivar listeners: the L{Listener}s, once started.
    @ivar workers: the running workers' process transports, by slot.
    @ivar restarts: how many workers were started again after exiting.
    """

    _log = NamedLogger(namespace="chunkwire.workers")

    def __init__(
        self,
        reactor: Any,
        descriptions: Sequence[str],
        command: Callable[[list[str]], list[str]],
        count: int,
        *,
        reusePort: bool = False,
        grace: float = DEFAULT_GRACE,
        env: dict[str, str] | None = None,
        path: str | None = None,
    ) -> None:
        """
        @param descriptions: the server endpoint descriptions to bind.
        @param command: given the C{--adopt} arguments of one worker, its
            command line (program first).
        @param count: how many workers.
        @param grace: the workers' drain grace, to know when to kill them.
        @param env: the workers' environment (this process's if C{None});
            each also gets C{CHUNKWIRE_WORKER}, its number from 0.
        @param path: the workers' working directory (this process's if C{None}).
        """
        if count < 1:
            raise ValueError(f"at least one worker, not {count}")
        self.reactor = reactor
        self.descriptions = list(descriptions)
        self.command = command
        self.count = count
        self.reusePort = reusePort
        self.grace = grace
        self.env = env
        self.path = path
        self.listeners: list[Listener] = []
        self.workers: dict[int, Any] = {}
        self.restarts = 0
        self._protocols: dict[int, _WorkerProcess] = {}
        self._failures = [0] * count
        self._started = [0.0] * count
        self._pending: dict[int, Any] = {}

    def startService(self) -> None:
        """Bind every listener, then start the workers."""
        self.listeners = [bind(self.reactor, d, self.count, self.reusePort) for d in self.descriptions]
        super().startService()  # type: ignore[no-untyped-call]
        for slot in range(self.count):
            self._spawn(slot)

    def _spawn(self, slot: int) -> None:
        self._pending.pop(slot, None)
        adopt: list[str] = []
        childFDs: dict[int, Any] = {0: "w", 1: 1, 2: 2}
        for listener in self.listeners:
            argument = listener.adoptArgument(slot)
            adopt += ["--adopt", argument]
            fd = int(argument.split(":", 1)[0])
            childFDs[fd] = fd
        args = self.command(adopt)
        protocol = _WorkerProcess(self, slot)
        self._protocols[slot] = protocol
        self._started[slot] = self.reactor.seconds()
        env = dict(os.environ if self.env is None else self.env, CHUNKWIRE_WORKER=str(slot))
        spawn = self.reactor.spawnProcess
        self.workers[slot] = spawn(protocol, args[0], args, env=env, path=self.path, childFDs=childFDs)
        self._log.info("worker {slot} started: pid {pid}", slot=slot, pid=self.workers[slot].pid)

    def workerEnded(self, protocol: _WorkerProcess, reason: Failure) -> None:
        """A worker exited: start it again after its back-off, unless the supervisor is stopping."""
        slot = protocol.slot
        self.workers.pop(slot, None)
        self._protocols.pop(slot, None)
        if not self.running:
            return
        if self.reactor.seconds() - self._started[slot] >= STEADY:
            self._failures[slot] = 0
        delay = backoff(self._failures[slot])
        self._failures[slot] += 1
        self.restarts += 1
        self._log.warn(
            "worker {slot} exited ({reason}); starting it again in {delay:.1f} s",
            slot=slot,
            reason=reason.value,
            delay=delay,
        )
        self._pending[slot] = self.reactor.callLater(delay, self._spawn, slot)

    def stopService(self) -> Deferred[None]:
        """SIGTERM every worker (they drain), close this side's listening sockets, wait for the workers to exit."""
        super().stopService()  # type: ignore[no-untyped-call]
        for timer in self._pending.values():
            timer.cancel()
        self._pending.clear()
        ended = [protocol.ended for protocol in self._protocols.values()]
        for process in list(self.workers.values()):
            _signal(process, "TERM")
        # A SIGTERM that reaches a worker between its fork and its exec is taken by the copy of this
        # process's handler and lost; a worker still there a moment later is told by its stdin's end too.
        # (Not at once: a worker whose SIGTERM came after the pipe's end would log its second stop as an error.)
        closer = self.reactor.callLater(STDIN_AFTER, self._closeStdins)
        # Now, not once the workers are gone: a socket stays listening while
        # any process holds it, and a worker draining has closed its own, so
        # a connection the kernel queued on it (with SO_REUSEPORT, those it
        # hashes to that worker's socket) would wait, unaccepted, until this
        # side closed it; closed, it is refused at once and its client retries.
        for listener in self.listeners:
            listener.close()
        self.listeners = []
        killer = self.reactor.callLater(self.grace + KILL_MARGIN, self._killAll)
        done: Deferred[Any] = gatherResults(ended) if ended else succeed(None)
        return done.addBoth(self._stopped, killer, closer)

    def _closeStdins(self) -> None:
        """Close the stdin of every worker still running: told to stop a second way (see L{stopService})."""
        for process in list(self.workers.values()):
            process.closeStdin()

    def _killAll(self) -> None:
        for process in list(self.workers.values()):
            self._log.warn("worker pid {pid} did not exit in time; killing it", pid=process.pid)
            _signal(process, "KILL")

    def _stopped(self, result: object, killer: Any, closer: Any) -> None:
        for timer in (killer, closer):
            if timer.active():
                timer.cancel()


def _signal(process: Any, name: str) -> None:
    try:
        process.signalProcess(name)
    except Exception:
        # Exited in the meantime.
        pass


def serveWorkers(
    reactor: Any,
    descriptions: Sequence[str],
    factory: str | None = None,
    count: int = 2,
    *,
    serve: str | None = None,
    arguments: Sequence[str] = (),
    reusePort: bool = False,
    grace: float = DEFAULT_GRACE,
    env: dict[str, str] | None = None,
    path: str | None = None,
) -> Supervisor:
    """Serve a service of your own on C{descriptions} from C{count} worker
    processes: a started L{Supervisor} whose workers run
    L{protocols.serving._worker}, each importing one function of yours,
    named C{"package.module:function"} (by the operator, never by a peer),
    and calling it in each worker with that worker's reactor and
    C{arguments} (strings, as on a command line):

      - C{factory=}: C{function(reactor, *arguments)} returns the factory
        to serve on each listener, e.g. C{rpc.serverFactory(root,
        clock=reactor, portal=..., interceptors=...)};
      - C{serve=}: C{function(reactor, endpoint, *arguments)} listens on
        C{endpoint} (one per listener) and returns (a C{Deferred} of) the
        L{protocols.rpc.ListeningPort}, as C{rpc.serve} does (every option works as
        in one process).

    Give exactly one.  Each worker drains (GOAWAY, then C{grace} seconds) on
    SIGTERM or when the supervisor is gone.  The descriptions may be C{tcp:},
    C{tcp6:}, C{unix:}, under C{haproxy:} or not, and C{ssl:} or
    C{chunkwire-tls:} over those.  Stop it with C{stopService}.  The function's module must be
    importable in the workers: C{path} and C{env} are their working directory
    and environment (e.g. with C{PYTHONPATH}).

    @raise ValueError: neither or both of C{factory} and C{serve}; a
        description that cannot be shared (before any process starts).
    """
    if (factory is None) == (serve is None):
        raise ValueError("give serveWorkers one of factory= and serve=")
    named = ["--factory", factory] if factory is not None else ["--serve", str(serve)]
    base = [sys.executable, "-m", "protocols.serving._worker", *named, "--grace", str(grace)]
    for argument in arguments:
        base.append(f"--argument={argument}")
    supervisor = Supervisor(
        reactor, descriptions, lambda adopt: base + adopt, count, reusePort=reusePort, grace=grace, env=env, path=path
    )
    supervisor.startService()
    return supervisor


def twistWorkerCommand(tapname: str, argv: Sequence[str] | None = None) -> Callable[[list[str]], list[str]]:
    """
    The command of a worker of C{twist TAPNAME ...}: this process's own
    C{twist} command line (C{argv}, C{sys.argv} if C{None}) without its
    C{--listen}, C{--workers} and C{--reuse-port} options, run as
    C{python -m twisted}, followed by the worker's C{--adopt} arguments.
    """
    argv = list(sys.argv if argv is None else argv)
    index = argv.index(tapname)
    twistOptions, own = argv[1:index], argv[index + 1 :]
    kept: list[str] = []
    skip = False
    for argument in own:
        if skip:
            skip = False
            continue
        name = argument.split("=", 1)[0]
        if name in ("--listen", "-l", "--workers"):
            skip = "=" not in argument
            continue
        if name == "--reuse-port":
            continue
        kept.append(argument)
    base = [sys.executable, "-m", "twisted", *twistOptions, tapname, *kept]
    return lambda adopt: base + adopt
