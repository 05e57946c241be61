"""Tutorial, part 2: a Referenceable with @remote methods, served and called over loopback TCP."""

from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater, react

from framing.slicing.constraints import Integer, Text
from protocols import rpc


class Greeter(rpc.Referenceable):
    """The object the server exposes; only its @remote methods can be called."""

    def __init__(self, reactor):
        self.reactor = reactor
        self.greeted = []

    @rpc.remote(args={"name": Text(100)})
    def greet(self, name):
        self.greeted.append(name)
        return f"hello {name}"

    @rpc.remote(args={"a": Integer(), "b": Integer(0, 10)}, result=Integer())
    async def add(self, a, b):
        await deferLater(self.reactor, 0.01)  # methods may wait: return a Deferred or be async
        return a + b

    @rpc.remote
    def history(self):
        return list(self.greeted)

    def secret(self):
        return "not callable: no @remote"


async def main(reactor):
    port = await rpc.serve(reactor, "tcp:0:interface=127.0.0.1", Greeter(reactor))
    address = f"tcp:host=127.0.0.1:port={port.getHost().port}"

    root = await rpc.connect(reactor, address)
    print(await root.callRemote("greet", "ada"))  # hello ada
    print(await root.callRemote("add", 2, b=3))  # 5
    print(await root.callRemote("history"))  # ['ada']

    try:
        await root.callRemote("add", 1, b=11)  # b must be 0..10
    except rpc.RemoteViolation as refused:
        print("refused:", refused.where)
    try:
        await root.callRemote("secret")
    except rpc.NoSuchMethod:
        print("secret is not callable")

    root.broker.disconnect()
    await port.stopListening()


if __name__ == "__main__":
    react(lambda reactor: Deferred.fromCoroutine(main(reactor)))
