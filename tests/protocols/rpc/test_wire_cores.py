"""
RPC messages on both codec cores: the compiled reader builds whole messages
of built-in values through L{protocols.rpc.wire.buildMessage}, and hands
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
from framing.errors import ChunkwireError
from framing.slicing.registry import DEFAULT_REGISTRY
from framing.wire import PREAMBLE
from protocols.rpc.wire import ANSWER, CALL, CANCEL, FAIL, RELEASE, Message, MessageSlicer, MessageUnslicer

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


def _outcome(action: Any) -> Any:
    try:
        return ("returned", action())
    except Exception as error:
        return ("raised", type(error).__name__, str(error))
