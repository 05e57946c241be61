"""The framing core is sans-IO: importing it (and its RPC half, framing.rpc) loads no Twisted at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
import framing
import framing.rpc
from framing import dumps, loads
assert loads(dumps([1, "two", b"3"])) == [1, "two", b"3"]
print(json.dumps(sorted(sys.modules)))
"""


def modules_after_import() -> list[str]:
    """Import C{framing} in a fresh interpreter and return every module it then has loaded."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    output = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, cwd=str(ROOT), capture_output=True, text=True, check=True
    ).stdout
    modules: list[str] = json.loads(output)
    return modules


class SansIOTests(SynchronousTestCase):
    """Importing and using framing pulls in nothing that does I/O."""

    def setUp(self) -> None:
        self.modules = modules_after_import()

    def test_framing_was_imported(self) -> None:
        """The probe really imported the framing package from this checkout."""
        self.assertIn("framing", self.modules)
        self.assertIn("framing._scanner", self.modules)
        self.assertIn("framing.rpc._calltable", self.modules)

    def test_no_twisted_internet(self) -> None:
        """twisted.internet (the reactor and transports) is never loaded."""
        self.assertNotIn("twisted.internet", self.modules)

    def test_no_twisted_at_all(self) -> None:
        """No twisted module at all is loaded by importing and using framing."""
        self.assertEqual([name for name in self.modules if name == "twisted" or name.startswith("twisted.")], [])

    def test_no_sockets_or_event_loops(self) -> None:
        """Neither socket, select, asyncio nor the protocols package is loaded."""
        for name in ("socket", "select", "selectors", "asyncio", "protocols"):
            self.assertNotIn(name, self.modules)
