"""Tutorial, tracing: every token sent and received, readably, once Twisted's logging is started."""

import sys

from twisted.internet.defer import Deferred
from twisted.internet.task import react
from twisted.logger import globalLogBeginner, textFileLogObserver

from protocols import TokenProtocol, echo


async def main(reactor):
    port = await echo.serve(reactor, "tcp:0:interface=127.0.0.1")
    client = await echo.connect(reactor, f"tcp:host=127.0.0.1:port={port.getHost().port}")
    print("back:", await client.echo({"name": "ada", "n": 5}))
    client.transport.loseConnection()
    await port.stopListening()


if __name__ == "__main__":
    # The trace goes through Twisted's logging, which shows nothing until it is started.
    globalLogBeginner.beginLoggingTo([textFileLogObserver(sys.stdout, timeFormat=None)], redirectStandardIO=False)
    TokenProtocol.trace = True  # every connection in this process; TokenProtocol(trace=True) for one
    react(lambda reactor: Deferred.fromCoroutine(main(reactor)))
