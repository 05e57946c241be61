"""
A whole body is collected by the scanner's one L{WholeBody} (the pure one,
or the compiled one with the same behaviour): each byte copied once, its
buffer doubling up to the announced length, and a chunk in the middle of a
long body taken in one call, before the scanner (and, from a decoder, before
the scanner's C{feed}) is entered at all.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any
from unittest import skipIf

from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, ProtocolError, dumps
from framing._errors import TruncatedStream
from framing._limits import MiB
from framing._scanner import _FIRST_CAPACITY, WholeBody
from framing.wire import PREAMBLE

from .test_cores import COMPILED, core

Factory = Callable[[], Any]


def bodies() -> list[tuple[str, Factory]]:
    """Each implementation of the whole body this process can run."""
    found: list[tuple[str, Factory]] = [("pure", WholeBody)]
    if COMPILED is not None:
        found.append(("compiled", COMPILED.WholeBody))
    return found


class WholeBodyTests(SynchronousTestCase):
    """Both whole bodies collect, refuse and empty alike."""

    def test_collects(self) -> None:
        """Takes and writes of bytes and views add up to the body, which value() hands out once, emptied after."""
        for name, make in bodies():
            body = make()
            body.start(10)
            self.assertTrue(body.take(b"abc"), name)
            body.write(memoryview(b"xdefg")[1:])
            self.assertEqual((body.held(), body.remaining), (7, 3), name)
            body.write(b"hij")
            self.assertEqual(body.value(), b"abcdefghij", name)
            self.assertEqual((body.held(), body.remaining, body.capacity), (0, 0, 0), name)

    def test_take_refuses_the_end(self) -> None:
        """take() takes nothing from a chunk that reaches or passes the body's end (the scanner reads that one)."""
        for name, make in bodies():
            body = make()
            body.start(8)
            self.assertTrue(body.take(b"1234"), name)
            self.assertFalse(body.take(b"5678"), name)
            self.assertFalse(body.take(b"56789"), name)
            self.assertEqual((body.held(), body.remaining), (4, 4), name)

    def test_take_between_bodies(self) -> None:
        """Between bodies (none started, or after value()), take() takes nothing, even an empty chunk."""
        for name, make in bodies():
            body = make()
            self.assertFalse(body.take(b""), name)
            self.assertFalse(body.take(b"x"), name)
            body.start(3)
            body.write(b"abc")
            body.value()
            self.assertFalse(body.take(b"x"), name)

    def test_abandon(self) -> None:
        """After abandon() (the stream broke), take() takes nothing more of the body."""
        for name, make in bodies():
            body = make()
            body.start(100)
            body.take(b"abc")
            body.abandon()
            self.assertFalse(body.take(b"def"), name)
            self.assertEqual(body.held(), 3, name)

    def test_drop(self) -> None:
        """After drop() (its object refused), nothing of the body is held, and take() takes nothing more of it."""
        for name, make in bodies():
            body = make()
            body.start(1 << 20)
            body.take(b"a" * 200_000)
            body.drop()
            self.assertEqual((body.held(), body.remaining, body.capacity), (0, 0, 0), name)
            self.assertFalse(body.take(b"def"), name)
            body.start(3)
            body.write(b"xyz")
            self.assertEqual(body.value(), b"xyz", name)

    def test_empty_body(self) -> None:
        """A body of no bytes is b""."""
        for name, make in bodies():
            body = make()
            body.start(0)
            body.write(b"")
            self.assertEqual(body.value(), b"", name)

    @skipIf(COMPILED is None, "the compiled core is not built (or CHUNKWIRE_PURE is set)")
    def test_compiled_write_bounded(self) -> None:
        """The compiled body refuses a write past the announced length (it never writes past its buffer)."""
        body = COMPILED.WholeBody()
        body.start(4)
        body.write(b"ab")
        with self.assertRaises(ValueError):
            body.write(b"cde")
        self.assertEqual((body.held(), body.remaining), (2, 2))
        with self.assertRaises(ValueError):
            body.start(-1)

    def test_capacity_follows_arrivals(self) -> None:
        """Fed 4 KiB at a time, the buffer stays within twice the bytes held (or its first 64 KiB) and ends exact."""
        length = 3 * MiB + 5
        data = bytes(range(256)) * (length // 256) + b"x" * (length % 256)
        for name, make in bodies():
            body = make()
            body.start(length)
            capacities = set()
            for at in range(0, length, 4096):
                body.write(data[at : at + 4096])
                capacities.add(body.capacity)
                self.assertLessEqual(body.capacity, max(2 * body.held(), _FIRST_CAPACITY), name)
            self.assertEqual(body.capacity, length, name)
            self.assertEqual(body.value(), data, name)
            self.assertLessEqual(len(capacities), 8, name)  # 64 KiB doubling to 2 MiB, then the length

    @skipIf(COMPILED is None, "the compiled core is not built (or CHUNKWIRE_PURE is set)")
    def test_same_as_pure(self) -> None:
        """Random bodies in random takes and writes: the compiled body's value, held and capacity are the pure one's."""
        rng = random.Random(17)
        for _ in range(300):
            length = rng.choice([0, 1, 5, 4096, _FIRST_CAPACITY - 1, _FIRST_CAPACITY + 1, 300_000])
            data = rng.randbytes(length)
            pure, compiled = WholeBody(), COMPILED.WholeBody()
            pure.start(length)
            compiled.start(length)
            at = 0
            while at < length:
                piece = data[at : at + rng.choice([1, 7, 4096, 70_000])]
                took = pure.take(piece)
                self.assertEqual(compiled.take(piece), took)
                if not took:
                    piece = piece[: pure.remaining]
                    pure.write(piece)
                    compiled.write(memoryview(piece))
                at += len(piece)
                self.assertEqual(
                    (compiled.held(), compiled.remaining, compiled.capacity),
                    (pure.held(), pure.remaining, pure.capacity),
                )
            self.assertEqual(compiled.value(), pure.value())


def counted(feed: Callable[[bytes], None], calls: list[int]) -> Callable[[bytes], None]:
    """C{feed}, noting the size of each chunk it is called with in C{calls}."""

    def wrapper(data: bytes) -> None:
        calls.append(len(data))
        feed(data)

    return wrapper


class DecoderFastPathTests(SynchronousTestCase):
    """A decoder hands a chunk in the middle of a long body straight to the body, on both cores."""

    def cores(self) -> list[Any]:
        return [None] if COMPILED is None else [None, COMPILED]

    def test_middle_skips_the_scanner(self) -> None:
        """Chunks wholly inside a long body never enter the scanner's feed; the body arrives whole and exact."""
        payload = random.Random(3).randbytes(300_000)
        wire = dumps(payload)
        for module in self.cores():
            with core(module):
                decoder = Decoder()
            scanner = decoder._scanner
            calls: list[int] = []
            scanner.feed = counted(scanner.feed, calls)  # type: ignore[method-assign]
            results = []
            for at in range(0, len(wire), 4096):
                results += decoder.feed(wire[at : at + 4096])
            self.assertEqual(results, [payload])
            # the chunk with the header and the body's start, and the one that ends it
            self.assertEqual(len(calls), 2, module)

    def test_truncated_then_fed(self) -> None:
        """After close() inside a long body, a later chunk is refused with the same error, not taken into the body."""
        wire = dumps(b"x" * 100_000)
        for module in self.cores():
            with core(module):
                decoder = Decoder()
            decoder.feed(wire[:50_000])
            with self.assertRaises(TruncatedStream) as first:
                decoder.close()
            with self.assertRaises(ProtocolError) as again:
                decoder.feed(b"x" * 1000)
            self.assertIs(again.exception, first.exception)

    def test_boundary_asks_no_body(self) -> None:
        """
        A read that begins between top-level objects does not ask the whole
        body (nothing can be in progress); one inside a long body does, and
        takes it.  The stream decodes the same either way, on both cores.
        """
        payload = random.Random(5).randbytes(100_000)
        wire = dumps(1) + dumps(payload)[len(PREAMBLE) :] + dumps("end")[len(PREAMBLE) :]
        small = len(dumps(1))
        chunks = [wire[:small], *(wire[at : at + 4096] for at in range(small, len(wire), 4096))]
        for module in self.cores():
            with core(module):
                decoder = Decoder()
            asked: list[tuple[bool, bool]] = []  # (at a boundary before the read, what take_body answered)
            take = decoder._take_body

            def counting(data: bytes, take: Any = take, asked: Any = asked, decoder: Any = decoder) -> bool:
                taken: bool = take(data)
                asked.append((decoder.at_boundary, taken))
                return taken

            decoder._take_body = counting
            results = []
            for chunk in chunks:
                boundary = decoder.at_boundary
                before = len(asked)
                results += decoder.feed(chunk)
                if boundary:
                    self.assertEqual(len(asked), before, module)
            self.assertEqual(results, [1, payload, "end"], module)
            self.assertTrue(any(taken for _, taken in asked), module)  # (the middle chunks, in one call each)
            self.assertTrue(decoder.at_boundary, module)
