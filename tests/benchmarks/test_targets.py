"""A missed benchmark target is reported with its figure as below target on this machine, and still fails the run."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from types import SimpleNamespace

from twisted.trial.unittest import SynchronousTestCase

from tests.benchmarks import __main__ as bench
from tests.benchmarks._harness import TARGETS_SET_ON, BenchResult, Criterion


class TargetLineTests(SynchronousTestCase):
    """How one acceptance target is printed."""

    def test_missed(self) -> None:
        """A missed target shows the figure, the target, and where the target was set; no bare FAIL."""
        line = Criterion("bulk: chunkwire / raw", 0.812, ">=", 0.85, "busy").line()
        self.assertTrue(line.startswith("BELOW  bulk: chunkwire / raw: 0.812 (target >= 0.85)"), line)
        self.assertIn(f"(below target on this machine (target set on {TARGETS_SET_ON}))", line)
        self.assertIn("(busy)", line)
        self.assertNotIn("FAIL", line)

    def test_metAndMissing(self) -> None:
        """A met target is PASS and a figure not measured is N/A, neither with the machine note."""
        self.assertEqual(Criterion("x", 1.2, "<=", 1.5).line(), "PASS  x: 1.200 (target <= 1.5)")
        self.assertEqual(Criterion("x", None, "<=", 1.5).line(), "N/A   x: n/a (target <= 1.5)")


class ExitStatusTests(SynchronousTestCase):
    """python -m tests.benchmarks exits 1 when a target is missed, 0 when all are met."""

    def runWith(self, criterion: Criterion) -> tuple[int, str]:
        result = BenchResult("fake", "report", [criterion], Path("fake.json"))
        module = SimpleNamespace(run=lambda opts: result)
        self.patch(bench, "BENCHMARKS", {"fake": "fake"})
        self.patch(bench.importlib, "import_module", lambda name: module)
        self.patch(bench, "machine_info", lambda: {})
        self.patch(bench, "machine_line", lambda info: "machine")
        output = io.StringIO()
        self.patch(sys, "stdout", output)
        return bench.main(["fake"]), output.getvalue()

    def test_missedFails(self) -> None:
        """A missed target makes the exit status 1, and the summary says why."""
        status, output = self.runWith(Criterion("x", 0.5, ">=", 1.0))
        self.assertEqual(status, 1)
        self.assertIn("below target on this machine", output)
        self.assertIn("Some targets were missed on this machine: exit status 1.", output)

    def test_metPasses(self) -> None:
        """All targets met: exit status 0."""
        self.assertEqual(self.runWith(Criterion("x", 2.0, ">=", 1.0))[0], 0)
