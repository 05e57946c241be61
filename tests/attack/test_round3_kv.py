"""Issue 28 item 2, against the kv example as a process: a flood of 1 MiB puts for no answer costs bounded memory.

The probe sent 2,452 calls for no answer, each a 1 MiB put of a new key,
and the server passed 2.5 GB in 2.5 s: the store had no size limit, and a
call for no answer is never slowed by answers waiting.  Now the store has
limits (L{protocols.kv.StoreLimits}; the test runs the server with a small
one so that it is reached quickly): past them each put fails with
C{kv.StoreFull} (logged at a bounded rate, nothing stored), and an honest
client's calls go on being answered: its puts, once the flood has filled
the store they share, with the same clear refusal.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from framing import Encoder
from framing.wire import PREAMBLE
from protocols.rpc.wire import CALL, NO_ANSWER

from .attacks import _connect
from .attacks_rpc import ROOT, Message, _registry
from .harness import ExampleServer, honest, honestResult

MiB = 1024 * 1024
STORE_BYTES = 16 * MiB
"""The server's --max-store-bytes in this test: the flood passes it five times over."""
PUTS = 80


def floodOfPuts(port: int, count: int) -> None:
    """C{count} calls for no answer, each a put of a new key with a 1 MiB value, as fast as the server reads."""
    encoder = Encoder(_registry())
    value = "v" * (MiB - 64)
    with _connect(port) as sock:
        sock.settimeout(60)
        sock.sendall(PREAMBLE)
        for n in range(count):
            sock.sendall(encoder.encode(Message((CALL, NO_ANSWER, ROOT, "put", None, f"flood-{n}", value))))


class StoreFloodTests(SynchronousTestCase):
    """A client flooding puts for no answer cannot grow the kv server past its store's limit."""

    def test_putsForNoAnswerBounded(self) -> None:
        """80 MiB of puts for no answer into a 16 MiB store: RSS grows far less than that; honest calls answered."""
        with tempfile.TemporaryDirectory() as logs:
            server = ExampleServer("kv", Path(logs) / "kv.log", ("--max-store-bytes", str(STORE_BYTES)))
            try:
                before = server.resources()
                clients = honest("kv", server.port, 3.0)
                floodOfPuts(server.port, PUTS)
                result = honestResult(clients)
                after = server.resources()
                peak = server.memory()["VmHWM"]
                log = server.logSince(0)
            finally:
                server.stop()
        # The flood filled the one store every client shares: the honest puts
        # after that are refused as clearly (kv.StoreFull) and nothing else fails.
        self.assertEqual([error for error in result["errors"] if "kv.StoreFull" not in error], [], result)
        self.assertGreater(result["calls"], 0)
        # The store holds at most 16 MiB, and the flood's reads a few MiB more at a time: far from its 80 MiB.
        self.assertLess(peak - before["rss"], 48 * MiB, (before, after, peak))
        self.assertIn("StoreFull", log)
        self.assertLess(after["fds"], before["fds"] + 8, (before, after))
