"""How-to: an interceptor that sets up the context a method runs in (enterMethod, exitMethod): a request id for logs."""

from contextvars import ContextVar

from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater, react

from protocols import rpc
from protocols.rpc import CallInterceptor, ServerOptions

REQUEST_ID: ContextVar[str] = ContextVar("request_id", default="-")


def log(text: str) -> None:
    """What a service's log line looks like: every line of a call says which request it served."""
    print(f"[{REQUEST_ID.get()}] {text}")


class RequestIds(CallInterceptor):
    """While a method runs, REQUEST_ID is the request id its caller sent in the call's metadata."""

    def enterMethod(self, call):
        return REQUEST_ID.set(call.metadata.get("request-id", "-"))

    def exitMethod(self, call, entered):
        REQUEST_ID.reset(entered)


class Orders(rpc.Referenceable):
    def __init__(self, reactor):
        self.reactor = reactor

    @rpc.remote
    async def place(self, item: str) -> str:
        log(f"placing {item}")
        await deferLater(self.reactor, 0.01)  # an async method keeps the context it started in
        log(f"placed {item}")
        return "ok"


async def main(reactor):
    port = await rpc.serve(
        reactor, "tcp:0:interface=127.0.0.1", Orders(reactor), options=ServerOptions(interceptors=[RequestIds()])
    )
    root = await rpc.connect(reactor, f"tcp:host=127.0.0.1:port={port.getHost().port}")
    with rpc.callContext(metadata={"request-id": "r-1"}):
        first = root.callRemote("place", "apples")
    with rpc.callContext(metadata={"request-id": "r-2"}):
        second = root.callRemote("place", "pears")
    print(await first, await second)
    log("outside any call")
    await root.broker.disconnect()
    await port.stopListening()
    await port.factory.disconnectAll()


react(lambda reactor: Deferred.fromCoroutine(main(reactor)))
