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
        self.together: list[list[tuple[list[str], bool, str | None]]] = []
        self.dev.runTogether = lambda jobs: self.together.append(jobs) or [0] * len(jobs)
        self.dev.compileAhead = lambda: None
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
        """
        dev.py test runs pytest on the compiled core and trial on the pure
        one together, each process-run test module in exactly one of them and
        every other in both, each half's modules split between its runners
        (each module in one); and the lint (ruff, mypy) beside them.
        """
        self.assertEqual(self.dev.main(["test"]), 0)
        self.assertEqual(self.calls[0], ("ensure_venv",))
        [jobs] = self.together
        runners = self.dev.RUNNERS
        pytests, trials, [(lint, _, _)] = jobs[:runners], jobs[runners:-1], jobs[-1:]
        self.assertEqual({(tuple(args[:2]), pure) for args, pure, _ in pytests}, {(("-m", "pytest"), False)})
        self.assertEqual({(tuple(args[:2]), pure) for args, pure, _ in trials}, {(("-m", "twisted.trial"), True)})
        self.assertEqual(lint, ["dev.py", "lint"])
        everything = self.dev.testModules(())
        pytestShards = [
            [argument[: -len(".py")].replace("/", ".") for argument in args if argument.endswith(".py")]
            for args, _, _ in pytests
        ]
        trialShards = [[argument for argument in args if argument.startswith("tests.")] for args, _, _ in trials]
        byPytest = {module for shard in pytestShards for module in shard}
        byTrial = {module for shard in trialShards for module in shard}
        self.assertEqual(sum(len(shard) for shard in pytestShards), len(byPytest))
        self.assertEqual(sum(len(shard) for shard in trialShards), len(byTrial))
        self.assertEqual(byPytest | byTrial, set(everything))
        once = byPytest ^ byTrial
        self.assertIn("tests.attack.test_attack", once & byPytest)
        self.assertIn("tests.examples.test_bulk_cli", once & byTrial)
        self.assertIn("tests.framing.test_codec", byPytest & byTrial)

    def test_testModules(self) -> None:
        """testModules names each test module under tests/ once, less a whole folder or one file asked for."""
        every = self.dev.testModules(())
        self.assertEqual(len(every), len(set(every)))
        self.assertIn("tests.attack.test_attack", every)
        less = self.dev.testModules(("tests/attack", "tests/framing/test_codec.py"))
        self.assertNotIn("tests.attack.test_attack", less)
        self.assertNotIn("tests.framing.test_codec", less)
        self.assertIn("tests.framing.test_chain", less)

    def test_runTogether(self) -> None:
        """runTogether runs its jobs at once and shows each one's whole output in order, with its status."""
        dev = loadDev()  # the real one (setUp's stands in for it)
        self.patch(dev, "PYTHON", sys.executable)
        output = io.BytesIO()
        self.patch(sys, "stdout", io.TextIOWrapper(output))
        slow = ["-c", "import time; time.sleep(0.5); print('first')"]
        fast = ["-c", "import os, sys; print('second', os.environ.get('CHUNKWIRE_PURE')); sys.exit(3)"]
        self.assertEqual(dev.runTogether([(slow, False, None), (fast, True, "the fast one")]), [0, 3])
        sys.stdout.flush()
        lines = output.getvalue().decode().splitlines()
        self.assertEqual(lines[2:], ["first", "second 1"])
        self.assertEqual(lines[1], "$ CHUNKWIRE_PURE=1 the fast one")

    def test_unknown(self) -> None:
        """An unknown command prints the usage and fails without setting anything up; help succeeds."""
        self.assertEqual(self.dev.main(["frobnicate"]), 2)
        self.assertEqual(self.dev.main(["help"]), 0)
        self.assertEqual(self.calls, [])
        self.assertIn("python3 dev.py test", self.output.getvalue())
