"""The shape of the code, measured: each package's modules, and the sizes of their classes and functions.

Shared by L{tests.test_structure} (which checks the rules that matter) and
C{python3 dev.py sizes} (C{python -m tests.structure}), which prints the
largest classes and functions of C{framing/} and C{protocols/}.  Size is a
report, not a rule: a long class is a reason to look, not a failure.

    python -m tests.structure [--top N]
"""

from __future__ import annotations

import argparse
import ast
import functools
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("framing", "protocols")
TOP = 15


def modules(package: str, root: Path = ROOT) -> dict[str, ast.Module]:
    """
    Each module of C{package} (under C{root}) by dotted name, parsed: a
    file is parsed once per process while it stays the same (L{_parsed}),
    so the trees are shared and must not be changed.  The structure tests
    ask for both packages' trees some ten times: about 1 CPU-s each parsed
    anew.
    """
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        stat = path.stat()
        found[".".join(parts)] = _parsed(path, stat.st_mtime_ns, stat.st_size)
    return found


@functools.cache
def _parsed(path: Path, mtimeNs: int, size: int) -> ast.Module:
    """The tree of the file at C{path} as it was at C{mtimeNs} and C{size} (the cache's key: a changed file is new)."""
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


@dataclass(frozen=True)
class Size:
    """One class or function: its length in lines (docstrings and comments included) and where it starts."""

    lines: int
    name: str
    where: str


def largestFirst(size: Size) -> tuple[int, str]:
    return (-size.lines, size.name)


def sizes(packages: tuple[str, ...] = PACKAGES, root: Path = ROOT) -> tuple[list[Size], list[Size]]:
    """
    The classes and the functions (methods and nested functions included) of
    C{packages}, each as a L{Size} named C{module.Qualified.name}, largest first.
    """
    classes: list[Size] = []
    functions: list[Size] = []

    def visit(node: ast.AST, prefix: str, path: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}.{child.name}"
                lines = (child.end_lineno or child.lineno) - child.lineno + 1
                size = Size(lines, name, f"{path}:{child.lineno}")
                (classes if isinstance(child, ast.ClassDef) else functions).append(size)
                visit(child, name, path)
            else:
                visit(child, prefix, path)

    for package in packages:
        for module, tree in modules(package, root).items():
            visit(tree, module, sourcePath(module, root))
    return sorted(classes, key=largestFirst), sorted(functions, key=largestFirst)


def sourcePath(module: str, root: Path = ROOT) -> str:
    """The path, relative to C{root}, of the dotted C{module} (a package's C{__init__.py})."""
    base = Path(*module.split("."))
    return (base / "__init__.py" if (root / base).is_dir() else base.with_suffix(".py")).as_posix()


def report(top: int = TOP, packages: tuple[str, ...] = PACKAGES, root: Path = ROOT) -> str:
    """The C{top} largest classes and functions of C{packages}, as lines of text."""
    classes, functions = sizes(packages, root)
    where = " and ".join(f"{package}/" for package in packages)
    out = [f"Largest classes in {where} (lines, docstrings and comments included):"]
    out += [f"  {size.lines:5}  {size.name}  ({size.where})" for size in classes[:top]]
    out += ["", f"Largest functions and methods in {where}:"]
    out += [f"  {size.lines:5}  {size.name}  ({size.where})" for size in functions[:top]]
    out += ["", f"{len(classes)} classes, {len(functions)} functions.  Informational: no size is a failure."]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="dev.py sizes", description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=TOP, help=f"how many of each to list (default {TOP})")
    options = parser.parse_args(argv)
    print(report(options.top))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
