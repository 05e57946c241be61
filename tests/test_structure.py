"""The shape of the code, checked: sans-IO framing, import cycles, private access and naming.

Issue 15's rules, kept true by a test instead of a review: no module of
C{framing/} imports Twisted or any other I/O (sockets, selectors, asyncio),
wherever in the module the import is; no import cycle among the modules of
C{protocols/}; no object there reaching into another object's C{_private}
members; and one naming rule per package (snake_case in C{framing},
camelCase in C{protocols} for functions, arguments, class fields and
attributes alike; ruff enforces the first, this test the second).

Each module of C{framing/} and C{protocols/} names its tests on its first
line, Twisted's C{# -*- test-case-name: tests.framing.test_ledger -*-}
(issue 40): the test modules that exercise it, each a file under C{tests/}
that imports, read the way C{trial --testmodule framing/_ledger.py} reads it;
and one of them imports the module itself (L{importedSources}: directly, or
a name its package re-exports; a helper module's imports do not count), so
a module is never covered only by tests of the modules that use it.

Class and function length is not a rule but a report (issue 27: a cap
became a target): C{python3 dev.py sizes} prints the largest ones, measured
by L{tests.structure}, which this module shares.
"""

from __future__ import annotations

import ast
import importlib
import re
import sys
from collections.abc import Callable
from pathlib import Path

from twisted.scripts.trial import getTestModules
from twisted.trial.unittest import SynchronousTestCase

from tests.structure import PACKAGES, ROOT, modules, report, sizes, sourcePath

_SNAKE = re.compile(r"^_*[a-z0-9]+(_[a-z0-9]+)+$")

# What the sans-IO core may never import (tests/framing/test_sansio.py checks
# what importing framing loads; this checks every module, imported or not).
IO_MODULES = ("twisted", "socket", "select", "selectors", "asyncio")


def ioImportsIn(module: str, tree: ast.Module) -> list[str]:
    """C{module:line name} for each import in C{tree} of one of L{IO_MODULES} or a module inside one."""
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        found += [
            f"{module}:{node.lineno} {name}"
            for name in names
            if any(name == banned or name.startswith(banned + ".") for banned in IO_MODULES)
        ]
    return found


def importGraph(package: str) -> dict[str, set[str]]:
    """Which modules of C{package} each one imports (anywhere in it, type-checking imports included)."""
    trees = modules(package)
    graph: dict[str, set[str]] = {name: set() for name in trees}
    for name, tree in trees.items():
        isPackage = (ROOT / Path(*name.split("."))).is_dir()
        base = name.split(".") if isPackage else name.split(".")[:-1]
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                anchor = base[: len(base) - node.level + 1] if node.level else []
                module = ".".join([*anchor, *(node.module.split(".") if node.module else [])])
                targets = [module] + [f"{module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            graph[name].update(t for t in targets if t in trees and t != name)
    # Importing a.b.c runs a/__init__ and a/b/__init__ first: a cycle through
    # a package's __init__ breaks at import time like any other.
    for name, targets in graph.items():
        ancestors = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        parents = {".".join(t.split(".")[:i]) for t in targets for i in range(1, t.count(".") + 1)}
        targets.update(p for p in parents - ancestors if p in trees and p != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in graph:
        if node not in index:
            visit(node)
    return found


# Twisted's own socket internals, read for direct sends: the one module allowed to.
TWISTED_INTERNALS = {"protocols._sockets"}
# framing's unslicer and constraint interfaces, implemented in protocols: their names are framing's (snake_case).
FRAMING_METHODS = {
    "check_token",
    "check_header",
    "check_open",
    "check_value",
    "receive_child",
    "child_where",
    "report_violation",
    "begin_body",
    "body_piece",
    "end_body",
}
# The standard library's asyncio.Protocol, implemented by the asyncio client: its method names are asyncio's.
ASYNCIO_METHODS = {
    "connection_made",
    "data_received",
    "eof_received",
    "connection_lost",
    "pause_writing",
    "resume_writing",
}


def attributeReaches(package: str, reaches: Callable[[ast.Attribute], bool]) -> list[str]:
    """C{module:line expression} for each attribute in C{package} (but L{TWISTED_INTERNALS}) that C{reaches}."""
    found = []
    for name, tree in modules(package).items():
        if name in TWISTED_INTERNALS:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and reaches(node):
                found.append(f"{name}:{node.lineno} {ast.unparse(node)}")
    return found


def _private(node: ast.Attribute) -> bool:
    """C{x._name} where C{x} is not C{self}, C{cls} or C{super()}."""
    if not node.attr.startswith("_") or node.attr.startswith("__"):
        return False
    owner = node.value
    if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
        return False
    return not (isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super")


def privateReaches(package: str) -> list[str]:
    """C{module:line expression} for each C{x._name} where C{x} is not C{self}, C{cls} or C{super()}."""
    return attributeReaches(package, _private)


# The attributes of Twisted's socket connections chunkwire reads or sets (protocols._sockets): public by
# name, but Twisted's internals all the same.
TWISTED_CONNECTION_ATTRIBUTES = {"bufferSize", "SEND_LIMIT", "dataBuffer", "_tempDataLen", "_writeDisconnected"}


def connectionReaches(package: str) -> list[str]:
    """C{module:line expression} for each C{x.name}, C{x} not C{self}, of a L{TWISTED_CONNECTION_ATTRIBUTES} name."""
    return attributeReaches(
        package,
        lambda node: (
            node.attr in TWISTED_CONNECTION_ATTRIBUTES
            and not (isinstance(node.value, ast.Name) and node.value.id == "self")
        ),
    )


# framing's unslicer attributes, set by unslicers in protocols: framing's names too.
FRAMING_ATTRIBUTES = {
    "open_type",
    "record_builder",
    "record_extra_items",
    "record_name",
    "part_kinds",
    "part_types",
    "max_length",
    "checks_tokens",
    "open_cost",
    "slot_cost",
    "item_cost",
    "worst_item_cost",
}


def assignedTargets(node: ast.AST) -> list[ast.expr]:
    """What C{node} assigns to, if it is an assignment."""
    if isinstance(node, ast.Assign):
        return node.targets
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        return [node.target]
    return []


def fieldNames(node: ast.AST) -> list[tuple[int, str]]:
    """
    C{(line, name)} for each attribute that C{node} defines: a class body's
    fields (annotated or assigned, dataclass fields included) and the
    C{self.name} targets of an assignment.
    """
    if isinstance(node, ast.ClassDef):
        return [
            (statement.lineno, target.id)
            for statement in node.body
            for target in assignedTargets(statement)
            if isinstance(target, ast.Name)
        ]
    return [
        (node.lineno, t.attr)
        for target in assignedTargets(node)
        for t in ast.walk(target)
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
    ]


def snakeNamesIn(module: str, tree: ast.Module) -> list[str]:
    """
    C{module:line name} for each snake_case function, argument, class field
    or C{self} attribute in C{tree} (framing's unslicer names aside).
    """
    found = []
    for node in ast.walk(tree):
        names: list[tuple[int, str]] = []
        if (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.name not in FRAMING_METHODS | ASYNCIO_METHODS
        ):
            arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            names += [(node.lineno, name) for name in [node.name, *(a.arg for a in arguments)]]
        names += [(line, name) for line, name in fieldNames(node) if name not in FRAMING_ATTRIBUTES]
        found += [f"{module}:{line} {n}" for line, n in names if _SNAKE.match(n) and not n.endswith("__")]
    return found


def snakeNames(package: str) -> list[str]:
    """C{module:line name} for each snake_case name that L{snakeNamesIn} finds in C{package}."""
    return [found for name, tree in modules(package).items() for found in snakeNamesIn(name, tree)]


def testCaseNameProblems(packages: tuple[str, ...] = PACKAGES, root: Path = ROOT) -> list[str]:
    """
    C{path: problem} for each module of C{packages} (under C{root}) whose
    C{test-case-name} header, as trial reads it (the first two lines), is
    missing or names something that is not a test module: a dotted name
    under C{tests}, a C{test_*.py} file there, in packages with an
    C{__init__.py} all the way down, so that it imports.
    """
    found = []
    for package in packages:
        for module in modules(package, root):
            path = sourcePath(module, root)
            names = getTestModules(str(root / path))
            if not names:
                found.append(f"{path}: no test-case-name header")
            for name in names:
                parts = name.split(".")
                packageDirs = [root.joinpath(*parts[:i]) for i in range(1, len(parts))]
                file = root.joinpath(*parts).with_suffix(".py")
                if (
                    parts[0] != "tests"
                    or not parts[-1].startswith("test_")
                    or not file.is_file()
                    or not all((d / "__init__.py").is_file() for d in packageDirs)
                ):
                    found.append(f"{path}: {name!r} is not a test module under tests/")
    return found


def _resolve(module: str, isPackage: bool, node: ast.ImportFrom) -> str:
    """The absolute name of the module C{node} (in C{module}) imports from."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if isPackage else module.split(".")[:-1]
    anchor = base[: len(base) - node.level + 1]
    return ".".join([*anchor, *(node.module.split(".") if node.module else [])])


def reexports(package: str, known: dict[str, ast.Module], root: Path = ROOT) -> dict[str, str]:
    """The names C{package}'s C{__init__} imports from its modules, each to the module it comes from."""
    tree = known.get(package)
    if tree is None or not (root / Path(*package.split("."))).is_dir():
        return {}
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = _resolve(package, True, node)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found[alias.asname or alias.name] = submodule if submodule in known else base
    return found


def _testFile(name: str, root: Path = ROOT) -> Path:
    """The file of dotted test module C{name}."""
    return root.joinpath(*name.split(".")).with_suffix(".py")


def importedSources(test: str, known: dict[str, ast.Module], root: Path = ROOT) -> set[str]:
    """
    The modules of C{known} that test module C{test} imports itself, anywhere
    in it: C{import x.y}, C{from x.y import z} (C{x.y.z} if a module), and a
    name a package re-exports (C{from protocols.bulk import Stream} imports
    L{protocols.bulk._sending} too), followed through packages that re-export
    a package's name.  Imports made by the modules it imports do not count.
    """
    tree = ast.parse(_testFile(test, root).read_text(encoding="utf-8"))
    found: set[str] = set()
    bound: dict[str, str] = {}  # local name to the module it is

    def imported(package: str, name: str) -> None:
        """C{from package import name}: the module C{name} is, or the modules that define it."""
        if f"{package}.{name}" in known:
            found.add(f"{package}.{name}")
            return
        source, seen = package, set()
        while source not in seen:
            seen.add(source)
            found.add(source)
            source = reexports(source, known, root).get(name, source)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(alias.name)
                local = alias.asname or alias.name.split(".")[0]
                bound[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(test, False, node)
            found.add(base)
            for alias in node.names:
                imported(base, alias.name)
                bound[alias.asname or alias.name] = f"{base}.{alias.name}"
    # bulk.BulkOptions, after from protocols import bulk: the name bulk re-exports.
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and bound.get(node.value.id) in known:
            imported(bound[node.value.id], node.attr)
    return found & set(known)


# Modules the named tests import in a way an ast walk cannot see, and how.
NOT_IMPORTED: dict[str, str] = {
    "framing.rpc": "tests.test_exports imports every public package by name (importlib.import_module)",
}


def unimportedModules(packages: tuple[str, ...] = PACKAGES, root: Path = ROOT) -> list[str]:
    """
    C{path: names} for each module of C{packages} (but L{NOT_IMPORTED}) that
    none of the test modules its C{test-case-name} header names imports (see
    L{importedSources}); names that are no test module are
    L{testCaseNameProblems}' business.
    """
    known = {name: tree for package in packages for name, tree in modules(package, root).items()}
    imports: dict[str, set[str]] = {}
    found = []
    for module in known:
        if module in NOT_IMPORTED:
            continue
        path = sourcePath(module, root)
        names = [n for n in getTestModules(str(root / path)) if _testFile(n, root).is_file()]
        for name in names:
            if name not in imports:
                imports[name] = importedSources(name, known, root)
        if names and not any(module in imports[name] for name in names):
            found.append(f"{path}: not imported by {', '.join(names)}")
    return found


class StructureTests(SynchronousTestCase):
    def test_framingImportsNoIO(self) -> None:
        """No module of framing/ imports Twisted (twisted.internet, the reactor), sockets, selectors or asyncio."""
        found = [hit for name, tree in modules("framing").items() for hit in ioImportsIn(name, tree)]
        self.assertEqual(found, [])

    def test_ioImportsAreFound(self) -> None:
        """An import of the reactor, of twisted.internet inside a function, or of socket is reported; others not."""
        source = """
import struct
from twisted.internet import reactor
from .twisted import helper
import socket as s

def later():
    import twisted.internet.defer
"""
        found = ioImportsIn("m", ast.parse(source))
        self.assertEqual(found, ["m:3 twisted.internet", "m:5 socket", "m:8 twisted.internet.defer"])

    def test_noImportCyclesInProtocols(self) -> None:
        """No two modules of protocols/ import each other, directly or through others."""
        self.assertEqual(cycles(importGraph("protocols")), [])

    def test_cycleFinderFindsCycles(self) -> None:
        """The cycle finder reports a cycle of three and nothing for a chain."""
        self.assertEqual(cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}), [["a", "b", "c"]])
        self.assertEqual(cycles({"a": {"b"}, "b": set()}), [])

    def test_noPrivateReachesInProtocols(self) -> None:
        """No object in protocols/ touches another object's _private members."""
        self.assertEqual(privateReaches("protocols"), [])

    def test_twistedConnectionsReadInOnePlace(self) -> None:
        """Only protocols._sockets reads or sets the attributes of Twisted's socket connections (read sizes, buffers)"""
        self.assertEqual(connectionReaches("protocols"), [])
        tree = ast.parse("def tune(t):\n    t.bufferSize = 1\n    self.bufferSize = 2\n")
        self.patch(sys.modules[__name__], "modules", lambda package: {"protocols.other": tree})
        self.assertEqual(connectionReaches("protocols"), ["protocols.other:2 t.bufferSize"])

    def test_protocolsNamesAreCamelCase(self) -> None:
        """Functions, arguments, class fields and attributes in protocols/ are camelCase (Twisted's rule)."""
        self.assertEqual(snakeNames("protocols"), [])

    def test_snakeFieldsAreFound(self) -> None:
        """A snake_case dataclass field, class attribute or self attribute is reported; camelCase ones are not."""
        source = """
@dataclass(frozen=True)
class Policy:
    idleTimeout: float = 1.0
    max_refusals: int = 10
    open_type = "policy"
    per_key = 3

    def __init__(self):
        self.perConnection = 1
        self.abort_after: float = 2.0
        self._held_bytes = 0
"""
        found = snakeNamesIn("m", ast.parse(source))
        self.assertEqual(found, ["m:5 max_refusals", "m:7 per_key", "m:11 abort_after", "m:12 _held_bytes"])


class TestCaseNameTests(SynchronousTestCase):
    """Every source module names its tests in a test-case-name header, and each one named exists."""

    def test_everyModuleNamesItsTests(self) -> None:
        """Each module of framing/ and protocols/ has the header, naming only test modules under tests/."""
        self.assertEqual(testCaseNameProblems(), [])

    def test_namedTestsImport(self) -> None:
        """The test modules the headers name import (the check reads files; this imports one module's names)."""
        for name in getTestModules(str(ROOT / "framing" / "_ledger.py")):
            self.assertIsNotNone(importlib.import_module(name))

    def test_checkerFindsMissingHeaders(self) -> None:
        """On a made-up tree, a module without the header and names of no test module are each reported."""
        root = Path(self.mktemp())
        for name in ["tests/__init__.py", "tests/pkg/__init__.py", "tests/pkg/test_a.py", "tests/nopkg/test_b.py"]:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text("")
        (root / "tests" / "pkg" / "helper.py").write_text("")
        (root / "pkg" / "sub").mkdir(parents=True)
        header = "# -*- test-case-name: {} -*-\n"
        (root / "pkg" / "__init__.py").write_text(header.format("tests.pkg.test_a") + '"""A package."""\n')
        (root / "pkg" / "good.py").write_text("#!/usr/bin/env python3\n" + header.format("tests.pkg.test_a"))
        (root / "pkg" / "bare.py").write_text('"""No header."""\n')
        (root / "pkg" / "sub" / "__init__.py").write_text(
            header.format("tests.pkg.test_gone,tests.pkg.helper,tests.nopkg.test_b,pkg.good")
        )
        self.assertEqual(
            testCaseNameProblems(("pkg",), root),
            [
                "pkg/bare.py: no test-case-name header",
                "pkg/sub/__init__.py: 'tests.pkg.test_gone' is not a test module under tests/",
                "pkg/sub/__init__.py: 'tests.pkg.helper' is not a test module under tests/",
                "pkg/sub/__init__.py: 'tests.nopkg.test_b' is not a test module under tests/",
                "pkg/sub/__init__.py: 'pkg.good' is not a test module under tests/",
            ],
        )

    def test_everyModuleImportedByItsTests(self) -> None:
        """Each module of framing/ and protocols/ is imported by one of the test modules its header names."""
        self.assertEqual(unimportedModules(), [])
        self.assertEqual([m for m in NOT_IMPORTED if m not in modules(m.split(".")[0])], [])

    def test_checkerFindsUnimportedModules(self) -> None:
        """
        On a made-up tree, a module whose named tests never import it is
        reported, even when a helper they import does; imports that count:
        C{import}, C{from ... import} of the module or a name in it, a
        relative import, and a name its package re-exports, used from the
        package or imported from it.
        """
        root = Path(self.mktemp())
        files = {
            "tests/__init__.py": "",
            "tests/pkg/__init__.py": "",
            "tests/pkg/helper.py": "from pkg import lonely\n",
            "tests/pkg/test_none.py": "from . import helper\nimport pkg.other\n",
            "tests/pkg/test_plain.py": "import pkg.plain as p\n",
            "tests/pkg/test_from.py": "from pkg.fromed import thing\n",
            "tests/pkg/test_exported.py": "from pkg import Exported\n",
            "tests/pkg/test_attribute.py": "def test():\n    from pkg import sub\n    sub.Deep\n",
            "pkg/__init__.py": "from .exported import Exported\nfrom . import sub\n",
            "pkg/sub/__init__.py": "from .deep import Deep\n",
        }
        header = "# -*- test-case-name: {} -*-\n"
        named = {
            "pkg/lonely.py": "tests.pkg.test_none",
            "pkg/other.py": "tests.pkg.test_none",
            "pkg/plain.py": "tests.pkg.test_none,tests.pkg.test_plain",
            "pkg/fromed.py": "tests.pkg.test_from",
            "pkg/exported.py": "tests.pkg.test_exported",
            "pkg/sub/deep.py": "tests.pkg.test_attribute",
            "pkg/gone.py": "tests.pkg.test_gone",
        }
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        for name, tests in named.items():
            (root / name).write_text(header.format(tests))
        for name in ["pkg/__init__.py", "pkg/sub/__init__.py"]:
            (root / name).write_text(header.format("tests.pkg.test_attribute") + files[name])
        self.assertEqual(unimportedModules(("pkg",), root), ["pkg/lonely.py: not imported by tests.pkg.test_none"])


class SizeReportTests(SynchronousTestCase):
    """dev.py sizes reports the largest classes and functions; no size fails anything."""

    def test_knownLargeClass(self) -> None:
        """The report on the real tree lists TokenProtocol, one of the largest classes, with its path and line."""
        text = report(top=50)
        self.assertIn("protocols._base.TokenProtocol  (protocols/_base.py:", text)
        self.assertIn("Largest functions and methods", text)

    def test_largestFirst(self) -> None:
        """On a made-up package, classes and methods come largest first, with their lengths, cut at top."""
        root = Path(self.mktemp())
        (root / "pkg" / "sub").mkdir(parents=True)
        (root / "pkg" / "__init__.py").write_text("")
        big = "class Big:\n    def long(self):\n" + "        x = 1\n" * 37 + "    y = 2\n"
        (root / "pkg" / "sub" / "mod.py").write_text(big + "class Small:\n    pass\n")
        classes, functions = sizes(("pkg",), root)
        self.assertEqual([(s.lines, s.name, s.where) for s in classes][0], (40, "pkg.sub.mod.Big", "pkg/sub/mod.py:1"))
        self.assertEqual([(s.lines, s.name) for s in functions], [(38, "pkg.sub.mod.Big.long")])
        text = report(top=1, packages=("pkg",), root=root)
        self.assertIn("     40  pkg.sub.mod.Big  (pkg/sub/mod.py:1)", text)
        self.assertNotIn("Small", text)
