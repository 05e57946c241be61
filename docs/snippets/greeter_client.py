"""Call greeter_server.py from another process.

.venv/bin/python docs/snippets/greeter_client.py [NAME] [ENDPOINT]   # default ada, port 8760
"""

import sys

from twisted.internet.defer import Deferred
from twisted.internet.task import react

from protocols import rpc


async def main(reactor, name, description):
    root = await rpc.connect(reactor, description)
    try:
        print(await root.callRemote("greet", name))
    finally:
        await root.broker.disconnect()


if __name__ == "__main__":
    name = sys.argv[1] if len(sys.argv) > 1 else "ada"
    description = sys.argv[2] if len(sys.argv) > 2 else "tcp:host=127.0.0.1:port=8760"
    react(lambda reactor: Deferred.fromCoroutine(main(reactor, name, description)))
