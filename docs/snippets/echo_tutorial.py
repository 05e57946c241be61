"""Tutorial, part 1: a TokenProtocol server and client on loopback TCP."""

from twisted.internet.defer import Deferred
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP4ServerEndpoint
from twisted.internet.protocol import Factory
from twisted.internet.task import react

from protocols import TokenProtocol


class Shouter(TokenProtocol):
    """Answers every string with the same string in capitals, anything else unchanged."""

    def objectReceived(self, obj):
        self.sendObject(obj.upper() if isinstance(obj, str) else obj)


class Asker(TokenProtocol):
    """Sends one object when connected and fires self.answer with the reply."""

    def __init__(self, question):
        super().__init__()
        self.question = question
        self.answer = Deferred()

    def connectionMade(self):
        self.sendObject(self.question)

    def objectReceived(self, obj):
        self.answer.callback(obj)
        self.transport.loseConnection()


async def main(reactor):
    port = await TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(Factory.forProtocol(Shouter))
    client = Asker({"greeting": "hello", "numbers": [1, 2.5, 2**70]})
    endpoint = TCP4ClientEndpoint(reactor, "127.0.0.1", port.getHost().port)
    await endpoint.connect(Factory.forProtocol(lambda: client))
    print("dict back:", await client.answer)

    client = Asker("hello")
    await endpoint.connect(Factory.forProtocol(lambda: client))
    print("string back:", await client.answer)
    await port.stopListening()


if __name__ == "__main__":
    react(lambda reactor: Deferred.fromCoroutine(main(reactor)))
