"""How-to: self-authenticating object URLs: the URL names the server's key and one object, no CA needed."""

import tempfile
from pathlib import Path

from twisted.internet.defer import Deferred
from twisted.internet.task import react

from protocols import rpc
from protocols.auth import LoginRefused, NameTable, ServerIdentity
from protocols.rpc import ServerOptions


class Counter(rpc.Referenceable):
    def __init__(self):
        self.count = 0

    @rpc.remote
    def increment(self):
        self.count += 1
        return self.count


async def main(reactor):
    with tempfile.TemporaryDirectory() as directory:
        # The key is made once and kept, and so is its hash in every URL.
        identity = ServerIdentity.loadOrCreate(Path(directory) / "server.pem")
        # The names are kept too (as digests, with their labels) in names.json.
        names = NameTable(Path(directory) / "names.json")
        counter = Counter()
        name = names.register(counter, label="the counter")
        listen = identity.serverDescription(f"unix:{directory}/counter.sock")
        port = await rpc.serve(reactor, listen, options=ServerOptions(names=names))
        url = names.url(identity, [f"unix:{directory}/counter.sock"], name)
        print("URL scheme and parts:", str(url).split("://")[0], len(url.keyHash), len(url.name))

        remote = await rpc.connectURL(reactor, str(url))
        print("increment:", await remote.callRemote("increment"))
        await remote.broker.disconnect()
        await port.stopListening()

        # A restart: the table read from the file knows the name, and the label gets its object back.
        names = NameTable(Path(directory) / "names.json")
        names.bind("the counter", counter)
        port = await rpc.serve(reactor, listen, options=ServerOptions(names=names))
        remote = await rpc.connectURL(reactor, str(url))
        print("after a restart, the same URL:", await remote.callRemote("increment"))
        await remote.broker.disconnect()

        names.revoke(name)  # in names.json too: refused after the next restart as well
        try:
            await rpc.connectURL(reactor, str(url))
        except LoginRefused:
            print("revoked: refused")
        await port.stopListening()


if __name__ == "__main__":
    react(lambda reactor: Deferred.fromCoroutine(main(reactor)))
