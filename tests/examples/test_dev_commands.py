"""dev.py turns each README command into the right run in .venv (the runs themselves are tested elsewhere)."""

from __future__ import annotations

import importlib.util
import io
import sys
from types import ModuleType

from twisted.trial.unittest import SynchronousTestCase

from tests.processes import ROOT


def loadDev() -> ModuleType:
    """Import dev.py afresh (it is a script at the repository root, not a package module)."""
    spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class DevCommandTests(SynchronousTestCase):
    """Each dev.py command runs what the README says, after making sure .venv is set up."""

    def setUp(self) -> None:
        self.dev = loadDev()
        self.calls: list[tuple[str, ...]] = []
        self.dev.ensure_venv = lambda: self.calls.append(("ensure_venv",))
        self.dev.run = lambda *args, pure=False: self.calls.append(args) or 0
        # What main prints (its verdict line, the usage) belongs to the runs it
        # stands for, not in the test log.
        self.output = io.StringIO()
        self.patch(sys, "stdout", self.output)

    def test_demo(self) -> None:
        """dev.py demo ARGS runs examples/demo.py ARGS."""
        self.assertEqual(self.dev.main(["demo", "--size", "16"]), 0)
        self.assertEqual(self.calls, [("ensure_venv",), ("examples/demo.py", "--size", "16")])

    def test_bench(self) -> None:
        """dev.py bench ARGS runs python -m tests.benchmarks ARGS, as tox -e bench does."""
        self.assertEqual(self.dev.main(["bench", "--quick", "rpc"]), 0)
        self.assertEqual(self.calls, [("ensure_venv",), ("-m", "tests.benchmarks", "--quick", "rpc")])

    def test_sizes(self) -> None:
        """dev.py sizes ARGS runs python -m tests.structure ARGS, the size report shared with the structure tests."""
        self.assertEqual(self.dev.main(["sizes", "--top", "5"]), 0)
        self.assertEqual(self.calls, [("ensure_venv",), ("-m", "tests.structure", "--top", "5")])

    def test_test(self) -> None:
        """dev.py test runs pytest, then trial on tests, then ruff and mypy."""
        self.assertEqual(self.dev.main(["test"]), 0)
        self.assertEqual(self.calls[0], ("ensure_venv",))
        tools = [call[1] for call in self.calls[1:]]
        self.assertEqual(
            [tool for i, tool in enumerate(tools) if tool not in tools[:i]], ["pytest", "twisted.trial", "ruff", "mypy"]
        )
        self.assertIn(("-m", "mypy", "framing", "protocols"), self.calls)

    def test_unknown(self) -> None:
        """An unknown command prints the usage and fails without setting anything up; help succeeds."""
        self.assertEqual(self.dev.main(["frobnicate"]), 2)
        self.assertEqual(self.dev.main(["help"]), 0)
        self.assertEqual(self.calls, [])
        self.assertIn("python3 dev.py test", self.output.getvalue())
