"""Remote interfaces and method signatures in the sans-IO core (L{framing.rpc._interfaces}, L{framing.rpc._signatures}).

What every client's typed proxy checks, tested without any client: the
constraints an interface's hints give, the argument check (a local
Violation naming the argument), the result check, a method the interface
lacks, and that a module declaring an interface need load no Twisted.
"""

from __future__ import annotations

import json
import subprocess
import sys

from twisted.trial.unittest import SynchronousTestCase

from framing import Violation
from framing.rpc._errors import NoSuchMethod, WrongArguments
from framing.rpc._interfaces import checkArguments, declaredAttribute, declaredMethod, interfaceNamed, resultCheck
from framing.rpc._signatures import RefOf, registerReference
from framing.slicing._constraints import Integer, ListOf, Text
from tests.framing.sampleinterface import ICounter
from tests.processes import ENV, ROOT


class DeclarationTests(SynchronousTestCase):
    """An interface's stubs become remote methods with the constraints of their hints, Deferred[T] read as T."""

    def test_registeredByName(self) -> None:
        """The interface is found by the name it declared."""
        self.assertIs(interfaceNamed("tests.ICounter"), ICounter)
        self.assertEqual(ICounter.remoteName, "tests.ICounter")

    def test_constraintsFromHints(self) -> None:
        """The bounds in the hints are the constraints; Deferred[int], never imported at run time, means int."""
        add = ICounter.remoteInterfaceMethods["add"]
        self.assertIsInstance(add.result, Integer)
        names = ICounter.remoteInterfaceMethods["names"]
        assert isinstance(names.result, ListOf)
        self.assertIsInstance(names.result.item, Text)

    def test_argumentsReadable(self) -> None:
        """
        A remote method keeps the constraints its argument check holds calls
        to, for a reader (the hostile peer derives its arguments from them):
        the hints' own, with C{remote}'s C{args} over them, on the class
        that implements an interface too.
        """
        from framing.rpc._referenceable import Referenceable
        from framing.rpc._signatures import remote
        from framing.slicing._constraints import ByteString

        class Counter(Referenceable, ICounter):
            def add(self, name: str, amount: int = 1) -> int:
                return amount

            def names(self) -> list[str]:
                return []

            @remote(args={"label": ByteString(8)})
            def tag(self, label: bytes, count: int) -> None:
                pass

        declared = ICounter.remoteInterfaceMethods["add"].arguments
        assert isinstance(declared, dict)
        self.assertIs(Counter.remoteMethods["add"].arguments, declared)
        tag = Counter.remoteMethods["tag"].arguments
        assert isinstance(tag, dict)
        self.assertEqual(sorted(tag), ["count", "label"])
        self.assertEqual((type(tag["label"]), tag["label"].max_length), (ByteString, 8))
        self.assertIsInstance(tag["count"], Integer)

    def test_declaringLoadsNoTwisted(self) -> None:
        """A fresh interpreter importing the interface (and the checks) has no twisted module."""
        probe = (
            "import json, sys\n"
            "import tests.framing.sampleinterface, framing.rpc._interfaces\n"
            "print(json.dumps(sorted(sys.modules)))\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", probe], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=60
        )
        self.assertEqual(result.returncode, 0, result.stderr)
        modules = json.loads(result.stdout)
        self.assertIn("tests.framing.sampleinterface", modules)
        self.assertEqual([name for name in modules if name == "twisted" or name.startswith("twisted.")], [])


class CheckTests(SynchronousTestCase):
    """The checks a typed proxy makes before sending and on the answer."""

    def test_argumentsChecked(self) -> None:
        """A refused argument is a Violation whose where names it, by position or by keyword."""
        add = declaredMethod(ICounter, "add")
        checkArguments(add, ("apples", 3), {})
        byPosition = self.assertRaises(Violation, checkArguments, add, ("much too long", 3), {})
        self.assertEqual(byPosition.where, "args[0]")
        byName = self.assertRaises(Violation, checkArguments, add, ("apples",), {"amount": 101})
        self.assertEqual(byName.where, "kwargs['amount']")

    def test_signatureChecked(self) -> None:
        """Arguments the signature cannot take are a WrongArguments naming the method."""
        add = declaredMethod(ICounter, "add")
        error = self.assertRaises(WrongArguments, checkArguments, add, (), {"colour": "red"})
        self.assertIn("add(name, amount=1)", str(error))

    def test_unknownMethod(self) -> None:
        """A name the interface lacks: NoSuchMethod for a call, AttributeError for an attribute; _private too."""
        self.assertIn("'sub'", str(self.assertRaises(NoSuchMethod, declaredMethod, ICounter, "sub")))
        self.assertRaises(AttributeError, declaredAttribute, ICounter, "sub")
        self.assertRaises(NoSuchMethod, declaredMethod, ICounter, "__init__")

    def test_resultChecked(self) -> None:
        """A result its constraint refuses is a Violation at "result", naming the call and the peer."""
        answered = resultCheck(declaredMethod(ICounter, "add"), lambda: " from there")
        assert answered is not None
        self.assertEqual(answered(7), 7)
        error = self.assertRaises(Violation, answered, "seven")
        self.assertTrue(error.where.startswith("result"), error.where)
        self.assertIn("in the answer to 'add' from there", str(error))

    def test_referenceResultProxied(self) -> None:
        """A result constrained to a reference to an interface comes back as the proxy its client registered."""

        class Reference:
            def __init__(self, names: tuple[str, ...]) -> None:
                self.interfaceNames = names

        proxies: list[tuple[object, object]] = []
        registerReference(Reference, lambda reference, interface: proxies.append((reference, interface)) or "proxy")
        constraint = RefOf(ICounter)
        good = Reference(("tests.ICounter",))
        constraint.validate(good)
        self.assertRaises(Violation, constraint.validate, Reference(("other.I",)))
        self.assertRaises(Violation, constraint.validate, object())
        self.assertEqual(ICounter.remoteProxy(good), "proxy")
        self.assertEqual(proxies, [(good, ICounter)])
        self.assertRaises(TypeError, ICounter.remoteProxy, Reference(("other.I",)))
        self.assertRaises(TypeError, ICounter.remoteProxy, object())
