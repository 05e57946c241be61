"""
Fuzz tests: hostile or damaged bytes can only produce objects, Violations
or a ProtocolError, and never make a decoder hold more than its limits allow.

Each property tries L{EXAMPLES} examples (100, as the default run caps the
other properties: tests/properties.py) in the default run; the fuzz
campaign runs it 200 times longer:

    CHUNKWIRE_FUZZ_EXAMPLES=20000 python3 dev.py pytest tests/framing/test_fuzz.py

(C{python3 dev.py fuzz} does, after its atheris runs).
"""

from __future__ import annotations

import math
import os
import random
from collections import deque
from itertools import pairwise
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test
from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, Encoder, Limits, ProtocolError, TokenScanner, Violation
from framing._errors import TruncatedStream
from framing._scanner import BODY_SKIP, BODY_STREAM, BODY_VIEWS, BODY_WHOLE
from framing.wire import (
    BIGINT,
    BIGNEG,
    BODY_KINDS,
    FLOAT,
    KIND_NAMES,
    MAX_HEADER_LENGTH,
    OPEN,
    PREAMBLE,
    VALUE_KINDS,
    encode_header,
)

from .test_codec import same

SMALL = Limits(
    max_bytes_length=4096,
    max_string_length=2048,
    max_bigint_length=64,
    max_open_name_length=32,
    max_error_length=256,
    max_buffered_bytes=64 * 1024,
    max_depth=8,
    max_items=32,
)

# Nothing but a partial header (or preamble) waits in the chain after a feed,
# and a partial body is held only up to its kind's limit.
BUFFER_BOUND = (
    max(
        SMALL.max_bytes_length,
        SMALL.max_string_length,
        SMALL.max_bigint_length,
        SMALL.max_open_name_length,
        SMALL.max_error_length,
        8,
    )
    + MAX_HEADER_LENGTH
)

# Longest body the scanner state machine queues, per kind, to stay within SMALL.
BODY_LIMITS = {FLOAT: 8, OPEN: SMALL.max_open_name_length, BIGINT: 64, BIGNEG: 64}

EXAMPLES = int(os.environ.get("CHUNKWIRE_FUZZ_EXAMPLES", "100"))
"""Examples per fuzz property: 100 in the default run, 20,000 in C{dev.py fuzz} (the environment variable)."""

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

OPEN_NAMES = [
    "list",
    "tuple",
    "dict",
    "set",
    "frozenset",
    "bytearray",
    "memoryview",
    "array",
    "ndarray",
    "stream",
    "nosuch",
    "",
]


def random_object(rng: random.Random, depth: int = 0) -> Any:
    """
    Build a random object of the built-in types from C{rng}.  Much cheaper
    than a recursive hypothesis strategy, so the fuzz cases spend their time
    decoding rather than generating.
    """
    choice = rng.randrange(11 if depth < 3 else 7)
    if choice == 0:
        return rng.choice([None, False, True])
    if choice == 1:
        return rng.randrange(-(2**70), 2**70) >> rng.randrange(72)
    if choice == 2:
        return rng.choice([0.0, -0.0, 1.5, math.inf, -math.inf, math.nan, 1e300, rng.random()])
    if choice == 3:
        return rng.randbytes(rng.choice([0, 1, 5, 40, 300]))
    if choice == 4:
        return "".join(chr(rng.randrange(*rng.choice(TEXT_RANGES))) for _ in range(rng.randrange(12)))
    if choice in (5, 6):
        return random_key(rng)
    size = rng.randrange(6)
    if choice == 7:
        return [random_object(rng, depth + 1) for _ in range(size)]
    if choice == 8:
        return tuple(random_object(rng, depth + 1) for _ in range(size))
    if choice == 9:
        return {random_key(rng): random_object(rng, depth + 1) for _ in range(size)}
    members = (random_key(rng) for _ in range(size))
    return set(members) if rng.randrange(2) else frozenset(members)


def random_key(rng: random.Random) -> Any:
    """A random hashable leaf: a small int, a short str or short bytes."""
    return rng.choice([rng.randrange(-300, 300), f"k{rng.randrange(99)}", rng.randbytes(rng.randrange(4))])


# Code point ranges: ASCII, the rest of the BMP below the surrogates, non-BMP.
TEXT_RANGES = [(32, 127), (0x80, 0xD800), (0x10000, 0x110000)]


def random_values(seed: int, count: int) -> list[Any]:
    """C{count} random objects, determined by C{seed}."""
    rng = random.Random(seed)
    return [random_object(rng) for _ in range(count)]


def random_soup(rng: random.Random, count: int) -> bytes:
    """C{count} random tokens, each well framed but making no sense where it lands."""
    tokens = []
    kinds = sorted(KIND_NAMES)
    for _ in range(count):
        kind = rng.choice(kinds)
        if kind in VALUE_KINDS:
            tokens.append(encode_header(kind, rng.choice([rng.randrange(16), rng.randrange(2**64)])))
            continue
        if rng.randrange(4):
            body = rng.randbytes(rng.choice([0, 1, 2, 8, 9, 24, 300]))
        else:
            body = rng.choice(OPEN_NAMES).encode()
        tokens.append(encode_header(kind, len(body)) + body)
    return b"".join(tokens)


def cut(data: bytes, cuts: list[int]) -> list[bytes]:
    """Cut C{data} at the given offsets (taken modulo its length + 1)."""
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in pairwise(points)]


class FeedOutcome:
    """What feeding a decoder produced: the results, and the ProtocolError that ended it, if any."""

    def __init__(self) -> None:
        self.results: list[Any] = []
        self.error: ProtocolError | None = None


def feed_all(test: SynchronousTestCase, decoder: Decoder, chunks: list[bytes]) -> FeedOutcome:
    """
    Feed C{chunks}; allow only results and ProtocolError, and check the
    buffer bound after every feed.  Anything else propagates and fails.
    """
    outcome = FeedOutcome()
    for chunk in chunks:
        try:
            outcome.results.extend(decoder.feed(chunk))
        except ProtocolError as error:
            outcome.error = error
            test.assertLessEqual(decoder.buffered, BUFFER_BOUND)
            # The decoder stays broken: more input raises the same error.
            test.assertIs(test.assertRaises(ProtocolError, decoder.feed, b"\0"), error)
            return outcome
        test.assertLessEqual(decoder.buffered, BUFFER_BOUND)
    try:
        decoder.close()
    except ProtocolError as error:
        outcome.error = error
    return outcome


def note_outcome(outcome: FeedOutcome) -> FeedOutcome:
    """Tell hypothesis's statistics how a case ended, to show the fuzzing reaches every outcome."""
    event(f"ended with {type(outcome.error).__name__}" if outcome.error else "ended cleanly")
    if any(isinstance(result, Violation) for result in outcome.results):
        event("some object refused")
    return outcome


class FuzzTests(SynchronousTestCase):
    """Random and damaged streams end only in objects, Violations or a ProtocolError."""

    @FUZZ
    @given(garbage=st.binary(max_size=300), cuts=st.lists(st.integers(0, 10**6), max_size=8))
    def test_random_bytes_after_preamble(self, garbage: bytes, cuts: list[int]) -> None:
        """Random bytes after a valid preamble yield only objects, Violations or a ProtocolError."""
        note_outcome(feed_all(self, Decoder(SMALL), cut(PREAMBLE + garbage, cuts)))

    @FUZZ
    @given(
        seed=st.integers(0, 2**64 - 1),
        count=st.integers(0, 40),
        cuts=st.lists(st.integers(0, 10**6), max_size=8),
    )
    def test_token_soup(self, seed: int, count: int, cuts: list[int]) -> None:
        """Well-framed tokens in a random order yield only objects, Violations or a ProtocolError."""
        soup = random_soup(random.Random(seed), count)
        note_outcome(feed_all(self, Decoder(SMALL), cut(PREAMBLE + soup, cuts)))

    @FUZZ
    @given(
        seed=st.integers(0, 2**64 - 1),
        count=st.integers(1, 4),
        end=st.integers(0, 10**6),
        cuts=st.lists(st.integers(0, 10**6), max_size=6),
    )
    def test_truncated_streams(self, seed: int, count: int, end: int, cuts: list[int]) -> None:
        """A cut stream yields the objects before the cut, then TruncatedStream unless the cut fell between objects."""
        values = random_values(seed, count)
        encoder = Encoder(limits=SMALL)
        pieces = [encoder.encode(value) for value in values]
        data = PREAMBLE + b"".join(pieces)
        end %= len(data) + 1
        boundaries = [len(PREAMBLE)]
        for piece in pieces:
            boundaries.append(boundaries[-1] + len(piece))
        complete = sum(1 for boundary in boundaries[1:] if boundary <= end)
        outcome = feed_all(self, Decoder(SMALL), cut(data[:end], cuts))
        self.assertEqual(len(outcome.results), complete)
        for result, value in zip(outcome.results, values, strict=False):
            self.assertTrue(same(result, value), f"{result!r} is not {value!r}")
        if end in boundaries:
            self.assertIsNone(outcome.error)
        else:
            self.assertIsInstance(outcome.error, TruncatedStream)

    @FUZZ
    @given(
        seed=st.integers(0, 2**64 - 1),
        count=st.integers(1, 5),
        mutations=st.lists(
            st.tuples(st.sampled_from(["flip", "insert", "delete"]), st.integers(0, 10**6), st.integers(0, 255)),
            min_size=1,
            max_size=4,
        ),
        cuts=st.lists(st.integers(0, 10**6), max_size=8),
    )
    def test_mutated_streams(
        self, seed: int, count: int, mutations: list[tuple[str, int, int]], cuts: list[int]
    ) -> None:
        """A damaged stream yields the objects before the damage unchanged, then only objects, Violations or errors."""
        values = random_values(seed, count)
        encoder = Encoder(limits=SMALL)
        pieces = [encoder.encode(value) for value in values]
        data = bytearray(PREAMBLE + b"".join(pieces))
        first_change = len(data)
        for operation, position, byte in mutations:
            # Damage the tokens, not the preamble (the scanner tests cover that).
            room = len(data) - len(PREAMBLE) + (operation == "insert")
            if not room:
                continue
            position = len(PREAMBLE) + position % room
            if operation == "flip":
                data[position] ^= byte or 0x80
            elif operation == "insert":
                data[position:position] = bytes([byte])
            else:
                del data[position]
            first_change = min(first_change, position)
        damaged = bytes(data)
        intact = 0
        offset = len(PREAMBLE)
        for piece in pieces:
            offset += len(piece)
            if offset > first_change:
                break
            intact += 1
        decoder = Decoder(SMALL)
        # The unchanged prefix is fed on its own, so a later chunk that raises
        # cannot take with it objects the prefix completed.
        results: list[Any] = []
        for chunk in cut(damaged[:first_change], cuts):
            results.extend(decoder.feed(chunk))
        self.assertEqual(len(results), intact)
        for result, value in zip(results, values, strict=False):
            self.assertTrue(same(result, value), f"{result!r} is not {value!r}")
        note_outcome(feed_all(self, decoder, cut(damaged[first_change:], cuts)))


class SoupSink:
    """A scanner sink that records tokens and answers accept_body from a queue of modes."""

    def __init__(self) -> None:
        self.delivered: list[tuple[int, Any]] = []
        self.modes: deque[int] = deque()
        self.pieces: list[bytes] = []
        self.handlers = [self._handler(kind) for kind in range(16)]
        self.accepts_all = False  # ask accept_body about every body (TokenSink)

    def _handler(self, kind: int) -> Any:
        return lambda value: self.delivered.append((kind, value))

    def accept_body(self, kind: int, length: int) -> int:
        return self.modes.popleft()

    def refused(self, kind: int, length: int, violation: Violation) -> None:
        raise AssertionError(f"unexpected refusal: {violation}")

    def body_chunk(self, kind: int, data: bytes | memoryview) -> None:
        assert data, "empty body piece"
        self.pieces.append(bytes(data))

    def body_end(self, kind: int) -> None:
        self.delivered.append((kind, b"".join(self.pieces)))
        self.pieces = []


class ScannerMachine(RuleBasedStateMachine):
    """
    Tokens are queued as bytes and fed in arbitrary slices; the sink must
    have received exactly the tokens whose last byte has been fed.
    """

    def __init__(self) -> None:
        super().__init__()
        self.sink = SoupSink()
        self.scanner = TokenScanner(self.sink, SMALL)
        self.pending = bytearray(PREAMBLE)
        self.ends: deque[tuple[int, tuple[int, Any] | None]] = deque()
        self.fed = 0
        self.expected: list[tuple[int, Any]] = []
        self.boundaries = {len(PREAMBLE)}
        self.queued_end = len(PREAMBLE)

    def _queue(self, data: bytes, token: tuple[int, Any] | None) -> None:
        self.pending += data
        self.queued_end += len(data)
        self.ends.append((self.queued_end, token))

    @rule(kind=st.sampled_from(sorted(VALUE_KINDS)), value=st.integers(0, 2**64 - 1))
    def value_token(self, kind: int, value: int) -> None:
        self._queue(encode_header(kind, value), (kind, value))

    @rule(
        kind=st.sampled_from(sorted(BODY_KINDS)),
        body=st.binary(max_size=200),
        mode=st.sampled_from([BODY_WHOLE, BODY_STREAM, BODY_VIEWS, BODY_SKIP]),
    )
    def body_token(self, kind: int, body: bytes, mode: int) -> None:
        if kind == FLOAT:
            body = body[:8].ljust(8, b"\0")
        body = body[: BODY_LIMITS.get(kind, len(body))]
        self.sink.modes.append(mode)
        self._queue(encode_header(kind, len(body)) + body, None if mode == BODY_SKIP else (kind, body))

    @precondition(lambda self: self.fed < self.queued_end)
    @rule(size=st.integers(1, 300))
    def feed(self, size: int) -> None:
        chunk = bytes(self.pending[:size])
        del self.pending[:size]
        self.scanner.feed(chunk)
        self.fed += len(chunk)
        while self.ends and self.ends[0][0] <= self.fed:
            end, token = self.ends.popleft()
            self.boundaries.add(end)
            if token is not None:
                self.expected.append(token)

    @invariant()
    def delivered_exactly_what_was_fed(self) -> None:
        assert self.sink.delivered == self.expected, (self.sink.delivered, self.expected)

    @invariant()
    def boundary_and_buffer(self) -> None:
        at_boundary = self.fed in self.boundaries
        assert self.scanner.at_boundary == at_boundary
        assert self.scanner.buffered <= BUFFER_BOUND


class ScannerStateMachineTests(SynchronousTestCase):
    """Runs L{ScannerMachine} under trial and pytest."""

    def test_scanner_matches_model(self) -> None:
        """Any interleaving of queued tokens and partial feeds delivers exactly the completed tokens."""
        run_state_machine_as_test(
            ScannerMachine,
            settings=settings(max_examples=max(50, EXAMPLES // 12), stateful_step_count=30, deadline=None),
        )
