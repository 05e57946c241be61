"""The bulk attacks against the example bulk server: refused or dropped with a logged code, nothing left behind."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from .attacks import patience
from .attacks_bulk import runBulkCampaign, table


class BulkAttackTests(SynchronousTestCase):
    """Hostile bulk peers cost bounded memory and leave no fds, threads or partial files behind (outcomes only)."""

    def test_bulkServer(self) -> None:
        """Abandoned uploads and reused stream ids: code logged, RSS within 64 MiB, fds/threads/.part back to idle."""
        with patience(10.0):  # only a server that never drops the attacker misses this
            rows = runBulkCampaign(timed=False)
        failed = [row for row in rows if row["failures"]]
        self.assertEqual(failed, [], "\n" + table(rows))
