"""No method is replaced on an instance in framing/ or protocols/ (issue 40, the connection's seams).

An instance attribute that shadows its class's method (C{self.dataReceived
= self.inbound.dataReceived}, C{protocol.connectionLost = lambda ...}) hides
which code runs from mypy, grep and the reader; the code says it instead: a
state the method reads, a delegate it calls, a subclass.  This checks, in
every module of C{framing/} and C{protocols/}:

  - no C{# type: ignore[method-assign]};
  - in a class, no assignment to C{self.NAME} where NAME is a method of the
    class or of a base class defined in these packages (properties aside);
  - no assignment of a function to C{OBJECT.NAME} where NAME is a method
    of L{protocols.TokenProtocol} or of Twisted's C{Protocol} (a
    connection's hooks, wrapped from outside), but in L{ALLOWED};
  - no assignment of a function (a lambda, a function of the module, a
    method of the class assigning: C{self.method}) to C{EXPRESSION.NAME},
    where EXPRESSION is anything but C{self} (C{self._broker}, C{broker})
    and NAME is a method, or a method-like attribute, of any class of these
    packages, but in L{ALLOWED}.  A method-like attribute is one a class
    body names with a callable type that is not optional
    (C{callRemote: Callable[..., Deferred]}: set on the instance, it is
    the method); an optional one (C{observer: Callable[[bool], None] |
    None}) is a hook, nobody by default, and may be set;
  - no C{setattr(self, ...)}, whose names grep cannot see.
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Iterator

from twisted.internet.protocol import Protocol
from twisted.trial.unittest import SynchronousTestCase

from tests.structure import PACKAGES, ROOT, modules, sourcePath

ALLOWED = {
    # Test helpers for any Twisted protocol: they wait on its connectionMade and connectionLost by wrapping them.
    ("protocols.testing", "protocol.connectionLost"),
    ("protocols.testing", "protocol.connectionMade"),
    # recordWrites: records what any transport (a real TCP or TLS one too) is asked to write, by wrapping it.
    ("protocols.testing", "transport.write"),
    ("protocols.testing", "transport.writeSequence"),
}

_FUNCTION = (ast.FunctionDef, ast.AsyncFunctionDef)
_IGNORED = re.compile(r"#\s*type:\s*ignore\[[^\]]*method-assign")


def _isProperty(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for decorator in function.decorator_list:
        name = decorator.attr if isinstance(decorator, ast.Attribute) else getattr(decorator, "id", "")
        if name in ("property", "setter", "deleter", "cached_property"):
            return True
    return False


def _storedAttributes(node: ast.AST) -> Iterator[ast.Attribute]:
    """The attributes C{node} assigns (C{a.b = ...}, C{a.b: T = ...}, C{a.b += ...}, unpacked targets too)."""
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    else:
        return
    for target in targets:
        for part in ast.walk(target):
            if isinstance(part, ast.Attribute) and isinstance(part.ctx, ast.Store):
                yield part


class _Classes:
    """The classes of some modules by name, and the methods each has there (its own and its bases')."""

    def __init__(self, trees: dict[str, ast.Module]) -> None:
        self.byName: dict[str, list[ast.ClassDef]] = {}
        for tree in trees.values():
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    self.byName.setdefault(node.name, []).append(node)

    def methods(self, node: ast.ClassDef, seen: tuple[ast.ClassDef, ...] = ()) -> set[str]:
        names = {child.name for child in node.body if isinstance(child, _FUNCTION) and not _isProperty(child)}
        for base in node.bases:
            baseName = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", None)
            for baseNode in self.byName.get(baseName or "", []):
                if baseNode not in seen and baseNode is not node:
                    names |= self.methods(baseNode, (*seen, node))
        return names


def _isOptional(annotation: ast.expr) -> bool:
    """Whether C{annotation} admits C{None} (C{X | None}, C{Optional[X]}, C{None | X}), nested in a wrapper too."""
    for part in ast.walk(annotation):
        if isinstance(part, ast.BinOp) and isinstance(part.op, ast.BitOr):
            if any(isinstance(side, ast.Constant) and side.value is None for side in (part.left, part.right)):
                return True
        if isinstance(part, ast.Subscript) and getattr(part.value, "id", getattr(part.value, "attr", "")) == "Optional":
            return True
    return False


def methodLike(node: ast.ClassDef) -> set[str]:
    """The attributes C{node}'s body names with a callable type that is not optional (see the module docstring)."""
    return {
        child.target.id
        for child in node.body
        if isinstance(child, ast.AnnAssign)
        and isinstance(child.target, ast.Name)
        and "Callable" in ast.unparse(child.annotation)
        and not _isOptional(child.annotation)
    }


def _functionLike(value: ast.expr | None, functions: set[str], own: set[str]) -> bool:
    """Whether C{value} is a function: a lambda, a function of the module (C{functions}), C{self.M} for M in C{own}."""
    if isinstance(value, ast.Lambda):
        return True
    if isinstance(value, ast.Name):
        return value.id in functions
    return (
        isinstance(value, ast.Attribute)
        and isinstance(value.value, ast.Name)
        and value.value.id == "self"
        and value.attr in own
    )


def _outsideShadows(module: str, tree: ast.Module, classes: _Classes, named: set[str]) -> Iterator[str]:
    """C{module:line EXPRESSION.NAME} for each function assigned to C{EXPRESSION.NAME}, NAME in C{named}."""
    functions = {node.name for node in ast.walk(tree) if isinstance(node, _FUNCTION)}

    def visit(node: ast.AST, own: set[str]) -> Iterator[str]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                yield from visit(child, classes.methods(child))
                continue
            if isinstance(child, (ast.Assign, ast.AnnAssign)) and _functionLike(child.value, functions, own):
                for target in _storedAttributes(child):
                    owner = ast.unparse(target.value)
                    if owner != "self" and target.attr in named and (module, f"{owner}.{target.attr}") not in ALLOWED:
                        yield f"{module}:{child.lineno} {owner}.{target.attr}"
            yield from visit(child, own)

    yield from visit(tree, set())


def connectionHooks(classes: _Classes) -> set[str]:
    """The method names of TokenProtocol (as defined in protocols/) and of Twisted's Protocol."""
    names = {name for name, value in inspect.getmembers(Protocol) if callable(value) and not name.startswith("__")}
    for node in classes.byName.get("TokenProtocol", []):
        names |= classes.methods(node)
    return names


def methodShadows(trees: dict[str, ast.Module], sources: dict[str, str]) -> list[str]:
    """C{module:line what} for each method replaced on an instance in C{trees} (see the module's rules)."""
    classes = _Classes(trees)
    hooks = connectionHooks(classes)
    named = set(hooks)
    for nodes in classes.byName.values():
        for node in nodes:
            named |= classes.methods(node) | methodLike(node)
    found = []
    for module, source in sources.items():
        found += [
            f"{module}:{number} type: ignore[method-assign]"
            for number, line in enumerate(source.splitlines(), 1)
            if _IGNORED.search(line)
        ]
    for module, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                own = classes.methods(node)
                for function in (child for child in node.body if isinstance(child, _FUNCTION)):
                    for inner in ast.walk(function):
                        found += [
                            f"{module}:{inner.lineno} self.{target.attr}"
                            for target in _storedAttributes(inner)
                            if isinstance(target.value, ast.Name) and target.value.id == "self" and target.attr in own
                        ]
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, (ast.Lambda, ast.Name)):
                for target in _storedAttributes(node):
                    owner = target.value
                    if isinstance(owner, ast.Name) and owner.id != "self" and target.attr in hooks:
                        if (module, f"{owner.id}.{target.attr}") not in ALLOWED:
                            found.append(f"{module}:{node.lineno} {owner.id}.{target.attr}")
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setattr" and node.args:
                if getattr(node.args[0], "id", None) == "self":
                    found.append(f"{module}:{node.lineno} setattr(self, ...)")
        found += _outsideShadows(module, tree, classes, named)
    return sorted(set(found))


def packageShadows(packages: tuple[str, ...] = PACKAGES) -> list[str]:
    trees: dict[str, ast.Module] = {}
    sources: dict[str, str] = {}
    for package in packages:
        for name, tree in modules(package).items():
            trees[name] = tree
            sources[name] = (ROOT / sourcePath(name)).read_text(encoding="utf-8")
    return methodShadows(trees, sources)


class MethodShadowTests(SynchronousTestCase):
    def test_noMethodReplacedOnAnInstance(self) -> None:
        """framing/ and protocols/ replace no method on an instance (the checks in this module's docstring)."""
        self.assertEqual(packageShadows(), [])

    def test_shadowsAreFound(self) -> None:
        """Each way of replacing a method on an instance is reported; a plain attribute and a property's are not."""
        source = """
class Base:
    def dataReceived(self, data): ...

class TokenProtocol(Base):
    def connectionLost(self, reason): ...

    @property
    def paused(self): ...

    @paused.setter
    def paused(self, value): ...

    def makeConnection(self, transport):
        self.dataReceived = self.inbound.dataReceived
        self._deliver = self.deliverChecked  # type: ignore[method-assign]
        self.paused = True
        self.receiver = transport
        setattr(self, "limits", 1)

def drop(protocol):
    original = protocol.connectionLost
    protocol.connectionLost = lambda reason: original(reason)
    protocol.receiver = protocol
"""
        found = methodShadows({"m": ast.parse(source)}, {"m": source})
        self.assertEqual(
            found,
            [
                "m:15 self.dataReceived",
                "m:16 type: ignore[method-assign]",
                "m:19 setattr(self, ...)",
                "m:23 protocol.connectionLost",
            ],
        )

    def test_outsideShadowsAreFound(self) -> None:
        """
        A function assigned from outside to any class's method or
        method-like attribute, on any expression but C{self}, is reported
        (the drain and the interceptors swapped C{broker.callRemote} so); a
        hook (an optional callable), data, or a function assigned to
        another name is not.
        """
        source = """
class Broker:
    send: Callable[[int], None]
    observer: Callable[[bool], None] | None = None

    def callRemote(self, target): ...

class Drain:
    def stop(self):
        def refuse(target): ...
        self._broker.callRemote = refuse
        self._broker.send = lambda target: None
        self._broker.observer = self.seen
        self._broker.count = refuse
        self._broker.callRemote = self.reason
        broker.send = self.stop

    def seen(self, reading): ...

def swap(broker):
    broker.callRemote = swap
"""
        found = methodShadows({"m": ast.parse(source)}, {"m": source})
        self.assertEqual(
            found,
            ["m:11 self._broker.callRemote", "m:12 self._broker.send", "m:16 broker.send", "m:21 broker.callRemote"],
        )
