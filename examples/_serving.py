"""What the example servers share: --listen, the login options, and listening on every endpoint until interrupted.

A failure to listen (a port in use, a description that is not an endpoint)
is raised as an L{EndpointFailed} naming the option and the description,
which L{_errors.runCommand} prints as one line.  Every server logs to
stdout unless given --quiet (L{addLogArguments}).  With none of --users, --client-ca and --tokens a
server is open (as its owner configured nothing); with any, only clients
that log in get anything, and the server says so at start.  Stopped (SIGTERM,
or Ctrl-C), a server drains as C{twist} runs the services: it stops
accepting, sends GOAWAY on every RPC connection, and exits once they have
closed, its calls in flight having had --grace seconds to finish.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from _errors import EndpointFailed
from twisted.internet.defer import Deferred, gatherResults, maybeDeferred
from twisted.logger import globalLogBeginner, textFileLogObserver

from protocols import rpc
from protocols.auth import OPEN, ServiceLogins
from protocols.rpc import DEFAULT_GRACE
from protocols.serving import serverEndpoint


def addLogArguments(parser: argparse.ArgumentParser) -> None:
    """
    Add C{--quiet}: every example server logs to stdout unless given it
    (start-up, logins and logouts, peers the guard drops, failed calls);
    Twisted logs nothing per successful call, so the log stays short.
    """
    parser.add_argument("--quiet", action="store_true", help="do not log to stdout (logins, dropped peers, errors)")
    # Logging was once off by default and --log turned it on: scripts that still pass it keep working.
    parser.add_argument("--log", action="store_true", help=argparse.SUPPRESS)


def beginLoggingAsAsked(args: argparse.Namespace) -> None:
    """Begin logging as L{addLogArguments}' options say: to stdout unless C{--quiet}, and always with C{--trace}."""
    beginLogging(not args.quiet or getattr(args, "trace", False))


def beginLogging(toStdout: bool) -> None:
    """
    Begin Twisted's logging, to stdout or to nothing.  Logging always
    begins: until it does, Twisted keeps the last 65,536 events, and each
    holds the connection it names, so a server that never began logging
    would keep closed connections alive.
    """
    observers: list[Any] = [textFileLogObserver(sys.stdout)] if toStdout else []
    globalLogBeginner.beginLoggingTo(observers, redirectStandardIO=False)


def addListenArgument(parser: argparse.ArgumentParser, default: str) -> None:
    """Add C{--listen ENDPOINT}, repeatable; the servers use C{default} when it is not given."""
    parser.add_argument(
        "--listen",
        action="append",
        metavar="ENDPOINT",
        help=f"a Twisted server endpoint description (repeatable; default {default})",
    )


def addGraceArgument(parser: argparse.ArgumentParser) -> None:
    """Add C{--grace S}: seconds the calls in flight get to finish when the server is stopped."""
    parser.add_argument(
        "--grace",
        type=float,
        default=DEFAULT_GRACE,
        metavar="S",
        help="seconds calls in flight get when the server is stopped (GOAWAY, then drain; default %(default)s)",
    )


def addLoginArguments(parser: argparse.ArgumentParser) -> None:
    """Add C{--users FILE}, C{--client-ca DIR} and C{--tokens FILE}: any one makes the server require logins."""
    parser.add_argument(
        "--users",
        metavar="FILE",
        help="require logins: users and password verifiers from this file (made with chunkwire-adduser)",
    )
    parser.add_argument(
        "--client-ca",
        dest="clientCA",
        metavar="DIR",
        help="require TLS client certificates issued by a CA in DIR (*.pem); every --listen must be ssl:;"
        " a certificate's common name is its user",
    )
    parser.add_argument(
        "--tokens",
        metavar="FILE",
        help="require logins: bearer tokens from this file (made with chunkwire-adduser --token)",
    )
    parser.add_argument(
        "--throttle-db",
        dest="throttleDB",
        metavar="FILE",
        help="keep the login throttle's counts in this SQLite file, shared by every server naming it"
        " (default: in this process's memory)",
    )


def loginsFrom(args: argparse.Namespace) -> ServiceLogins:
    """The login options given."""
    return ServiceLogins(args.users, args.clientCA, args.tokens, args.throttleDB)


async def serveForever(
    reactor: Any,
    descriptions: list[str],
    factory: Any,
    banner: str,
    suffix: str = "",
    logins: ServiceLogins | None = None,
    grace: float = DEFAULT_GRACE,
) -> None:
    """
    Print whether logins are required (C{logins} C{None}: a server that
    takes no login options, open to anyone); listen with C{factory} on each
    endpoint description (each requiring client certificates with
    C{logins.clientCA}) and print, for each, C{"BANNER listening on
    DESCRIPTION (ADDRESS)SUFFIX"}; then serve until the process is
    interrupted, and drain before the reactor stops (L{drain}).

    @raise ClientCertificatesNeedTLS: C{--client-ca} with a description that is not C{ssl:}.
    """
    if logins is None:
        # Not ServiceLogins' notice, which names the login options: this server has none.
        notice = f"logins: none, anyone who can connect is served (the {banner} takes no login options)"
        logins = OPEN
    else:
        notice = logins.notice()
    listening = logins.listen(descriptions)
    print(notice, flush=True)
    ports: list[Any] = []
    reactor.addSystemEventTrigger("before", "shutdown", lambda: Deferred.fromCoroutine(drain(ports, factory, grace)))
    for description, listen in zip(descriptions, listening, strict=True):
        try:
            # haproxy: believes PROXY headers from loopback only (protocols._proxyheader).
            port: Any = await serverEndpoint(reactor, listen).listen(factory)
        except Exception as failure:
            raise EndpointFailed(description, failure, listening=True, option="--listen") from failure
        ports.append(port)
        print(f"{banner} listening on {description} ({port.getHost()}){suffix}", flush=True)
    await Deferred()  # serve until interrupted


async def drain(ports: list[Any], factory: Any, grace: float) -> None:
    """
    Stop accepting on every one of C{ports}, then send GOAWAY on every RPC
    connection of C{factory} and wait until they have all closed: their
    calls in flight get C{grace} seconds (L{rpc.drainBrokers}).  A factory
    of connections that are not RPC (the echo service's) has none to drain.
    """
    await gatherResults([maybeDeferred(port.stopListening) for port in ports])
    await rpc.drainBrokers(getattr(factory, "brokers", ()), grace)
