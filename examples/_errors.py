"""One line, not a traceback, for the errors a user of the example programs meets.

Contract: L{runCommand} runs an example's coroutine under Twisted's C{react}
(L{runBlocking}: a command on a client without Twisted, as it is); any
error it ends with is printed to stderr as one line that names the endpoint
and, for the usual mistakes (a refused connection, an endpoint written as
C{HOST:PORT}, a port in use, a peer that does not speak chunkwire, a
server that says nothing within C{--timeout}), says what to do; the exit
status is then 1.  C{--debug} (L{addDebugArgument}) adds the traceback.
Every example client and server uses it, so they all say the same thing
the same way.  Twisted and chunkwire are imported only once an error is
explained or a command run: building the parser (and C{--help}) loads
neither; while a command loads them, and at its exit, the cyclic garbage
collector stays out of the way (L{pausedCollector}).
"""

from __future__ import annotations

import argparse
import errno
import gc
import importlib
import re
import sys
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

# "127.0.0.1:8750", "localhost:8750", "[::1]:8750" or "8750": what people type for an address.
_HOST_PORT = re.compile(r"^(?:(?P<host>\[[0-9a-fA-F:]+\]|[\w.\-]+):)?(?P<port>\d{1,5})$")


# TLS alerts a server sends when the client's certificate is missing or not from a CA it trusts.
_CERTIFICATE_ALERTS = ("certificate required", "unknown ca", "bad certificate", "certificate unknown")

_LISTEN_ADVICE = {
    errno.EADDRINUSE: "is another server on that port? pick another one, e.g. tcp:0",
    errno.EACCES: "ports below 1024 need privileges: pick a port above 1023",
    errno.EADDRNOTAVAIL: "that interface is not an address of this machine",
}


class EndpointFailed(Exception):
    """
    Listening on, or connecting to, the endpoint C{description} failed with
    C{reason}; C{option} is the command-line option that gave it, if one did.
    """

    def __init__(
        self, description: str, reason: BaseException, listening: bool = False, option: str | None = None
    ) -> None:
        super().__init__(f"{description}: {reason}")
        self.description = description
        self.reason = reason
        self.listening = listening
        self.option = option


class NotReady(TimeoutError):
    """
    A client without Twisted was not connected and ready (the preamble
    heard, logged in) within C{--timeout}; the message says which step was
    missing, in the words of the Twisted clients' C{ConnectTimeout}.
    """


class CommandLineParser(argparse.ArgumentParser):
    """
    An C{ArgumentParser} whose errors are the error and one line pointing
    at C{--help}: argparse's own usage block (a dozen lines for a server)
    would bury the one line that matters.  Subcommands' parsers are of this
    class too (argparse makes them of their parent's class).
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\nrun '{self.prog} --help' to see the options\n")


def addDebugArgument(parser: argparse.ArgumentParser, *subcommands: argparse.ArgumentParser) -> None:
    """Add C{--debug}: show the traceback of an error, not only its one-line explanation (after a subcommand too)."""
    parser.add_argument("--debug", action="store_true", help="on an error, show its traceback too")
    for subcommand in subcommands:
        # SUPPRESS: a subcommand that was not given --debug leaves the main parser's value alone.
        subcommand.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def endpointHint(description: str, listening: bool) -> str:
    """How to write C{description} as a Twisted endpoint, if it looks like a plain address; else C{""}."""
    match = _HOST_PORT.match(description.strip())
    if match is None:
        return ""
    host, port = match.group("host"), match.group("port")
    if listening:
        return f"use tcp:{port}" + (f":interface={_escaped(host)}" if host else "")
    return f"use tcp:host={_escaped(host or '127.0.0.1')}:port={port}"


def _escaped(host: str) -> str:
    """A host as an endpoint description writes it: no brackets, colons escaped."""
    return host.strip("[]").replace(":", "\\:")


def explain(failure: BaseException, description: str | None, listening: bool = False) -> str:
    """One line saying what went wrong with C{description} and, where known, what to do."""
    from framing import ProtocolError
    from framing.rpc import CallLost
    from protocols.blockingbulk import ConnectionLost

    refused, cannotListen, done, lost, lookup, connectError = _types(
        "twisted.internet.error",
        "ConnectionRefusedError",
        "CannotListenError",
        "ConnectionDone",
        "ConnectionLost",
        "DNSLookupError",
        "ConnectError",
    )
    (ConnectTimeout,) = _types("protocols.rpc", "ConnectTimeout")
    (BadEndpointDescription,) = _types("protocols.serving", "BadEndpointDescription")

    option = None
    if isinstance(failure, EndpointFailed):
        failure, description, listening, option = failure.reason, failure.description, failure.listening, failure.option
    where = f"{'listen on' if listening else 'connect to'} {description}" if description else "run"
    if isinstance(failure, BadEndpointDescription) and description:
        advice = endpointHint(description, listening) or "e.g. tcp:8750"
        reason = f"not a server endpoint description ({failure.reason}); {advice}"
        return f"{option} {description}: {reason}" if option else f"cannot {where}: {reason}"
    login = _explainLogin(failure, description, where)
    if login:
        return login
    if isinstance(failure, (refused, ConnectionRefusedError)):
        return f"cannot {where}: connection refused (is the server running, on that address and port?)"
    if isinstance(failure, cannotListen):
        number = getattr(failure.socketError, "errno", None)
        reason = getattr(failure.socketError, "strerror", None) or failure.socketError
        return f"cannot {where}: {reason} ({_LISTEN_ADVICE.get(number, 'check the address and the port')})"
    if isinstance(failure, ValueError) and "endpoint" in str(failure).lower() and description:
        hint = endpointHint(description, listening)
        advice = hint or ("e.g. tcp:8750" if listening else "e.g. tcp:host=127.0.0.1:port=8750")
        return f"cannot {where}: not a Twisted endpoint description ({failure}); {advice}"
    if isinstance(failure, NotReady):
        return f"cannot {where}: {failure}; --timeout S waits longer"
    if isinstance(failure, ConnectTimeout):
        # Its message says which step did not happen; the call it ended adds nothing.
        reason = failure.reason if isinstance(failure, CallLost) else failure
        return f"cannot {where}: {reason}; --timeout S waits longer"
    if isinstance(failure, ProtocolError) and getattr(failure, "code", "") == "bad-preamble":
        return f"cannot {where}: {failure} (is it a chunkwire server, and is the port right?)"
    if isinstance(failure, (done, lost, ConnectionLost)) and description:
        return f"lost the connection to {description}: {failure} (is it a chunkwire server? TLS on one side only?)"
    if isinstance(failure, (lookup, connectError, OSError)):
        return f"cannot {where}: {failure}"
    text = str(failure)
    return text if _isRegistered(failure) and text else f"{type(failure).__name__}: {text}"


class _NeverLoaded(Exception):
    """Stands for a type of Twisted's (or of chunkwire's Twisted shells) in a process that never loaded Twisted."""


def _types(module: str, *names: str) -> tuple[type[Any], ...]:
    """
    The classes C{names} of C{module}, a module of Twisted's or one that
    loads it, to tell failures apart by; in a process that never loaded
    Twisted (a command on the blocking client), no failure can be one of
    them: L{_NeverLoaded} stands for each, and an error costs no Twisted import.
    """
    if "twisted.internet" not in sys.modules:
        return (_NeverLoaded,) * len(names)
    loaded = importlib.import_module(module)
    return tuple(getattr(loaded, name) for name in names)


def needsLogin(failure: BaseException) -> bool:
    """Whether C{failure} is a server with logins dropping a client that sent calls without logging in."""
    from framing import PeerError

    return isinstance(failure, PeerError) and "before logging in" in str(failure)


def _certificateAlert(failure: BaseException) -> str:
    """The TLS alert that refused this client's certificate (or its lack of one), or C{""}."""
    if not isinstance(failure, _types("protocols.rpc", "NotTLS", "TLSHandshakeFailed")):
        return ""
    return next((alert for alert in _CERTIFICATE_ALERTS if alert in str(failure)), "")


def _explainLogin(failure: BaseException, description: str | None, where: str) -> str:
    """The line for a login's failure (or a server's login configuration), or C{""} for any other failure."""
    from framing.login import LoginFailed, LoginRefused

    configuration = _types("protocols.auth", "SecretFileError", "ClientCertificatesNeedTLS", "ThrottleStateError")

    if isinstance(failure, LoginRefused):
        return (
            f"cannot log in to {description}: the server refused the login"
            " (a wrong user name or password, an unknown token, or a certificate it does not accept)"
        )
    if isinstance(failure, LoginFailed):
        return f"cannot log in to {description}: {failure}"
    if needsLogin(failure):
        advice = "give --user NAME, --token-file FILE or --certificate-login"
        return f"cannot {where}: the server requires a login ({advice})"
    alert = _certificateAlert(failure)
    if alert:
        return (
            f"cannot {where}: the server wants a TLS client certificate from a CA it trusts"
            f" (TLS alert: {alert}; give certKey= and privateKey= in the ssl: endpoint)"
        )
    if isinstance(failure, configuration):
        return f"cannot {where}: {failure}"
    return ""


def _isRegistered(failure: BaseException) -> bool:
    """Whether C{failure}'s class is registered with C{rpc.registerError}: a service's own error, written for users."""
    from framing.rpc import ERRORS

    return ERRORS.nameFor(type(failure)) is not None


def fail(failure: BaseException, description: str | None, debug: bool, listening: bool = False) -> NoReturn:
    """Print L{explain}'s line (and with C{debug} the traceback) to stderr, then exit with status 1."""
    if debug:
        import traceback  # (only here: a command's start does not load it)

        traceback.print_exception(failure, file=sys.stderr)
    print(explain(failure, description, listening), file=sys.stderr, flush=True)
    raise SystemExit(1)


def runCommand(
    main: Callable[[Any], Coroutine[Any, Any, Any]], description: str | None, debug: bool, listening: bool = False
) -> NoReturn:
    """
    Run C{main(reactor)} under C{react}; end with status 1 and one line
    (L{fail}) if it raises.

    Start-up and exit cost a command little (L{pausedCollector}): the
    cyclic garbage collector is off while Twisted, chunkwire and what
    C{main} imports before its first wait load, and the objects they made
    are frozen out of its reach once the reactor runs, then again at the
    exit, so that the interpreter's teardown does not walk them.
    """
    with pausedCollector():
        from twisted.internet.defer import Deferred
        from twisted.internet.task import react

        async def guarded(reactor: Any) -> None:
            try:
                await main(reactor)
            except (SystemExit, KeyboardInterrupt):
                raise
            except Exception as failure:
                fail(failure, description, debug, listening)

        def start(reactor: Any) -> Deferred[None]:
            reactor.callWhenRunning(resumeCollector)
            return Deferred.fromCoroutine(guarded(reactor))

        react(start)
    raise AssertionError("react returns by exiting")


def runBlocking(main: Callable[[Callable[[], None]], None], description: str | None, debug: bool) -> NoReturn:
    """
    Run C{main(ready)}, a command on a client without Twisted, to its end
    and exit with status 0; end with status 1 and one line (L{fail}) if it
    raises, as L{runCommand}.  C{main} calls C{ready()} once it has
    imported what it needs: the collector is paused until then
    (L{pausedCollector}), as L{runCommand} pauses it until the reactor runs.
    A Ctrl-C that C{main} does not take over ends it with status 130, no traceback.
    """
    with pausedCollector():
        try:
            main(resumeCollector)
        except SystemExit:
            raise
        except KeyboardInterrupt:
            raise SystemExit(130) from None
        except Exception as failure:
            fail(failure, description, debug)
    raise SystemExit(0)


@contextmanager
def pausedCollector() -> Iterator[None]:
    """
    Run the body with the cyclic garbage collector off until
    L{resumeCollector} (or the body's end) turns it back on; on the way out
    (the command's exit) freeze every object left.

    The cost it saves: a command imports some 500 modules, whose objects
    the collector would walk over and over while they load (a tenth of the
    import time) and again when the interpreter tears down at the exit
    (a fifth of the imports' CPU more; bulk_client.py's commands: some
    100 ms of CPU in all, tests/examples/test_errors.py RunCommandTests).
    Freezing keeps the objects, it frees nothing: the teardown still
    releases every module and runs the finalizers of what reference
    counting frees; what it skips is collecting reference cycles left at
    the exit, which hold nothing to flush (a command closes its files and
    connections before it returns; Python flushes stdout and stderr itself).
    """
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def resumeCollector() -> None:
    """
    Freeze what exists now (the loaded modules and the command's set-up)
    out of the collector's reach and turn it back on: from here it walks
    only what the command makes as it runs.
    """
    gc.freeze()
    gc.enable()
