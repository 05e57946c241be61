"""The attack suite's short version: every attack at once against each example server, honest clients beside it."""

from __future__ import annotations

import tempfile
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from .attacks import ATTACKS
from .harness import runCampaign, table

ALONE = frozenset({"held-until-collected"})
"""Run on their own after the rest: their rule is that RSS comes back to idle, judged only alone (see harness)."""

DURATION = 4.0
"""Seconds of honest calls in each phase; long enough for every timeout in harness.SERVER_OPTIONS to fire."""


class AttackTests(SynchronousTestCase):
    """Hostile peers are dropped with a logged reason, in time, while honest calls keep succeeding."""

    def attackAll(self, kind: str) -> None:
        together = [name for name in ATTACKS if name not in ALONE]
        with tempfile.TemporaryDirectory() as logs:
            rows = runCampaign([kind], together, DURATION, Path(logs), together=True)
            rows += runCampaign([kind], sorted(ALONE), DURATION, Path(logs))
        failed = [row for row in rows if row["failures"]]
        self.assertEqual(failed, [], "\\n" + table(rows))

    def test_kvServer(self) -> None:
        """Every attack at once against the kv server: attackers dropped in time, honest calls succeed, p99 <= 5x."""
        self.attackAll("kv")

    def test_echoServer(self) -> None:
        """Every attack at once against the echo server: attackers dropped in time, honest echoes succeed, p99 <= 5x."""
        self.attackAll("echo")
