"""
RPC messages on both codec cores: the compiled reader builds whole messages
of built-in values through L{framing.rpc._wire.buildMessage}, and hands
every other one back to L{MessageUnslicer}; both cores give the same
messages, the same refusals (L{MessageRefused} with the call's id, the same
C{where}) and the same bytes, for generated messages and for mutated and
truncated streams in random chunks.  (C{CHUNKWIRE_CORES_EXAMPLES} sets the
number of examples, as in C{tests/framing/test_cores.py}.)
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, Encoder, Limits, Registry
from framing._errors import ChunkwireError
from framing.rpc._wire import (
    ANSWER,
    CALL,
    CANCEL,
    FAIL,
    MAX_NAME,
    RELEASE,
    Message,
    MessageSlicer,
    MessageUnslicer,
    buildMessage,
)
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import PREAMBLE

from ...framing.test_cores import COMPILED, core, cut, differential, feed_all, limits, mutate, needs_compiled, values

REGISTRY = Registry(DEFAULT_REGISTRY)
REGISTRY.add_slicer(Message, MessageSlicer())
REGISTRY.add_unslicer("rpc", MessageUnslicer)

ids = st.one_of(st.integers(0, 2**40), st.integers(-3, 3), st.just(2**64), st.just("7"), st.none())
names = st.one_of(st.text(min_size=1, max_size=12), st.just(""), st.just("x" * 300), st.integers(0, 3))
plain_kwargs = st.one_of(
    st.none(), st.dictionaries(st.text(max_size=5), values, max_size=3), st.just({1: 2}), st.just([1])
)
metadata = st.one_of(
    st.none(), st.dictionaries(st.text(max_size=5), st.text(max_size=8), max_size=3), st.just({"k": 1}), values
)
# A call context (kwargs, milliseconds left, metadata), well-formed or not.
contexts = st.one_of(
    st.tuples(plain_kwargs, st.one_of(st.none(), st.integers(-1, 2**40)), metadata), st.tuples(plain_kwargs)
)
kwargs = st.one_of(plain_kwargs, contexts)
texts = st.one_of(st.text(max_size=20), st.none(), st.integers(0, 2))
messages = st.one_of(
    st.builds(lambda *f: Message((CALL, *f[:4], *f[4])), ids, ids, names, kwargs, st.lists(values, max_size=4)),
    st.builds(lambda *f: Message((ANSWER, *f)), ids, values),
    st.builds(
        lambda *f: Message((FAIL, *f)), ids, names, texts, texts, st.one_of(st.none(), st.tuples(values), values)
    ),
    st.builds(lambda *f: Message((CANCEL, *f)), ids),
    st.builds(lambda *f: Message((RELEASE, *f)), ids, ids),
    st.builds(lambda tag, rest: Message((tag, *rest)), st.integers(-1, 7), st.lists(values, max_size=6)),
)


# The children of an rpc record as the compiled reader hands them over (values of built-in kinds), in the shapes it
# builds itself (an ANSWER, a CALL without keyword arguments), well-formed or not, and a few it leaves to buildMessage.
record_ids = st.one_of(ids, st.just(2**64 - 1), st.just(-(2**64)), st.just(True), st.just(1.0), st.just(b"1"))
record_names = st.one_of(names, st.just("x" * MAX_NAME), st.just("é" * MAX_NAME), st.just("é" * (MAX_NAME + 1)))
record_tags = st.one_of(st.just(CALL), st.just(ANSWER), st.just(False), st.just(True), st.integers(-2, 7))
records = st.one_of(
    st.builds(
        lambda *f: [f[0], *f[1:5], *f[5]],
        record_tags,
        record_ids,
        record_ids,
        record_names,
        kwargs,
        st.lists(values, max_size=3),
    ),
    st.builds(lambda *f: [*f], record_tags, record_ids, values),
    st.lists(st.one_of(record_tags, record_ids, record_names, values), max_size=7),
)
BUILT_IN_C = [
    [ANSWER, 5, 42],
    [ANSWER, 0, None],
    [ANSWER, 2**64 - 1, [1, {"k": b"v"}]],
    [CALL, 5, 0, "echo", None],
    [CALL, 5, 0, "echo", None, 42, [b"x"], {"a": 1}],
    [CALL, 2**64 - 1, 2**64 - 1, "x" * MAX_NAME, None, 1],
    [CALL, 1, 2, "é" * MAX_NAME, None],
]
REFUSED_IN_C = [
    *([ANSWER, bad, 42] for bad in (-1, 2**64, "5", 5.0, True, None, b"5")),
    *([CALL, bad, 0, "echo", None, 1] for bad in (-1, 2**64, "5", 5.0, True, None)),
    *([CALL, 5, bad, "echo", None, 1] for bad in (-1, 2**64, "5", 5.0, False, None)),
    *([CALL, 5, 0, bad, None, 1] for bad in ("", "x" * (MAX_NAME + 1), b"echo", 7, None, ("echo",))),
]
LEFT_TO_PYTHON = [
    [],
    [True, 5, 42],
    [ANSWER, 5],
    [ANSWER, 5, 1, 2],
    [CALL, 5, 0, "echo"],
    [CALL, 5, 0, "echo", {}],
    [CALL, 5, 0, "echo", ({}, 10, None)],
    [FAIL, 5, "E", "text", None, None],
    [CANCEL, 5],
    [2**70, 1],
    ["0", 1],
]


def encoded(message: Message) -> bytes | None:
    try:
        return Encoder(REGISTRY).encode(message)
    except ChunkwireError:
        return None


@needs_compiled
class MessageCoreTests(SynchronousTestCase):
    """Both cores on RPC messages, side by side."""

    @differential
    @given(st.lists(messages, min_size=1, max_size=4), st.lists(st.integers(0, 2**16), max_size=5), limits)
    def test_messages(self, found: list[Message], points: list[int], limit: Limits | None) -> None:
        """Well-formed and malformed messages, in random chunks, decode to the same messages and refusals."""
        data = PREAMBLE + b"".join(filter(None, map(encoded, found)))
        chunks = cut(data, points)
        self.assertEqual(feed_all(None, chunks, limit, REGISTRY), feed_all(COMPILED, chunks, limit, REGISTRY))

    @differential
    @given(
        st.lists(messages, min_size=1, max_size=3),
        st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2**16), st.integers(0, 255)), min_size=1, max_size=4),
        st.lists(st.integers(0, 2**16), max_size=5),
        limits,
    )
    def test_mutated(
        self, found: list[Message], edits: list[tuple[int, int, int]], points: list[int], limit: Limits | None
    ) -> None:
        """Mutated and truncated message streams give the same events on both cores."""
        data = mutate(PREAMBLE + b"".join(filter(None, map(encoded, found))), edits)
        chunks = cut(data, points)
        self.assertEqual(feed_all(None, chunks, limit, REGISTRY), feed_all(COMPILED, chunks, limit, REGISTRY))

    @differential
    @given(messages)
    def test_bytes(self, message: Message) -> None:
        """Both cores write a message as the same bytes (or refuse it alike)."""
        written = []
        for module in (None, COMPILED):
            with core(module):
                encoder = Encoder(REGISTRY)
                written.append((_outcome(lambda encoder=encoder: encoder.encode(message)), encoder.tokens(message)))
        self.assertEqual(written[0][0], written[1][0])
        self.assertIsNone(written[0][1])
        if written[1][1] is not None:
            self.assertEqual(("returned", written[1][1]), written[0][0])

    def test_call_built_in_c(self) -> None:
        """A call and an answer of built-in values are built by the compiled reader: no MessageUnslicer is made."""
        made: list[Any] = []

        class Counting(MessageUnslicer):
            def __init__(self, limits: Limits) -> None:
                made.append(self)
                super().__init__(limits)

        registry = Registry(REGISTRY)
        registry.add_unslicer("rpc", Counting)
        call = Message((CALL, 5, 0, "echo", None, 42, [b"x"]))
        answer = Message((ANSWER, 5, {"k": 1.5}))
        results = Decoder(registry=registry).feed(PREAMBLE + encoded(call) + encoded(answer))
        self.assertEqual(results, [Message((CALL, 5, 0, "echo", (42, [b"x"]), {})), answer])
        self.assertEqual([type(m) for m in results], [Message, Message])
        self.assertEqual(made, [])
        refused = Decoder(registry=registry).feed(PREAMBLE + encoded(Message((CALL, 5, 0, "", None))))
        self.assertEqual(
            (type(refused[0]).__name__, refused[0].where, refused[0].requestId), ("MessageRefused", "name", 5)
        )
        self.assertEqual(len(made), 1)


@needs_compiled
class CompiledMessageTests(SynchronousTestCase):
    """The compiled reader's own build of an ANSWER and of a CALL without keyword arguments is buildMessage's."""

    def assertSameAsBuildMessage(self, items: list[Any]) -> Any:
        """The compiled build of C{items} (NotImplemented: left to buildMessage) agrees with buildMessage's."""
        assert COMPILED is not None
        built = COMPILED.rpc_message(list(items), Message, MAX_NAME)
        if built is not NotImplemented:
            expected = buildMessage(list(items))
            self.assertEqual((type(built), built), (type(expected), expected))
        return built

    def test_built(self) -> None:
        """An ANSWER and a CALL without keyword arguments, each bound reached, are built in C as buildMessage does."""
        for items in BUILT_IN_C:
            built = self.assertSameAsBuildMessage(items)
            self.assertIs(type(built), Message, items)

    def test_refused(self) -> None:
        """Each kind of bad id, target or name is refused in C (None) where buildMessage refuses it."""
        for items in REFUSED_IN_C:
            self.assertIsNone(self.assertSameAsBuildMessage(items), items)

    def test_otherShapes(self) -> None:
        """Every other shape (keyword arguments, a context, another kind, a tag not an int) is left to buildMessage."""
        for items in LEFT_TO_PYTHON:
            self.assertIs(self.assertSameAsBuildMessage(items), NotImplemented, items)

    @differential
    @given(records)
    def test_generated(self, items: list[Any]) -> None:
        """Generated children, well-formed or not: the compiled build, where there is one, is buildMessage's."""
        self.assertSameAsBuildMessage(items)

    def test_reader(self) -> None:
        """The decoder's compiled reader builds them so: the same messages, and refusals worded by the unslicer."""
        for items in (*BUILT_IN_C, *REFUSED_IN_C):
            data = PREAMBLE + (encoded(Message(items)) or b"")
            self.assertEqual(feed_all(None, [data], None, REGISTRY), feed_all(COMPILED, [data], None, REGISTRY))


def _outcome(action: Any) -> Any:
    try:
        return ("returned", action())
    except Exception as error:
        return ("raised", type(error).__name__, str(error))
