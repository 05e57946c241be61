"""compare_commits builds the base tree's compiled core, so that two commits are compared on one core."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from tests.benchmarks.compare_commits import _transferRate, buildCore

TINY = """
#include <Python.h>
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speedups", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__speedups(void) { return PyModule_Create(&module); }
"""


class BuildCoreTests(SynchronousTestCase):
    """L{buildCore} compiles C{framing/_speedups.c} into the tree's C{framing/}, or says it could not."""

    def tree(self, source: str) -> Path:
        root = Path(self.mktemp()).absolute()
        (root / "framing").mkdir(parents=True)
        (root / "framing" / "__init__.py").write_text("")
        (root / "framing" / "_speedups.c").write_text(source)
        # An old commit's pyproject.toml that today's setuptools refuses: the build must not read it.
        (root / "pyproject.toml").write_text('[project]\nname = "x"\nlicense = {file = "a", text = "b"}\n')
        return root

    def test_built(self) -> None:
        """The module lands in the tree's framing/ and imports from there."""
        root = self.tree(TINY)
        buildCore(root)
        self.assertEqual(len(list((root / "framing").glob("_speedups*.so"))), 1)
        imported = subprocess.run(
            [sys.executable, "-c", "import framing._speedups as s; print(s.__file__)"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        )
        self.assertTrue(imported.stdout.strip().startswith(str(root)), imported.stdout)

    def test_notBuilt(self) -> None:
        """C that does not compile is an error naming the build's output, not a silent pure-Python base."""
        root = self.tree("this is not C\n")
        with self.assertRaises(RuntimeError) as raised:
            buildCore(root)
        self.assertIn("did not build", str(raised.exception))
        self.assertEqual(list((root / "framing").glob("_speedups*.so")), [])


class TransferRateTests(SynchronousTestCase):
    """A CLI case is compared over its transfer's own time, whichever tree's JSON it comes from."""

    def test_transferSeconds(self) -> None:
        """A run that kept C{transfer_seconds} (timed from the command's start since issue 42) is rated by it."""
        self.assertEqual(_transferRate({"size": 10**9, "mb_s": 5.0, "send": {"transfer_seconds": 2.0}}), 500.0)

    def test_baseRate(self) -> None:
        """A base's run, whose C{mb_s} was the transfer's own rate, keeps it."""
        self.assertEqual(_transferRate({"size": 10**9, "mb_s": 5.0, "send": {"seconds": 3.0}}), 5.0)
        self.assertEqual(_transferRate({"size": 10**9, "mb_s": 7.0}), 7.0)
