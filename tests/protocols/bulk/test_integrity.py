"""Tests for protocols.bulk._integrity.OrderedHasher, hashing inline (no reactor)."""

from __future__ import annotations

import hashlib
import os
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from protocols.bulk._integrity import HashPool, IntegrityError, OrderedHasher, checkAlgorithm, inlineHashing

from .support import payload

DATA = payload(100_000)
DIGEST = hashlib.sha256(DATA).digest()


class Reader:
    """A readBack over DATA that records what it was asked for."""

    def __init__(self) -> None:
        self.reads: list[tuple[int, int]] = []

    def __call__(self, offset: int, length: int) -> bytes:
        self.reads.append((offset, length))
        return DATA[offset : offset + length]


class OrderedHasherTests(SynchronousTestCase):
    """The digest of bytes offered in any order, each hashed once."""

    def test_inOrder(self) -> None:
        """Pieces offered in order are hashed from their buffers and give the object's digest."""
        hasher = OrderedHasher()
        for offset in range(0, len(DATA), 7000):
            hasher.offer(offset, DATA[offset : offset + 7000])
        self.assertEqual(self.successResultOf(hasher.finish(len(DATA))), DIGEST)

    def test_releases(self) -> None:
        """Each offered piece is released, with its length, once the hasher is done with it."""
        released: list[int] = []
        hasher = OrderedHasher()
        hasher.offer(0, DATA[:10], released.append)
        hasher.offer(50, DATA[50:60], released.append)
        self.assertEqual(released, [10, 10])

    def test_outOfOrderReadsBack(self) -> None:
        """A piece ahead of the hashed position is not kept: its bytes are read back once allowed."""
        reader = Reader()
        hasher = OrderedHasher(readBack=reader)
        hasher.offer(50_000, DATA[50_000:])
        hasher.offer(0, DATA[:50_000])
        self.assertEqual(hasher.position, 50_000)
        self.assertEqual(self.successResultOf(hasher.finish(len(DATA))), DIGEST)
        self.assertEqual(sum(length for _, length in reader.reads), 50_000)

    def test_allowReadBack(self) -> None:
        """allowReadBack catches up to the given offset without waiting for finish."""
        reader = Reader()
        hasher = OrderedHasher(readBack=reader)
        hasher.allowReadBack(30_000)
        self.assertEqual(hasher.position, 30_000)
        hasher.offer(30_000, DATA[30_000:])
        self.assertEqual(self.successResultOf(hasher.finish(len(DATA))), DIGEST)

    def test_repeatsAndOverlaps(self) -> None:
        """Repeated and overlapping pieces are hashed once: only their new tail counts."""
        hasher = OrderedHasher()
        hasher.offer(0, DATA[:40_000])
        hasher.offer(0, DATA[:10_000])
        hasher.offer(30_000, DATA[30_000:70_000])
        hasher.offer(69_999, DATA[69_999:])
        self.assertEqual(self.successResultOf(hasher.finish(len(DATA))), DIGEST)

    def test_gapWithoutReadBack(self) -> None:
        """Without a readBack, a gap in what was offered fails the digest with IntegrityError."""
        hasher = OrderedHasher()
        hasher.offer(0, DATA[:10])
        hasher.offer(20, DATA[20:])
        self.failureResultOf(hasher.finish(len(DATA)), IntegrityError)

    def test_tooMuch(self) -> None:
        """More bytes in order than the size announced fail with IntegrityError."""
        hasher = OrderedHasher()
        hasher.offer(0, DATA)
        self.failureResultOf(hasher.finish(len(DATA) - 1), IntegrityError)

    def test_readBackFails(self) -> None:
        """An error reading back fails the digest with that error."""

        def broken(offset: int, length: int) -> bytes:
            raise OSError("disk gone")

        hasher = OrderedHasher(readBack=broken)
        self.failureResultOf(hasher.finish(10), OSError)

    def test_otherAlgorithm(self) -> None:
        """Any fixed-length hashlib algorithm can be used."""
        hasher = OrderedHasher("blake2b")
        hasher.offer(0, DATA)
        self.assertEqual(self.successResultOf(hasher.finish(len(DATA))), hashlib.blake2b(DATA).digest())

    def test_checkAlgorithm(self) -> None:
        """Unknown and variable-length algorithms are refused; None means no digest."""
        self.assertEqual(checkAlgorithm("sha256"), "sha256")
        self.assertIsNone(checkAlgorithm(None))
        self.assertRaises(ValueError, checkAlgorithm, "shake_128")
        self.assertRaises(ValueError, checkAlgorithm, "nope")


class RecordingPool(HashPool):
    """A pool that runs nothing: it records the jobs submitted."""

    def __init__(self) -> None:
        super().__init__(1)
        self.jobs: list[Any] = []

    def submit(self, job: Any) -> None:
        self.jobs.append(job)


class InlineWithReactorTests(SynchronousTestCase):
    """With inline=True and a reactor, in-order pieces are hashed at once; only read-backs use the pool."""

    def test_inOrderAtOnce(self) -> None:
        """Pieces offered in order are hashed and released in the caller's thread; no job reaches the pool."""
        pool, released = RecordingPool(), []
        hasher = OrderedHasher("sha256", None, reactor=object(), pool=pool, inline=True)
        for offset in range(0, len(DATA), 10_000):
            hasher.offer(offset, DATA[offset : offset + 10_000], released.append)
        self.assertEqual((hasher.position, sum(released), pool.jobs), (len(DATA), len(DATA), []))

    def test_readBackGoesToPool(self) -> None:
        """A read-back is queued on the pool, and while it is queued later pieces go there too, in order."""
        pool, released = RecordingPool(), []
        hasher = OrderedHasher("sha256", Reader(), reactor=object(), pool=pool, inline=True)
        hasher.offer(50_000, DATA[50_000:60_000], released.append)
        self.assertEqual(released, [10_000])  # ahead of the position: not kept, released at once
        hasher.allowReadBack(60_000)
        self.assertEqual(len(pool.jobs), 1)
        hasher.offer(60_000, DATA[60_000:70_000], released.append)
        self.assertEqual((released, hasher.position), ([10_000], 0))


class InlineHashingTests(SynchronousTestCase):
    """Which thread hashes what a file transfer moves in order."""

    def test_named(self) -> None:
        """inline and thread are taken as named."""
        self.assertEqual((inlineHashing("inline"), inlineHashing("thread")), (True, False))

    def test_autoByLoad(self) -> None:
        """auto hashes in a thread only while a core stays free beside this process: never on two cores."""
        self.patch(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
        self.patch(os, "cpu_count", lambda: 2)
        self.assertTrue(inlineHashing("auto"))
        self.patch(os, "cpu_count", lambda: 4)
        self.assertFalse(inlineHashing("auto"))
        self.patch(os, "getloadavg", lambda: (2.5, 1.0, 1.0))
        self.assertTrue(inlineHashing("auto"))
