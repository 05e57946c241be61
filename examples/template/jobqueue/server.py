"""The job queue as a process: clients log in with a user name and password (SCRAM) and share one queue.

    jobqueue-server --users users.txt --inputs /srv/jobqueue [--listen tcp:8790]
        [--store memory | /srv/jobqueue/state.sqlite | postgresql://jobs@db.example/jobs]

Add users to the file with `chunkwire-adduser users.txt NAME` (it asks for
the password and keeps only a salted verifier).
"""

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from protocols import bulk, rpc
from protocols.auth import IRemoteRoot, UserFile, portal
from protocols.kv import openState
from protocols.rpc import ServerOptions
from twisted.cred.portal import IRealm
from twisted.internet.defer import Deferred
from twisted.internet.task import react
from twisted.logger import globalLogBeginner, textFileLogObserver
from zope.interface import implementer

from .service import JobQueue, openJobQueue


@implementer(IRealm)
class JobRealm:
    """Gives every user who logs in the same queue as their root."""

    def __init__(self, queue: JobQueue) -> None:
        self.queue = queue

    def requestAvatar(
        self, avatarId: bytes | tuple[()], mind: object, *interfaces: Any
    ) -> tuple[Any, JobQueue, Callable[[], None]]:
        if IRemoteRoot not in interfaces:
            raise NotImplementedError("chunkwire asks for IRemoteRoot")
        return IRemoteRoot, self.queue, lambda: None


def serveJobs(
    reactor: Any, description: str, users: Path, inputs: Path, store: str = "memory"
) -> Deferred[rpc.ListeningPort]:
    """
    Serve a `JobQueue` keeping inputs under `inputs` and its jobs in
    `store` (`memory`, a SQLite file's path or a `postgresql://` URL: see
    `protocols.kv.openState`) on the endpoint `description`, to the users
    of the user file `users`; fire with the listening port.  Connections
    carry streams too (`ServerOptions.bulk`), for `JobQueue.attach`.
    """
    return Deferred.fromCoroutine(_serveJobs(reactor, description, users, inputs, store))


async def _serveJobs(reactor: Any, description: str, users: Path, inputs: Path, store: str) -> rpc.ListeningPort:
    inputs.mkdir(parents=True, exist_ok=True)
    # Opening a durable store connects (or opens the file) once, before serving.
    queue = await openJobQueue(inputs, openState(reactor, store))
    # auth.portal checks that the realm and the checkers provide their interfaces.
    logins = portal(JobRealm(queue), [UserFile(users)])
    return await rpc.serve(reactor, description, options=ServerOptions(portal=logins, bulk=bulk.BulkOptions()))


async def _serveForever(reactor: Any, options: argparse.Namespace) -> None:
    port = await serveJobs(reactor, options.listen, options.users, options.inputs, options.store)
    print(f"jobqueue: serving on {port.getHost()}", flush=True)
    await Deferred()  # never fires: serve until the process is stopped


def main(argv: Sequence[str] | None = None) -> None:
    """The `jobqueue-server` command."""
    parser = argparse.ArgumentParser(prog="jobqueue-server", description="Serve the job queue.")
    parser.add_argument("--listen", default="tcp:8790", help="a Twisted server endpoint (default: %(default)s)")
    parser.add_argument("--users", type=Path, required=True, help="the user file (chunkwire-adduser)")
    parser.add_argument("--inputs", type=Path, required=True, help="the directory that keeps jobs' inputs")
    parser.add_argument(
        "--store",
        default="memory",
        help="where the jobs are kept: memory, a SQLite file's path, or a postgresql:// URL (default: %(default)s)",
    )
    options = parser.parse_args(argv)
    # Twisted logs nothing until logging begins: logins, refusals and dropped peers go to stdout.
    globalLogBeginner.beginLoggingTo([textFileLogObserver(sys.stdout)])
    react(lambda reactor: Deferred.fromCoroutine(_serveForever(reactor, options)))


if __name__ == "__main__":
    main()
