"""Every design note a docstring links to exists and is in the design notes' toctree.

Issue 40 moved the essays of many docstrings to C{docs/design/}, each docstring
keeping one line such as C{Design: docs/design/bulk.md}.  This test keeps those
lines true: a renamed or missing page, or one left out of
C{docs/design/index.rst} (which the Sphinx build would not notice, since no
page links to it), fails here with the module that names it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

ROOT = Path(__file__).resolve().parent.parent
DESIGN = ROOT / "docs" / "design"
LINK = re.compile(r"docs/design/([\w.-]+?)\.(md|rst)\b")


def designLinks() -> list[tuple[str, str]]:
    """Each (module path, page name) for a C{docs/design/...} page a docstring in framing/ or protocols/ names."""
    links = []
    for root in ("framing", "protocols"):
        for path in sorted((ROOT / root).rglob("*.py")):
            tree = ast.parse(path.read_text("utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    doc = ast.get_docstring(node, clean=False) or ""
                    for match in LINK.finditer(doc):
                        links.append((str(path.relative_to(ROOT)), match.group(1)))
    return links


def toctree() -> set[str]:
    """The page names listed in C{docs/design/index.rst}'s toctree."""
    lines = (DESIGN / "index.rst").read_text("utf-8").splitlines()
    return {line.strip() for line in lines if line.startswith("   ") and not line.strip().startswith(":")}


class DesignLinkTests(SynchronousTestCase):
    """Docstrings' links to design notes lead somewhere a reader of the site finds."""

    def test_linksFound(self) -> None:
        """The scan finds the links issue 40 made (so an empty scan cannot pass by finding nothing)."""
        pages = {page for _, page in designLinks()}
        self.assertIn("bulk", pages)
        self.assertIn("kv", pages)

    def test_everyLinkedPageExists(self) -> None:
        """Every page a docstring names is a file in docs/design/."""
        missing = [
            (module, page)
            for module, page in designLinks()
            if not (DESIGN / f"{page}.md").exists() and not (DESIGN / f"{page}.rst").exists()
        ]
        self.assertEqual(missing, [])

    def test_everyLinkedPageInToctree(self) -> None:
        """Every page a docstring names is in the design notes' toctree, so the site shows it."""
        listed = toctree()
        self.assertEqual([(module, page) for module, page in designLinks() if page not in listed], [])
