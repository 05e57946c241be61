"""How-to: several processes serving one port: the parent listens once, each worker adopts the socket.

python docs/snippets/shared_port.py --workers 2     # parent: listen, spawn workers, call each once
"""

import os
import socket
import sys

from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.protocol import ProcessProtocol
from twisted.internet.task import react

from protocols import echo

WORKER = r"""
from twisted.internet import reactor
from protocols import echo

# fd 3 is the listening socket the parent passed in childFDs.
port = reactor.adoptStreamPort(3, socket_family, echo.serverFactory())
print("worker ready", flush=True)
reactor.run()
"""


async def main(reactor, workers):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    code = f"socket_family = {int(socket.AF_INET)}\n" + WORKER
    processes = []
    for _ in range(workers):
        ready = Deferred()
        processes.append((_Worker(ready), ready))
        reactor.spawnProcess(
            processes[-1][0],
            sys.executable,
            [sys.executable, "-c", code],
            env=env,
            childFDs={0: "w", 1: "r", 2: 2, 3: listener.fileno()},
        )
    await gatherResults([ready for _, ready in processes])
    listener.close()  # the workers hold it now
    clients = [await echo.connect(reactor, f"tcp:host=127.0.0.1:port={port}") for _ in range(4)]
    print("answers:", await gatherResults([c.echo(i) for i, c in enumerate(clients)]))
    for client in clients:
        client.transport.loseConnection()
    for worker, _ in processes:
        worker.transport.signalProcess("TERM")


class _Worker(ProcessProtocol):
    """Fires ready when the worker says it is serving."""

    def __init__(self, ready):
        self.ready = ready

    def childDataReceived(self, fd, data):
        if b"worker ready" in data and not self.ready.called:
            self.ready.callback(None)


if __name__ == "__main__":
    count = int(sys.argv[sys.argv.index("--workers") + 1]) if "--workers" in sys.argv else 2
    react(lambda reactor: Deferred.fromCoroutine(main(reactor, count)))
