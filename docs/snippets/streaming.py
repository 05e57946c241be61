"""How-to: stream a large body in chunks, read no faster than the peer reads."""

import hashlib

from twisted.internet.defer import Deferred
from twisted.internet.task import react

from protocols.echo import EchoClient, EchoServer
from protocols.testing import loopbackTCP

CHUNK = 64 * 1024


def generated(total):
    """A lazy source: sendStream pulls the next chunk only while the transport is not paused."""
    for offset in range(0, total, CHUNK):
        yield bytes([offset // CHUNK % 256]) * min(CHUNK, total - offset)


async def main(reactor):
    pair = await loopbackTCP(reactor, EchoServer(), EchoClient())
    try:
        total = 16 * 1024 * 1024
        answer = await pair.client.echoStream(generated(total))  # one write per chunk
        expected = hashlib.sha256(b"".join(generated(total))).hexdigest()
        print(len(answer), "bytes back, digest ok:", hashlib.sha256(answer).hexdigest() == expected)
    finally:
        await pair.close()


if __name__ == "__main__":
    react(lambda reactor: Deferred.fromCoroutine(main(reactor)))
