"""Constraints derived from type hints (L{framing.rpc._signatures}), and how L{protocols.rpc.remote} uses them."""

from __future__ import annotations

import array
import dataclasses
from collections.abc import Awaitable, Mapping, Sequence
from typing import Annotated, Any, Literal, Optional, Union

from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase

from framing import Violation
from framing._errors import BodyTooLarge, InvalidValue, KindRefused, TooManyItems
from framing.rpc._errors import WrongArguments
from framing.rpc._signatures import UNBOUNDED, constraintFor, methodConstraints, registerHint
from framing.slicing._constraints import ANY, Integer, Text, TupleOf
from protocols.rpc import (
    MaxLength,
    MinLength,
    Pattern,
    Range,
    Referenceable,
    RemoteReference,
    RemoteViolation,
    UnsupportedHint,
    remote,
)

from .services import RpcPair


@dataclasses.dataclass
class Point:
    x: int
    y: Annotated[int, Range(0, 10)]


@dataclasses.dataclass
class Node:
    name: str
    children: list[Node]


class Unknown:
    """A class nothing tells how to send."""


class HintTestCase(SynchronousTestCase):
    def assertAccepts(self, hint: Any, *values: Any) -> None:
        constraint = constraintFor(hint)
        for value in values:
            constraint.validate(value)

    def assertRefuses(self, hint: Any, value: Any, kind: type[Violation] = Violation, where: str = "") -> None:
        error = self.assertRaises(kind, constraintFor(hint).validate, value)
        self.assertEqual(error.where, where)


class ScalarHintTests(HintTestCase):
    """Built-in scalar hints accept their type and nothing else; bare hints bound nothing else."""

    def test_scalars(self) -> None:
        """str, bytes, int, bool and None accept their own type only (a bool is not an int)."""
        self.assertAccepts(str, "", "x" * 100_000)
        self.assertRefuses(str, b"x", KindRefused)
        self.assertAccepts(bytes, b"", b"x" * 100_000)
        self.assertRefuses(bytes, "x", KindRefused)
        self.assertAccepts(int, 0, -(2**600))
        self.assertRefuses(int, True, KindRefused)
        self.assertRefuses(int, 1.0, KindRefused)
        self.assertAccepts(bool, True, False)
        self.assertRefuses(bool, 1, KindRefused)
        self.assertAccepts(None, None)
        self.assertRefuses(None, 0, KindRefused)

    def test_float_takes_int(self) -> None:
        """A float hint accepts floats and, as PEP 484 says, ints; not strings or bools."""
        self.assertAccepts(float, 1.5, 2)
        self.assertRefuses(float, "1.5", KindRefused)
        self.assertRefuses(float, True, KindRefused)

    def test_any(self) -> None:
        """Any and object accept anything: the ANY constraint itself."""
        self.assertIs(constraintFor(Any), ANY)
        self.assertIs(constraintFor(object), ANY)

    def test_bare_hints_are_unbounded(self) -> None:
        """A bare str or list bounds nothing but the type: the decoder's Limits do the rest."""
        text = constraintFor(str)
        assert isinstance(text, Text)
        self.assertEqual(text.max_length, UNBOUNDED)
        self.assertAccepts(list[int], list(range(5000)))


class ContainerHintTests(HintTestCase):
    """Container hints check each item where it is."""

    def test_list_set_dict(self) -> None:
        """list, set, frozenset and dict hints check their items, keys and values."""
        self.assertAccepts(list[int], [], [1, 2])
        self.assertRefuses(list[int], [1, "x"], KindRefused, "[1]")
        self.assertRefuses(list[int], (1,), KindRefused)
        self.assertAccepts(set[str], {"a"}, frozenset({"b"}))
        self.assertAccepts(frozenset[str], frozenset({"b"}))
        self.assertAccepts(dict[str, list[int]], {"a": [1]})
        self.assertRefuses(dict[str, list[int]], {"a": ["x"]}, KindRefused, "['a'][0]")
        self.assertRefuses(dict[str, int], {1: 1}, KindRefused, "<key 1>")

    def test_tuples(self) -> None:
        """tuple[X, Y] is one constraint per position; tuple[X, ...] any length; tuple[()] empty."""
        self.assertAccepts(tuple[int, str], (1, "a"))
        self.assertRefuses(tuple[int, str], (1, 2), KindRefused, "[1]")
        self.assertRefuses(tuple[int, str], (1,), InvalidValue)
        self.assertAccepts(tuple[int, ...], (), (1, 2, 3))
        self.assertRefuses(tuple[int, ...], (1, "x"), KindRefused, "[1]")
        self.assertAccepts(tuple[()], ())
        self.assertRefuses(tuple[()], (1,), InvalidValue)

    def test_abstract_collections(self) -> None:
        """Sequence takes a list or a tuple; Mapping a dict."""
        self.assertAccepts(Sequence[int], [1], (1,))
        self.assertRefuses(Sequence[int], {1}, KindRefused)
        self.assertAccepts(Mapping[str, int], {"a": 1})

    def test_bare_containers(self) -> None:
        """A bare list, dict or tuple hint checks the container's type only."""
        self.assertAccepts(list, [1, "x", None])
        self.assertAccepts(dict, {1: "x"})
        self.assertAccepts(tuple, (1, "x"))
        self.assertRefuses(list, {}, KindRefused)


class UnionHintTests(HintTestCase):
    """Optional, unions and Literal."""

    def test_optional(self) -> None:
        """X | None and Optional[X] accept None and what X accepts."""
        for hint in (Optional[int], int | None, Union[None, int]):  # noqa: UP007, UP045 (the old spellings too)
            self.assertAccepts(hint, None, 5)
            self.assertRefuses(hint, "5", KindRefused)

    def test_union(self) -> None:
        """int | str accepts either; int | str | None also None; list[int] | list[str] refuses mixed lists."""
        self.assertAccepts(int | str, 1, "a")
        self.assertRefuses(int | str, b"a", KindRefused)
        self.assertAccepts(int | str | None, None)
        self.assertAccepts(list[int] | list[str], [1], ["a"])
        self.assertRefuses(list[int] | list[str], [1, "a"], KindRefused, "[1]")

    def test_union_with_any(self) -> None:
        """A union with Any in it is Any: no check at all."""
        self.assertIs(constraintFor(Any | None), ANY)
        self.assertIs(constraintFor(Union[int, Any]), ANY)  # noqa: UP007

    def test_literal(self) -> None:
        """Literal takes exactly its values, of their own types."""
        self.assertAccepts(Literal["r", "w", 1], "r", "w", 1)
        self.assertRefuses(Literal["r", "w", 1], "x", InvalidValue)
        self.assertRefuses(Literal["r", "w", 1], True, InvalidValue)


class AnnotatedHintTests(HintTestCase):
    """Annotated bounds."""

    def test_lengths(self) -> None:
        """MaxLength and MinLength bound text and bytes (UTF-8 bytes) and containers (items)."""
        hint = Annotated[str, MaxLength(5), MinLength(2)]
        self.assertAccepts(hint, "ab", "abcde")
        self.assertRefuses(hint, "abcdef", BodyTooLarge)
        self.assertRefuses(hint, "a", InvalidValue)
        self.assertRefuses(Annotated[bytes, MaxLength(1)], b"ab", BodyTooLarge)
        self.assertRefuses(Annotated[list[int], MaxLength(1)], [1, 2], TooManyItems)
        self.assertRefuses(Annotated[dict[str, int], MinLength(1)], {}, InvalidValue)

    def test_range_and_pattern(self) -> None:
        """Range bounds ints and floats; Pattern must match a whole string."""
        self.assertAccepts(Annotated[int, Range(0, 10)], 0, 10)
        self.assertRefuses(Annotated[int, Range(0, 10)], 11, InvalidValue)
        self.assertRefuses(Annotated[float, Range(0.0, 1.0)], 1.5, InvalidValue)
        self.assertAccepts(Annotated[float, Range(0.0, 1.0)], 0.5, 1)
        self.assertAccepts(Annotated[str, Pattern("[a-z]+")], "abc")
        self.assertRefuses(Annotated[str, Pattern("[a-z]+")], "abc!", InvalidValue)

    def test_constraint_in_metadata(self) -> None:
        """A Constraint in Annotated's metadata is used as it is."""
        constraint = Integer(0, 3)
        self.assertIs(constraintFor(Annotated[int, constraint]), constraint)

    def test_other_metadata_ignored(self) -> None:
        """Metadata that is not a bound (a docstring, another library's marker) is left alone."""
        self.assertAccepts(Annotated[int, "the count"], 5)

    def test_misplaced_bound(self) -> None:
        """A bound that does not apply to its type (MaxLength on an int, Pattern on bytes) is an UnsupportedHint."""
        self.assertRaises(UnsupportedHint, constraintFor, Annotated[int, MaxLength(3)])
        self.assertRaises(UnsupportedHint, constraintFor, Annotated[bytes, Pattern("x")])
        self.assertRaises(UnsupportedHint, constraintFor, Annotated[bool, Range(0, 1)])


class TypeHintTests(HintTestCase):
    """Dataclasses, registered types and references."""

    def test_dataclass_fields(self) -> None:
        """A dataclass hint checks the class and each field's own hint, naming the field."""
        self.assertAccepts(Point, Point(1, 2))
        self.assertRefuses(Point, Point(1, 11), InvalidValue, ".y")
        self.assertRefuses(Point, Point("x", 1), KindRefused, ".x")  # type: ignore[arg-type]
        self.assertRefuses(Point, (1, 2), KindRefused)

    def test_recursive_dataclass(self) -> None:
        """A dataclass that holds itself converts, checking its fields one level down."""
        self.assertAccepts(Node, Node("a", [Node("b", [])]))
        self.assertRefuses(Node, Node("a", [5]), KindRefused, ".children[0]")  # type: ignore[list-item]

    def test_registered_type(self) -> None:
        """A type in the default registry (array.array) is an instance check."""
        self.assertAccepts(array.array, array.array("b", [1]))
        self.assertRefuses(array.array, [1], KindRefused)

    def test_references(self) -> None:
        """RemoteReference and Referenceable subclasses accept references and local Referenceables."""
        ref = RemoteReference(None, 3)  # type: ignore[arg-type]
        self.assertAccepts(RemoteReference, ref, Referenceable())
        self.assertAccepts(Referenceable, ref)
        self.assertRefuses(RemoteReference, "ref", KindRefused)

    def test_registered_hint(self) -> None:
        """A class given to registerHint, and its subclasses, mean the constraint given."""

        class Handle:
            pass

        class SubHandle(Handle):
            pass

        constraint = Integer(0, 9)
        registerHint(Handle, constraint)
        self.assertIs(constraintFor(Handle), constraint)
        self.assertIs(constraintFor(SubHandle), constraint)

    def test_unsupported(self) -> None:
        """A class nothing knows how to send, and a generic of one, are UnsupportedHints."""
        self.assertRaises(UnsupportedHint, constraintFor, Unknown)
        self.assertRaises(UnsupportedHint, constraintFor, list[Unknown])
        self.assertRaises(UnsupportedHint, constraintFor, "int")


class Explicit(Referenceable):
    @remote(args={"a": Integer(0, 5)}, result=Text(3))
    def both(self, a: int, b: int) -> str:
        return "x" * b


class MethodConstraintTests(SynchronousTestCase):
    """What remote derives from a method, once, when it decorates it."""

    def test_derived(self) -> None:
        """Each annotated parameter gets its constraint, the result too; Any and unannotated ones get none."""

        def method(self: Any, a: int, b: Any, c, *rest: int, d: str = "", **extra: int) -> list[int]:  # type: ignore[no-untyped-def]
            return []

        arguments, result = methodConstraints(method)
        self.assertEqual(sorted(arguments), ["a", "d"])
        assert result is not None
        self.assertRaises(KindRefused, result.validate, ["x"])

    def test_awaited_results(self) -> None:
        """Deferred[X], Awaitable[X] and an async method's own hint all mean X."""

        def deferred(self: Any) -> Deferred[int]:
            raise NotImplementedError

        def awaitable(self: Any) -> Awaitable[int]:
            raise NotImplementedError

        async def coroutine(self: Any) -> int:
            return 1

        for function in (deferred, awaitable, coroutine):
            _, result = methodConstraints(function)
            assert result is not None
            self.assertRaises(KindRefused, result.validate, "1")

    def test_checked_by_remote(self) -> None:
        """A method marked with remote refuses arguments its hints refuse, by position or keyword, naming them."""

        class Service(Referenceable):
            @remote
            def put(self, key: Annotated[str, MaxLength(3)], value: bytes) -> bool:
                return True

        check = Service.remoteMethods["put"].checkArguments
        assert check is not None
        check(("abc", b""), {})
        error = self.assertRaises(BodyTooLarge, check, ("abcd", b""), {})
        self.assertEqual(error.where, "args[0]")
        error = self.assertRaises(KindRefused, check, ("abc",), {"value": "text"})
        self.assertEqual(error.where, "kwargs['value']")
        self.assertRaises(WrongArguments, check, ("abc",), {})

    def test_explicit_overrides(self) -> None:
        """args= replaces the derived constraints of the parameters it names, not the others; result= the result's."""
        method = Explicit.remoteMethods["both"]
        check = method.checkArguments
        assert check is not None
        self.assertRaises(InvalidValue, check, (6, 1), {})
        self.assertRaises(KindRefused, check, (1, "x"), {})
        assert isinstance(method.result, Text)
        self.assertEqual(method.result.max_length, 3)

    def test_tuple_args_replace_all(self) -> None:
        """A single args= constraint replaces every derived argument constraint."""

        class Service(Referenceable):
            @remote(args=TupleOf(ANY))
            def one(self, a: int) -> None:
                pass

        check = Service.remoteMethods["one"].checkArguments
        assert check is not None
        check(("not an int",), {})

    def test_unannotated_unchecked(self) -> None:
        """A method without hints has no argument constraints and no result constraint."""

        class Service(Referenceable):
            @remote
            def any(self, a, b=None):  # type: ignore[no-untyped-def]
                return a

        self.assertIsNone(Service.remoteMethods["any"].result)

    def test_unsupported_hint_names_the_parameter(self) -> None:
        """A hint no constraint describes fails the decoration, naming the method and the parameter."""
        with self.assertRaises(UnsupportedHint) as caught:

            class Service(Referenceable):
                @remote
                def put(self, key: str, value: Unknown) -> None:
                    pass

        self.assertIn("put", str(caught.exception))
        self.assertIn("'value'", str(caught.exception))
        self.assertIsInstance(caught.exception, TypeError)

    def test_unresolvable_hint_names_the_parameter(self) -> None:
        """A hint naming something not defined fails the decoration, naming the parameter."""
        with self.assertRaises(UnsupportedHint) as caught:
            remote(_forward)
        self.assertIn("'later'", str(caught.exception))

    def test_own_class_resolved_at_first_use(self) -> None:
        """A method hinted with its own class (not yet defined when decorated) is checked against it once called."""
        method = SelfMaking.remoteMethods["clone"]
        method.result.validate(SelfMaking())
        self.assertRaises(Violation, method.result.validate, "not one")
        with self.assertRaises(UnsupportedHint) as caught:
            remote(_forward)
        self.assertIn("'later'", str(caught.exception))

    def test_unsupported_result(self) -> None:
        """An unsupported result hint names the result."""

        def method(self: Any) -> Unknown:
            raise NotImplementedError

        error = self.assertRaises(UnsupportedHint, remote, method)
        self.assertIn("the result", str(error))


def _forward(self: Any, later: NotDefinedAnywhere) -> None:  # type: ignore[name-defined] # noqa: F821
    pass


class Store(Referenceable):
    """A service whose constraints all come from hints."""

    @remote
    def put(self, key: Annotated[str, MaxLength(8)], value: int | None = None) -> Literal["ok"]:
        return "ok"

    @remote
    def lie(self) -> int:
        return "not an int"  # type: ignore[return-value]


class DerivedOnTheWireTests(SynchronousTestCase):
    """Derived constraints are enforced by the server like explicit ones."""

    def setUp(self) -> None:
        self.pair = RpcPair(Store())

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        called = self.pair.root.callRemote(name, *args, **kwargs)
        self.pair.flush()
        return called

    def test_accepted(self) -> None:
        """Arguments the hints accept reach the method."""
        self.assertEqual(self.successResultOf(self.call("put", "k", value=None)), "ok")

    def test_argument_refused(self) -> None:
        """An argument the hints refuse fails the call with a RemoteViolation naming it."""
        failure = self.failureResultOf(self.call("put", "much too long"), RemoteViolation)
        self.assertIn("args[0]", str(failure.value))

    def test_result_refused(self) -> None:
        """A result the return hint refuses is not sent; the call fails with a RemoteViolation at result."""
        failure = self.failureResultOf(self.call("lie"), RemoteViolation)
        self.assertIn("result", str(failure.value))


class SelfMaking(Referenceable):
    """A Referenceable whose remote method returns another of its kind (a hint naming its own class)."""

    @remote
    def clone(self) -> SelfMaking:
        return SelfMaking()
