"""The hostile peer's short form: every behaviour of the catalogue briefly, and every shipped server.

Each test starts one server as a user does (L{tests.attack.peercatalogue.SERVERS}),
finds its methods from its served class, and runs its behaviours of L{CASES}
for L{DURATION} seconds each beside an honest client; it fails with the table of
every case that broke a bound (memory, fds, disk), left an honest call
unanswered, or killed the server.  Outcomes only: no timing is judged, every
wait is a deadline.  The default run takes each behaviour against at least
one server and each server under at least one behaviour (L{CASES}); the
whole product, every behaviour against every server, is the campaign's:
C{python -m tests.attack.peercatalogue --duration 1} runs its 38 cases as
this short form would (89 s and 116 CPU-s of a quiet machine with the
servers on the pure core and the attacker on the compiled one, as here;
152 s and 188 CPU-s with C{CHUNKWIRE_PURE=1} throughout), and C{dev.py
attack} runs them longer, three rounds, at the guard's full object size.
"""

from __future__ import annotations

import contextlib
import importlib
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from twisted.trial.unittest import SynchronousTestCase

from framing import _core

from . import peercatalogue as catalogue

DURATION = 1.0
"""Seconds each behaviour of L{CASES} runs against its server in the default run."""

CASES: dict[str, list[str]] = {
    "echo": ["every-kind", "many-addresses"],
    "kv": ["no-answer-flood"],
    "kv-store": ["every-kind"],
    "kv-workers": ["never-read"],
    "bulk": ["trickle-read"],
    "interop": ["stream-churn"],
    "streams": ["trickle-read", "enormous-credit"],
}
"""
The behaviours each server meets in the default run: every behaviour at
least once, each where it bites (every kind at its largest where a store
file or the decoder's kinds are the subject, enormous credit and the
trickle where streams hold most), and every server once: 9 cases.  All
seven servers against every behaviour that fits, 38 cases, took 141 s of
one runner of the default run (load 4-5 on two cores) and 116 CPU-s alone
on a quiet machine; the rest run in the campaign (the module's docstring).
"""


@contextlib.contextmanager
def attackerCore() -> Iterator[None]:
    """
    The attacker's side (its encoding, the honest client, the sampler) on
    the compiled core where it was built, whatever this process's core: the
    subject is the server process, which keeps the core it was started
    with (C{CHUNKWIRE_PURE} in its environment), and the cores make the same
    bytes (tests/framing/test_cores.py).  On the pure core the attacker's
    encoding of the streams server's stream arguments (ten of a MiB each, as
    many small items) took some 65 s of the 70 s enormous-credit case.
    """
    try:
        compiled: ModuleType | None = importlib.import_module("framing._speedups")
    except ImportError:
        compiled = None
    saved = _core.speedups
    _core.speedups = compiled or saved
    try:
        yield
    finally:
        _core.speedups = saved


class CataloguePeerTests(SynchronousTestCase):
    """Every hostile behaviour against every server: bounded memory, fds and disk; honest calls answered; alive."""

    def visit(self, server: str) -> None:
        with tempfile.TemporaryDirectory(prefix="chunkwire-catalogue-") as scratch, attackerCore():
            rows = catalogue.runServer(server, CASES[server], DURATION, Path(scratch))
        self.assertEqual([row["behaviour"] for row in rows], CASES[server], "a case that does not fit its server")
        self.assertEqual([row for row in rows if row["failures"]], [], "\n" + catalogue.table(rows))

    def test_everyBehaviourAndServer(self) -> None:
        """L{CASES} takes every behaviour of the catalogue at least once and names every server, each with a test."""
        self.assertEqual({name for names in CASES.values() for name in names}, set(catalogue.BEHAVIOURS))
        self.assertEqual(set(CASES), set(catalogue.SERVERS))
        tests = {name for name in dir(self) if name.startswith("test_")}
        for server in CASES:
            camel = server.split("-")[0] + "".join(part.title() for part in server.split("-")[1:])
            self.assertIn(f"test_{camel}", tests, server)

    def test_echo(self) -> None:
        """examples/echo_server.py: objects of every kind, and busy connections from many addresses."""
        self.visit("echo")

    def test_kv(self) -> None:
        """examples/kv_server.py, in memory: every IKeyValue method found and flooded with calls for no answer."""
        self.visit("kv")

    def test_kvStore(self) -> None:
        """examples/kv_server.py --store FILE: memory and the SQLite file's size bounded too."""
        self.visit("kv-store")

    def test_kvWorkers(self) -> None:
        """twist chunkwire-kv --workers 2 --store FILE, never read: every worker bounded and alive (not restarted)."""
        self.visit("kv-workers")

    def test_bulk(self) -> None:
        """examples/bulk_server.py, read a trickle: the file service's methods, and its directory's size bounded."""
        self.visit("bulk")

    def test_interop(self) -> None:
        """examples/interop_server.py: the interop service's stream methods, opened and abandoned over and over."""
        self.visit("interop")

    def test_streams(self) -> None:
        """Object streams both ways (tests/attack/streams_server.py): read a trickle, and granted enormous credit."""
        self.visit("streams")

    def test_discovery(self) -> None:
        """A method is found from the served class alone, with arguments at its constraints' largest."""
        plans = {plan.name: plan for plan in catalogue.discover("protocols.kv:KeyValueStore", 1 << 20)}
        self.assertEqual(sorted(plans), ["delete", "get", "list", "put", "unwatch", "watch"])
        key, value = plans["put"].argumentSets[0]
        self.assertEqual((len(key), len(value)), (1024, 1 << 20))
        streams = {plan.name: plan for plan in catalogue.discover("tests.attack.streams_server:Streams", 1024)}
        self.assertTrue(streams["doubled"].streamArguments and streams["doubled"].streamResult)
        kinds = {type(args[0].items[0]).__name__ for args in streams["doubled"].argumentSets}
        self.assertTrue({"bytes", "str", "memoryview", "array", "bytearray", "list", "dict"} <= kinds, kinds)

    def test_attackerAddress(self) -> None:
        """
        The behaviours connect from an address of their own, not the honest
        client's, so the guard's per-address cap counts the attacker alone
        (the stream churn's connections once had the honest client refused).
        """
        with socket.create_server(("127.0.0.1", 0)) as listener:
            target = catalogue.Target(listener.getsockname()[1], [], True, ("", (), None), False)
            peer = target.peer()
            self.addCleanup(peer.close)
            accepted, (host, _) = listener.accept()
            accepted.close()
            with socket.create_connection(listener.getsockname()) as honest:
                self.assertNotEqual(host, honest.getsockname()[0])
        self.assertEqual(host, catalogue.ATTACKER_ADDRESS)

    def test_rssGrowth(self) -> None:
        """
        The RSS-after rule judges growth from round to round, not the level:
        heap the allocator keeps (a level the first rounds set) passes, a
        leak (as much again each round) fails, one round is not judged.
        """
        MiB = catalogue.MiB
        idle = 50 * MiB
        self.assertIsNone(catalogue.rssGrowth([idle + 107 * MiB, idle + 188 * MiB, idle + 187 * MiB], idle))
        self.assertIsNone(catalogue.rssGrowth([idle + 200 * MiB], idle))
        # (a round that left less than the level is no baseline: interop x no-answer-flood left 16, -37, 8)
        self.assertIsNone(catalogue.rssGrowth([idle + 16 * MiB, idle - 37 * MiB, idle + 8 * MiB], idle))
        verdict = catalogue.rssGrowth([idle + 191 * MiB, idle + 213 * MiB, idle + 259 * MiB], idle)
        self.assertEqual(
            verdict,
            "RSS after the attack grew 46 MiB in round 3 past the rounds before "
            "(191, 213, 259 MiB above idle after each)",
        )
