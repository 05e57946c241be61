"""mypy --strict checks calls on a typed proxy against its remote interface, and the server's class against it too."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from twisted.trial.unittest import SkipTest, SynchronousTestCase

ROOT = Path(__file__).resolve().parents[3]

INTERFACE = """\
from __future__ import annotations

from typing import Annotated, Any, Protocol

from protocols import rpc


class IKeyValue(rpc.RemoteInterface, Protocol, name="example.IKeyValue"):
    async def get(self, key: Annotated[str, rpc.MaxLength(100)]) -> str | None: ...


class KeyValue(rpc.Referenceable, IKeyValue):
    async def get(self, key: str) -> str | None:
        return None


async def client(root: rpc.RemoteReference, reactor: Any) -> None:
    kv = root.typed(IKeyValue)
    value: str | None = await kv.get("key")  # GOOD
    connected = await rpc.connect(reactor, "tcp:host=127.0.0.1:port=1", interface=IKeyValue)
    again: str | None = await connected.get("key")  # GOOD
    rpc.referenceOf(connected).broker.disconnect()
"""

BAD_CALL = """\
    await kv.get(42)  # BAD
"""

BAD_SERVER = """\


class Wrong(rpc.Referenceable, IKeyValue):
    async def get(self, key: str) -> int:  # BAD
        return 1
"""


def lineOf(source: str, marker: str) -> list[int]:
    """The 1-based numbers of the lines of C{source} that carry C{marker}."""
    return [number for number, line in enumerate(source.splitlines(), 1) if marker in line]


class MypyTests(SynchronousTestCase):
    """mypy --strict on a small client of a remote interface."""

    def setUp(self) -> None:
        if importlib.util.find_spec("mypy") is None:
            raise SkipTest("mypy is not installed (the dev extra)")
        self.directory = Path(self.mktemp()).resolve()
        self.directory.mkdir()

    def mypy(self, source: str) -> tuple[int, list[int]]:
        """Run mypy --strict on C{source}; its exit code and the lines it reports errors on."""
        path = self.directory / "client.py"
        path.write_text(source)
        command = [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-incremental"]
        command += ["--config-file", os.devnull, "--python-version", "3.10", path.name]
        environment = {**os.environ, "MYPYPATH": str(ROOT)}
        done = subprocess.run(command, capture_output=True, text=True, cwd=self.directory, env=environment, timeout=300)
        self.assertIn(done.returncode, (0, 1), done.stdout + done.stderr)
        reported = [line for line in done.stdout.splitlines() if line.startswith(f"{path.name}:") and "error:" in line]
        return done.returncode, [int(line.split(":")[1]) for line in reported]

    def test_good_calls_pass(self) -> None:
        """Calls that match the interface, on root.typed() and connect(interface=), type-check cleanly."""
        code, lines = self.mypy(INTERFACE)
        self.assertEqual((code, lines), (0, []))

    def test_bad_call_reported(self) -> None:
        """A call with an argument of the wrong type is reported on its line, and only there."""
        source = INTERFACE + BAD_CALL
        code, lines = self.mypy(source)
        self.assertEqual(code, 1)
        self.assertEqual(lines, lineOf(source, "# BAD"))

    def test_wrong_implementation_reported(self) -> None:
        """A server class whose method's result does not match the interface is reported."""
        source = INTERFACE + BAD_SERVER
        code, lines = self.mypy(source)
        self.assertEqual(code, 1)
        self.assertEqual(lines, lineOf(source, "# BAD"))
