"""
Tests for the decoder's optional unslicer hooks: C{report_violation} on the
top-level unslicer of a refused object, streamed bodies (C{begin_body},
C{body_piece}, C{end_body}), the L{NOTHING} result, and unslicer failures
turned into typed Violations.
"""

from __future__ import annotations

from typing import Any, ClassVar

from twisted.trial.unittest import SynchronousTestCase

import framing
from framing import NOTHING, Decoder, Limits, ProtocolError, Violation
from framing.errors import (
    Aborted,
    BodyTooLarge,
    InvalidValue,
    KindRefused,
    ObjectTooCostly,
    TooDeep,
    TooManyItems,
    UnknownType,
)
from framing.slicing.builtin import ListUnslicer, Unslicer
from framing.slicing.registry import DEFAULT_REGISTRY, Registry
from framing.wire import ABORT, BYTES, CLOSE, OPEN, PREAMBLE, STRING

from .test_slicing import container, encoded, feed_all, text, token


class Reported(Violation):
    """What the reporting unslicer below delivers instead of the violation it was told of."""

    code = "reported"


class ReportingUnslicer(ListUnslicer):
    """
    A list that records every refusal reported to it, tags the violation
    with its own name, and (when C{replace} is set) delivers another one.
    """

    open_type = "test.reporting"
    reports: ClassVar[list[tuple[ReportingUnslicer, Violation]]] = []
    replace: ClassVar[bool] = False

    def report_violation(self, violation: Violation) -> Violation:
        self.reports.append((self, violation))
        if self.replace:
            return Reported(f"reported: {violation.code}", violation.where)
        violation.tag = "tagged"  # type: ignore[attr-defined]
        return violation


class PickyUnslicer(Unslicer):
    """A container outside the budget that refuses STRING bodies at their header, the int 13 and a 3rd child."""

    open_type = "test.picky"

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self.items: list[Any] = []

    def check_token(self, kind: int, size: int) -> None:
        if kind == STRING:
            raise KindRefused("no strings here")

    def receive_child(self, obj: Any) -> None:
        if obj == 13:
            raise InvalidValue("unlucky")
        self.items.append(obj)

    def finish(self) -> Any:
        if len(self.items) > 2:
            raise InvalidValue("at most two")
        return self.items

    def child_where(self) -> str:
        return f"<picky {len(self.items)}>"


class SilentUnslicer(PickyUnslicer):
    """An unslicer class with no report_violation at all (not built on Unslicer)."""

    open_type = "test.silent"
    report_violation = None  # type: ignore[assignment]


def hook_registry() -> Registry:
    registry = Registry(parent=DEFAULT_REGISTRY)
    registry.add_unslicer("test.reporting", ReportingUnslicer)
    registry.add_unslicer("test.picky", PickyUnslicer)
    registry.add_unslicer("test.silent", SilentUnslicer)
    return registry


def reporting(*parts: bytes) -> bytes:
    return container("test.reporting", *parts)


# Each way a top-level object can be refused from inside, and the Violation class it gives.
REFUSALS: dict[str, tuple[bytes, type[Violation]]] = {
    "check_token": (container("test.picky", text("s")), KindRefused),
    "receive_child": (container("test.picky", encoded(13)), InvalidValue),
    "finish": (container("test.picky", encoded(1), encoded(2), encoded(3)), InvalidValue),
    "unknown type": (container("no.such.type", encoded(1)), UnknownType),
    "body too large": (token(BYTES, b"x" * 200), BodyTooLarge),
    "too deep": (token(OPEN, b"list") * 10 + token(CLOSE) * 10, TooDeep),
    "too many items": (container("list", *[encoded(i) for i in range(40)]), TooManyItems),
    "bad utf-8": (token(STRING, b"\xff"), InvalidValue),
}
LIMITS = Limits(max_bytes_length=100, max_depth=8, max_items=30)


class ReportViolationTests(SynchronousTestCase):
    """The top-level unslicer of a refused object is told of the refusal and chooses what is delivered."""

    def setUp(self) -> None:
        ReportingUnslicer.reports = []
        ReportingUnslicer.replace = False
        self.addCleanup(setattr, ReportingUnslicer, "replace", False)

    def decode(self, data: bytes, step: int | None = None, limits: Limits = LIMITS) -> list[Any]:
        return feed_all(Decoder(limits, hook_registry()), PREAMBLE + data, step)

    def test_nested_refusals_reported_to_top_level(self) -> None:
        """Every kind of refusal deep inside a top-level object is reported once to its top-level unslicer."""
        for name, (bad, kind) in REFUSALS.items():
            for step in (None, 1, 5):
                ReportingUnslicer.reports = []
                data = reporting(encoded(0), container("list", encoded(1), bad)) + encoded("next")
                results = self.decode(data, step)
                self.assertEqual(len(results), 2, name)
                self.assertIsInstance(results[0], kind, name)
                self.assertEqual(getattr(results[0], "tag", None), "tagged", name)
                self.assertTrue(results[0].where.startswith("[1][1]"), (name, results[0].where))
                self.assertEqual(len(ReportingUnslicer.reports), 1, name)
                self.assertIs(ReportingUnslicer.reports[0][1], results[0], name)
                self.assertEqual(results[1], "next", name)

    def test_replacement_delivered(self) -> None:
        """A hook that returns another Violation has that one delivered, with the where it was given."""
        ReportingUnslicer.replace = True
        results = self.decode(reporting(encoded(1), container("test.picky", encoded(13))))
        self.assertEqual(results, [Reported("reported: invalid-value", "[1]<picky 0>")])

    def test_own_refusal_reported(self) -> None:
        """A refusal by the top-level unslicer itself (here its item cap) is reported to it."""
        results = self.decode(reporting(*[encoded(i) for i in range(31)]))
        self.assertIsInstance(results[0], TooManyItems)
        self.assertEqual(getattr(results[0], "tag", None), "tagged")

    def test_abort_reported(self) -> None:
        """An ABORT inside a top-level object is reported to its top-level unslicer."""
        results = self.decode(token(OPEN, b"test.reporting") + encoded(1) + token(OPEN, b"list") + token(ABORT))
        self.assertIsInstance(results[0], Aborted)
        self.assertEqual(len(ReportingUnslicer.reports), 1)

    def test_over_budget_reported(self) -> None:
        """An object refused by its cost budget is reported to its top-level unslicer."""
        limits = Limits(max_object_items=5)
        data = reporting(container("test.picky", *[encoded(i) for i in range(2)]), *[encoded(i) for i in range(6)])
        results = self.decode(data, limits=limits)
        self.assertIsInstance(results[0], TooManyItems)
        self.assertEqual(len(ReportingUnslicer.reports), 1)
        data = reporting(container("list", encoded(b"x" * 90)))
        results = self.decode(data, limits=Limits(max_object_memory=100))
        self.assertIsInstance(results[0], ObjectTooCostly)
        self.assertEqual(len(ReportingUnslicer.reports), 2)

    def test_only_the_top_level_is_told(self) -> None:
        """A reporting unslicer nested inside another object is not told; the top-level one is, once."""
        data = reporting(reporting(container("test.picky", encoded(13))))
        results = self.decode(data)
        self.assertIsInstance(results[0], InvalidValue)
        (unslicer, violation), *rest = ReportingUnslicer.reports
        self.assertEqual(rest, [])
        self.assertIs(violation, results[0])
        nested = self.decode(container("list", reporting(container("test.picky", encoded(13)))))
        self.assertIsInstance(nested[0], InvalidValue)
        self.assertEqual(len(ReportingUnslicer.reports), 1)

    def test_unslicer_without_the_hook(self) -> None:
        """A top-level unslicer without report_violation has the violation delivered as it is."""
        results = self.decode(container("test.silent", encoded(13)) + encoded(2))
        self.assertEqual(results, [InvalidValue("unlucky", "<picky 0>"), 2])

    def test_failing_hook_keeps_the_violation(self) -> None:
        """A hook that raises (or returns no Violation) leaves the original violation delivered."""
        for bad in (lambda self, v: 1 / 0, lambda self, v: "not a violation"):

            class Broken(ReportingUnslicer):
                report_violation = bad  # type: ignore[assignment]

            registry = hook_registry()
            registry.add_unslicer("test.reporting", Broken)
            results = Decoder(LIMITS, registry).feed(
                PREAMBLE + reporting(encoded(13), text("ok"), token(BYTES, b"x" * 200))
            )
            self.assertIsInstance(results[0], BodyTooLarge)

    def test_not_called_for_protocol_error(self) -> None:
        """A ProtocolError inside a reporting object is raised; the hook is not called."""
        decoder = Decoder(LIMITS, hook_registry())
        self.assertRaises(ProtocolError, decoder.feed, PREAMBLE + token(OPEN, b"test.reporting") + token(CLOSE, 3))
        self.assertEqual(ReportingUnslicer.reports, [])

    def test_intact_objects_not_reported(self) -> None:
        """An object that decodes is never reported."""
        results = self.decode(reporting(encoded(1), container("test.picky", encoded(2))))
        self.assertEqual(results, [[1, [2]]])
        self.assertEqual(ReportingUnslicer.reports, [])


class EmptyUnslicer(PickyUnslicer):
    """Completes nothing: its finish returns NOTHING."""

    open_type = "test.empty"

    def finish(self) -> Any:
        super().finish()
        return NOTHING


class NothingTests(SynchronousTestCase):
    """An object whose finish returns NOTHING is delivered nowhere, yet counts as complete."""

    def registry(self) -> Registry:
        registry = hook_registry()
        registry.add_unslicer("test.empty", EmptyUnslicer)
        return registry

    def test_not_in_results(self) -> None:
        """A top-level NOTHING is not in feed's results; its neighbours are, split anywhere."""
        data = PREAMBLE + encoded(1) + container("test.empty", encoded(2)) + encoded(3)
        for step in (None, 1, 3):
            decoder = Decoder(registry=self.registry())
            self.assertEqual(feed_all(decoder, data, step), [1, 3])
            self.assertTrue(decoder.at_boundary)

    def test_alone_leaves_a_boundary(self) -> None:
        """A stream of NOTHING objects yields no results and ends at a boundary (close accepts it)."""
        decoder = Decoder(registry=self.registry())
        self.assertEqual(decoder.feed(PREAMBLE + container("test.empty") * 3), [])
        self.assertTrue(decoder.at_boundary)
        self.assertEqual(decoder.held_cost, 0)
        decoder.close()

    def test_not_given_to_parent(self) -> None:
        """A nested NOTHING is not passed to its parent's receive_child."""
        data = PREAMBLE + container("list", encoded(1), container("test.empty"), encoded(2))
        self.assertEqual(Decoder(registry=self.registry()).feed(data), [[1, 2]])

    def test_refusal_still_delivered(self) -> None:
        """An unslicer that would return NOTHING but is refused still yields its Violation."""
        data = PREAMBLE + container("test.empty", encoded(13)) + encoded(4)
        results = Decoder(registry=self.registry()).feed(data)
        self.assertEqual(results, [InvalidValue("unlucky", "<picky 0>"), 4])

    def test_nothing_is_one_object(self) -> None:
        """NOTHING is exported from framing and has a readable repr."""
        self.assertIs(framing.NOTHING, NOTHING)
        self.assertEqual(repr(NOTHING), "NOTHING")
