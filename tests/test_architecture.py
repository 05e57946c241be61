"""ARCHITECTURE.md, the map of the code, cannot silently fall behind it in either direction.

Every module of C{framing/} and C{protocols/} (a package as its directory,
C{framing/slicing/}; the C extension as C{framing/_speedups.c}) has exactly
one row in the module map, a table row that starts with its path in
backticks; and every C{framing/...} or C{protocols/...} path named anywhere
in the file is a module that exists.
"""

from __future__ import annotations

import re
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from tests.structure import PACKAGES, ROOT

MAP = ROOT / "ARCHITECTURE.md"

# A path from the repository root into one of the packages: directories, then
# optionally a .py or .c file; not part of a longer path (tests/framing/...)
# or name (framing/_speedups.pyi names no module: it is not matched at all).
_PACKAGE = "|".join(PACKAGES)
_PATH = re.compile(rf"(?<![\w/.-])((?:{_PACKAGE})/(?:[A-Za-z_]\w*/)*(?:[A-Za-z_]\w*\.(?:py|c))?)(?![\w.])")
_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|", re.MULTILINE)


def codeModules(root: Path = ROOT) -> set[str]:
    """The modules of the packages under C{root}, as ARCHITECTURE.md names them (by path)."""
    found = set()
    for package in PACKAGES:
        for path in (root / package).rglob("*"):
            name = path.relative_to(root).as_posix()
            if path.name == "__init__.py":
                found.add(name[: -len("__init__.py")])
            elif path.suffix in (".py", ".c") and "__pycache__" not in path.parts:
                found.add(name)
    return found


def mapProblems(text: str, root: Path = ROOT) -> list[str]:
    """What is wrong between C{text} (an ARCHITECTURE.md) and the code under C{root}; nothing if they agree."""
    modules = codeModules(root)
    rows = [row for row in _ROW.findall(text) if _PATH.fullmatch(row)]
    named = set(_PATH.findall(text))
    problems = [f"no row in the module map for {name}" for name in sorted(modules - set(rows))]
    problems += [f"more than one row for {name}" for name in sorted({r for r in rows if rows.count(r) > 1})]
    problems += [f"named, but no such module: {name}" for name in sorted(named - modules)]
    return problems


class ArchitectureMapTests(SynchronousTestCase):
    """ARCHITECTURE.md names every module of framing/ and protocols/, and only modules that exist."""

    def test_mapMatchesCode(self) -> None:
        """Every module has exactly one row in the map, and every module path the map names exists."""
        self.assertEqual(mapProblems(MAP.read_text("utf-8")), [])

    def test_mapNamesTheCExtension(self) -> None:
        """The C extension and the packages' __init__ modules (as their directories) count as modules."""
        modules = codeModules()
        self.assertIn("framing/_speedups.c", modules)
        self.assertIn("protocols/rpc/", modules)
        self.assertNotIn("protocols/rpc/__init__.py", modules)

    def test_checkerFindsStaleMaps(self) -> None:
        """On a made-up tree, a module with no row, a row twice and a path to nothing are each reported."""
        root = Path(self.mktemp())
        for name in ["framing/__init__.py", "framing/a.py", "framing/_fast.c", "framing/sub/__init__.py"]:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text("")
        (root / "framing" / "sub" / "b.py").write_text("")
        (root / "protocols").mkdir()
        (root / "protocols" / "__init__.py").write_text("")
        good = "\n".join(
            f"| `{name}` | what it does |"
            for name in [
                "framing/",
                "framing/a.py",
                "framing/_fast.c",
                "framing/sub/",
                "framing/sub/b.py",
                "protocols/",
            ]
        )
        self.assertEqual(mapProblems(good + "\nSee `tests/framing/x.py` and `framing/_fast.pyi`.\n", root), [])
        stale = good.replace("| `framing/sub/b.py` | what it does |\n", "") + "\n| `framing/a.py` | again |\n"
        stale += "The old scanner lived in framing/old.py, next to `protocols/gone/`.\n"
        self.assertEqual(
            mapProblems(stale, root),
            [
                "no row in the module map for framing/sub/b.py",
                "more than one row for framing/a.py",
                "named, but no such module: framing/old.py",
                "named, but no such module: protocols/gone/",
            ],
        )
