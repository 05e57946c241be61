"""Logging in over a real loopback connection: SCRAM passwords checked against a user file."""

from pathlib import Path

from protocols import bulk, rpc
from protocols.auth import LoginRefused, addUser
from protocols.options import ClientOptions
from twisted.cred.credentials import UsernamePassword
from twisted.internet import reactor
from twisted.trial.unittest import TestCase

from jobqueue.interface import IJobQueue
from jobqueue.server import serveJobs


class LoginTests(TestCase):
    """jobqueue-server's set-up, listening on a port of the loopback interface."""

    async def startServer(self) -> str:
        """Serve the queue to two users on a port the system picks; return its client endpoint description."""
        directory = Path(self.mktemp())
        directory.mkdir()
        users = directory / "users"
        # chunkwire-adduser does the same with more PBKDF2 rounds; fewer keep the test quick.
        addUser(users, "ada", b"ada's password", iterations=4096)
        addUser(users, "bob", b"bob's password", iterations=4096)
        port = await serveJobs(reactor, "tcp:0:interface=127.0.0.1", users, directory / "inputs")
        self.addCleanup(port.stopListening)
        return f"tcp:host=127.0.0.1:port={port.getHost().port}"

    async def logIn(self, address: str, name: bytes, password: bytes) -> IJobQueue:
        """Log in to `address` as `name`; the connection is closed when the test ends."""
        options = ClientOptions(credentials=UsernamePassword(name, password), bulk=bulk.BulkOptions())
        root = await rpc.connect(reactor, address, options=options)
        self.addCleanup(root.broker.disconnect)
        return root.typed(IJobQueue)

    async def test_usersShareTheQueue(self) -> None:
        """Two users who log in reach the same queue: one takes the job the other submitted."""
        address = await self.startServer()
        ada = await self.logIn(address, b"ada", b"ada's password")
        bob = await self.logIn(address, b"bob", b"bob's password")
        job = await ada.submit("render")
        self.assertEqual(await bob.take(), (job, "render"))

    async def test_wrongPasswordRefused(self) -> None:
        """A wrong password is refused."""
        address = await self.startServer()
        with self.assertRaises(LoginRefused):
            await self.logIn(address, b"ada", b"not ada's password")
