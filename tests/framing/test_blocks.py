"""Tests for L{framing._blocks.BlockBuffer}, the send buffer."""

from __future__ import annotations

import gc
import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from framing import BlockBuffer
from framing._blocks import FIRST_BLOCK, LARGE_PIECE, MAX_BLOCK
from tests.properties import examples

MiB = 1024 * 1024

# Piece sizes around every threshold the buffer cares about.
piece_sizes = st.one_of(
    st.integers(0, 64),
    st.sampled_from([LARGE_PIECE - 1, LARGE_PIECE, LARGE_PIECE + 1, FIRST_BLOCK - 1, FIRST_BLOCK, FIRST_BLOCK + 1]),
    st.integers(64, 3 * FIRST_BLOCK),
)


def make_piece(size: int, seed: int) -> bytes:
    """Return C{size} bytes whose content depends on C{seed}, so order mistakes show."""
    pattern = bytes((seed + i) % 251 for i in range(251))
    return (pattern * (size // 251 + 1))[:size]


class BlockBufferTests(SynchronousTestCase):
    """BlockBuffer hands back exactly what was written, in order."""

    @settings(max_examples=examples(150), deadline=None)
    @given(
        sizes=st.lists(piece_sizes, max_size=25),
        methods=st.lists(st.sampled_from(["write", "write_piece", "seal"]), min_size=25, max_size=25),
    )
    def test_take_returns_everything_in_order(self, sizes: list[int], methods: list[str]) -> None:
        """take() returns the concatenation of every piece written, by write or write_piece."""
        buf = BlockBuffer()
        expected = []
        for i, size in enumerate(sizes):
            piece = make_piece(size, i)
            expected.append(piece)
            if methods[i] == "write_piece":
                buf.write_piece(piece)
            else:
                buf.write(piece)
                if methods[i] == "seal":
                    buf.seal_if_full()
            self.assertEqual(len(buf), sum(map(len, expected)))
        self.assertEqual(buf.take(), b"".join(expected))
        self.assertEqual(len(buf), 0)

    @settings(max_examples=examples(150), deadline=None)
    @given(sizes=st.lists(piece_sizes, max_size=25))
    def test_take_blocks_returns_everything_in_order(self, sizes: list[int]) -> None:
        """take_blocks() returns non-empty bytes blocks whose concatenation is what was written."""
        buf = BlockBuffer()
        pieces = [make_piece(size, i) for i, size in enumerate(sizes)]
        for piece in pieces:
            buf.write_piece(piece)
        blocks = buf.take_blocks()
        self.assertTrue(all(type(block) is bytes and block for block in blocks))
        self.assertEqual(b"".join(blocks), b"".join(pieces))

    @settings(max_examples=examples(150), deadline=None)
    @given(
        sizes=st.lists(piece_sizes, max_size=25),
        methods=st.lists(st.sampled_from(["write", "write_piece", "seal"]), min_size=25, max_size=25),
    )
    def test_take_sized_counts_what_it_takes(self, sizes: list[int], methods: list[str]) -> None:
        """take_sized() returns the blocks take_blocks() would, and their length: what len() said before."""
        taken: list[list[bytes]] = []
        for take in ("take_blocks", "take_sized"):
            buf = BlockBuffer()
            for i, size in enumerate(sizes):
                piece = make_piece(size, i)
                if methods[i] == "write_piece":
                    buf.write_piece(piece)
                else:
                    buf.write(piece)
                    if methods[i] == "seal":
                        buf.seal_if_full()
            written = len(buf)
            if take == "take_sized":
                blocks, size = buf.take_sized()
                self.assertEqual(size, written)
                self.assertEqual(size, sum(map(len, blocks)))
            else:
                blocks = buf.take_blocks()
            taken.append(blocks)
            self.assertEqual((len(buf), buf.take_sized()), (0, ([], 0)))
        self.assertEqual(taken[0], taken[1])

    def test_empty(self) -> None:
        """A new buffer has length 0 and takes as b"", as an empty list, or as an empty list of no bytes."""
        buf = BlockBuffer()
        self.assertEqual(len(buf), 0)
        self.assertEqual(buf.take(), b"")
        self.assertEqual(buf.take_blocks(), [])
        self.assertEqual(buf.take_sized(), ([], 0))

    def test_large_piece_kept_by_reference(self) -> None:
        """A bytes piece of at least LARGE_PIECE bytes becomes a block of its own, the same object."""
        buf = BlockBuffer()
        big = b"B" * LARGE_PIECE
        buf.write(b"header")
        buf.write_piece(big)
        buf.write(b"trailer")
        blocks = buf.take_blocks()
        self.assertEqual(len(blocks), 3)
        self.assertIs(blocks[1], big)
        self.assertEqual(blocks[0], b"header")
        self.assertEqual(blocks[2], b"trailer")

    def test_single_large_piece_take_is_same_object(self) -> None:
        """take() of a buffer holding only one large piece returns that piece itself."""
        buf = BlockBuffer()
        big = b"B" * (LARGE_PIECE * 3)
        buf.write_piece(big)
        self.assertIs(buf.take(), big)

    def test_small_piece_is_copied(self) -> None:
        """A bytes piece below LARGE_PIECE is copied into the current block, not kept as a block."""
        buf = BlockBuffer()
        small = b"s" * (LARGE_PIECE - 1)
        buf.write(b"h")
        buf.write_piece(small)
        blocks = buf.take_blocks()
        self.assertEqual(blocks, [b"h" + small])

    def test_first_piece_of_empty_buffer_kept_by_reference(self) -> None:
        """The first bytes piece written to an empty buffer is handed out as it is: no copy, no block started."""
        buf = BlockBuffer()
        for round in range(3):
            current = buf.write.__self__  # type: ignore[attr-defined]
            message = b"m" * (10 + round)
            buf.write_piece(message)
            self.assertEqual(len(buf), len(message))
            blocks = buf.take_blocks()
            self.assertEqual(len(blocks), 1)
            self.assertIs(blocks[0], message)
            # The empty current block was never used: it is kept rather than replaced by a new one.
            self.assertIs(buf.write.__self__, current)  # type: ignore[attr-defined]

    def test_pieces_after_the_first_are_copied_behind_it(self) -> None:
        """After a first piece kept by reference, small pieces go to the current block, after it."""
        buf = BlockBuffer()
        first = b"f" * 5
        buf.write_piece(first)
        buf.write_piece(b"second")
        buf.write(b"third")
        blocks = buf.take_blocks()
        self.assertIs(blocks[0], first)
        self.assertEqual(blocks, [first, b"secondthird"])

    def test_first_piece_rolled_back(self) -> None:
        """A first piece kept by reference is dropped by a rollback to a mark taken before it."""
        buf = BlockBuffer()
        mark = buf.mark()
        buf.write_piece(b"dropped")
        buf.write(b"also dropped")
        buf.rollback(mark)
        self.assertEqual(len(buf), 0)
        buf.write_piece(b"kept")
        self.assertEqual(buf.take(), b"kept")

    def test_used_block_replaced_after_take(self) -> None:
        """A take that sealed the current block starts a new one; so does one after a preallocated block."""
        buf = BlockBuffer()
        buf.write(b"x")
        used = buf.write.__self__  # type: ignore[attr-defined]
        self.assertEqual(buf.take_blocks(), [b"x"])
        self.assertIsNot(buf.write.__self__, used)  # type: ignore[attr-defined]
        buf.write(b"y" * MAX_BLOCK)
        buf.seal_if_full()  # the next block is preallocated whole, MAX_BLOCK bytes
        preallocated = buf.write.__self__  # type: ignore[attr-defined]
        self.assertEqual(len(buf.take_blocks()), 1)
        self.assertIsNot(buf.write.__self__, preallocated)  # type: ignore[attr-defined]

    def test_large_mutable_piece_is_copied(self) -> None:
        """A large bytearray piece is copied, so changing it afterwards does not change the output."""
        buf = BlockBuffer()
        mutable = bytearray(b"m" * LARGE_PIECE)
        buf.write_piece(mutable)
        mutable[:] = b"x" * LARGE_PIECE
        self.assertEqual(buf.take(), b"m" * LARGE_PIECE)

    def test_caps_grow_geometrically(self) -> None:
        """Blocks sealed by seal_if_full have caps doubling from FIRST_BLOCK up to MAX_BLOCK."""
        buf = BlockBuffer()
        piece = b"p" * 4096
        total = 3 * MAX_BLOCK + 8 * MiB
        for _ in range(total // len(piece)):
            buf.write(piece)
            buf.seal_if_full()
        sizes = [len(block) for block in buf.take_blocks()]
        expected = []
        cap = FIRST_BLOCK
        while sum(expected) < total:
            expected.append(min(cap, total - sum(expected)))
            cap = min(cap * 2, MAX_BLOCK)
        self.assertEqual(sizes, expected)
        self.assertEqual(max(sizes), MAX_BLOCK)

    def test_write_piece_seals_full_blocks(self) -> None:
        """write_piece seals the current block as soon as it reaches its cap."""
        buf = BlockBuffer()
        piece = b"q" * 1024
        buf.write(piece)  # (the first piece of an empty buffer would be kept by reference)
        for _ in range(FIRST_BLOCK // len(piece) - 1):
            buf.write_piece(piece)
        self.assertEqual(len(buf._blocks), 1)
        self.assertEqual(len(buf._blocks[0]), FIRST_BLOCK)

    def test_reusable_after_take(self) -> None:
        """After take the buffer is empty, and new writes start again from a FIRST_BLOCK cap."""
        buf = BlockBuffer()
        for _ in range(3):
            for _ in range(100):
                buf.write(b"z" * 1024)
                buf.seal_if_full()
            self.assertEqual(len(buf), 100 * 1024)
            blocks = buf.take_blocks()
            self.assertEqual(b"".join(blocks), b"z" * 100 * 1024)
            self.assertEqual(len(blocks[0]), FIRST_BLOCK)
            self.assertEqual(len(buf), 0)
            self.assertEqual(buf.take(), b"")

    def test_write_rebinds_after_seal(self) -> None:
        """A write looked up on the buffer after a seal goes to the new block, not the sealed one."""
        buf = BlockBuffer()
        buf.write(b"a" * FIRST_BLOCK)
        buf.seal_if_full()
        buf.write(b"b")
        self.assertEqual(buf.take(), b"a" * FIRST_BLOCK + b"b")


class BlockBufferMemoryTests(SynchronousTestCase):
    """BlockBuffer's peak memory is the output plus less than one block."""

    def test_peak_memory_building_from_small_pieces(self) -> None:
        """Building 16 MiB from 16-byte pieces peaks under 1.1x the output plus one MAX_BLOCK."""
        total = 16 * MiB
        pieces = [bytes([i]) * 16 for i in range(16)]
        gc.collect()
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            buf = BlockBuffer()
            count = 0
            for _ in range(total // (16 * 1024)):
                write = buf.write
                for _ in range(64):
                    for piece in pieces:
                        write(piece)
                count += 1024
                buf.seal_if_full()
            blocks = buf.take_blocks()
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        self.assertEqual(count * 16, total)
        self.assertEqual(sum(map(len, blocks)), total)
        self.assertEqual(blocks[0][:32], pieces[0] + pieces[1])
        self.assertLess(peak, 1.1 * total + MAX_BLOCK)


class RollbackTests(SynchronousTestCase):
    """mark() and rollback() drop exactly what was written after the mark."""

    @settings(max_examples=examples(150), deadline=None)
    @given(
        before=st.lists(piece_sizes, max_size=8),
        after=st.lists(piece_sizes, max_size=8),
        then=st.lists(piece_sizes, max_size=4),
    )
    def test_rollback_keeps_what_came_before(self, before: list[int], after: list[int], then: list[int]) -> None:
        """Pieces before the mark and after the rollback survive; pieces in between are gone."""
        buf = BlockBuffer()
        kept = [make_piece(size, seed) for seed, size in enumerate(before)]
        for piece in kept:
            buf.write_piece(piece)
        mark = buf.mark()
        for seed, size in enumerate(after):
            buf.write_piece(make_piece(size, 100 + seed))
        buf.rollback(mark)
        self.assertEqual(len(buf), sum(before))
        tail = [make_piece(size, 200 + seed) for seed, size in enumerate(then)]
        for piece in tail:
            buf.write_piece(piece)
        self.assertEqual(len(buf), sum(before) + sum(then))
        self.assertEqual(buf.take(), b"".join(kept + tail))

    def test_rollback_after_a_large_block(self) -> None:
        """A rollback past a sealed preallocated block restores the marked block's bytes only."""
        buf = BlockBuffer()
        buf.write(b"x" * (MAX_BLOCK + 10))
        buf.seal_if_full()
        buf.write(b"head")
        mark = buf.mark()
        buf.write(bytes(MAX_BLOCK))
        buf.seal_if_full()
        buf.write_piece(bytes(LARGE_PIECE))
        buf.rollback(mark)
        buf.write(b"tail")
        self.assertEqual(buf.take(), b"x" * (MAX_BLOCK + 10) + b"headtail")
