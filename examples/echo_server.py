"""Run chunkwire's echo service on one or more Twisted endpoints.

    python examples/echo_server.py --listen tcp:8750
    python examples/echo_server.py --make-cert /tmp/chunkwire-cert
    python examples/echo_server.py --listen tcp:8750 \\
        --listen ssl:8751:privateKey=/tmp/chunkwire-cert/server.pem \\
        --listen unix:/tmp/chunkwire-echo.sock

Every object a client sends comes back unchanged; a peer that does not speak
chunkwire is dropped, and the log says what it looked like.  Stop with Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from _errors import CommandLineParser, addDebugArgument, runCommand
from _serving import addListenArgument, addLogArguments, beginLoggingAsAsked, serveForever

from framing import Limits
from protocols import TokenProtocol, echo
from protocols.serving import GuardedFactory, GuardPolicy, addGuardArguments, policyFromArguments
from protocols.testing import SelfSignedCertificate


def makeCertificate(directory: str) -> None:
    """Write a self-signed certificate for localhost and say how to use it."""
    certificate = SelfSignedCertificate.generate("localhost").writeTo(directory)
    print(f"wrote {certificate.serverPEMPath} (key and certificate) and {certificate.caDirectory}/ca.pem")
    print("serve with:   --listen", certificate.serverEndpoint(8751))
    print("connect with: --connect", certificate.clientEndpoint(8751))


async def serve(reactor: Any, descriptions: list[str], limits: Limits, policy: GuardPolicy | None = None) -> None:
    factory = GuardedFactory(echo.serverFactory(limits), policy, reactor)
    await serveForever(reactor, descriptions, factory, "echo server")


def main(argv: list[str]) -> None:
    parser = CommandLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    addListenArgument(parser, "tcp:8750")
    parser.add_argument("--make-cert", metavar="DIR", help="write a self-signed TLS certificate into DIR and exit")
    parser.add_argument("--max-bytes", type=int, default=Limits().max_bytes_length, help="largest byte string accepted")
    addLogArguments(parser)
    addGuardArguments(parser)
    parser.add_argument("--trace", action="store_true", help="log every token sent and received, readably")
    addDebugArgument(parser)
    args = parser.parse_args(argv)
    TokenProtocol.trace = args.trace
    if args.make_cert:
        makeCertificate(args.make_cert)
        return
    beginLoggingAsAsked(args)
    limits = Limits(max_bytes_length=args.max_bytes)
    policy = policyFromArguments(args)
    runCommand(lambda reactor: serve(reactor, args.listen or ["tcp:8750"], limits, policy), None, args.debug, True)


if __name__ == "__main__":
    main(sys.argv[1:])
