"""How-to: serve and connect over TLS with endpoint strings (a throwaway certificate made here)."""

import tempfile

from twisted.internet.defer import Deferred
from twisted.internet.task import react

from protocols import echo
from protocols.testing import SelfSignedCertificate


async def main(reactor):
    with tempfile.TemporaryDirectory() as directory:
        certificate = SelfSignedCertificate.generate("localhost").writeTo(directory)
        # ssl:0:privateKey=.../server.pem (the key and certificate in one PEM file)
        port = await echo.serve(reactor, certificate.serverEndpoint(0))
        # ssl:host=127.0.0.1:port=...:caCertsDir=.../ca:hostname=localhost (verifies the server)
        client = await echo.connect(reactor, certificate.clientEndpoint(port.getHost().port))
        print("over TLS:", await client.echo({"secret": b"\x00\x01"}))
        client.transport.loseConnection()
        await port.stopListening()


if __name__ == "__main__":
    react(lambda reactor: Deferred.fromCoroutine(main(reactor)))
