"""The sidecar of a partial file (L{protocols._sidecars}): ranges held, and with a key, nobody else's edits."""

from __future__ import annotations

import json
import os
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from framing.bulk._ranges import RangeSet
from protocols._places import Directory
from protocols._sidecars import (
    KEY_BYTES,
    KEYED,
    PLAIN,
    SAVE_RANGES,
    Sidecar,
    algorithmOf,
    preferring,
    recordedAlgorithm,
    recordedHeader,
    serviceKey,
)

NAME = "f.part.json"
KEY = b"k" * KEY_BYTES


class SidecarTests(SynchronousTestCase):
    """Saved ranges load back for the same file; another file's, a forged or a too-long one does not."""

    def setUp(self) -> None:
        self.root = Path(self.mktemp())
        self.root.mkdir()
        self.directory = Directory(self.root)
        self.addCleanup(self.directory.close)

    def saved(self, key: bytes | None, ranges: list[tuple[int, int]]) -> Sidecar:
        sidecar = Sidecar(self.directory, NAME, key)
        for start, end in ranges:
            sidecar.note(start, end)
        sidecar.save(1000, "v1", "sha256", RangeSet(ranges))
        return sidecar

    def load(self, key: bytes | None, size: int = 1000, version: str = "v1", partSize: int = 1000) -> Sidecar:
        self.loaded = Sidecar(self.directory, NAME, key)
        self.ranges = self.loaded.load(size, version, "sha256", partSize)
        return self.loaded

    def test_roundTrip(self) -> None:
        """With or without a key, the ranges saved load back, and the header records its version."""
        for key, version in [(None, PLAIN), (KEY, KEYED)]:
            self.saved(key, [(0, 10), (20, 30)])
            self.assertEqual(self.load(key).rejected, False)
            self.assertEqual(self.ranges.ranges(), [(0, 10), (20, 30)])
            header = recordedHeader(self.directory, NAME)
            assert header is not None
            self.assertEqual((header["v"], "mac" in header), (version, key is not None))

    def test_appendsThenLoads(self) -> None:
        """A second save appends the ranges noted since (one line for a run in order); all load back."""
        sidecar = self.saved(KEY, [(0, 10)])
        sidecar.note(10, 20)
        sidecar.note(20, 25)
        sidecar.save(1000, "v1", "sha256", RangeSet([(0, 25)]))
        self.assertEqual(sidecar.lines, 2)
        self.load(KEY)
        self.assertEqual(self.ranges.ranges(), [(0, 25)])

    def test_anotherFile(self) -> None:
        """A sidecar of another size or version gives nothing, and is not a rejection."""
        self.saved(KEY, [(0, 10)])
        self.assertEqual((self.load(KEY, size=999).rejected, len(self.ranges)), (False, 0))
        self.assertEqual((self.load(KEY, version="v2").rejected, len(self.ranges)), (False, 0))

    def test_forgedRejected(self) -> None:
        """A keyed sidecar written or edited without the key is rejected whole."""
        self.saved(KEY, [(0, 10)])
        self.assertTrue(self.load(b"x" * KEY_BYTES).rejected)
        data = (self.root / NAME).read_bytes()
        (self.root / NAME).write_bytes(data.replace(b"0 10 ", b"0 99 "))
        self.assertEqual((self.load(KEY).rejected, len(self.ranges)), (True, 0))

    def test_addedLineRejected(self) -> None:
        """A line added without the key is rejected; cutting lines off the end only loses ranges."""
        self.saved(KEY, [(0, 10), (20, 30)])
        data = (self.root / NAME).read_bytes()
        (self.root / NAME).write_bytes(data + b"40 50 " + b"0" * 32 + b"\n")
        self.assertTrue(self.load(KEY).rejected)
        (self.root / NAME).write_bytes(data.rsplit(b"\n", 2)[0] + b"\n")
        self.assertEqual((self.load(KEY).rejected, self.ranges.ranges()), (False, [(0, 10)]))

    def test_pastPartialFileRejected(self) -> None:
        """A range past the partial file's end rejects the sidecar."""
        self.saved(None, [(0, 10)])
        self.assertTrue(self.load(None, partSize=5).rejected)

    def test_cutLineDropped(self) -> None:
        """A last line cut short by a crash is dropped; the next save rewrites the file rather than append."""
        self.saved(None, [(0, 10)])
        with open(self.root / NAME, "ab") as file:
            file.write(b"20 2")
        sidecar = self.load(None)
        self.assertEqual((self.ranges.ranges(), sidecar.rejected, sidecar.lines), ([(0, 10)], False, 0))

    def test_notAJsonHeader(self) -> None:
        """A sidecar whose first line is no JSON record is rejected; an absent one gives nothing."""
        self.assertEqual((self.load(None).rejected, len(self.ranges)), (False, 0))
        (self.root / NAME).write_bytes(b"[1, 2]\n0 10\n")
        self.assertTrue(self.load(None).rejected)

    def test_noteSaysWhenToSave(self) -> None:
        """A save is due after L{SAVE_RANGES} ranges noted (runs in order count once)."""
        sidecar = Sidecar(self.directory, NAME)
        self.assertFalse(any(sidecar.note(i, i + 1) for i in range(10 * SAVE_RANGES)))  # one run
        base = 10 * SAVE_RANGES + 1
        due = [sidecar.note(base + 2 * i, base + 2 * i + 1) for i in range(SAVE_RANGES - 1)]
        self.assertEqual(due, [False] * (SAVE_RANGES - 2) + [True])

    def test_remove(self) -> None:
        """Removing leaves no sidecar; removing an absent one is fine."""
        sidecar = self.saved(None, [(0, 10)])
        sidecar.remove()
        sidecar.remove()
        self.assertFalse((self.root / NAME).exists())


class HelperTests(SynchronousTestCase):
    """The recorded algorithm, the preference order, and the service's key."""

    def test_recordedAlgorithm(self) -> None:
        """A download's sidecar (C{.NAME.part.json}) gives its algorithm; none, or another record, gives None."""
        root = Path(self.mktemp())
        root.mkdir()
        self.assertIsNone(recordedAlgorithm(root / "file"))
        (root / ".file.part.json").write_text(json.dumps({"v": PLAIN, "algorithm": "blake3"}) + "\n")
        self.assertEqual(recordedAlgorithm(root / "file"), "blake3")
        self.assertIsNone(recordedAlgorithm(root / "missing-dir" / "file"))
        self.assertIsNone(algorithmOf({"algorithm": 3}))

    def test_preferring(self) -> None:
        """The recorded algorithm goes first if it is offered; otherwise the order is unchanged."""
        self.assertEqual(preferring("b", ["a", "b", "c"]), ["b", "a", "c"])
        self.assertEqual(preferring("z", ["a", "b"]), ["a", "b"])
        self.assertEqual(preferring(None, ("a",)), ["a"])

    def test_serviceKey(self) -> None:
        """The key is made once (0600) and read back by every later call; a short one is made again."""
        root = Path(self.mktemp())
        root.mkdir()
        directory = Directory(root)
        self.addCleanup(directory.close)
        key = serviceKey(directory)
        self.assertEqual((len(key), serviceKey(directory)), (KEY_BYTES, key))
        self.assertEqual(os.stat(root / "sidecar.key").st_mode & 0o777, 0o600)
        (root / "sidecar.key").write_bytes(b"short")
        self.assertEqual(len(serviceKey(directory)), KEY_BYTES)
