"""The hostile-server catalogue's short form: every behaviour against every client, outcomes only.

Each test is one behaviour of L{tests.attack.hostileserver} against one
client (L{tests.attack.catalogue.SHORT_CLIENTS}); the clients of one
behaviour run at once, the first time one of its tests runs, and each test
then judges its own row: every step ends within its deadline plus a
generous margin with a typed error (or the answer the behaviour allows),
the client's RSS stays within its bound, its close returns.  No timing
ratio is asserted; a hang is told from a slow machine by a margin only a
hang misses.  C{python3 dev.py attack} runs the full campaign (the
clients' default limits, the reconnecting client, every interop case).
"""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from .catalogue import SHORT_CLIENTS, interopFooled, runCatalogue, table
from .hostileserver import BEHAVIOURS

_ROWS: dict[str, dict[str, dict[str, Any]]] = {}
"""The rows of each behaviour already run, by client."""


def rowOf(behaviour: str, client: str) -> dict[str, Any]:
    """The row of C{behaviour} against C{client}, running the behaviour against every client the first time."""
    if behaviour not in _ROWS:
        rows = runCatalogue([behaviour], SHORT_CLIENTS, "short", together=len(SHORT_CLIENTS))
        _ROWS[behaviour] = {row["client"]: row for row in rows}
    return _ROWS[behaviour][client]


class HostileServerCatalogueTests(SynchronousTestCase):
    """Each hostile behaviour against each client: a typed error in time, bounded memory, a close that returns."""

    def check(self, behaviour: str, client: str) -> None:
        row = rowOf(behaviour, client)
        self.assertEqual(row["failures"], [], "\n" + table([row]))


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


for _behaviour in BEHAVIOURS:
    for _client in SHORT_CLIENTS:
        _test = _makeTest(_behaviour, _client)
        setattr(HostileServerCatalogueTests, _test.__name__, _test)
del _behaviour, _client, _test
