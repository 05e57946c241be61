"""Serve a directory over chunkwire's bulk-transfer service.

    python examples/bulk_server.py --listen tcp:8770 --dir /tmp/chunkwire-files
    python examples/bulk_client.py --connect tcp:host=127.0.0.1:port=8770 send big.iso
    python examples/bulk_client.py --connect tcp:host=127.0.0.1:port=8770 fetch big.iso

Clients upload and download files of any size, striped over several
connections if they like; a transfer cut by a dropped connection resumes
from the bytes the receiver already holds.  Every file is checked end to end
with the first digest both ends have (BLAKE3 with chunkwire[fast], else
SHA-256), and an upload appears in the directory (under its own name)
only once its digest has been verified: until then its bytes live in a
hidden .NAME.part file with a .NAME.part.json record of the ranges
held.  It logs to stdout (start-up, logins, peers the guard drops,
failed transfers) unless given --quiet.  Stop with Ctrl-C or SIGTERM: the server stops accepting, sends
GOAWAY to every client and exits once they have closed, their calls in
flight having had --grace seconds (30) to finish.

The service holds at most --max-open-files files open for clients
(unfinished uploads, files being received or sent; a quarter of the
process's descriptor limit by default) and --max-open-files-per-address
for one client address; past either, a client is refused with
TooManyOpenFiles and its connection stays up.  Unfinished uploads
(their declared sizes, kept on disk for a resume for a day) may take at
most --partial-quota bytes in all and --partial-quota-per-user bytes for
one user; past either, a new upload is refused with QuotaExceeded.

With --users FILE (made with chunkwire-adduser), --client-ca DIR or
--tokens FILE, only clients that log in are served, and each user sees
only their own directory, DIR/USER (made 0700 on their first login).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from _errors import CommandLineParser, addDebugArgument, runCommand
from _serving import (
    addGraceArgument,
    addListenArgument,
    addLogArguments,
    addLoginArguments,
    beginLoggingAsAsked,
    loginsFrom,
    serveForever,
)

from protocols import TokenProtocol, bulk
from protocols.auth import OPEN, DirectoryRealm, ServiceLogins
from protocols.bulk import BulkService, FileBudget, FileLimits
from protocols.rpc import DEFAULT_GRACE, BrokerFactory, ServerOptions, serverFactory
from protocols.serving import GuardedFactory, GuardPolicy, addGuardArguments, policyFromArguments


def brokerFactory(
    reactor: Any,
    directory: str,
    options: bulk.BulkOptions,
    logins: ServiceLogins = OPEN,
    hashing: str = "auto",
    limits: FileLimits | None = None,
) -> BrokerFactory:
    """
    Brokers carrying bulk with C{options}, serving C{directory} to anyone,
    or, with logins, each user their own DIRECTORY/USER; uploads hashed as
    C{hashing} says; every user's service counts its open files in one
    budget of C{limits}.  Unguarded: L{serve} puts the guard around it.
    """
    budget = FileBudget(limits)
    if not logins.required:
        service = BulkService(directory, reactor=reactor, hashing=hashing, budget=budget)
        return serverFactory(service, options=ServerOptions(bulk=options, guard=None), clock=reactor)
    realm = DirectoryRealm(
        directory, lambda userDirectory: BulkService(userDirectory, reactor=reactor, hashing=hashing, budget=budget)
    )
    serving = ServerOptions(bulk=options, guard=None, portal=logins.portal(realm), throttle=logins.throttle(reactor))
    return serverFactory(None, options=serving, clock=reactor)


async def serve(
    reactor: Any,
    descriptions: list[str],
    directory: str,
    options: bulk.BulkOptions,
    policy: GuardPolicy | None = None,
    logins: ServiceLogins = OPEN,
    hashing: str = "auto",
    limits: FileLimits | None = None,
    grace: float = DEFAULT_GRACE,
) -> None:
    factory = GuardedFactory(brokerFactory(reactor, directory, options, logins, hashing, limits), policy, reactor)
    await serveForever(reactor, descriptions, factory, "bulk server", f", serving {directory}", logins, grace)


def addFileLimitArguments(parser: argparse.ArgumentParser) -> None:
    """The file service's limits across connections (L{FileLimits})."""
    parser.add_argument(
        "--max-open-files",
        type=int,
        default=0,
        help="most files held open for clients in all (0: a quarter of the process's descriptor limit)",
    )
    parser.add_argument(
        "--max-open-files-per-address",
        type=int,
        default=FileLimits.maxOpenPerAddress,
        help=f"most files held open for one client address (default {FileLimits.maxOpenPerAddress})",
    )

    parser.add_argument(
        "--partial-quota",
        type=int,
        default=FileLimits.maxPartialBytes,
        help=f"most bytes of unfinished uploads kept in all (default {FileLimits.maxPartialBytes})",
    )
    parser.add_argument(
        "--partial-quota-per-user",
        type=int,
        default=FileLimits.maxPartialBytesPerUser,
        help=f"most bytes of unfinished uploads kept for one user (default {FileLimits.maxPartialBytesPerUser})",
    )


def fileLimitsFrom(args: argparse.Namespace) -> FileLimits:
    """The L{FileLimits} the command line asks for."""
    return FileLimits(
        maxOpen=args.max_open_files or None,
        maxOpenPerAddress=args.max_open_files_per_address,
        maxPartialBytes=args.partial_quota,
        maxPartialBytesPerUser=args.partial_quota_per_user,
    )


def bulkOptions(hashing: str) -> bulk.BulkOptions:
    """
    The connections' options: incoming streams hashed in a worker thread
    only if C{hashing} says so; the rest the library's defaults (the read
    size among them, which follows L{bulk.steadyAllocator}).
    """
    return bulk.BulkOptions(hashing="thread" if hashing == "thread" else "inline")


def main(argv: list[str]) -> None:
    # Per-read buffers stay with the process instead of being faulted back in, and connections read
    # 1 MiB per turn (see steadyAllocator; rpc.serve would do it, but this server builds its own factory).
    bulk.steadyAllocator()
    parser = CommandLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    addListenArgument(parser, "tcp:8770")
    parser.add_argument("--dir", required=True, help="the directory to serve (created if missing)")
    parser.add_argument(
        "--hashing",
        choices=("auto", "inline", "thread"),
        default="auto",
        help="where uploads are hashed: the reactor thread or a worker thread (auto: a thread if a core stays free)",
    )
    addFileLimitArguments(parser)
    addLogArguments(parser)
    parser.add_argument(
        "--trace", action="store_true", help="log every token sent and received, readably (even with --quiet; noisy)"
    )
    addGraceArgument(parser)
    addLoginArguments(parser)
    addGuardArguments(parser)
    addDebugArgument(parser)
    args = parser.parse_args(argv)
    TokenProtocol.trace = args.trace
    beginLoggingAsAsked(args)
    options = bulkOptions(args.hashing)
    policy = policyFromArguments(args)
    listen = args.listen or ["tcp:8770"]
    limits = fileLimitsFrom(args)
    runCommand(
        lambda reactor: serve(
            reactor, listen, args.dir, options, policy, loginsFrom(args), args.hashing, limits, args.grace
        ),
        None,
        args.debug,
        True,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
