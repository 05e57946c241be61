"""Which codec core runs, and a type of your own that the compiled core builds without its unslicer."""

from __future__ import annotations

from typing import Any

from zope.interface import implementer

import framing
from framing import ISlicer, Limits, Registry, Violation, dumps, loads
from framing.slicing import DEFAULT_REGISTRY, BudgetedUnslicer

# "compiled" when the C extension was built at install time, else "pure";
# CHUNKWIRE_PURE=1 in the environment forces "pure".
print("core:", framing.implementation)


class Span(tuple):  # type: ignore[type-arg]
    """Two ints, start <= end."""


def buildSpan(items: list[Any]) -> Span | None:
    """What SpanUnslicer finishes with, given these children; None wherever it would refuse them."""
    if len(items) == 2 and type(items[0]) is int and type(items[1]) is int and items[0] <= items[1]:
        return Span(items)
    return None


class SpanUnslicer(BudgetedUnslicer):
    """The reference: checks each child as it arrives, and says why it refuses."""

    open_type = "example.Span"
    record_builder = staticmethod(buildSpan)  # the compiled core builds good spans with this

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self.items: list[int] = []

    def receive_child(self, obj: Any) -> None:
        if len(self.items) >= self.cap:
            self.full()  # (BudgetedUnslicer's bookkeeping: the decoder charges the items so far)
        if len(self.items) >= 2:
            raise Violation("a span has two ends")
        if type(obj) is not int:
            raise Violation(f"a span's ends are ints, not {type(obj).__name__}")
        self.items.append(obj)

    def finish(self) -> Span:
        if len(self.items) != 2 or self.items[0] > self.items[1]:
            raise Violation(f"not a span: {self.items}")
        return Span(self.items)

    def child_where(self) -> str:
        return f"<{len(self.items)}>"


@implementer(ISlicer)
class SpanSlicer:
    record_name = "example.Span"  # slice() is exactly this write_container: the compiled core writes it

    def slice(self, obj: Any, encoder: Any) -> None:
        encoder.write_container("example.Span", obj, obj)


registry = Registry(DEFAULT_REGISTRY)
registry.add_slicer(Span, SpanSlicer())
registry.add_unslicer("example.Span", SpanUnslicer)

print("decoded:", loads(dumps([Span((1, 5)), Span((7, 7))], registry), registry=registry))
try:
    loads(dumps(Span((9, 2)), registry), registry=registry)
except Violation as refusal:
    print("refused:", refusal)
