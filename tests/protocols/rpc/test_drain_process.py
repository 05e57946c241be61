"""A server of rpc.serve, with bulk or without, run as a process, drains on SIGTERM: the call in flight is answered.

The server is L{tests.protocols.rpc.drainserver}; the client is the
blocking one, its call made on a thread of this test's.  Each step waits
for an event (a line the server prints, the call's answer, the process's
exit) under a 60 s bound that only a hang misses.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing.rpc._limits import CallLimits
from protocols import blocking
from protocols.options import ClientOptions
from tests.processes import readUntil, startPython, stop

HANG = 60.0


class DrainOnSigtermTests(SynchronousTestCase):
    """SIGTERM stops accepting, lets the call in flight finish, then the process exits 0."""

    def drainsOnSigterm(self, kind: str) -> None:
        server = startPython("-m", "tests.protocols.rpc.drainserver", kind)
        self.addCleanup(stop, server)
        port = int(readUntil(server, rb"serving on port (\d+)").group(1))
        connection = blocking.connect(
            f"127.0.0.1:{port}", options=ClientOptions(timeout=HANG, callLimits=CallLimits(callTimeout=HANG))
        )
        self.addCleanup(connection.close)
        outcome: dict[str, Any] = {}

        def call() -> None:
            try:
                outcome["answer"] = connection.root.callRemote("slow", 1.0)
            except Exception as error:  # reported by the assertion below
                outcome["error"] = error

        caller = threading.Thread(target=call, daemon=True)
        caller.start()
        readUntil(server, rb"slow started")
        server.send_signal(signal.SIGTERM)
        caller.join(HANG)
        self.assertEqual(outcome, {"answer": "done"})
        # The client has nothing more to call: it closes (the blocking client does not close by itself on GOAWAY).
        connection.close()
        readUntil(server, rb"drained")
        self.assertEqual(server.wait(HANG), 0)

    def test_rpcServe(self) -> None:
        """rpc.serve's port drains: the call running at SIGTERM is answered before the process exits."""
        self.drainsOnSigterm("rpc")

    def test_bulkServe(self) -> None:
        """A port of rpc.serve with bulk options drains the same way."""
        self.drainsOnSigterm("bulk")
