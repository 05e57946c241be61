"""How-to: a server with logins (SCRAM-SHA-256 passwords and bearer tokens) through twisted.cred."""

import tempfile
from pathlib import Path

from twisted.cred.credentials import Anonymous, UsernamePassword
from twisted.cred.portal import IRealm, Portal
from twisted.internet.defer import Deferred
from twisted.internet.task import react
from zope.interface import implementer

from protocols import rpc
from protocols.auth import BearerToken, IRemoteRoot, LoginRefused, TokenChecker, UserFile, addUser
from protocols.rpc import ServerOptions


class Notes(rpc.Referenceable):
    """One user's notes: what a logged-in client sees as its root."""

    def __init__(self, owner):
        self.owner, self.notes = owner, []

    @rpc.remote
    def add(self, text):
        self.notes.append(text)
        return f"{self.owner} has {len(self.notes)} note(s)"


@implementer(IRealm)
class NotesRealm:
    """Gives each avatar id its own Notes; twisted.cred calls requestAvatar after a checker accepted the login."""

    def __init__(self):
        self.books = {}

    def requestAvatar(self, avatarId, mind, *interfaces):
        if IRemoteRoot not in interfaces:
            raise NotImplementedError("chunkwire asks for IRemoteRoot")
        notes = self.books.setdefault(avatarId, Notes(avatarId.decode()))
        return IRemoteRoot, notes, lambda: print("logged out:", avatarId.decode())


async def main(reactor):
    with tempfile.TemporaryDirectory() as directory:
        users = Path(directory) / "users"
        # The file keeps a salted SCRAM verifier per user, never the password
        # (the same as: chunkwire-adduser users ada).
        addUser(users, "ada", b"correct horse", iterations=4096)
        tokens = TokenChecker({b"build-bot": b"a long random API key"})
        portal = Portal(NotesRealm(), [UserFile(users), tokens])
        port = await rpc.serve(reactor, "tcp:0:interface=127.0.0.1", options=ServerOptions(portal=portal))
        address = f"tcp:host=127.0.0.1:port={port.getHost().port}"

        ada = await rpc.login(reactor, address, UsernamePassword(b"ada", b"correct horse"))
        print(await ada.callRemote("add", "buy milk"))
        bot = await rpc.login(reactor, address, BearerToken(b"a long random API key"))
        print(await bot.callRemote("add", "nightly build ok"))
        for wrong in (UsernamePassword(b"ada", b"wrong"), Anonymous()):
            try:
                await rpc.login(reactor, address, wrong)
            except LoginRefused:
                print("refused:", type(wrong).__name__)
        await ada.broker.disconnect()
        await bot.broker.disconnect()
        await port.stopListening()


if __name__ == "__main__":
    react(lambda reactor: Deferred.fromCoroutine(main(reactor)))
