"""bench_bulk sets chunkwire-sha256 against cpu_floor's SHA-256 limit; cpu_floor's two-process copy moves every byte."""

from __future__ import annotations

import os
from unittest import skipUnless

from twisted.trial.unittest import SynchronousTestCase

from tests.benchmarks import bench_bulk, cpu_floor

MiB = 1 << 20


class Sha256FloorTests(SynchronousTestCase):
    """The SHA-256 floor's figures and the acceptance check made of them."""

    def test_criterion(self) -> None:
        """With a measured SHA-256 floor, the checks include chunkwire-sha256's ratio to it, at least 0.9."""
        summary = {
            "config": {"size": 1 << 30},
            "cases": {},
            "calls": {},
            "sha256_floor": {"chunkwire_vs_floor": 0.74},
        }
        checks = [check for check in bench_bulk.criteria(summary) if "SHA-256 forced" in check[0]]
        self.assertEqual([(value, op, threshold) for _, value, op, threshold in checks], [(0.74, ">=", 0.9)])

    def test_sha256CallsShownNotChecked(self) -> None:
        """The SHA-256 case's small-call p99 is measured but is no acceptance check; the default case's is."""
        calls = {"chunkwire": {"ratio": 8.0}, "chunkwire-sha256": {"ratio": 15.0}}
        summary = {"config": {"size": 1 << 30}, "cases": {}, "calls": calls}
        labels = [check[0] for check in bench_bulk.criteria(summary)]
        self.assertEqual(
            [label for label in labels if "p99" in label], ["bulk: chunkwire small-call p99 during transfer / idle p99"]
        )

    def test_noFloorNoCriterion(self) -> None:
        """Without the SHA-256 case (no floor measured), no such check is made."""
        summary = {"config": {"size": 1 << 30}, "cases": {}, "calls": {}}
        self.assertEqual([check for check in bench_bulk.criteria(summary) if "SHA-256" in check[0]], [])

    def test_digestFloor(self) -> None:
        """The limit is the copy plus two digests, in CPU-s per GiB, turned into MB/s over the cores."""
        floor = cpu_floor.digestFloor(8 * MiB, "sha256", copy=0.25)
        self.assertAlmostEqual(floor["floor"], 0.25 + 2 * floor["digest"])
        cores = os.cpu_count() or 1
        self.assertAlmostEqual(floor["mb_s"], cores / floor["floor"] * (1 << 30) / 1e6)

    @skipUnless(hasattr(os, "fork"), "the two-process copy forks")
    def test_pipeRate(self) -> None:
        """The two-process blocking copy moves every byte and reports each end's CPU."""
        result = cpu_floor.pipeRate(4 * MiB, "sha256")
        self.assertEqual(result["received"], 4 * MiB)
        self.assertGreater(result["mb_s"], 0)
        self.assertGreater(result["sender_cpu_s_per_gib"], 0)
        self.assertGreaterEqual(result["receiver_cpu_s_per_gib"], 0)
