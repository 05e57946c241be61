"""Files in one directory by descriptor, never through a link (L{protocols._places}), on a real temporary directory."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from twisted.trial.unittest import SkipTest, SynchronousTestCase

from protocols._places import Directory, NotRegular, UnsafeDirectory, lockFile


class DirectoryTests(SynchronousTestCase):
    """Names are looked up relative to the descriptor; links, FIFOs and directories are no files."""

    def setUp(self) -> None:
        self.root = Path(self.mktemp())
        self.root.mkdir()
        self.outside = Path(self.mktemp())
        self.outside.mkdir()
        (self.outside / "secret").write_bytes(b"secret")
        self.directory = Directory(self.root)
        self.addCleanup(self.directory.close)

    def test_createReadAppendReplace(self) -> None:
        """A created file reads back; append adds; replace swaps the content whole and leaves no temporary file."""
        os.close(self.directory.create("a"))
        self.assertRaises(FileExistsError, self.directory.create, "a")
        self.directory.append("a", b"one")
        self.directory.append("a", b"two")
        self.assertEqual(self.directory.read("a", 100), b"onetwo")
        self.assertEqual(self.directory.read("a", 3), b"one")
        self.directory.replace("a", b"new")
        self.assertEqual(self.directory.read("a", 100), b"new")
        self.assertEqual([name for name, _ in self.directory.files()], ["a"])

    def test_linkIsNoFile(self) -> None:
        """A link to a file outside is not followed: open refuses it, read and stat find nothing, files() omits it."""
        (self.root / "link").symlink_to(self.outside / "secret")
        self.assertRaises(NotRegular, self.directory.open, "link")
        self.assertRaises(NotRegular, self.directory.open, "link", os.O_RDWR | os.O_CREAT)
        self.assertIsNone(self.directory.read("link", 100))
        self.assertIsNone(self.directory.stat("link"))
        self.assertEqual(list(self.directory.files()), [])

    def test_fifoAndDirectoryAreNoFiles(self) -> None:
        """A FIFO (opened without blocking) and a directory are not regular files."""
        os.mkfifo(self.root / "fifo")
        (self.root / "sub").mkdir()
        self.assertRaises(NotRegular, self.directory.open, "fifo")
        self.assertRaises(NotRegular, self.directory.open, "sub")
        self.assertIsNone(self.directory.read("fifo", 1))

    def test_missing(self) -> None:
        """A missing name: open raises FileNotFoundError, read and stat give None, unlink gives False."""
        self.assertRaises(FileNotFoundError, self.directory.open, "gone")
        self.assertIsNone(self.directory.read("gone", 1))
        self.assertIsNone(self.directory.stat("gone"))
        self.assertFalse(self.directory.unlink("gone"))

    def test_unlinkAndRenameActOnTheLink(self) -> None:
        """Unlinking or renaming a link acts on the link itself: the file it points to stays."""
        (self.root / "link").symlink_to(self.outside / "secret")
        other = Directory(self.outside)
        self.addCleanup(other.close)
        self.directory.rename("link", other, "moved")
        self.assertTrue((self.outside / "moved").is_symlink())
        (self.root / "link2").symlink_to(self.outside / "secret")
        self.assertTrue(self.directory.unlink("link2"))
        self.assertEqual((self.outside / "secret").read_bytes(), b"secret")

    def test_replaceDoesNotFollowALink(self) -> None:
        """Replacing a name that is a link replaces the link; the file outside keeps its content."""
        (self.root / "a").symlink_to(self.outside / "secret")
        self.directory.replace("a", b"mine")
        self.assertEqual(((self.root / "a").is_symlink(), (self.outside / "secret").read_bytes()), (False, b"secret"))
        self.assertEqual(self.directory.read("a", 100), b"mine")

    def test_publishOnce(self) -> None:
        """publish writes a name that is absent, and leaves one that exists (False); no temporary file stays."""
        self.assertTrue(self.directory.publish("p", b"first"))
        self.assertFalse(self.directory.publish("p", b"second"))
        self.assertEqual(self.directory.read("p", 100), b"first")
        self.assertEqual([name for name, _ in self.directory.files()], ["p"])

    def test_closed(self) -> None:
        """Once closed (idempotently), every use is a ValueError, never a lookup by path."""
        directory = Directory(self.root)
        directory.close()
        directory.close()
        self.assertRaises(ValueError, directory.descriptor)
        self.assertRaises(ValueError, directory.open, "a")

    def test_adoptDescriptor(self) -> None:
        """A directory adopted by descriptor is reached through it, whatever the path now names."""
        fd = os.open(self.root, os.O_RDONLY)
        adopted = Directory("elsewhere", fd=fd)
        self.addCleanup(adopted.close)
        os.close(adopted.create("x"))
        self.assertTrue((self.root / "x").is_file())
        self.assertEqual(repr(adopted), "<Directory elsewhere>")


class PrivateTests(SynchronousTestCase):
    """L{Directory.private}: a subdirectory of mode 0700, this user's, never a link."""

    def setUp(self) -> None:
        self.root = Path(self.mktemp())
        self.root.mkdir()
        self.directory = Directory(self.root)
        self.addCleanup(self.directory.close)

    def test_madeAndTightened(self) -> None:
        """A missing one is made 0700; an existing one is set to 0700; it is usable as a Directory."""
        made = self.directory.private("made")
        self.addCleanup(made.close)
        (self.root / "loose").mkdir(mode=0o755)
        loose = self.directory.private("loose")
        self.addCleanup(loose.close)
        for name in ("made", "loose"):
            self.assertEqual(stat.S_IMODE((self.root / name).stat().st_mode), 0o700)
        os.close(made.create("f"))
        self.assertTrue((self.root / "made" / "f").is_file())

    def test_linkOrFileRefused(self) -> None:
        """A link to a directory, or a file, is no private directory."""
        elsewhere = Path(self.mktemp())
        elsewhere.mkdir()
        (self.root / "link").symlink_to(elsewhere)
        (self.root / "file").write_bytes(b"")
        self.assertRaises(UnsafeDirectory, self.directory.private, "link")
        self.assertRaises(UnsafeDirectory, self.directory.private, "file")


class LockTests(SynchronousTestCase):
    """An exclusive lock per open file, seen by every open file of the same name."""

    def setUp(self) -> None:
        try:
            import fcntl  # noqa: F401
        except ImportError:
            raise SkipTest("no flock on this platform") from None
        self.root = Path(self.mktemp())
        self.root.mkdir()
        self.directory = Directory(self.root)
        self.addCleanup(self.directory.close)

    def test_secondOpenNotLocked(self) -> None:
        """While one open file holds the lock, another gets None; once it is closed, the next one locks."""
        first = self.directory.openLocked("partial")
        assert first is not None
        self.assertIsNone(self.directory.openLocked("partial"))
        os.close(first)
        second = self.directory.openLocked("partial")
        self.assertIsNotNone(second)
        assert second is not None
        other = os.open(self.root / "partial", os.O_RDONLY)
        self.addCleanup(os.close, other)
        self.assertFalse(lockFile(other))
        os.close(second)
        self.assertTrue(lockFile(other))
