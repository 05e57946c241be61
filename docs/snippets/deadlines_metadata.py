"""How-to: a deadline and metadata that travel with a call, passed on downstream, and traced with OpenTelemetry."""

from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater, react

from protocols import rpc


class Inventory(rpc.Referenceable):
    """The downstream service: it sees the time its caller had left."""

    @rpc.remote
    def count(self, item: str) -> int:
        left = rpc.currentCall().timeRemaining()
        print(f"inventory: {item}, time left under 0.5 s: {left is not None and left < 0.5}")
        return 3


class Shop(rpc.Referenceable):
    def __init__(self, reactor, inventory):
        self.reactor, self.inventory = reactor, inventory

    @rpc.remote
    async def stock(self, item: str) -> int:
        call = rpc.currentCall()
        print("shop: request id", call.metadata.get("request-id"))
        await deferLater(self.reactor, 0.05)
        # Made inside the method: this call carries the time the shop's caller has left.
        return await self.inventory.callRemote("count", item)

    @rpc.remote
    async def slow(self) -> str:
        await Deferred()  # never fires by itself: cancelled when the deadline passes
        return "too late"


async def main(reactor):
    inventoryPort = await rpc.serve(reactor, "tcp:0:interface=127.0.0.1", Inventory())
    inventory = await rpc.connect(reactor, f"tcp:host=127.0.0.1:port={inventoryPort.getHost().port}")
    shopPort = await rpc.serve(reactor, "tcp:0:interface=127.0.0.1", Shop(reactor, inventory))
    shop = await rpc.connect(reactor, f"tcp:host=127.0.0.1:port={shopPort.getHost().port}")

    # Every call made inside the block has 0.5 s from now, and this metadata.
    with rpc.callContext(timeout=0.5, metadata={"request-id": "r-17"}):
        print("stock:", await shop.callRemote("stock", "apples"))

    with rpc.callContext(timeout=0.2):
        slow = shop.callRemote("slow")
    try:
        await slow
    except rpc.DeadlineExceeded as error:
        print("deadline exceeded:", error)

    for ref in (shop, inventory):
        await ref.broker.disconnect()
    for port in (shopPort, inventoryPort):
        await port.stopListening()
        await port.factory.disconnectAll()


react(lambda reactor: Deferred.fromCoroutine(main(reactor)))
