"""The error catalogue of docs/wire-format.md (6.3, and 5.5.1) against the code: codes, names, FAIL type names."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

import framing.bulk._errors
import framing.bulk._fileerrors
import framing.rpc._drain
import protocols.kv
from framing import ProtocolError, Violation
from framing import _errors as errors
from framing.rpc._errors import ERRORS, NO_SUCH_METHOD, NO_SUCH_OBJECT, VIOLATION, describe, isTypeName

ROOT = Path(__file__).resolve().parents[3]
DOCUMENT = (ROOT / "docs" / "wire-format.md").read_text("utf-8")
CATALOGUE = DOCUMENT[DOCUMENT.index("### 6.3 Error catalogue") : DOCUMENT.index("## 7. ")]
CODE_ROW = re.compile(r"^\| `([a-z-]+)` \| (ProtocolError|Violation) \| `(\w+)` \|$", re.M)
NAME_ROW = re.compile(r"^\| `([\w.]+)` \| ", re.M)
REGISTERING: tuple[ModuleType, ...] = (
    protocols.kv,
    framing.bulk._errors,
    framing.bulk._fileerrors,
    framing.rpc._drain,
)
"""The modules that register chunkwire's own errors and the kv service's."""


def vectorPairs() -> set[tuple[str, str]]:
    """Every C{(error, code)} pair any vector file names."""
    found: set[tuple[str, str]] = set()

    def walk(item: Any) -> None:
        if isinstance(item, dict):
            if "error" in item and "code" in item:
                found.add((item["error"], item["code"]))
            for value in item.values():
                walk(value)
        elif isinstance(item, list):
            for value in item:
                walk(value)

    for path in (ROOT / "tests" / "vectors").glob("*.json"):
        walk(json.loads(path.read_text("utf-8")))
    return found


def registeredNames() -> dict[str, type[BaseException]]:
    """The FAIL type names that chunkwire's modules and the kv service register, with their types."""
    names = {}
    for module in REGISTERING:
        for _, cls in inspect.getmembers(module, inspect.isclass):
            name = ERRORS.nameFor(cls) if issubclass(cls, BaseException) else None
            if name is not None and ERRORS.typeFor(name) is cls:
                names[name] = cls
    return names


class CodeTableTests(SynchronousTestCase):
    """The table of codes and the vectors' error names."""

    def test_rowsMatchTheClasses(self) -> None:
        """Each row's name is the framing error class of that code, a ProtocolError or Violation as the row says."""
        rows = CODE_ROW.findall(CATALOGUE)
        self.assertEqual(len(rows), 17)
        for code, family, name in rows:
            cls = getattr(errors, name)
            self.assertEqual(cls.code, code, name)
            self.assertTrue(issubclass(cls, {"ProtocolError": ProtocolError, "Violation": Violation}[family]), name)

    def test_everyDecodingErrorListed(self) -> None:
        """Every code the framing layer reports for wire input has its row (an encoding error is the sender's)."""
        listed = {code for code, _, _ in CODE_ROW.findall(CATALOGUE)}
        members = inspect.getmembers(errors, inspect.isclass)
        classes = [cls for _, cls in members if issubclass(cls, errors.ChunkwireError)]
        bases = {errors.ChunkwireError, ProtocolError, Violation, errors.EncodingError}
        self.assertEqual({cls.code for cls in classes if cls not in bases}, listed)

    def test_everyVectorPairListed(self) -> None:
        """Every (error, code) pair of every vector file is a row of the table."""
        rows = {(name, code) for code, _, name in CODE_ROW.findall(CATALOGUE)}
        self.assertEqual(vectorPairs() - rows, set())


class TypeNameTests(SynchronousTestCase):
    """The FAIL type names the catalogue lists."""

    def test_reservedNames(self) -> None:
        """The three names without a dot are the RPC layer's own, and the catalogue lists each."""
        listed = set(NAME_ROW.findall(CATALOGUE))
        self.assertTrue({VIOLATION, NO_SUCH_OBJECT, NO_SUCH_METHOD} <= listed)
        for name in (VIOLATION, NO_SUCH_OBJECT, NO_SUCH_METHOD):
            self.assertRaises(ValueError, ERRORS.register, KeyError, name)

    def test_everyRegisteredNameListed(self) -> None:
        """Every name chunkwire or the kv service registers is listed (6.3, 5.5.1); every name listed is registered."""
        registered = registeredNames()
        self.assertTrue(registered)
        listed = {name for name in NAME_ROW.findall(DOCUMENT) if name.startswith(("chunkwire.", "kv."))}
        self.assertEqual(set(registered), listed)

    def test_namingRule(self) -> None:
        """Every registered name is a lowercase dotted namespace, then a CapWords name."""
        for name in registeredNames():
            self.assertRegex(name, r"^[a-z]+(\.[a-z]+)*\.[A-Z][A-Za-z]+$")

    def test_typeNameGrammar(self) -> None:
        """
        A type name is dot-separated ASCII identifiers of 1 to 256
        characters (6.3's grammar): registering another is refused, and a
        sender's own name for an unregistered type is made to fit (a local
        class's <locals> left out).
        """
        for good in ("KeyError", "kv.KeyNotFound", "java.lang.IllegalStateException", "_x.y_1"):
            self.assertTrue(isTypeName(good), good)
        for bad in ("", "std::runtime_error", "kv..KeyNotFound", ".x", "x.", "1x", "a b", "é", "x" * 257, 7):
            self.assertFalse(isTypeName(bad), bad)
        self.assertRaises(ValueError, ERRORS.register, KeyError, "kv::KeyNotFound")

        def local() -> type[Exception]:
            class Local(Exception):
                pass

            return Local

        name = describe(local()("no"))[0]
        self.assertTrue(isTypeName(name), name)
        self.assertTrue(name.endswith(".local.Local"), name)

    def test_detailsAreTheArguments(self) -> None:
        """A registered error's details are its arguments; a refusal's are its code and where; others have none."""
        self.assertEqual(describe(protocols.kv.KeyNotFound("k")), ("kv.KeyNotFound", "k", ("k",)))
        drain = framing.rpc._drain.DrainDeadlineExceeded("late", 2.5)
        self.assertEqual(describe(drain), ("chunkwire.DrainDeadlineExceeded", "late", ("late", 2.5)))
        refused = errors.KindRefused("expected a string", "args[0]")
        self.assertEqual(describe(refused)[::2], (VIOLATION, ("kind-refused", "args[0]")))
        self.assertEqual(describe(ValueError("no")), ("ValueError", "no", None))
