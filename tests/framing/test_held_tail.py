"""The scanner's held tail: an object cut at a chunk's end is read whole by the compiled reader with the next chunk."""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, Limits, dumps
from framing._errors import ChunkwireError
from framing._scanner import HELD_TAIL_LIMIT, WANT_HEADER, WANT_REST
from framing.slicing import _builtin as builtin
from framing.wire import PREAMBLE

from .test_cores import COMPILED, USER_TYPES, core, feed_all, needs_compiled

MESSAGES = [{"id": n, "method": "put", "value": bytes(1000), "tags": ["a", "b"]} for n in range(40)]
STREAM = PREAMBLE + b"".join(dumps(m)[len(PREAMBLE) :] for m in MESSAGES)


def chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def decode(module: Any, pieces: list[bytes], limits: Limits | None = None) -> tuple[list[Any], list[str]]:
    """Every object and the scanner's state after each piece, under C{module}'s core."""
    with core(module):
        decoder = Decoder(limits)
    objects: list[Any] = []
    states: list[str] = []
    for piece in pieces:
        objects += decoder.feed(piece)
        states.append(decoder._scanner.state)
    return objects, states


@needs_compiled
class HeldTailTests(SynchronousTestCase):
    """Both cores give the same objects; the compiled one builds the cut ones in C."""

    def test_sameObjects(self) -> None:
        """Cut anywhere, the stream gives the same objects on both cores, and the compiled one holds tails."""
        for size in (700, 4096, 5000, 65536):
            pure, _ = decode(None, chunks(STREAM, size))
            compiled, states = decode(COMPILED, chunks(STREAM, size))
            self.assertEqual((pure, compiled), (MESSAGES, MESSAGES))
            if size < len(STREAM):
                self.assertIn(WANT_REST, states, size)

    def test_builtInC(self) -> None:
        """With tails held, no object goes through the Python dict unslicer, however the chunks cut them."""
        made: list[Any] = []
        original = builtin.DictUnslicer.__init__

        def counting(self: Any, *args: Any, **kwargs: Any) -> None:
            made.append(self)
            original(self, *args, **kwargs)

        self.patch(builtin.DictUnslicer, "__init__", counting)
        objects, _ = decode(COMPILED, chunks(STREAM, 4096))
        self.assertEqual((objects, made), (MESSAGES, []))

    def test_limits(self) -> None:
        """A tail is held once (an object longer than the next chunk goes to the pure path), within buffer limits."""
        big = [{"blob": bytes(HELD_TAIL_LIMIT // 2)} for _ in range(3)]
        stream = PREAMBLE + b"".join(dumps(m)[len(PREAMBLE) :] for m in big)
        objects, states = decode(COMPILED, chunks(stream, 4096))
        self.assertEqual(objects, big)
        self.assertLessEqual(states.count(WANT_REST), len(big))
        with core(COMPILED):
            decoder = Decoder(Limits(max_buffered_bytes=500))
        held = []
        for piece in chunks(STREAM, 4096):
            decoder.feed(piece)
            if decoder._scanner.state == WANT_REST:
                held.append(decoder.buffered)
        self.assertTrue(held)
        self.assertLessEqual(max(held), 500)

    def test_notForOtherReasons(self) -> None:
        """An object the reader declines for another reason than the cut (a refused length) is not held."""
        stream = PREAMBLE + dumps(["x" * 50, 1])[len(PREAMBLE) :]
        limits = Limits(max_string_length=10)
        pure, _ = decode(None, [stream[:-2], stream[-2:]], limits)
        compiled, states = decode(COMPILED, [stream[:-2], stream[-2:]], limits)
        self.assertEqual(states[0], WANT_HEADER)
        self.assertEqual([type(o) for o in compiled], [type(o) for o in pure])
        self.assertEqual([str(o) for o in compiled], [str(o) for o in pure])

    def test_closeWhileHeld(self) -> None:
        """Input ending inside a held tail gives the pure core's error."""
        errors = []
        for module in (None, COMPILED):
            with core(module):
                decoder = Decoder()
            decoder.feed(STREAM[: len(PREAMBLE) + 500])
            try:
                decoder.close()
            except ChunkwireError as error:
                errors.append((type(error), str(error), decoder.buffered))
        self.assertEqual(len(errors), 2)
        self.assertEqual(errors[0], errors[1])

    def test_reconfigureWhileHeld(self) -> None:
        """Reconfiguring while a tail is held is refused, as mid-object on the pure core."""
        with core(COMPILED):
            decoder = Decoder()
        decoder.feed(STREAM[: len(PREAMBLE) + 500])
        self.assertTrue(decoder._scanner.holding)
        self.assertRaises(ValueError, decoder.reconfigure, Limits(max_items=3))

    def test_partialHeaderProvedWrong(self) -> None:
        """A cut wide header whose bytes already prove it non-canonical is refused at once, as by the pure core."""
        for stream in (PREAMBLE + b"\xab}\x00", PREAMBLE + bytes([0x7F, 0, 0, 0, 0])):
            for at in range(len(PREAMBLE), len(stream) + 1):
                pieces = [stream[:at], stream[at:]]
                self.assertEqual(feed_all(None, pieces, None, USER_TYPES), feed_all(COMPILED, pieces, None, USER_TYPES))

    def test_emptyRefusedBodyThenError(self) -> None:
        """A refused body of no bytes, then the peer's ERROR, after a held tail: the same on both cores (fuzz_cores)."""
        pieces = [PREAMBLE + b"tlistsrp", b"\x00P\xb5tli\xeet2"]
        self.assertEqual(feed_all(None, pieces, None, USER_TYPES), feed_all(COMPILED, pieces, None, USER_TYPES))
        for at in range(len(PREAMBLE), len(b"".join(pieces)) + 1):
            whole = b"".join(pieces)
            cut = [whole[:at], whole[at:]]
            self.assertEqual(feed_all(None, cut, None, USER_TYPES), feed_all(COMPILED, cut, None, USER_TYPES), at)
