"""The Sphinx documentation in C{docs/} builds cleanly and covers every framing module."""

from __future__ import annotations

import importlib.util
import os
import pkgutil
import subprocess
import sys
import tempfile
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

import framing

ROOT = Path(__file__).resolve().parent.parent.parent
DOCS = ROOT / "docs"


class DocsBuildTests(SynchronousTestCase):
    """The docs build without warnings and document the whole framing package."""

    def test_every_framing_module_documented(self) -> None:
        """docs/api.rst has an automodule directive for every module of the framing package."""
        api = (DOCS / "api.rst").read_text("utf-8")
        modules = ["framing"] + [m.name for m in pkgutil.walk_packages(framing.__path__, "framing.")]
        missing = [name for name in modules if f".. automodule:: {name}\n" not in api]
        self.assertEqual(missing, [])

    def test_sphinx_build_without_warnings(self) -> None:
        """sphinx-build -W (warnings are errors) succeeds on docs/."""
        if importlib.util.find_spec("sphinx") is None:
            self.skipTest("Sphinx is not installed")
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        with tempfile.TemporaryDirectory() as out:
            command = [sys.executable, "-m", "sphinx", "-W", "-q", "-E", "-b", "html", "-d", out, str(DOCS), out]
            result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr + result.stdout)
