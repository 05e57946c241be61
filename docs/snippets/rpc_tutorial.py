"""Tutorial, part 2: a remote interface both ends share, implemented by a Referenceable, called over loopback TCP."""

from typing import Annotated, Protocol

from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater, react

from framing import Violation
from framing.slicing import Integer, ListOf, Text
from protocols import rpc
from protocols.rpc import MaxLength, Range


class IGreeter(rpc.RemoteInterface, Protocol, name="tutorial.IGreeter"):
    """What both ends agree on: the methods, and, in their type hints, what each accepts."""

    def greet(self, name: Annotated[str, MaxLength(100)]) -> Deferred[str]: ...

    def add(self, a: int, b: Annotated[int, Range(0, 10)]) -> Deferred[int]: ...


class Greeter(rpc.Referenceable, IGreeter):
    """The object the server exposes: IGreeter's methods, and its own @remote ones."""

    def __init__(self, reactor):
        self.reactor = reactor
        self.greeted = []

    @rpc.deferred  # an async def method, returning the Deferred IGreeter declares
    async def greet(self, name):
        self.greeted.append(name)
        return f"hello {name}"

    @rpc.deferred
    async def add(self, a, b):
        await deferLater(self.reactor, 0.01)  # methods may wait: be async or return a Deferred
        return a + b

    # The explicit style: constraints given to @remote rather than read from hints.
    @rpc.remote(args={"limit": Integer(1, 100)}, result=ListOf(Text(100)))
    def history(self, limit=10):
        return self.greeted[-limit:]

    def secret(self):
        return "not callable: neither in IGreeter nor @remote"


async def main(reactor):
    port = await rpc.serve(reactor, "tcp:0:interface=127.0.0.1", Greeter(reactor))
    address = f"tcp:host=127.0.0.1:port={port.getHost().port}"

    greeter = await rpc.connect(reactor, address, interface=IGreeter)  # a typed proxy
    print(await greeter.greet("ada"))  # hello ada
    print(await greeter.add(2, b=3))  # 5
    try:
        await greeter.add(1, b=11)  # b must be 0..10: refused here, nothing is sent
    except Violation as refused:
        print("refused here:", refused.where)

    root = greeter.remoteReference  # the plain reference: any method, by name
    print(await root.callRemote("history"))  # ['ada']
    try:
        await root.callRemote("add", 1, b=11)  # sent, and refused by the server
    except rpc.RemoteViolation as refused:
        print("refused by the server:", refused.where)
    try:
        await root.callRemote("secret")
    except rpc.NoSuchMethod:
        print("secret is not callable")

    root.broker.disconnect()
    await port.stopListening()


if __name__ == "__main__":
    react(lambda reactor: Deferred.fromCoroutine(main(reactor)))
