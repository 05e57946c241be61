"""Issue 28, round three, the bulk file service: local users' links, descriptors, workers, quotas, sidecars.

Each test runs the real service as a process (the example server, or
C{twist chunkwire-bulk --workers 2}), attacks it, and checks outcomes
only: the honest client's answers all correct, nothing outside the served
directory touched, the attacker refused with a logged code, descriptors,
RSS and partial files bounded and back to idle.  No timing ratios.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing.bulk._fileerrors import QuotaExceeded
from protocols.bulk._quotas import FileBudget, FileLimits

from ..processes import figure
from .attacks_round3_bulk import PRIVATE, BulkProcess, drain, holdUploads, partialFiles, runClient, settled
from .harness import UNTIMED_PAUSE, honest, honestResult

RSS_BOUND = 64 * 1024 * 1024
"""Most the service's peak RSS may grow over idle during one case."""
HONEST_SECONDS = 3.0


class _Case(SynchronousTestCase):
    """A scratch directory and a bulk service process per test."""

    def scratch(self) -> Path:
        work = tempfile.TemporaryDirectory()
        self.addCleanup(work.cleanup)
        return Path(work.name)

    def start(self, scratch: Path, **options: Any) -> BulkProcess:
        server = BulkProcess(scratch, **options)
        self.addCleanup(server.stop)
        return server

    def assertNoPath(self, text: str, server: BulkProcess) -> None:
        """The service's own paths never reach a client."""
        self.assertNotIn(str(server.directory), text)
        self.assertNotIn(str(server.directory.parent), text)

    def assertHonest(self, clients: Any) -> None:
        result = honestResult(clients)
        self.assertEqual(result["errors"], [])
        self.assertGreater(result["calls"], 0)


class SymlinkTests(_Case):
    """A local user's links and FIFOs in the served directory reach nothing outside it."""

    def test_linksAreNotFollowed(self) -> None:
        """Links named as partial files, sidecars, digest records and files: nothing outside is truncated or served."""
        scratch = self.scratch()
        outside = scratch / "outside"
        outside.mkdir()
        victims = {name: f"{name} belongs to someone else\n".encode() for name in ("a", "b", "c", "d", "e", "f")}
        for name, content in victims.items():
            (outside / name).write_bytes(content)
        server = self.start(scratch)
        served = server.directory
        # The local user's links, under every name the service uses or used.
        os.symlink(outside / "a", served / ".up.bin.part")
        os.symlink(outside / "b", served / ".up.bin.part.json")
        os.symlink(outside / "c", served / "link.bin")
        os.symlink(outside / "d", served / "dest.bin")
        os.symlink(outside / "e", served / ".dest.bin.sha256.json")
        os.symlink(outside / "f", served / ".dest.bin.blake3.json")
        os.mkfifo(served / "fifo.bin")
        idle = server.idle()
        clients = honest("bulk", server.port, HONEST_SECONDS, pause=UNTIMED_PAUSE)
        seen = runClient("symlinks", port=server.port, work=str(scratch))
        self.assertHonest(clients)
        for name, content in victims.items():
            self.assertEqual((outside / name).read_bytes(), content, f"{name} outside was changed")
        for name in ("link.bin", "fifo.bin"):
            for method in ("stat", "get", "download"):
                self.assertEqual(seen[f"{method} {name}"]["error"]["type"], "NoSuchFile", seen)
        self.assertNotIn("link.bin", [name for name, _ in seen["list"]])
        self.assertNotIn("fifo.bin", [name for name, _ in seen["list"]])
        self.assertIn("ok", seen["send up.bin"], seen)
        self.assertIn("ok", seen["send dest.bin"], seen)
        # The upload replaced the link by a regular file; the link's target is untouched.
        self.assertFalse((served / "dest.bin").is_symlink())
        self.assertEqual((served / "dest.bin").read_bytes(), (scratch / "source.bin").read_bytes())
        self.assertEqual(sorted(name for name, _ in seen["list after"]), ["dest.bin", "up.bin"])
        self.assertNoPath(repr(seen), server)
        after = settled(server, idle, ("fds",), time.monotonic() + 10)
        self.assertLessEqual(after["fds"], idle["fds"])
        self.assertLessEqual(after["peak"] - idle["rss"], RSS_BOUND)
        self.assertEqual(partialFiles(served), [".up.bin.part", ".up.bin.part.json"])  # the links, left alone
        figure(f"bulk symlinks: fds {idle['fds']}/{after['fds']}, peak RSS +{(after['peak'] - idle['rss']) >> 20} MiB")


class WorkerTests(_Case):
    """Two worker processes serving one directory own each upload through a lock on its partial file."""

    def test_uploadOwnedAcrossWorkers(self) -> None:
        """Another version of a name being uploaded through the other worker is refused UploadBusy; nothing is lost."""
        scratch = self.scratch()
        server = self.start(scratch, workers=2)
        idle = server.idle()
        seen = runClient("workers", port=server.port, pids=server.pids, work=str(scratch))
        self.assertIn("other", seen["b"], seen)  # a connection of B reached the other worker
        for where, outcome in seen["b"].items():
            self.assertEqual(outcome.get("error", {}).get("type"), "UploadBusy", (where, seen))
        self.assertEqual(seen["finishA"].get("ok", {}).get("digest"), seen["digest"], seen)
        self.assertEqual((server.directory / "shared.bin").read_bytes(), (scratch / "a.bin").read_bytes())
        self.assertNoPath(repr(seen), server)
        after = settled(server, idle, ("fds", "parts"), time.monotonic() + 10)
        self.assertLessEqual(after["fds"], idle["fds"])
        self.assertEqual(after["parts"], 0)
        self.assertLessEqual(after["peak"] - idle["rss"], RSS_BOUND)
        self.assertIn("upload-busy", server.log())
        figure(f"bulk workers: fds {idle['fds']}/{after['fds']}, peak RSS +{(after['peak'] - idle['rss']) >> 20} MiB")


class DescriptorTests(_Case):
    """Unfinished uploads held by many connections from a few addresses leave room for new clients."""

    NOFILE = 1024

    def test_uploadsHeldFromFourAddresses(self) -> None:
        """80 connections from 4 addresses, 16 open uploads each: refused past the budget; a new client is served."""
        scratch = self.scratch()
        server = self.start(scratch, nofile=self.NOFILE)
        idle = server.idle()
        clients = honest("bulk", server.port, HONEST_SECONDS, pause=UNTIMED_PAUSE)
        addresses = [f"127.0.0.{n}" for n in range(2, 6)]
        sockets = holdUploads(server.port, addresses, perAddress=20, uploads=16)
        try:
            answers = drain(sockets, 3.0)
            during = server.figures()
            seen = runClient("fresh", port=server.port, bind="127.0.0.9", work=str(scratch))
            still = server.figures()
        finally:
            for sock in sockets:
                sock.close()
        self.assertHonest(clients)
        self.assertEqual(len(sockets), 80)
        self.assertIn(b"TooManyOpenFiles", answers)
        self.assertEqual([outcome.get("error") for outcome in seen["lists"]], [None] * 5, seen)
        self.assertIn("ok", seen["put"], seen)
        self.assertIn("ok", seen["send"], seen)
        self.assertNoPath(repr(seen), server)
        self.assertNoPath(answers.decode("latin-1"), server)
        # At most 32 open files per address: 4 x 32 uploads, 80 connections, and the service's own.
        for figures in (during, still):
            self.assertLess(figures["fds"], idle["fds"] + 80 + 4 * 32 + 32)
        self.assertIn("too-many-open-files", server.log())
        after = settled(server, idle, ("fds", "parts"), time.monotonic() + 10)
        figure(
            f"bulk descriptors: fds {idle['fds']}/{during['fds']}/{still['fds']}/{after['fds']}, "
            f"parts {idle['parts']}/{during['parts']}/{after['parts']}, "
            f"peak RSS +{(after['peak'] - idle['rss']) >> 20} MiB"
        )
        self.assertLessEqual(after["fds"], idle["fds"])
        self.assertEqual(after["parts"], 0)
        self.assertLessEqual(after["peak"] - idle["rss"], RSS_BOUND)


class QuotaTests(_Case):
    """Unfinished uploads are charged their sizes against a quota per user and in all."""

    def test_abandonedUploadsHitTheQuota(self) -> None:
        """An abandoned 6 MB upload stays charged: another gets QuotaExceeded; the first resumes, a small one fits."""
        scratch = self.scratch()
        server = self.start(scratch, extra=["--partial-quota-per-user=8000000", "--partial-quota=20000000"])
        idle = server.idle()
        clients = honest("bulk", server.port, HONEST_SECONDS, pause=UNTIMED_PAUSE)
        seen = runClient("quota", port=server.port, work=str(scratch), size=6_000_000)
        self.assertHonest(clients)
        self.assertEqual(seen["open first"]["ok"]["held"], [], seen)
        self.assertEqual(seen["open second"]["error"]["type"], "QuotaExceeded", seen)
        self.assertEqual(seen["resume first"]["ok"]["held"], [[0, 1_000_000]], seen)
        self.assertIn("ok", seen["small"], seen)
        self.assertIn("partial-quota", server.log())
        self.assertNoPath(repr(seen), server)
        after = settled(server, idle, ("fds",), time.monotonic() + 10)
        self.assertLessEqual(after["fds"], idle["fds"])
        self.assertEqual(partialFiles(server.directory), ["first.bin.part", "first.bin.part.json"])
        figure(f"bulk quota: {seen['open second']['error']['message']}; fds {idle['fds']}/{after['fds']}")

    def test_budgetPerUserAndInAll(self) -> None:
        """The budget refuses a user past its quota, and any user past the total; what is given back is free again."""
        budget = FileBudget(FileLimits(maxPartialBytes=100, maxPartialBytesPerUser=60))
        budget.charge("alice", "a", 50)
        self.assertRaises(QuotaExceeded, budget.charge, "alice", "b", 20)
        budget.charge("alice", "a", 60)  # the same upload, restarted bigger: within the user's quota
        budget.charge("bob", "a", 40)
        self.assertRaises(QuotaExceeded, budget.charge, "carol", "c", 1)
        budget.uncharge("alice", "a")
        budget.charge("carol", "c", 60)
        self.assertEqual((budget.partialBytes, budget.partialFor("alice"), budget.partialFor("carol")), (100, 0, 60))


class SidecarTests(_Case):
    """A sidecar not written by the service (forged ranges) restarts its upload; its bytes are never served."""

    def test_forgedSidecarRestartsTheUpload(self) -> None:
        """Half an upload, then its sidecar rewritten to claim every byte: the resume sends all and it verifies."""
        scratch = self.scratch()
        server = self.start(scratch)
        idle = server.idle()
        size = 2_000_000
        first = runClient("half", port=server.port, work=str(scratch), size=size)
        self.assertIn("ok", first["upload"], first)
        sidecar = server.directory / PRIVATE / "t.bin.part.json"
        lines = sidecar.read_bytes().split(b"\n")
        # The local user keeps the header (and a real line's tag, if lines
        # carry tags), and claims the whole file.
        fields = lines[1].split(b" ")
        forged = b"0 %d" % size + (b" " + fields[2] if len(fields) == 3 else b"")
        sidecar.write_bytes(lines[0] + b"\n" + forged + b"\n")
        clients = honest("bulk", server.port, HONEST_SECONDS, pause=UNTIMED_PAUSE)
        seen = runClient("resume", port=server.port, work=str(scratch))
        self.assertHonest(clients)
        data = (scratch / "t.bin").read_bytes()
        self.assertEqual(seen.get("ok"), hashlib.sha256(data).hexdigest(), seen)
        self.assertEqual(seen["payload"], size)  # restarted: every byte sent again
        self.assertEqual((server.directory / "t.bin").read_bytes(), data)
        self.assertIn("sidecar-refused", server.log())
        after = settled(server, idle, ("fds", "parts"), time.monotonic() + 10)
        figure(f"bulk sidecar: resent {seen['payload']} of {size}; fds {idle['fds']}/{after['fds']}")
        self.assertLessEqual(after["fds"], idle["fds"])
        self.assertEqual(after["parts"], 0)
        self.assertLessEqual(after["peak"] - idle["rss"], RSS_BOUND)
