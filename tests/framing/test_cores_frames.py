"""
A frame (an open type whose unslicer declares C{frame_values} and
C{begin_frame}: a bulk data frame) whose headers lie whole in one read is
taken in one call (the compiled reader's C{frame}, or the pure core's
L{framing._scanner.FrameHeaders}) with the results of its tokens read one
by one: the same pieces handed on (the same bytes, as the same kind of
object), the same objects, Violations and errors, the same bytes held and
charged to the connection's ledger after every read, on both cores,
whatever the reads' boundaries; oversize, malformed and refused frames
included.

The fuzz campaign's length comes from the environment, as in
L{tests.framing.test_cores}:

    CHUNKWIRE_CORES_FUZZ_RUNS=100000 pytest tests/framing/test_cores_frames.py -k mutations
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from types import ModuleType
from typing import Any

from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from framing import Decoder, Limits, Registry, dumps
from framing._decoder import DECODING
from framing._encoder import open_token
from framing._errors import InvalidValue, KindRefused, ProtocolError, TooManyItems
from framing._ledger import Ledger
from framing._scanner import MAX_FRAME_TYPES, MAX_FRAME_VALUES, FrameHeaders
from framing.bulk._errors import FlowControlError
from framing.bulk._wire import DATA_OPEN_TYPE, DataUnslicer, dataFramePieces
from framing.slicing._builtin import Unslicer
from framing.slicing._interfaces import IStreamsBodies
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import ABORT, BYTES, CLOSE, INT, NEG, OPEN, PING, PREAMBLE, STRING, encode_header

from .test_cores import COMPILED, canonical, core, cut, needs_compiled, outcome

FUZZ_RUNS = int(os.environ.get("CHUNKWIRE_CORES_FUZZ_RUNS", "2000")) // 4
BLOB = "tests.blob"


class Recorder:
    """
    What a decoder hands on: each data frame's start and each piece of a
    body (its offset, its type's name and its bytes), in order; C{taken}
    counts the frames taken at once (C{begin_frame}).
    """

    def __init__(self, fail: Callable[[int], BaseException | None] = lambda count: None) -> None:
        self.log: list[Any] = []
        self.taken = 0
        self._fail = fail
        self._starts = 0

    def starting(self, streamId: int, offset: int, length: int) -> Any:
        self._starts += 1
        self.log.append(("start", streamId, offset, length))
        failure = self._fail(self._starts)
        if failure is not None:
            raise failure
        return None if streamId == 13 else self.piece

    def piece(self, offset: int, data: Any) -> None:
        self.log.append(("piece", offset, type(data).__name__, bytes(data)))

    def take(self) -> list[Any]:
        taken, self.log = self.log, []
        return taken


class TakenData(DataUnslicer):
    """A bulk data frame taken at once (counted)."""

    def __init__(self, limits: Limits, recorder: Recorder) -> None:
        super().__init__(limits, recorder.starting)
        self._recorder = recorder

    def begin_frame(self, values: tuple[int, ...], length: int) -> bool:
        self._recorder.taken += 1
        return super().begin_frame(values, length)


class TokenData(DataUnslicer):
    """The same frames, read token by token (not declared a frame): the reference."""

    frame_values = None  # type: ignore[assignment]


@implementer(IStreamsBodies)
class Blob(Unslicer):
    """
    OPEN C{"tests.blob"}, three INTs, a BYTES body, CLOSE: finishes as
    C{("blob", values, body)}.  Its body is streamed unless the first value
    is 0 (then taken whole); a value of 13 is refused, a first value of 7
    refuses the body at its header, one of 8 breaks the connection there.
    """

    open_type = BLOB
    frame_values: int | None = 3

    def __init__(self, limits: Limits, recorder: Recorder) -> None:
        super().__init__(limits)
        self.values: list[int] = []
        self.pieces: list[bytes] = []
        self.done = False
        self._recorder = recorder

    def check_token(self, kind: int, size: int) -> None:
        if kind != BYTES or len(self.values) != 3 or self.done:
            raise KindRefused("a blob's body comes after its three values")

    def receive_child(self, obj: Any) -> None:
        if len(self.values) < 3:
            if type(obj) is not int or obj == 13:
                raise InvalidValue(f"bad blob value {obj!r}")
            self.values.append(obj)
        elif type(obj) is bytes and not self.done:
            self.pieces.append(obj)
            self.done = True
        else:
            raise TooManyItems("a blob has four parts")

    def begin_body(self, length: int) -> bool:
        if self.values[0] == 7:
            raise InvalidValue("a blob of kind 7 has no body")
        if self.values[0] == 8:
            raise FlowControlError("a blob of kind 8 breaks the connection")
        return self.values[0] != 0

    def body_piece(self, data: Any) -> None:
        self._recorder.log.append(("blob piece", type(data).__name__, bytes(data)))
        self.pieces.append(bytes(data))

    def end_body(self) -> None:
        self.done = True

    def begin_frame(self, values: tuple[int, ...], length: int) -> bool:
        """As its tokens: each value received, the body's header checked, then begun."""
        self._recorder.taken += 1
        for value in values:
            self.receive_child(value)
        self.check_token(BYTES, length)
        return self.begin_body(length)

    def finish(self) -> Any:
        if not self.done:
            raise InvalidValue("a blob ended without its body")
        return ("blob", tuple(self.values), b"".join(self.pieces))

    def child_where(self) -> str:
        return f"<blob {len(self.values)}>"


class TokenBlob(Blob):
    frame_values = None


def registry(
    frames: bool,
    recorder: Recorder,
    factory_fails: Callable[[int], BaseException | None] | None = None,
    mixed: bool = False,
) -> Registry:
    """
    The registry of a run: the frame types taken at once (C{frames}) or
    read token by token; C{mixed}: every other data frame's unslicer is
    one read token by token all the same.
    """
    result = Registry(DEFAULT_REGISTRY)
    made = [0]

    def data(limits: Limits) -> DataUnslicer:
        made[0] += 1
        failure = factory_fails(made[0]) if factory_fails is not None else None
        if failure is not None:
            raise failure
        if frames and not (mixed and made[0] % 2 == 0):
            return TakenData(limits, recorder)
        return TokenData(limits, recorder.starting)

    result.add_unslicer(DATA_OPEN_TYPE, data)
    result.add_unslicer(BLOB, lambda limits: (Blob if frames else TokenBlob)(limits, recorder))
    return result


def frame(streamId: int, offset: int, body: bytes) -> bytes:
    return b"".join(dataFramePieces(streamId, offset, body))


def blob(values: tuple[int, ...], body: bytes) -> bytes:
    headers = b"".join(encode_header(INT, value) for value in values)
    return open_token(BLOB) + headers + encode_header(BYTES, len(body)) + body + encode_header(CLOSE, 0)


def body(length: int, seed: int = 0) -> bytes:
    return bytes((seed + i * 7) % 256 for i in range(length))


def stream() -> bytes:
    """Frames of both types (the first of each read token by token, learning it), between other objects."""
    return PREAMBLE + b"".join(
        [
            frame(3, 0, body(30)),
            frame(3, 30, body(25, 1)),
            dumps([1, "x", b"y"])[len(PREAMBLE) :],
            frame(300, 2**40, body(20, 2)),
            frame(3, 55, b""),
            bytes([(PING << 4) | 5]),
            frame(13, 0, body(9, 3)),
            blob((1, 2, 3), body(10, 4)),
            blob((0, 5, 2**33), body(12, 5)),
            blob((2, 3, 4), b""),
            frame(3, 55, body(40, 6)),
        ]
    )


Run = tuple[list[Any], int]


def run(
    module: ModuleType | None,
    frames: bool,
    chunks: list[bytes],
    limits: Limits | None = None,
    budget: int | None = None,
    fail: Callable[[int], BaseException | None] = lambda count: None,
    factory_fails: Callable[[int], BaseException | None] | None = None,
    mixed: bool = False,
) -> Run:
    """
    Everything a decoder on C{module}'s core says about C{chunks} fed one
    by one, then closed: each feed's results or error, the pieces handed on,
    what it holds and has charged to its ledger (of C{budget}) after it;
    and how many frames were taken at once.
    """
    recorder = Recorder(fail)
    with core(module):
        decoder = Decoder(limits, registry(frames, recorder, factory_fails, mixed))
    ledger = Ledger(budget)
    decoder.charge_to(ledger)
    events: list[Any] = []
    for chunk in chunks:
        step = outcome(lambda chunk=chunk: decoder.feed(chunk))
        pings = [canonical(event) for event in decoder.control_events]
        held = (decoder.buffered, decoder.charged, ledger.holding(DECODING), decoder.held_cost)
        events.append((step, pings, decoder.at_boundary, held, recorder.take()))
        if step[0] == "raised":
            break
    else:
        events.append(outcome(decoder.close))
    events.append((decoder.objects_completed, decoder.at_boundary, decoder.buffered, decoder.held_cost))
    return events, recorder.taken


def _unheld(events: list[Any]) -> list[Any]:
    """A run's events without what was held and charged after each read, and at the end."""
    *steps, end = events
    return [(*step[:3], step[4]) if type(step) is tuple and len(step) == 5 else step for step in steps] + [end[:2]]


class FramesTestCase(SynchronousTestCase):
    def assertSameRuns(self, chunks: list[bytes], **options: Any) -> list[Run]:
        """
        C{chunks} give the same events with frames taken at once and read
        token by token, on each core (what is held and charged after each
        read included), and on both cores alike (but for what each holds
        between reads: the compiled core may hold a top-level object's
        start for the next read, see C{framing._scanner.HELD_TAIL_LIMIT});
        return the runs taken at once (pure, then compiled when built).
        """
        runs = []
        for module in (None, COMPILED) if COMPILED is not None else (None,):
            reference = run(module, False, chunks, **options)
            self.assertEqual(reference[1], 0)
            taken = run(module, True, chunks, **options)
            self.assertEqual(taken[0], reference[0], (module, chunks))
            runs.append(taken)
        if len(runs) == 2:
            self.assertEqual(_unheld(runs[0][0]), _unheld(runs[1][0]), chunks)
        return runs


class SplitTests(FramesTestCase):
    """Frames split across reads anywhere."""

    def test_split_at_every_byte(self) -> None:
        """Cut in two at every byte, the stream gives the same events either way; frames are taken at once."""
        data = stream()
        taken = set()
        for at in range(len(data) + 1):
            runs = self.assertSameRuns([data[:at], data[at:]])
            taken |= {count for _, count in runs}
        # The first frame of each type teaches it, the 7 others are taken at once, but for one whose headers
        # the cut falls in (which the compiled core may still take whole, holding its start for the next read).
        self.assertEqual(taken, {6, 7})

    def test_byte_at_a_time(self) -> None:
        """Fed one byte at a time, no frame lies whole in a read: every one is read token by token, as before."""
        data = stream()
        runs = self.assertSameRuns([data[i : i + 1] for i in range(len(data))])
        self.assertEqual({count for _, count in runs}, {0})

    def test_whole(self) -> None:
        """In one read, every frame after the first of its type is taken at once; a nested one is not."""
        nested = open_token("list") + frame(3, 0, b"abc") + encode_header(CLOSE, 0)
        runs = self.assertSameRuns([stream() + nested + frame(3, 95, b"z")])
        self.assertEqual({count for _, count in runs}, {8})

    def test_random_reads(self) -> None:
        """Cut at random points, several times over."""
        rng = random.Random(5)
        data = stream() * 1 + stream()[len(PREAMBLE) :]
        for _ in range(200):
            self.assertSameRuns(cut(data, [rng.randrange(len(data) + 1) for _ in range(rng.randrange(1, 8))]))

    @needs_compiled
    def test_compiled_finder(self) -> None:
        """On the compiled core the headers are found by the reader (one C call); on the pure core by FrameHeaders."""
        recorder = Recorder()
        for module, finder in ((COMPILED, "Reader"), (None, "FrameHeaders")):
            with core(module):
                decoder = Decoder(registry=registry(True, recorder))
            decoder.feed(stream())
            self.assertEqual(type(decoder._scanner._frame_finder).__name__, finder)

    def test_pieces_not_copied(self) -> None:
        """A frame taken at once hands its body on as the reads it came in: each read, or a view into it."""
        recorder = Recorder()
        decoder = Decoder(registry=registry(True, recorder))
        data = PREAMBLE + frame(3, 0, b"first") + frame(3, 5, body(5000))
        start = data.index(body(5000))
        chunks = [data[: start + 1000], data[start + 1000 : start + 3000], data[start + 3000 :]]
        seen: list[Any] = []
        recorder.piece = lambda offset, piece: seen.append(piece)  # type: ignore[method-assign]
        for chunk in chunks:
            decoder.feed(chunk)
        self.assertEqual(recorder.taken, 1)
        self.assertEqual(len(seen), 4)  # the first frame's body, then the second's in three pieces
        seen = seen[1:]
        self.assertIs(seen[1], chunks[1])
        self.assertIs(seen[0].obj, chunks[0])
        self.assertIs(seen[2].obj, chunks[2])


def malformed() -> dict[str, bytes]:
    """Streams whose third frame (after one taught and one taken at once) is broken, then a good frame."""
    opening = open_token(DATA_OPEN_TYPE)
    good = PREAMBLE + frame(3, 0, b"abc") + frame(3, 3, b"defg")
    after = frame(3, 7, b"hij")
    ints = encode_header(INT, 3) + encode_header(INT, 7)
    return {
        name: good + bad + after
        for name, bad in {
            "body too long": frame(3, 7, body(40)),
            "header too wide": frame(3, 2**40, b"x"),
            "non-canonical INT": opening + bytes([0x0C, 3]) + encode_header(INT, 7) + bytes([0x21]) + b"x\x80",
            "non-canonical length": opening + ints + bytes([0x2C, 1]) + b"x\x80",
            "NEG offset": opening + encode_header(INT, 3) + encode_header(NEG, 6) + encode_header(BYTES, 1) + b"x\x80",
            "STRING body": opening + ints + encode_header(STRING, 1) + b"x\x80",
            "a value missing": opening + encode_header(INT, 3) + encode_header(BYTES, 1) + b"x\x80",
            "a value too many": opening + ints + encode_header(INT, 1) + encode_header(BYTES, 1) + b"x\x80",
            "INT after the body": opening + ints + encode_header(BYTES, 1) + b"x" + encode_header(INT, 1) + b"\x80",
            "ABORT for CLOSE": opening + ints + encode_header(BYTES, 1) + b"x" + encode_header(ABORT, 0),
            "PING between": opening + encode_header(INT, 3) + bytes([0xC1]) + encode_header(INT, 7) + b"\x21x\x80",
            "reserved kind": opening + encode_header(INT, 3) + bytes([0xE0]) + b"\x21x\x80",
            "CLOSE with a value": opening + ints + encode_header(BYTES, 1) + b"x" + encode_header(CLOSE, 1),
            "another name": open_token("bulk.datA") + ints + encode_header(BYTES, 1) + b"x\x80",
            "a longer name": open_token("bulk.data2") + ints + encode_header(BYTES, 1) + b"x\x80",
            "OPEN inside": opening + ints + encode_header(OPEN, 4) + b"list\x80\x80",
            "cut short": opening + ints + encode_header(BYTES, 5) + b"xy",
        }.items()
    }


class MalformedTests(FramesTestCase):
    """Frames that break a limit or the grammar, anywhere in them and split anywhere."""

    LIMITS = Limits(max_bytes_length=32, max_header_length=5)

    def test_each(self) -> None:
        """Each broken frame, cut in two at every byte, is refused (or breaks the stream) as its tokens would."""
        for name, data in malformed().items():
            for at in range(len(data) + 1):
                self.assertSameRuns([data[:at], data[at:]], limits=self.LIMITS)
            events = run(None, True, [data], limits=self.LIMITS)[0]
            broken = events[0][0][0] == "raised" or events[0][0][1][1:] or events[1][0] == "raised"
            broken = bool(broken)
            self.assertEqual(broken, name != "PING between", name)  # (a PING may come between any two tokens)

    def test_body_too_long_refused(self) -> None:
        """A frame over the body limit is refused at its header (its body skipped), and the next frame arrives."""
        events, taken = run(COMPILED, True, [malformed()["body too long"]], limits=self.LIMITS)
        results = events[0][0][1]
        self.assertEqual([result[0] for result in results[1:]], ["BodyTooLarge"])
        self.assertEqual([entry[:3] for entry in events[0][4] if entry[0] == "start"][-1], ("start", 3, 7))
        self.assertEqual(taken, 2)

    def test_mutations(self) -> None:
        """Random mutations of a stream of frames, in random reads, under random small limits (FUZZ_RUNS/4 long)."""
        rng = random.Random(int(os.environ.get("CHUNKWIRE_CORES_SEED", "23")))
        seeds = [stream(), *malformed().values()]
        choices = [None, self.LIMITS, Limits(max_object_items=2), Limits(max_object_memory=200), Limits(max_depth=1)]
        for _ in range(FUZZ_RUNS):
            data = bytearray(rng.choice(seeds))
            for _ in range(rng.randrange(1, 4)):
                at = rng.randrange(len(PREAMBLE), len(data) + 1)
                how = rng.randrange(4)
                if how == 0 and at < len(data):
                    data[at] = rng.randrange(256)
                elif how == 1:
                    del data[at : at + rng.randrange(1, 5)]
                elif how == 2:
                    data[at:at] = rng.randbytes(rng.randrange(1, 4))
                elif rng.random() < 0.2:
                    del data[at:]
            chunks = cut(bytes(data), [rng.randrange(len(data) + 1) for _ in range(rng.randrange(4))])
            self.assertSameRuns(chunks, limits=rng.choice(choices))


class BudgetTests(FramesTestCase):
    """What a frame costs its object's budget and its connection's ledger."""

    def test_object_budget(self) -> None:
        """A frame over the object budget's items or memory is never taken at once: its tokens word the refusal."""
        data = stream()
        for limits in (Limits(max_object_items=1), Limits(max_object_memory=100), Limits(max_object_memory=175)):
            for at in range(0, len(data) + 1, 7):
                runs = self.assertSameRuns([data[:at], data[at:]], limits=limits)
                self.assertEqual({count for _, count in runs}, {0})
        refused = run(None, True, [data], limits=Limits(max_object_items=1))[0][0][0][1]
        self.assertIn("TooManyItems", {result[0] for result in refused})

    def test_object_budget_fits(self) -> None:
        """At exactly its cost (64 bytes at the OPEN, 56 per value), a frame is taken at once."""
        runs = self.assertSameRuns([stream()], limits=Limits(max_object_memory=64 + 3 * 56, max_object_items=3))
        self.assertEqual({count for _, count in runs}, {7})

    def test_held_across_reads(self) -> None:
        """
        A body held across reads is charged by the bytes actually held:
        the frame's estimate and its headers, never the body handed on;
        after every read, as its tokens would be charged.
        """
        data = PREAMBLE + frame(3, 0, b"a") + frame(3, 1, body(3000)) + frame(3, 3001, b"b")
        points = list(range(0, len(data), 97))
        runs = self.assertSameRuns(cut(data, points))
        charged = [step[3][1] for step in runs[0][0][:-2]]
        # The estimate (64 at the OPEN, 56 per value) and what the read that began it held besides bodies.
        self.assertGreaterEqual(min(charged[1:-1]), 64 + 2 * 56)
        self.assertLess(max(charged), 64 + 2 * 56 + 64)
        self.assertEqual(charged[-1], 0)

    def test_ledger_room(self) -> None:
        """A ledger too small for a frame's estimate refuses it while it arrives (its body skipped), both ways."""
        data = PREAMBLE + frame(3, 0, b"a") + frame(3, 1, body(3000)) + frame(3, 3001, b"b")
        for budget in (0, 150, 180, 200, 4000):
            for at in range(0, len(data) + 1, 53):
                self.assertSameRuns([data[:at], data[at : at + 1500], data[at + 1500 :]], budget=budget)


class RefusalTests(FramesTestCase):
    """What a frame's unslicer, its stream or its factory refuses."""

    def test_target_refuses(self) -> None:
        """A start that fails (a bug) refuses the frame; one that breaks flow control breaks the stream there."""
        data = stream()
        for failure in (ValueError, InvalidValue, FlowControlError):
            for nth in (1, 2, 3):

                def fail(count: int, nth: int = nth, failure: type[Exception] = failure) -> BaseException | None:
                    return failure("refused") if count == nth else None  # (a new one: a refusal fills in its where)

                for at in range(0, len(data) + 1, 3):
                    self.assertSameRuns([data[:at], data[at:]], fail=fail)

    def test_blob_refusals(self) -> None:
        """A value refused, a body refused at its header, or a ProtocolError there: as their tokens."""
        base = PREAMBLE + blob((1, 1, 1), b"ab")
        for values in ((1, 13, 2), (7, 1, 1), (8, 1, 1), (0, 1, 13)):
            data = base + blob(values, b"cd") + blob((1, 2, 3), b"e")
            for at in range(len(data) + 1):
                self.assertSameRuns([data[:at], data[at:]])

    def test_factory_fails(self) -> None:
        """A factory that raises refuses the frame at its OPEN; a ProtocolError from it breaks the stream there."""
        data = stream()
        for failure in (ValueError, ProtocolError):

            def fails(count: int, failure: type[Exception] = failure) -> BaseException | None:
                return failure("broken") if count == 2 else None

            for at in range(0, len(data) + 1, 5):
                self.assertSameRuns([data[:at], data[at:]], factory_fails=fails)

    def test_factory_changes_class(self) -> None:
        """A factory that makes an unslicer of another class than the one learnt: its tokens are taken one by one."""
        data = stream()
        for at in range(len(data) + 1):
            runs = self.assertSameRuns([data[:at], data[at:]], mixed=True, limits=Limits(max_object_memory=200))
            self.assertLess(max(count for _, count in runs), 7)

    def test_violation_where(self) -> None:
        """A frame refused by its unslicer names where, as its tokens would."""
        events, taken = run(COMPILED, True, [PREAMBLE + blob((1, 1, 1), b"") + blob((1, 13, 1), b"x")])
        refused = [result for result in events[0][0][1] if result[0] == "InvalidValue"]
        self.assertEqual(len(refused), 1)
        self.assertEqual(refused[0][2], "<blob 1>")
        self.assertEqual(taken, 1)


class LearningTests(FramesTestCase):
    """Which frame types a decoder learns to take at once."""

    def test_reconfigure(self) -> None:
        """A decoder reconfigured between objects forgets its frame types and learns them again."""
        for module in (None, COMPILED) if COMPILED is not None else (None,):
            recorder = Recorder()
            with core(module):
                decoder = Decoder(registry=registry(True, recorder))
            decoder.feed(PREAMBLE + frame(3, 0, b"a") + frame(3, 1, b"b"))
            decoder.reconfigure(Limits(max_bytes_length=10))
            results = decoder.feed(frame(3, 2, b"c") + frame(3, 3, b"d") + frame(3, 4, body(11)))
            self.assertEqual(recorder.taken, 2)
            self.assertEqual([type(result).__name__ for result in results], ["BodyTooLarge"])

    def test_finders_agree(self) -> None:
        """FrameHeaders and the compiled reader's frame find the same frames in any bytes, under any limits."""
        rng = random.Random(11)
        seeds = [stream(), *malformed().values()]
        names = [(DATA_OPEN_TYPE.encode(), 2), (BLOB.encode(), 3), (b"", 0), (b"list", 1)]
        for round_ in range(300):
            limits = rng.choice([Limits(), Limits(max_bytes_length=20, max_header_length=3, max_open_name_length=8)])
            pure = FrameHeaders(limits)
            compiled = _compiled_finder(limits)
            for name, count in rng.sample(names, rng.randrange(len(names) + 1)):
                self.assertEqual(pure.add_frame(name, count), compiled.add_frame(name, count) if compiled else True)
            data = bytearray(rng.choice(seeds))
            for _ in range(rng.randrange(3)):
                at = rng.randrange(len(data))
                data[at] = rng.randrange(256)
            buf = bytes(data[: rng.randrange(len(data) + 1)])
            for pos in range(len(buf) + 1):
                found = pure.frame(buf, pos)
                if compiled is not None:
                    self.assertEqual(compiled.frame(buf, pos), found, (round_, pos))

    def test_learning_limits(self) -> None:
        """At most MAX_FRAME_TYPES types of at most MAX_FRAME_VALUES values, one count per name, both finders."""
        finders: list[Any] = [FrameHeaders(Limits())]
        compiled = _compiled_finder(Limits())
        if compiled is not None:
            finders.append(compiled)
        for finder in finders:
            self.assertFalse(finder.add_frame(b"many", MAX_FRAME_VALUES + 1))
            self.assertFalse(finder.add_frame(b"negative", -1))
            self.assertTrue(finder.add_frame(b"a", 1))
            self.assertTrue(finder.add_frame(b"a", 1))
            self.assertFalse(finder.add_frame(b"a", 2))
            for index in range(1, MAX_FRAME_TYPES):
                self.assertTrue(finder.add_frame(bytes([65 + index]), index))
            self.assertFalse(finder.add_frame(b"one too many", 0))
            data = open_token("D") + encode_header(INT, 1) + encode_header(INT, 2) + encode_header(INT, 3)
            data += encode_header(BYTES, 2) + b"xy"
            self.assertEqual(finder.frame(data, 0), (b"D", (1, 2, 3), 2, len(data) - 3, len(data) - 2))

    def test_many_frame_types(self) -> None:
        """Past MAX_FRAME_TYPES types, the others are read token by token, with the same results."""
        data = PREAMBLE
        names = [f"tests.frame{index}" for index in range(MAX_FRAME_TYPES + 2)]
        for name in names * 2:
            data += open_token(name) + encode_header(INT, 1) + encode_header(INT, 2) + encode_header(BYTES, 1)
            data += b"x" + encode_header(CLOSE, 0)
        results = {}
        for frames in (True, False):
            for module in (None, COMPILED) if COMPILED is not None else (None,):
                recorder = Recorder()
                types = Registry(DEFAULT_REGISTRY)
                made: Callable[[Limits], DataUnslicer]
                if frames:
                    made = lambda limits, recorder=recorder: TakenData(limits, recorder)  # noqa: E731
                else:
                    made = lambda limits, recorder=recorder: TokenData(limits, recorder.starting)  # noqa: E731
                for name in names:
                    types.add_unslicer(name, made)
                with core(module):
                    decoder = Decoder(registry=types)
                results[frames, module] = ([canonical(r) for r in decoder.feed(data)], recorder.take())
                self.assertEqual(recorder.taken, MAX_FRAME_TYPES if frames else 0)
        self.assertEqual(len({repr(value) for value in results.values()}), 1)


def _compiled_finder(limits: Limits) -> Any:
    """The compiled reader for C{limits} (its C{frame}, C{add_frame}), or None on the pure core."""
    if COMPILED is None:
        return None
    with core(COMPILED):
        return Decoder(limits).fast_reader
