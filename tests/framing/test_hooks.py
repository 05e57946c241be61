"""
Tests for the decoder's optional unslicer hooks: C{report_violation} on the
top-level unslicer of a refused object, streamed bodies (C{begin_body},
C{body_piece}, C{end_body}), the L{NOTHING} result, and unslicer failures
turned into typed Violations.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any, ClassVar

from twisted.trial.unittest import SynchronousTestCase

import framing
from framing import NOTHING, Decoder, Limits, ProtocolError, Violation
from framing._errors import (
    Aborted,
    BodyTooLarge,
    InvalidValue,
    KindRefused,
    ObjectTooCostly,
    TooDeep,
    TooManyItems,
    UnknownType,
)
from framing.slicing._builtin import ListUnslicer, Unslicer
from framing.slicing._registry import DEFAULT_REGISTRY, Registry
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

    def test_own_finish_refusal_reported(self) -> None:
        """A top-level object its own unslicer refuses at its CLOSE (in finish) is reported to that unslicer."""

        class Finicky(ReportingUnslicer):
            def finish(self) -> Any:
                if len(self.items) > 2:
                    raise InvalidValue("at most two")
                return super().finish()

        registry = hook_registry()
        registry.add_unslicer("test.reporting", Finicky)
        for step in (None, 1):
            ReportingUnslicer.reports = []
            data = PREAMBLE + reporting(encoded(1), encoded(2), encoded(3)) + encoded("next")
            results = feed_all(Decoder(LIMITS, registry), data, step)
            self.assertEqual(len(results), 2)
            self.assertIsInstance(results[0], InvalidValue)
            self.assertEqual(getattr(results[0], "tag", None), "tagged")
            self.assertEqual([violation for _, violation in ReportingUnslicer.reports], [results[0]])
            self.assertEqual(results[1], "next")

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

    def test_counted_as_completed(self) -> None:
        """objects_completed counts delivered, refused and NOTHING objects alike, split anywhere."""
        data = PREAMBLE + container("test.empty") + encoded(1) + container("test.empty", encoded(13)) + encoded(2)
        for step in (None, 1, 4):
            decoder = Decoder(registry=self.registry())
            results = feed_all(decoder, data, step)
            self.assertEqual(len(results), 3)
            self.assertEqual(decoder.objects_completed, 4)

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


class PieceUnslicer(Unslicer):
    """
    OPEN "test.pieces", then one BYTES body streamed here piece by piece,
    then any ints; builds C{(body, ints)}.  C{fail} names a hook that raises
    C{error} (on its C{fail_at}-th call for body_piece).
    """

    open_type = "test.pieces"
    log: ClassVar[list[Any]] = []
    fail: ClassVar[str] = ""
    fail_at: ClassVar[int] = 1
    error: ClassVar[Exception] = InvalidValue("refused by the hook")
    stream: ClassVar[bool] = True

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self.pieces: list[bytes] = []
        self.body: bytes | None = None
        self.ints: list[int] = []
        self.calls = 0

    def _maybe_fail(self, hook: str) -> None:
        if self.fail == hook:
            self.calls += 1
            if self.calls >= self.fail_at:
                raise self.error

    def begin_body(self, length: int) -> bool:
        self.log.append(("begin", length))
        self._maybe_fail("begin_body")
        return self.stream

    def body_piece(self, data: bytes | memoryview) -> None:
        self._maybe_fail("body_piece")
        self.log.append(("piece", data))
        self.pieces.append(bytes(data))

    def end_body(self) -> None:
        self._maybe_fail("end_body")
        self.log.append(("end",))
        self.body = b"".join(self.pieces)

    def receive_child(self, obj: Any) -> None:
        if type(obj) is bytes:
            self.log.append(("whole", obj))
            self.body = obj
        else:
            self.ints.append(obj)

    def finish(self) -> Any:
        return (self.body, self.ints)


def pieces_registry() -> Registry:
    registry = hook_registry()
    registry.add_unslicer("test.pieces", PieceUnslicer)
    return registry


def pieces(body: bytes, *ints: int) -> bytes:
    return container("test.pieces", token(BYTES, body), *[encoded(i) for i in ints])


class StreamedBodyTests(SynchronousTestCase):
    """An unslicer with begin_body gets a BYTES body piece by piece, as it arrives, through the decoder."""

    def setUp(self) -> None:
        PieceUnslicer.log = []
        for name in ("fail", "fail_at", "error", "stream"):
            self.addCleanup(setattr, PieceUnslicer, name, getattr(PieceUnslicer, name))

    def decoder(self, **kwargs: Any) -> Decoder:
        return Decoder(registry=pieces_registry(), **kwargs)

    def test_pieces_delivered_as_they_come(self) -> None:
        """Split at every offset, the body's pieces reach the unslicer as each feed brings them; nothing is held."""
        body = bytes(range(256)) * 2
        data = PREAMBLE + pieces(body, 7) + encoded("after")
        start = data.index(body)
        for cut in range(len(data) + 1):
            PieceUnslicer.log = []
            decoder = self.decoder()
            first = decoder.feed(data[:cut])
            got = b"".join(bytes(entry[1]) for entry in PieceUnslicer.log if entry[0] == "piece")
            self.assertEqual(got, body[: max(0, min(cut - start, len(body)))])
            if start <= cut <= start + len(body):
                self.assertEqual(decoder.buffered, 0)
            results = first + decoder.feed(data[cut:])
            self.assertEqual(results, [(body, [7]), "after"], str(cut))
            self.assertEqual(PieceUnslicer.log[0], ("begin", len(body)))
            self.assertEqual(PieceUnslicer.log[-1], ("end",))

    def test_byte_by_byte(self) -> None:
        """Fed one byte at a time, the body arrives in one-byte pieces, each as soon as it is fed."""
        body = b"abcdefghij"
        data = PREAMBLE + pieces(body) + encoded(1)
        decoder = self.decoder()
        results: list[Any] = []
        for i in range(len(data)):
            results += decoder.feed(data[i : i + 1])
        self.assertEqual(results, [(body, []), 1])
        self.assertEqual([bytes(e[1]) for e in PieceUnslicer.log if e[0] == "piece"], [bytes([b]) for b in body])

    def test_pieces_are_not_copied(self) -> None:
        """A piece is the chunk that was fed, or a view into it: the decoder copies nothing."""
        body = b"x" * 5000
        data = PREAMBLE + pieces(body)
        cut = data.index(body) + 1000
        chunks = [data[:cut], data[cut : cut + 2000], data[cut + 2000 :]]
        decoder = self.decoder()
        for chunk in chunks:
            decoder.feed(chunk)
        given = [entry[1] for entry in PieceUnslicer.log if entry[0] == "piece"]
        self.assertEqual(len(given), 3)
        self.assertIs(given[1], chunks[1])
        for piece, chunk in zip(given[::2], chunks[::2], strict=True):
            self.assertIs(piece.obj, chunk)

    def test_empty_body(self) -> None:
        """An empty streamed body is begun and ended with no piece."""
        results = self.decoder().feed(PREAMBLE + pieces(b""))
        self.assertEqual(results, [(b"", [])])
        self.assertEqual(PieceUnslicer.log, [("begin", 0), ("end",)])

    def test_declined_body_arrives_whole(self) -> None:
        """A begin_body that returns false has the body delivered whole to receive_child."""
        PieceUnslicer.stream = False
        results = self.decoder().feed(PREAMBLE + pieces(b"whole", 1))
        self.assertEqual(results, [(b"whole", [1])])
        self.assertEqual(PieceUnslicer.log, [("begin", 5), ("whole", b"whole")])

    def test_constrained_decoder_delivers_whole(self) -> None:
        """Under a constraint every body is checked as a value, so it is delivered whole, not streamed."""
        from framing.slicing._constraints import Constraint

        results = self.decoder(constraint=Constraint()).feed(PREAMBLE + pieces(b"whole"))
        self.assertEqual(results, [(b"whole", [])])
        self.assertEqual(PieceUnslicer.log, [("whole", b"whole")])

    def test_only_the_innermost_streams(self) -> None:
        """A BYTES body goes to the innermost open unslicer: streamed inside test.pieces, whole in a list inside it."""
        data = (
            PREAMBLE
            + container("list", pieces(b"in", 1))
            + container("test.pieces", container("list", token(BYTES, b"x")))
        )
        results = self.decoder().feed(data)
        self.assertEqual(results, [[(b"in", [1])], (None, [[b"x"]])])

    def test_refusals_from_each_hook(self) -> None:
        """A hook's Violation, or its bug as an InvalidValue, refuses the object; the rest of its body is skipped."""
        body = b"y" * 3000
        data = PREAMBLE + reporting(pieces(body, 1)) + encoded("next")
        for hook in ("begin_body", "body_piece", "end_body"):
            for error, kind in ((KindRefused("no"), KindRefused), (RuntimeError("bug"), InvalidValue)):
                for step in (None, 1000, 7):
                    PieceUnslicer.log = []
                    ReportingUnslicer.reports = []
                    PieceUnslicer.fail, PieceUnslicer.fail_at, PieceUnslicer.error = hook, 1, error
                    results = feed_all(self.decoder(), data, step)
                    self.assertEqual(len(results), 2, f"{hook} {step}")
                    self.assertIsInstance(results[0], kind, f"{hook} {step}")
                    self.assertEqual(len(ReportingUnslicer.reports), 1)
                    self.assertEqual(results[1], "next")
                    if kind is InvalidValue:
                        self.assertIn("unslicer failed: RuntimeError: bug", str(results[0]))
                    self.assertNotIn(("end",), PieceUnslicer.log)

    def test_piece_after_refusal_not_delivered(self) -> None:
        """Once a piece refused the object, no more pieces of its body are handed on."""
        PieceUnslicer.fail, PieceUnslicer.fail_at = "body_piece", 2
        data = PREAMBLE + pieces(b"z" * 100)
        decoder = self.decoder()
        results: list[Any] = []
        for i in range(0, len(data), 10):
            results += decoder.feed(data[i : i + 10])
        self.assertIsInstance(results[0], InvalidValue)
        self.assertEqual(len([entry for entry in PieceUnslicer.log if entry[0] == "piece"]), 1)
        self.assertTrue(decoder.at_boundary)

    def test_protocol_error_from_a_hook(self) -> None:
        """A ProtocolError raised by a body hook is raised by feed: the stream is broken."""
        for hook in ("begin_body", "body_piece", "end_body"):
            PieceUnslicer.fail, PieceUnslicer.fail_at, PieceUnslicer.error = hook, 1, ProtocolError("flow control")
            self.assertRaises(ProtocolError, self.decoder().feed, PREAMBLE + pieces(b"abc"))


class GuardedCallTests(SynchronousTestCase):
    """Whatever an unslicer's method raises becomes a typed Violation for its object; a ProtocolError stays one."""

    def test_constructor_violation_keeps_its_class(self) -> None:
        """An unslicer constructor raising a Violation refuses the object with that Violation."""
        registry = Registry(parent=DEFAULT_REGISTRY)

        def factory(limits: Limits) -> Any:
            raise TooManyItems("no more of these today")

        registry.add_unslicer("test.refusing", factory)
        results = Decoder(registry=registry).feed(PREAMBLE + container("list", container("test.refusing")) + encoded(1))
        self.assertEqual(results, [TooManyItems("no more of these today", "[0]"), 1])

    def test_bugs_become_invalid_values(self) -> None:
        """A bug in check_token, receive_child or finish is an InvalidValue naming the exception."""
        for data in (
            container("test.picky", text("s")),
            container("test.picky", encoded(1), encoded(2), encoded(3)),
        ):
            results = Decoder(registry=hook_registry()).feed(PREAMBLE + data)
            self.assertIsInstance(results[0], Violation)

        class Buggy(PickyUnslicer):
            def check_token(self, kind: int, size: int) -> None:
                raise KeyError("check")

            def finish(self) -> Any:
                raise ZeroDivisionError("finish")

        registry = hook_registry()
        registry.add_unslicer("test.picky", Buggy)
        for data, name in (
            (container("test.picky", text("s")), "KeyError"),
            (container("test.picky"), "ZeroDivisionError"),
        ):
            (result,) = Decoder(registry=registry).feed(PREAMBLE + data)
            self.assertIsInstance(result, InvalidValue)
            self.assertIn(f"unslicer failed: {name}", str(result))

    def test_protocol_errors_pass_through(self) -> None:
        """A ProtocolError from receive_child or finish breaks the stream, as the unslicer asked."""

        class Breaking(PickyUnslicer):
            def receive_child(self, obj: Any) -> None:
                raise ProtocolError("receive")

            def finish(self) -> Any:
                raise ProtocolError("finish")

        registry = hook_registry()
        registry.add_unslicer("test.picky", Breaking)
        for data in (container("test.picky", encoded(1)), container("test.picky")):
            self.assertRaises(ProtocolError, Decoder(registry=registry).feed, PREAMBLE + data)


class LifetimeTests(SynchronousTestCase):
    """A decoder holds no cycle of its own parts beyond its attributes, so a closed connection frees it at once."""

    def test_freed_by_reference_counting(self) -> None:
        """Once its attributes are cleared (as a closed connection does), a decoder in any state is freed without gc."""
        from framing.slicing._constraints import Constraint

        streaming = PREAMBLE + pieces(b"x" * 100)[:-60]
        discarding = PREAMBLE + reporting(encoded(13), token(BYTES, b"x" * 200), container("list"))[:-3]
        building = PREAMBLE + container("list", container("test.picky", encoded(1)))[:-2]
        gc.collect()
        gc.disable()
        self.addCleanup(gc.enable)
        for data, constraint in ((streaming, None), (discarding, None), (building, None), (building, Constraint())):
            decoder = Decoder(LIMITS, pieces_registry(), constraint=constraint)
            decoder.feed(data)
            self.assertFalse(decoder.at_boundary)
            ref = weakref.ref(decoder)
            vars(decoder).clear()
            del decoder
            self.assertIsNone(ref(), repr(data))
