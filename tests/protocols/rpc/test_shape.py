"""The shape of L{protocols.rpc}: no import cycle, no reach into other objects (sizes: C{python3 dev.py sizes})."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

import protocols.rpc

PACKAGE = Path(protocols.rpc.__file__).parent


def sources() -> dict[str, str]:
    """Each module of protocols/rpc's text, by file name, a private one's without its underscore (C{refs.py})."""
    named = {
        path: path.name if path.name == "__init__.py" else path.name.removeprefix("_") for path in PACKAGE.glob("*.py")
    }
    return {name: path.read_text() for path, name in sorted(named.items())}


def imports(text: str) -> set[str]:
    """The sibling modules a module of protocols/rpc imports (C{from .x import ...}), type-checking ones included."""
    return {
        node.module.removeprefix("_")
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
    }


class ShapeTests(SynchronousTestCase):
    """The rules issue 15 set for the RPC package."""

    def test_noImportCycle(self) -> None:
        """The modules of protocols/rpc import each other without a cycle (refs needs neither broker nor tables)."""
        graph = {name[:-3]: imports(text) for name, text in sources().items() if name != "__init__.py"}
        self.assertNotIn("broker", graph["refs"])
        self.assertNotIn("tables", graph["refs"])
        done: set[str] = set()

        def visit(module: str, path: tuple[str, ...]) -> None:
            self.assertNotIn(module, path, f"import cycle: {' -> '.join((*path, module))}")
            if module in done:
                return
            for imported in graph.get(module, ()):
                visit(imported, (*path, module))
            done.add(module)

        for module in graph:
            visit(module, ())

    def test_noCrossObjectPrivateAccess(self) -> None:
        """Code in protocols/rpc touches only its own private attributes (self._x)."""
        found = []
        for name, text in sources().items():
            for number, line in enumerate(text.splitlines(), 1):
                # A module's path (framing.rpc._errors, ..auth._client) is no object's private attribute.
                code = (
                    "" if line.lstrip().startswith("from ") else re.sub(r"\b(?:framing|protocols)(?:\.\w+)+", "", line)
                )
                for match in re.finditer(r"(\w+|[)\]])\._[a-zA-Z]", code):
                    if match.group(1) not in ("self", "cls"):
                        found.append(f"{name}:{number}: {line.strip()}")
        self.assertEqual(found, [])
