"""tests/properties.py: a property's examples are capped in the default run and whole in the fuzz campaign."""

from __future__ import annotations

import ast

from twisted.trial.unittest import SynchronousTestCase

from tests import properties
from tests.processes import ROOT


class ExamplesTests(SynchronousTestCase):
    """L{properties.examples}: at most DEFAULT_CAP unless the run is full, and every user is run by the campaign."""

    def test_capped(self) -> None:
        """Outside the campaign a property written for over 100 examples tries 100; one written for fewer, its own."""
        self.assertEqual(properties.examples(300, full=False), properties.DEFAULT_CAP)
        self.assertEqual(properties.examples(50, full=False), 50)

    def test_full(self) -> None:
        """In the campaign (CHUNKWIRE_PROPERTY_EXAMPLES=full) a property tries every example it was written for."""
        self.assertEqual(properties.examples(300, full=True), 300)

    def test_everyUserInTheCampaign(self) -> None:
        """MODULES, which the campaign runs whole, is every test module that imports examples, and each exists."""
        users = []
        for path in sorted((ROOT / "tests").rglob("test_*.py")):
            tree = ast.parse(path.read_text("utf-8"))
            if any(isinstance(node, ast.ImportFrom) and node.module == "tests.properties" for node in ast.walk(tree)):
                users.append(path.relative_to(ROOT).as_posix())
        self.assertEqual(users, sorted(properties.MODULES))
