"""Tests for L{framing._chain.ChunkChain}, checked against a plain C{bytes} model."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test
from twisted.trial.unittest import SynchronousTestCase

from framing import ChunkChain
from tests.properties import examples

chunk_lists = st.lists(st.binary(max_size=40), max_size=12)


class ChainMachine(RuleBasedStateMachine):
    """Random operation sequences on a ChunkChain and on the bytes it should hold."""

    def __init__(self) -> None:
        super().__init__()
        self.chain = ChunkChain()
        self.model = b""

    @rule(data=st.binary(max_size=50))
    def append(self, data: bytes) -> None:
        self.chain.append(data)
        self.model += data

    @rule(n=st.integers(0, 60))
    def peek(self, n: int) -> None:
        assert self.chain.peek(n) == self.model[:n]

    @rule(n=st.integers(0, 60))
    def popleft(self, n: int) -> None:
        if n > len(self.model):
            try:
                self.chain.popleft(n)
            except ValueError:
                return
            raise AssertionError("popleft past the end did not raise")
        assert self.chain.popleft(n) == self.model[:n]
        self.model = self.model[n:]

    @rule(n=st.integers(0, 60))
    def skip(self, n: int) -> None:
        if n > len(self.model):
            try:
                self.chain.skip(n)
            except ValueError:
                return
            raise AssertionError("skip past the end did not raise")
        self.chain.skip(n)
        self.model = self.model[n:]

    @rule(n=st.integers(-5, -1))
    def negative(self, n: int) -> None:
        for operation in (self.chain.peek, self.chain.popleft, self.chain.skip):
            try:
                operation(n)
            except ValueError:
                continue
            raise AssertionError(f"{operation.__name__}({n}) did not raise")

    @precondition(lambda self: self.model)
    @rule()
    def head(self) -> None:
        chunk, offset = self.chain.head()
        assert 0 <= offset < len(chunk)
        assert self.model.startswith(chunk[offset:])

    @rule()
    def clear(self) -> None:
        self.chain.clear()
        self.model = b""

    @invariant()
    def same_content(self) -> None:
        assert len(self.chain) == len(self.model)
        assert bool(self.chain) == bool(self.model)
        assert b"".join(self.chain.chunks()) == self.model
        assert all(self.chain._chunks)


class ChainStateMachineTests(SynchronousTestCase):
    """Runs L{ChainMachine} under trial and pytest."""

    def test_matches_bytes_model(self) -> None:
        """Every operation sequence leaves the chain holding exactly what the bytes model holds."""
        run_state_machine_as_test(
            ChainMachine, settings=settings(max_examples=examples(300), stateful_step_count=40, deadline=None)
        )


class ChunkChainTests(SynchronousTestCase):
    """Direct tests of each ChunkChain operation."""

    @settings(max_examples=examples(200), deadline=None)
    @given(chunks=chunk_lists, sizes=st.lists(st.integers(0, 30), max_size=20))
    def test_popleft_sequence(self, chunks: list[bytes], sizes: list[int]) -> None:
        """Successive poplefts return consecutive slices of the concatenated chunks."""
        chain = ChunkChain()
        for chunk in chunks:
            chain.append(chunk)
        model = b"".join(chunks)
        for n in sizes:
            if n > len(model):
                self.assertRaises(ValueError, chain.popleft, n)
            else:
                self.assertEqual(chain.popleft(n), model[:n])
                model = model[n:]
            self.assertEqual(len(chain), len(model))
        self.assertEqual(b"".join(chain.chunks()), model)

    @settings(max_examples=100, deadline=None)
    @given(data=st.binary(min_size=1, max_size=64))
    def test_one_byte_chunks(self, data: bytes) -> None:
        """A chain of 1-byte chunks peeks, pops and skips across chunk boundaries correctly."""
        chain = ChunkChain()
        for i in range(len(data)):
            chain.append(data[i : i + 1])
        self.assertEqual(chain.peek(len(data) + 3), data)
        half = len(data) // 2
        self.assertEqual(chain.popleft(half), data[:half])
        chain.skip(1 if len(data) - half else 0)
        rest = data[half + 1 :] if len(data) - half else b""
        self.assertEqual(chain.popleft(len(rest)), rest)
        self.assertEqual(len(chain), 0)

    def test_empty_chain(self) -> None:
        """An empty chain has length 0, is false, peeks nothing and refuses head, popleft and skip."""
        chain = ChunkChain()
        self.assertEqual(len(chain), 0)
        self.assertFalse(chain)
        self.assertEqual(chain.peek(5), b"")
        self.assertEqual(chain.chunks(), [])
        self.assertRaises(IndexError, chain.head)
        self.assertRaises(ValueError, chain.popleft, 1)
        self.assertRaises(ValueError, chain.skip, 1)
        self.assertEqual(chain.popleft(0), b"")
        chain.skip(0)
        self.assertEqual(len(chain), 0)

    def test_append_empty_is_ignored(self) -> None:
        """Appending an empty chunk keeps no chunk, so the chain stays empty."""
        chain = ChunkChain()
        chain.append(b"")
        self.assertEqual(len(chain._chunks), 0)
        self.assertRaises(IndexError, chain.head)

    def test_zero_counts(self) -> None:
        """peek(0), popleft(0) and skip(0) return nothing and consume nothing."""
        chain = ChunkChain()
        chain.append(b"abc")
        self.assertEqual(chain.peek(0), b"")
        self.assertEqual(chain.popleft(0), b"")
        chain.skip(0)
        self.assertEqual(chain.peek(3), b"abc")
        self.assertEqual(len(chain), 3)

    def test_negative_counts(self) -> None:
        """A negative count is a ValueError for peek, popleft and skip, and consumes nothing."""
        chain = ChunkChain()
        chain.append(b"abc")
        self.assertRaises(ValueError, chain.peek, -1)
        self.assertRaises(ValueError, chain.popleft, -1)
        self.assertRaises(ValueError, chain.skip, -2)
        self.assertEqual(chain.popleft(3), b"abc")

    def test_overlong_requests_consume_nothing(self) -> None:
        """popleft and skip of more than is held raise ValueError and leave the content intact; peek returns fewer."""
        chain = ChunkChain()
        chain.append(b"ab")
        chain.append(b"cd")
        chain.skip(1)
        self.assertRaises(ValueError, chain.popleft, 4)
        self.assertRaises(ValueError, chain.skip, 4)
        self.assertEqual(chain.peek(10), b"bcd")
        self.assertEqual(len(chain), 3)
        self.assertEqual(chain.popleft(3), b"bcd")

    def test_append_refuses_non_bytes(self) -> None:
        """append takes only bytes: bytearray, memoryview, str and bytes subclasses raise TypeError."""

        class Sub(bytes):
            pass

        chain = ChunkChain()
        for bad in (bytearray(b"x"), memoryview(b"x"), "x", Sub(b"x"), None):
            self.assertRaises(TypeError, chain.append, bad)
        self.assertEqual(len(chain), 0)

    def test_head_after_partial_consumption(self) -> None:
        """head returns the first chunk and the offset of its first unread byte."""
        chain = ChunkChain()
        first, second = b"hello", b"world"
        chain.append(first)
        chain.append(second)
        chain.skip(2)
        chunk, offset = chain.head()
        self.assertIs(chunk, first)
        self.assertEqual(offset, 2)
        chain.skip(3)
        chunk, offset = chain.head()
        self.assertIs(chunk, second)
        self.assertEqual(offset, 0)

    def test_head_chunk_fully_consumed(self) -> None:
        """Consuming the head chunk exactly drops it; the next chunk becomes the head at offset 0."""
        chain = ChunkChain()
        chain.append(b"abc")
        chain.append(b"def")
        self.assertEqual(chain.popleft(3), b"abc")
        self.assertEqual(len(chain._chunks), 1)
        self.assertEqual(chain.head(), (b"def", 0))
        chain.skip(3)
        self.assertEqual(len(chain._chunks), 0)
        self.assertRaises(IndexError, chain.head)

    def test_chunks_are_views_of_unread_bytes(self) -> None:
        """chunks() returns memoryviews covering exactly the unread bytes, the first one trimmed."""
        chain = ChunkChain()
        chain.append(b"abcd")
        chain.append(b"ef")
        chain.skip(1)
        views = chain.chunks()
        self.assertTrue(all(isinstance(view, memoryview) for view in views))
        self.assertEqual([bytes(view) for view in views], [b"bcd", b"ef"])
        self.assertEqual(len(chain), 5)

    def test_clear(self) -> None:
        """clear empties the chain and it can be reused from scratch."""
        chain = ChunkChain()
        chain.append(b"abc")
        chain.skip(1)
        chain.clear()
        self.assertEqual(len(chain), 0)
        self.assertEqual(chain.chunks(), [])
        chain.append(b"xyz")
        self.assertEqual(chain.head(), (b"xyz", 0))
        self.assertEqual(chain.popleft(3), b"xyz")


class ChunkChainCopyTests(SynchronousTestCase):
    """ChunkChain copies as little as its contract says and keeps nothing consumed."""

    def test_append_keeps_reference(self) -> None:
        """append stores the chunk itself, not a copy."""
        chain = ChunkChain()
        chunk = b"x" * 100
        chain.append(chunk)
        self.assertIs(chain.head()[0], chunk)

    def test_popleft_whole_chunk_is_same_object(self) -> None:
        """popleft of exactly a whole unread chunk returns that very object."""
        chain = ChunkChain()
        first, second = b"a" * 1000, b"b" * 1000
        chain.append(first)
        chain.append(second)
        self.assertIs(chain.popleft(1000), first)
        self.assertIs(chain.popleft(1000), second)

    def test_peek_whole_chunk_is_same_object(self) -> None:
        """peek of exactly the whole first chunk returns that object without copying."""
        chain = ChunkChain()
        first = b"a" * 1000
        chain.append(first)
        self.assertIs(chain.peek(1000), first)

    def test_popleft_within_chunk_keeps_chunk_until_used(self) -> None:
        """popleft inside one chunk keeps it only while unread bytes remain, then drops it."""
        chain = ChunkChain()
        chain.append(b"abcdef")
        chain.append(b"gh")
        self.assertEqual(chain.popleft(2), b"ab")
        self.assertEqual(len(chain._chunks), 2)
        self.assertEqual(chain.popleft(4), b"cdef")
        self.assertEqual(len(chain._chunks), 1)

    def test_popleft_spanning_releases_consumed_chunks(self) -> None:
        """popleft across chunks drops every chunk it consumed entirely."""
        chain = ChunkChain()
        for chunk in (b"ab", b"cd", b"ef", b"gh"):
            chain.append(chunk)
        self.assertEqual(chain.popleft(5), b"abcde")
        self.assertEqual(len(chain._chunks), 2)
        self.assertEqual(chain.head(), (b"ef", 1))
        self.assertEqual(chain.popleft(3), b"fgh")
        self.assertEqual(len(chain._chunks), 0)

    def test_skip_releases_consumed_chunks(self) -> None:
        """skip drops every chunk it consumed entirely."""
        chain = ChunkChain()
        for chunk in (b"ab", b"cd", b"ef"):
            chain.append(chunk)
        chain.skip(4)
        self.assertEqual(len(chain._chunks), 1)

    def test_peek_retains_everything(self) -> None:
        """peek across chunks consumes nothing and drops no chunk."""
        chain = ChunkChain()
        for chunk in (b"ab", b"cd", b"ef"):
            chain.append(chunk)
        self.assertEqual(chain.peek(5), b"abcde")
        self.assertEqual(len(chain._chunks), 3)
        self.assertEqual(len(chain), 6)
