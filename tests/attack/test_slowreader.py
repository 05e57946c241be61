"""The slow reader against each example server: bounded memory, every answer once and in order, or a drop."""

from __future__ import annotations

import tempfile
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from . import slowreader

DURATION = 3.0
"""Seconds of honest calls in each phase."""


class SlowReaderTests(SynchronousTestCase):
    """A client that does not read its answers costs the server a bounded amount of memory and nothing else."""

    def campaign(self, kind: str) -> None:
        with tempfile.TemporaryDirectory() as logs:
            rows = slowreader.runCampaign([kind], DURATION, Path(logs), timed=False)
        self.assertEqual([row["failures"] for row in rows], [[], []], "\n" + slowreader.table(rows))

    def test_kvServer(self) -> None:
        """kv: RSS within 16 MiB of idle, honest calls succeed; every answer arrives after a pause, or a drop."""
        self.campaign("kv")

    def test_echoServer(self) -> None:
        """echo: RSS within 16 MiB of idle, honest calls succeed; every answer arrives after a pause, or a drop."""
        self.campaign("echo")
