"""The interop test server: the interop service, for any chunkwire client to be checked against.

    python examples/interop_server.py
    python examples/interop_client.py --server 127.0.0.1:8790 --login-server 127.0.0.1:8791

It serves the interop service of protocols/interop.py (its methods, and the
cases a client runs against it, are in docs/interop.md) on three kinds of
endpoint:

  --listen ENDPOINT              the service itself, to anyone (no login)
  --login-listen ENDPOINT        only to clients that log in (SCRAM-SHA-256
                                 with a password, or a bearer token); their
                                 root answers whoami() with the name the
                                 login proved
  --certificate-listen ENDPOINT  the same, over TLS, to clients that log in
                                 with a client certificate from --client-ca

Unless --users and --tokens name files (made with chunkwire-adduser), the
server writes them itself, in a temporary directory removed when it stops,
with the public test credentials: the user "interop" with the password
"interop-password", and the bearer token "interop-token" for the same user.
Unless --client-ca names a directory of CA certificates, it also makes a
test CA there, a server certificate for localhost, 127.0.0.1 and ::1, and
a client certificate for the user "interop", and prints the client options
that use them ("test certificates: --ca-dir DIR --client-pem FILE");
without the TLS packages (the tls extra) it serves no certificate logins.
These credentials are published: listen on loopback (the default) or on a
test network only.  The file service behind files() keeps its files in
--dir (a temporary directory, removed when the server stops, by default).

A login connection has --login-timeout seconds (10 by default) to log in.

Each endpoint prints one line when it listens, "interop server listening on
ENDPOINT (ADDRESS)", "interop login server listening on ..." or "interop
certificate login server listening on ...".  Stop with Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from dataclasses import replace
from typing import Any

from _errors import CommandLineParser, EndpointFailed, addDebugArgument, runCommand
from _serving import beginLogging
from twisted.internet.defer import Deferred

from framing.login import MIN_ITERATIONS
from protocols import TokenProtocol, bulk, rpc
from protocols.auth import (
    DEFAULT_LOGIN_TIMEOUT,
    ServiceLogins,
    addUser,
    joinDescription,
    replaceEntry,
    requireClientCertificates,
    splitDescription,
    tokenDigest,
)
from protocols.interop import TEST_PASSWORD, TEST_TOKEN, TEST_USER, InteropRealm, InteropService
from protocols.serving import GuardedFactory, GuardPolicy, addGuardArguments, policyFromArguments, serverEndpoint

LISTEN = "tcp:8790:interface=127.0.0.1"
LOGIN_LISTEN = "tcp:8791:interface=127.0.0.1"
CERTIFICATE_LISTEN = "ssl:8792:interface=127.0.0.1"


def writeTestCredentials(directory: str) -> tuple[str, str]:
    """
    Write the test credentials' user file and token file in C{directory};
    give their paths.  The password's verifier uses the fewest PBKDF2
    rounds SCRAM allows: these credentials are public anyway, and a
    check run logs in many times.
    """
    users = os.path.join(directory, "users")
    tokens = os.path.join(directory, "tokens")
    addUser(users, TEST_USER, TEST_PASSWORD.encode("utf-8"), iterations=MIN_ITERATIONS)
    replaceEntry(tokens, TEST_USER, f"{TEST_USER}:{tokenDigest(TEST_TOKEN).hex()}")
    return users, tokens


def writeTestCertificates(directory: str) -> tuple[str, str, str]:
    """
    Make a test CA in C{directory}, a server certificate it issued (for
    localhost, 127.0.0.1 and ::1) and a client certificate for the test
    user; give the CA directory, the server's PEM file and the client's.

    @raise ImportError: the TLS packages are not installed.
    """
    from protocols.testing import CertificateAuthority

    ca = CertificateAuthority.generate("chunkwire interop test CA")
    caDirectory = ca.writeCADirectory(os.path.join(directory, "ca"))
    server = ca.issue("localhost", server=True).writePEM(os.path.join(directory, "server.pem"))
    client = ca.issue(TEST_USER).writePEM(os.path.join(directory, "client.pem"))
    return str(caDirectory), str(server), str(client)


def certificateEndpoints(descriptions: list[str], caDirectory: str, serverPEM: str | None) -> list[str]:
    """
    The server descriptions of C{descriptions} (C{ssl:}), each requiring
    client certificates from the CAs in C{caDirectory}, and using the key
    in C{serverPEM} when it names none.
    """
    endpoints = []
    for description in descriptions:
        kind, positional, keywords = splitDescription(description)
        if serverPEM is not None and "privateKey" not in keywords:
            description = joinDescription(kind, positional, {**keywords, "privateKey": serverPEM})
        endpoints.append(requireClientCertificates(description, caDirectory))
    return endpoints


def factories(
    reactor: Any,
    directory: str,
    logins: ServiceLogins,
    policy: GuardPolicy | None,
    loginTimeout: float = DEFAULT_LOGIN_TIMEOUT,
) -> tuple[GuardedFactory, GuardedFactory]:
    """
    The open service's factory and the login service's, both carrying bulk
    streams and guarded; a login connection has C{loginTimeout} seconds to log in.
    """
    service = InteropService(reactor, directory)
    # Guarded by the GuardedFactory around each, not by the factory's own guard.
    streams = rpc.ServerOptions(bulk=bulk.BulkOptions(), callLimits=rpc.SERVER_CALL_LIMITS, guard=None)
    anyone = rpc.serverFactory(service, options=streams, clock=reactor)
    portal = logins.portal(InteropRealm())
    logging = replace(streams, portal=portal, loginTimeout=loginTimeout, throttle=logins.throttle(reactor))
    login = rpc.serverFactory(None, options=logging, clock=reactor)
    return GuardedFactory(anyone, policy, reactor), GuardedFactory(login, policy, reactor)


async def listenAll(
    reactor: Any, descriptions: list[str], factory: Any, banner: str, given: list[str] | None = None
) -> None:
    """
    Listen with C{factory} on each description; print C{"BANNER listening
    on DESCRIPTION (ADDRESS)"} for each, naming it as C{given} (the
    descriptions as the command line gave them) if given.
    """
    for description, shown in zip(descriptions, given or descriptions, strict=True):
        try:
            port: Any = await serverEndpoint(reactor, description).listen(factory)
        except Exception as failure:
            raise EndpointFailed(shown, failure, listening=True) from failure
        print(f"{banner} listening on {shown} ({port.getHost()})", flush=True)


async def serve(reactor: Any, args: argparse.Namespace) -> None:
    scratch = tempfile.mkdtemp(prefix="chunkwire-interop-")
    # Removed once the reactor has stopped: nothing is served from it after that.
    reactor.addSystemEventTrigger("after", "shutdown", shutil.rmtree, scratch, True)
    users, tokens = args.users, args.tokens
    if users is None or tokens is None:
        written = writeTestCredentials(scratch)
        users, tokens = users or written[0], tokens or written[1]
        print(f"test credentials: user {TEST_USER!r}, password {TEST_PASSWORD!r}, token {TEST_TOKEN!r}", flush=True)
    clientCA, serverPEM = args.clientCA, None
    certificateListen = args.certificate_listen or [CERTIFICATE_LISTEN]
    if clientCA is None:
        try:
            clientCA, serverPEM, clientPEM = writeTestCertificates(scratch)
        except ImportError as missing:
            print(f"certificate logins: not served ({missing}; install chunkwire[tls])", flush=True)
            certificateListen = []
        else:
            print(f"test certificates: --ca-dir {clientCA} --client-pem {clientPEM}", flush=True)
    directory = args.dir or os.path.join(scratch, "files")
    logins = ServiceLogins(users=users, clientCA=clientCA, tokens=tokens, throttleDB=args.throttleDB)
    anyone, login = factories(reactor, directory, logins, policyFromArguments(args), args.login_timeout)
    await listenAll(reactor, args.listen or [LISTEN], anyone, "interop server")
    await listenAll(reactor, args.login_listen or [LOGIN_LISTEN], login, "interop login server")
    if certificateListen:
        assert clientCA is not None
        tls = certificateEndpoints(certificateListen, clientCA, serverPEM)
        await listenAll(reactor, tls, login, "interop certificate login server", certificateListen)
    await Deferred()  # serve until interrupted


def main(argv: list[str]) -> None:
    parser = CommandLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--listen",
        action="append",
        metavar="ENDPOINT",
        help=f"serve the interop service to anyone here, a Twisted endpoint (repeatable; default {LISTEN})",
    )
    parser.add_argument(
        "--login-listen",
        action="append",
        metavar="ENDPOINT",
        help=f"serve only clients that log in here (repeatable; default {LOGIN_LISTEN})",
    )
    parser.add_argument(
        "--certificate-listen",
        action="append",
        metavar="ENDPOINT",
        help="serve clients that log in with a TLS client certificate here, an ssl: endpoint (repeatable;"
        f" default {CERTIFICATE_LISTEN} with the test server certificate)",
    )
    parser.add_argument(
        "--client-ca",
        dest="clientCA",
        metavar="DIR",
        help="the CA certificates (*.pem) whose client certificates log in (default: a test CA, made here)",
    )
    parser.add_argument(
        "--dir", metavar="DIR", help="the file service's directory (default: a temporary one, removed at the end)"
    )
    parser.add_argument(
        "--users",
        metavar="FILE",
        help="the user file of password logins (made with chunkwire-adduser; default: the test user, written here)",
    )
    parser.add_argument(
        "--tokens",
        metavar="FILE",
        help="the token file of bearer-token logins (chunkwire-adduser --token; default: the test token)",
    )
    parser.add_argument(
        "--throttle-db",
        dest="throttleDB",
        metavar="FILE",
        help="keep the login throttle's counts in this SQLite file (default: in this process's memory)",
    )
    parser.add_argument(
        "--login-timeout",
        type=float,
        default=DEFAULT_LOGIN_TIMEOUT,
        metavar="S",
        help="seconds a login connection has to log in (default %(default)g; the kit's test runs 2)",
    )
    parser.add_argument("--log", action="store_true", help="log to stdout")
    parser.add_argument("--trace", action="store_true", help="log every token sent and received, readably")
    addGuardArguments(parser)
    addDebugArgument(parser)
    args = parser.parse_args(argv)
    TokenProtocol.trace = args.trace
    beginLogging(args.log or args.trace)
    runCommand(lambda reactor: serve(reactor, args), None, args.debug, True)


if __name__ == "__main__":
    main(sys.argv[1:])
