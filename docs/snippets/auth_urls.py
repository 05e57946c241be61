"""How-to: self-authenticating object URLs: the URL names the server's key and one object, no CA needed."""

import tempfile
from pathlib import Path

from twisted.internet.defer import Deferred
from twisted.internet.task import react

from protocols import rpc
from protocols.auth import LoginRefused
from protocols.auth.identity import ServerIdentity
from protocols.auth.names import NameTable


class Counter(rpc.Referenceable):
    def __init__(self):
        self.count = 0

    @rpc.remote
    def increment(self):
        self.count += 1
        return self.count


async def main(reactor):
    with tempfile.TemporaryDirectory() as directory:
        # The key is made once and kept: URLs stay valid across restarts.
        identity = ServerIdentity.loadOrCreate(Path(directory) / "server.pem")
        names = NameTable()
        name = names.register(Counter(), label="the counter")
        port = await rpc.serve(reactor, identity.serverDescription("tcp:0:interface=127.0.0.1"), names=names)
        url = names.url(identity, [f"127.0.0.1:{port.getHost().port}"], name)
        print("URL scheme and parts:", str(url).split("://")[0], len(url.keyHash), len(url.name))

        counter = await rpc.connectURL(reactor, str(url))
        print("increment:", await counter.callRemote("increment"))
        await counter.broker.disconnect()

        names.revoke(name)
        try:
            await rpc.connectURL(reactor, str(url))
        except LoginRefused:
            print("revoked: refused")
        await port.stopListening()


if __name__ == "__main__":
    react(lambda reactor: Deferred.fromCoroutine(main(reactor)))
