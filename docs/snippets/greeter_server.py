"""Your own RPC server, as a process: serve a Referenceable until stopped (SIGTERM or Ctrl-C), then drain.

.venv/bin/python docs/snippets/greeter_server.py [ENDPOINT]     # default tcp:8760
"""

import sys
from typing import Annotated

from twisted.internet.defer import Deferred
from twisted.internet.task import react

from protocols import rpc


class Greeter(rpc.Referenceable):
    """What clients may call: only the @remote methods, with what their type hints allow."""

    def __init__(self):
        self.greeted = 0

    @rpc.remote
    def greet(self, name: Annotated[str, rpc.MaxLength(100)]) -> str:
        self.greeted += 1
        return f"hello {name}, you are visitor {self.greeted}"


async def main(reactor, description):
    port = await rpc.serve(reactor, description, Greeter())
    # On SIGTERM or Ctrl-C: stop accepting, send GOAWAY, give the calls in flight up to 30 s, then exit.
    reactor.addSystemEventTrigger("before", "shutdown", port.drain)
    print(f"serving Greeter on port {port.getHost().port}", flush=True)
    await Deferred()  # never fires: serve until the process is interrupted


if __name__ == "__main__":
    description = sys.argv[1] if len(sys.argv) > 1 else "tcp:8760"
    react(lambda reactor: Deferred.fromCoroutine(main(reactor, description)))
