"""The hostile-server catalogue's short form: every behaviour against one client, outcomes only.

Each test is one behaviour of L{tests.attack.hostileserver} against one
client (L{CASES}: every behaviour once, every client of
L{tests.attack.catalogue.SHORT_CLIENTS} at least twice), and judges its
row: every step ends within its deadline plus a generous margin with a
typed error (or the answer the behaviour allows), the client's RSS stays
within its bound, its close returns.  No timing ratio is asserted; a hang
is told from a slow machine by a margin only a hang misses.  The whole
product, every behaviour against every client (the reconnecting one too),
is the campaign's: C{PYTHONPATH=. python -m tests.attack.catalogue} at
this short form's sizes, and C{python3 dev.py attack} at the clients'
default limits with every interop case.
"""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from .catalogue import SHORT_CLIENTS, interopFooled, runCatalogue, table
from .hostileserver import BEHAVIOURS

CASES: dict[str, str] = {
    "silent": "blocking",
    "dripping": "asyncio",
    "garbage": "interop",
    "garbage-preamble": "twisted",
    "huge": "blocking",
    "huge-past": "asyncio",
    "flood": "interop",
    "stalled-stream": "asyncio",
    "largest-items": "twisted",
}
"""
The client each behaviour meets in the default run: 9 of the 36
behaviour x client rows of the short form, which took about 18 CPU-s of
the default run (each row a server and a client process).  The rest run in
the campaign (the module's docstring).
"""


class HostileServerCatalogueTests(SynchronousTestCase):
    """Each hostile behaviour against a client: a typed error in time, bounded memory, a close that returns."""

    def check(self, behaviour: str, client: str) -> None:
        [row] = runCatalogue([behaviour], [client], "short")
        self.assertEqual((row["behaviour"], row["client"]), (behaviour, client))
        self.assertEqual(row["failures"], [], "\n" + table([row]))

    def test_everyBehaviourAndClient(self) -> None:
        """L{CASES} takes every behaviour of the catalogue once and every client of the short form at least twice."""
        self.assertEqual(set(CASES), set(BEHAVIOURS))
        clients = list(CASES.values())
        self.assertEqual([client for client in SHORT_CLIENTS if clients.count(client) < 2], [])


class InteropVerdictTests(SynchronousTestCase):
    """Which of the interop client's passes the catalogue takes as fooled: all but what the behaviour really does."""

    def test_pingAgainstServersThatAnswerPings(self) -> None:
        """
        C{ping} ("must observe the PONG of the same id", docs/interop.md)
        may pass against the behaviours that read and answer PINGs (the
        full campaign's huge x interop row said pass, rightly); no other case may.
        """
        for behaviour in ("garbage", "huge", "huge-past", "stalled-stream", "largest-items"):
            self.assertEqual(interopFooled(behaviour, {"ping": "pass", "empty_call": "FAIL"}), [], behaviour)
            self.assertEqual(
                interopFooled(behaviour, {"ping": "pass", "empty_call": "pass"}),
                ["said pass for cases it cannot have seen happen: empty_call"],
            )

    def test_noPassAgainstServersThatReadNothing(self) -> None:
        """Against a server that reads nothing (silent, dripping, flood) or never connects, a ping's pass is fooled."""
        for behaviour in ("silent", "dripping", "flood", "garbage-preamble"):
            self.assertEqual(
                interopFooled(behaviour, {"ping": "pass"}), ["said pass for cases it cannot have seen happen: ping"]
            )


def _makeTest(behaviour: str, client: str) -> Any:
    def test(self: HostileServerCatalogueTests) -> None:
        self.check(behaviour, client)

    test.__name__ = f"test_{behaviour.replace('-', '_')}_{client}"
    test.__doc__ = f"The {behaviour} server against the {client} client: {BEHAVIOURS[behaviour].serve.__doc__}"
    return test


for _behaviour, _client in CASES.items():
    _test = _makeTest(_behaviour, _client)
    setattr(HostileServerCatalogueTests, _test.__name__, _test)
del _behaviour, _client, _test
