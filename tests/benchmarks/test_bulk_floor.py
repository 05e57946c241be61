"""bench_bulk's bulk criterion: the framing-free copy moves every byte, and each file case is set against it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from tests.benchmarks import _floorcopy, bench_bulk

MiB = 1 << 20
GiB = 1 << 30


def transfer(mb_s: float) -> dict[str, object]:
    """One direction's figures as the benchmark records them (each end 0.1 s user, 0.2 s system)."""
    return bench_bulk._ends(GiB / (mb_s * 1e6), [0.1, 0.2, 0.0], [0.1, 0.2, 0.0], GiB)


class FloorCopyTests(SynchronousTestCase):
    """The two ends of the framing-free copy."""

    def test_copiesEveryByte(self) -> None:
        """The sender's file arrives whole in the receiver's fresh file, and both ends' digests are its SHA-256."""
        data = os.urandom(3 * MiB + 12345)
        with tempfile.TemporaryDirectory() as directory:
            source, target = os.path.join(directory, "source"), os.path.join(directory, "target")
            with open(source, "wb") as file:
                file.write(data)
            sending, receiving = socket.socketpair()
            digests = [hashlib.sha256(), hashlib.sha256()]
            sent: list[int] = []
            sender = threading.Thread(target=lambda: sent.append(_floorcopy.send(sending, source, digests[0])))
            sender.start()
            received = _floorcopy.receive(receiving, target, digests[1])
            sender.join()
            sending.close()
            receiving.close()
            with open(target, "rb") as file:
                self.assertEqual(file.read(), data)
        self.assertEqual((sent, received), ([len(data)], len(data)))
        expected = hashlib.sha256(data).hexdigest()
        self.assertEqual([d.hexdigest() for d in digests], [expected, expected])

    def test_receiverRefusesAnExistingFile(self) -> None:
        """The receiver writes a fresh file: an existing one is an error, not overwritten."""
        with tempfile.NamedTemporaryFile() as existing:
            sending, receiving = socket.socketpair()
            with sending, receiving, self.assertRaises(FileExistsError):
                _floorcopy.receive(receiving, existing.name, hashlib.sha256())


class TwistedFloorTests(SynchronousTestCase):
    """The copy with its listening end on Twisted (C{_floorcopy --twisted}), against a blocking end."""

    def copy(self, direction: str) -> tuple[bytes, bytes, dict[str, object], dict[str, object]]:
        """
        Copy a file of a few MiB with the listening end on Twisted doing
        C{direction} (C{send} or C{receive}); the bytes sent, the bytes that
        arrived, and the listening and connecting ends' lines.
        """
        data = os.urandom(3 * MiB + 12345)
        with tempfile.TemporaryDirectory() as directory:
            source, target = os.path.join(directory, "source"), os.path.join(directory, "target")
            with open(source, "wb") as file:
                file.write(data)
            files = {"send": source, "receive": target}
            other = "receive" if direction == "send" else "send"
            command = [sys.executable, "-m", "tests.benchmarks._floorcopy", "listen", direction, "--twisted"]
            command += ["--file", files[direction], "--digest", "sha256"]
            listener = subprocess.Popen(
                command, cwd=bench_bulk.ROOT, env=bench_bulk._env(), stdout=subprocess.PIPE, text=True
            )
            try:
                assert listener.stdout is not None
                port = json.loads(listener.stdout.readline())["port"]
                connecting = _floorcopy.run("connect", other, files[other], "sha256", port)
                out, _ = listener.communicate(timeout=120)  # only a hang takes this long
            finally:
                if listener.poll() is None:
                    listener.kill()
                    listener.wait()
            with open(target, "rb") as file:
                arrived = file.read()
        self.assertEqual(listener.returncode, 0)
        return data, arrived, json.loads(out.strip().splitlines()[-1]), connecting

    def test_receives(self) -> None:
        """On Twisted, the listening end receives every byte into its fresh file and hashes what it received."""
        data, arrived, listening, connecting = self.copy("receive")
        self.assertEqual(arrived, data)
        expected = hashlib.sha256(data).hexdigest()
        self.assertEqual((listening["digest"], connecting["digest"]), (expected, expected))
        self.assertEqual((listening["bytes"], listening["reactor"]), (len(data), "twisted"))

    def test_sends(self) -> None:
        """On Twisted, the listening end sends the whole file, hashed, and closes: the blocking end has it all."""
        data, arrived, listening, connecting = self.copy("send")
        self.assertEqual(arrived, data)
        expected = hashlib.sha256(data).hexdigest()
        self.assertEqual((listening["digest"], connecting["digest"]), (expected, expected))
        self.assertEqual((listening["bytes"], connecting["bytes"]), (len(data), len(data)))
        self.assertLess(listening["started"], listening["ended"])

    def test_onlyListening(self) -> None:
        """C{--twisted} is refused for the connecting end."""
        with self.assertRaises(SystemExit):
            _floorcopy.main(["connect", "send", "--file", "x", "--twisted"])


class FloorCommandTests(SynchronousTestCase):
    """The floor timed as the CLI is, from the connecting process's launch to its exit."""

    def test_commandReachesTheExit(self) -> None:
        """
        A floor copy's command time runs to the connecting process's exit:
        it is at least as long as the wait for that process from just
        before its launch to just after its exit (in a fetch the connecting
        process is the receiver, whose last loop ends before it exits).
        """
        size = 3 * MiB + 12345
        # The files in a directory of the test's own, not in /dev/shm (a container's may hold 64 MiB), and no
        # freshMemory (it writes the size and 64 MiB more there).
        directory = Path(self.mktemp()).resolve()  # (absolute: the copy's processes run in the repository)
        directory.mkdir(parents=True)
        self.patch(bench_bulk, "TMPFS", directory)
        self.patch(bench_bulk, "freshMemory", lambda size: None)
        waits: list[float] = []
        run = bench_bulk._runClient

        def timed(command: list[str], timeout: float) -> tuple[str, tuple[float, float], int]:
            before = time.monotonic()
            result = run(command, timeout)
            waits.append(time.monotonic() - before)
            return result

        self.patch(bench_bulk, "_runClient", timed)
        for direction in bench_bulk.DIRECTIONS:
            copy = bench_bulk._floorCopy(size, "sha256", direction, False, 120.0)
            self.assertGreaterEqual(copy["command_seconds"], waits[-1], direction)
            self.assertGreater(copy["command_seconds"], copy["seconds"], direction)
            self.assertAlmostEqual(copy["command_mb_s"], size / copy["command_seconds"] / 1e6)


class CriterionTests(SynchronousTestCase):
    """Each file case's rate against the floor of its own run, direction and digest."""

    def summary(self) -> dict[str, object]:
        floors = [
            {"blake3": {"send": transfer(1000), "fetch": transfer(800)}},
            {"blake3": {"send": transfer(500), "fetch": transfer(1000)}},
            {"blake3": {"send": transfer(2000), "fetch": transfer(1000)}},
        ]
        cli = [
            {"algorithm": "blake3", "send": transfer(900), "fetch": transfer(800)},
            {"algorithm": "blake3", "send": transfer(500), "fetch": transfer(500)},
            {"algorithm": "blake3", "send": transfer(1000), "fetch": transfer(900)},
        ]
        return {
            "config": {"size": GiB},
            "cases": {},
            "calls": {},
            "floor": bench_bulk.againstFloor({"cli": cli}, floors, GiB),
        }

    def test_ratioOfEachRun(self) -> None:
        """The ratio is the median of each run's ratio to its own floor, not a ratio of medians."""
        rows = {(row["case"], row["direction"]): row for row in self.summary()["floor"]["rows"]}  # type: ignore[index]
        self.assertAlmostEqual(rows["cli", "send"]["ratio"], 0.9)  # 0.9, 1.0, 0.5
        self.assertAlmostEqual(rows["cli", "fetch"]["ratio"], 0.9)  # 1.0, 0.5, 0.9
        self.assertEqual(rows["floor", "send"]["ratio"], 1.0)

    def test_pooledRatio(self) -> None:
        """
        Beside the check, each case has the median of its rates over the
        median of every floor of the set with its digest and direction (a
        CLI case's timed as commands), which is not checked.
        """
        rows = {(row["case"], row["direction"]): row for row in self.summary()["floor"]["rows"]}  # type: ignore[index]
        self.assertAlmostEqual(rows["cli", "send"]["ratio_pooled"], 0.9)  # 900 over the median of 1000, 500, 2000
        self.assertAlmostEqual(rows["cli", "fetch"]["ratio_pooled"], 0.8)  # 800 over 1000
        self.assertNotIn("ratio_pooled", rows["floor", "send"])
        floors = [
            {"blake3": {direction: transfer(loops) | {"command_mb_s": loops * 0.8} for direction in ("send", "fetch")}}
            for loops in (1000, 500)
        ]
        runs = [{"algorithm": "blake3", "send": transfer(720), "fetch": transfer(720)}] * 2
        pooled = bench_bulk.againstFloor({"cli": runs, "library": runs}, floors, GiB)["rows"]
        rows = {(row["case"], row["direction"]): row for row in pooled}
        self.assertAlmostEqual(rows["cli", "send"]["ratio_pooled"], 1.2)  # 720 over the commands' median, 600
        self.assertAlmostEqual(rows["library", "send"]["ratio_pooled"], 0.96)  # 720 over the loops' median, 750
        self.assertAlmostEqual(rows["library", "send"]["ratio"], 1.08)  # 0.72 and 1.44, each run against its own
        summary = {"config": {"size": GiB, "criterion": True}, "cases": {}, "calls": {}, "floor": {"rows": pooled}}
        checked = [value for _, value, *_ in bench_bulk.criteria(summary)]
        self.assertEqual(checked, [row["ratio"] for row in pooled if row["case"] in ("cli", "library")])
        self.assertNotIn(rows["library", "send"]["ratio_pooled"], checked)

    def test_pairedFloor(self) -> None:
        """
        A case's run that carries the floor measured just before it (its
        C{"floor"}) is set against that floor, not its run's; the floor rows
        count every floor measured.
        """
        paired = {"digest": "blake3", "send": transfer(900), "fetch": transfer(1600)}
        cli = [{"algorithm": "blake3", "send": transfer(900), "fetch": transfer(800), "floor": paired}]
        ofTheRun = [{"blake3": {"send": transfer(450), "fetch": transfer(400)}}]
        for floors in ([], ofTheRun):
            rows = {
                (row["case"], row["direction"]): row
                for row in bench_bulk.againstFloor({"cli": cli}, floors, GiB)["rows"]
            }
            self.assertAlmostEqual(rows["cli", "send"]["ratio"], 1.0)
            self.assertAlmostEqual(rows["cli", "fetch"]["ratio"], 0.5)
            self.assertEqual(rows["floor", "send"]["floors"], 1 + len(floors))

    def test_cpuSplitPerGiB(self) -> None:
        """Each end's user, system and waiting time are given per GiB (waiting: the time it was not running)."""
        row = self.summary()["floor"]["rows"][0]  # type: ignore[index]
        self.assertAlmostEqual(row["server_user_s"], 0.1)
        self.assertAlmostEqual(row["client_system_s"], 0.2)
        self.assertAlmostEqual(row["server_wait_s"], GiB / 1000e6 - 0.3)

    def test_criteria(self) -> None:
        """The CLI with BLAKE3 must reach 0.9x the floor in each direction; the floor's own rows are no check."""
        checks = [check for check in bench_bulk.criteria(self.summary()) if "framing-free" in check[0]]
        self.assertEqual(
            [(label.split(" MB/s")[0], op, threshold) for label, _, op, threshold in checks],
            [("bulk: cli send (blake3)", ">=", 0.9), ("bulk: cli fetch (blake3)", ">=", 0.9)],
        )

    def test_criterionOnly(self) -> None:
        """With --criterion the checks are issue 31's alone: no ratio to the raw producer, no client RSS."""
        row = {"vs_raw": 0.5, "server_above_idle_mib": 6.0, "client_above_idle_mib": 80.0}
        summary = self.summary() | {"cases": {"chunkwire": row, "library": row}}
        summary["calls"] = {"chunkwire": {"ratio": 8.0}}
        full = [label for label, *_ in bench_bulk.criteria(summary)]
        summary["config"] = {"size": GiB, "criterion": True}
        only = [label for label, *_ in bench_bulk.criteria(summary)]
        self.assertTrue(any("raw Twisted producer" in label for label in full))
        self.assertTrue(any("client peak RSS" in label for label in full))
        self.assertEqual(
            [label.split(" (1 GiB)")[0] for label in only],
            [
                "bulk: cli send (blake3) MB/s / framing-free copy MB/s",
                "bulk: cli fetch (blake3) MB/s / framing-free copy MB/s",
                "bulk: chunkwire server peak RSS above idle, MiB",
                "bulk: library server peak RSS above idle, MiB",
                "bulk: chunkwire small-call p99 during transfer / idle p99",
            ],
        )

    def test_targets(self) -> None:
        """SHA-256 forced must reach 0.8x, the library 0.95x, the blocking client's upload() 0.95x (send only)."""
        self.assertEqual(
            bench_bulk.FLOOR_TARGETS,
            {"cli": 0.9, "cli-sha256": 0.8, "library": 0.95, "upload": {"send": 0.95}},
        )

    def test_commandsAgainstCommandFloor(self) -> None:
        """
        A CLI case (timed from its command's start to its exit) is set against
        the floor timed from its connecting process's launch; the library's
        and the blocking client's calls against the floor's loops.
        """
        floor = {direction: transfer(1000) | {"command_mb_s": 800.0} for direction in ("send", "fetch")}
        runs = [{"algorithm": "blake3", "send": transfer(720), "fetch": transfer(720)}]
        rows = bench_bulk.againstFloor({"cli": runs, "library": runs, "upload": runs}, [{"blake3": floor}], GiB)
        ratios = {(row["case"], row["direction"]): round(row["ratio"], 3) for row in rows["rows"]}
        self.assertEqual((ratios[("cli", "send")], ratios[("cli", "fetch")]), (0.9, 0.9))
        self.assertEqual((ratios[("library", "send")], ratios[("upload", "send")]), (0.72, 0.72))
        summary = {"config": {"size": GiB, "criterion": True}, "cases": {}, "calls": {}, "floor": rows}
        labels = [label.split(" (blake3)")[0] for label, *_ in bench_bulk.criteria(summary)]
        self.assertEqual(labels.count("bulk: upload send"), 1)
        self.assertNotIn("bulk: upload fetch", labels)

    def test_againstTheCopyOnTwisted(self) -> None:
        """
        Where the floors carry the copy on Twisted (C{--twisted-floor}), each
        case also has its median ratio to it, and the copy on Twisted a row
        whose ratio is its own to the blocking copy measured with it; both
        are shown, and the criterion still checks each case against the
        blocking copy.
        """

        def floor(blocking: float, twisted: float) -> dict[str, object]:
            copies = {d: transfer(blocking) | {"command_mb_s": blocking} for d in bench_bulk.DIRECTIONS}
            onTwisted = {d: transfer(twisted) | {"command_mb_s": twisted} for d in bench_bulk.DIRECTIONS}
            return {"digest": "blake3", **copies, "twisted": onTwisted}

        runs = [
            {"algorithm": "blake3", "send": transfer(720), "fetch": transfer(720), "floor": floor(1000, 800)},
            {"algorithm": "blake3", "send": transfer(450), "fetch": transfer(450), "floor": floor(500, 500)},
            {"algorithm": "blake3", "send": transfer(900), "fetch": transfer(900), "floor": floor(1000, 900)},
        ]
        result = bench_bulk.againstFloor({"cli": runs}, [], GiB)
        rows = {(row["case"], row["direction"]): row for row in result["rows"]}
        self.assertAlmostEqual(rows["cli", "send"]["ratio"], 0.9)  # 0.72, 0.9, 0.9
        self.assertAlmostEqual(rows["cli", "send"]["ratio_twisted"], 0.9)  # 0.9, 0.9, 1.0
        self.assertAlmostEqual(rows[bench_bulk.TWISTED_FLOOR, "fetch"]["ratio"], 0.9)  # 0.8, 1.0, 0.9
        self.assertEqual(rows[bench_bulk.TWISTED_FLOOR, "fetch"]["floors"], 3)
        summary = {"config": {"size": GiB, "criterion": True}, "cases": {}, "calls": {}, "floor": result}
        checks = {label.split(" (1 GiB)")[0]: value for label, value, *_ in bench_bulk.criteria(summary)}
        self.assertEqual(
            checks,
            {
                "bulk: cli send (blake3) MB/s / framing-free copy MB/s": rows["cli", "send"]["ratio"],
                "bulk: cli fetch (blake3) MB/s / framing-free copy MB/s": rows["cli", "fetch"]["ratio"],
            },
        )
        raw = {"label": "raw", "mb_s": 1000.0, "mb_s_min": 900.0, "mb_s_max": 1100.0, "vs_raw": 1.0}
        raw |= {f"{side}_cpu_s_per_gib": 1.0 for side in ("server", "client")}
        raw |= {f"{side}_{kind}_mib": 50.0 for side in ("server", "client") for kind in ("peak", "above_idle")}
        summary["config"] |= {"runs": 3, "cpus": 2, "load_average": (1.0, 1.0, 1.0)}
        table = bench_bulk.table(summary | {"cases": {"raw": raw}}).splitlines()
        # (/ all floors: the median 720 over the blocking floors' median, 1000)
        self.assertIn(
            "| cli | send | blake3 | 720 | 0.90x | 0.72x | 0.90x | 0.10 / 0.20 / 1.19 | 0.10 / 0.20 / 1.19 |", table
        )
        self.assertIn(
            "| floor on Twisted | fetch | blake3 | 800 | 0.90x | — | — | 0.10 / 0.20 / 1.04 | 0.10 / 0.20 / 1.04 |",
            table,
        )
        plain = self.summary() | {"config": summary["config"], "cases": {"raw": raw}}
        self.assertNotIn("on Twisted", bench_bulk.table(plain))  # (measured only with --twisted-floor)


class ListeningPortTests(SynchronousTestCase):
    """The CLI case finds the example server's port past the log lines it prints first."""

    def test_afterLogLines(self) -> None:
        """Log lines before the server's own line are passed over."""
        import io

        out = io.StringIO(
            "logins: not required\n"
            "2026-11-27T07:13:29+0000 [-] BrokerFactory starting on 37315\n"
            "bulk server listening on tcp:0 (IPv4Address(type='TCP', host='127.0.0.1', port=37316)), serving /x\n"
            "more log\n"
        )
        self.assertEqual(bench_bulk._listeningPort(out), "37316")

    def test_never(self) -> None:
        """A server that ends without saying where it listens is an error that shows what it printed."""
        import io

        error = self.assertRaises(RuntimeError, bench_bulk._listeningPort, io.StringIO("Traceback: boom\n"))
        self.assertIn("boom", str(error))


class FreshMemoryTests(SynchronousTestCase):
    """Every transfer starts in memory the guest has just touched, and says what the VM handed back meanwhile."""

    def test_writesAndFrees(self) -> None:
        """L{bench_bulk.freshMemory} writes its size (and 64 MiB more) to tmpfs and leaves no file behind."""
        written: list[int] = []
        with tempfile.TemporaryDirectory() as directory:
            self.patch(bench_bulk, "TMPFS", directory)
            real = tempfile.NamedTemporaryFile

            def recording(**kwargs: object) -> object:
                scratch = real(**kwargs)  # type: ignore[call-overload]
                write = scratch.write
                scratch.write = lambda block: written.append(len(block)) or write(block)
                return scratch

            self.patch(tempfile, "NamedTemporaryFile", recording)
            bench_bulk.freshMemory(3 * MiB + 1)
            self.assertEqual(os.listdir(directory), [])
        self.assertEqual(sum(written), (4 + 64) * MiB)

    def test_reportedSince(self) -> None:
        """The MiB the VM handed back between two readings; nothing where it does not say."""
        with tempfile.NamedTemporaryFile("w") as reported:
            self.patch(bench_bulk, "HOST_REPORTED", bench_bulk.Path(reported.name))
            reported.write("2048")
            reported.flush()
            before = bench_bulk.hostReportedMiB()
            with open(reported.name, "w") as again:
                again.write("4096")
            self.assertEqual((before, bench_bulk.reportedSince(before)), (2.0, 2.0))
            self.assertIsNone(bench_bulk.reportedSince(None))
        self.patch(bench_bulk, "HOST_REPORTED", bench_bulk.Path("/nonexistent/reported_kib"))
        self.assertIsNone(bench_bulk.hostReportedMiB())

    def test_runLine(self) -> None:
        """A run's line gives each direction's memory handed back, and nothing on a machine that does not say."""
        result = {"send": {"host_reported_mib": 12.4}, "fetch": {"host_reported_mib": None}}
        self.assertEqual(bench_bulk.handedBack(result), " (memory handed back to the host meanwhile: 12, 0 MiB)")
        self.assertEqual(bench_bulk.handedBack({"send": {"host_reported_mib": None}, "fetch": {}}), "")

    def test_floorLine(self) -> None:
        """A floor's line gives each direction's rate, on Twisted too when measured, and what went back."""
        floor = {"send": {"mb_s": 812.4, "host_reported_mib": 3.0}, "fetch": {"mb_s": 770.0, "host_reported_mib": None}}
        line = "send 812 MB/s, fetch 770 MB/s (memory handed back to the host meanwhile: 3, 0 MiB)"
        self.assertEqual(bench_bulk.floorRates(floor), line)
        floor["twisted"] = {"send": {"mb_s": 760.6}, "fetch": {"mb_s": 809.0}}
        self.assertEqual(
            bench_bulk.floorRates(floor),
            "send 812 MB/s, fetch 770 MB/s, on Twisted send 761, fetch 809"
            " (memory handed back to the host meanwhile: 3, 0 MiB)",
        )


class BufferTests(SynchronousTestCase):
    """The copy's buffers start on a page, where the kernel copies into them at full speed."""

    def test_pageAligned(self) -> None:
        """L{_floorcopy.buffer} is writable, of its size, and starts on a page boundary."""
        import ctypes
        import mmap

        view = _floorcopy.buffer(3 * MiB)
        self.assertEqual((len(view), view.readonly), (3 * MiB, False))
        address = ctypes.addressof(ctypes.c_char.from_buffer(view))
        self.assertEqual(address % mmap.PAGESIZE, 0)


class HostMemoryKeptTests(SynchronousTestCase):
    """C{--keep-host-memory}: the VM's page reporting is held off for the run, put back after, and said."""

    BUDDYINFO = (
        "Node 0, zone      DMA      0      0      0      0      0      0      0      0      1      1      3 \n"
        "Node 0, zone   Normal   5014    672    481    691    565    280    176    110    127     52    144 \n"
    )

    def files(self, order: str | None) -> tuple[bench_bulk.Path, bench_bulk.Path]:
        directory = bench_bulk.Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, directory)
        buddyinfo = directory / "buddyinfo"
        buddyinfo.write_text(self.BUDDYINFO)
        parameter = directory / "page_reporting_order"
        if order is not None:
            parameter.write_text(order + "\n")
        return parameter, buddyinfo

    def test_heldAndPutBack(self) -> None:
        """Inside, the order is one past the largest (11 orders: 11); after, the one before, even after an error."""
        parameter, buddyinfo = self.files("9")
        with bench_bulk.hostMemoryKept(parameter, buddyinfo) as (before, held):
            self.assertEqual((before, held, parameter.read_text()), ("9", "11", "11\n"))
        self.assertEqual(parameter.read_text(), "9\n")
        with self.assertRaises(RuntimeError):
            with bench_bulk.hostMemoryKept(parameter, buddyinfo):
                raise RuntimeError("a run failed")
        self.assertEqual(parameter.read_text(), "9\n")

    def test_noReporting(self) -> None:
        """A machine without page reporting: a plain error naming the missing setting, nothing written."""
        parameter, buddyinfo = self.files(None)
        with self.assertRaises(SystemExit) as caught:
            with bench_bulk.hostMemoryKept(parameter, buddyinfo):
                self.fail("entered")
        self.assertIn("reports no free memory to a host", str(caught.exception))
        self.assertFalse(parameter.exists())

    def test_notWritable(self) -> None:
        """A setting that cannot be changed (not root): a plain error saying so."""
        parameter, buddyinfo = self.files("9")

        def refused(path: bench_bulk.Path, text: str) -> None:
            raise PermissionError(13, "Permission denied")

        self.patch(bench_bulk.Path, "write_text", refused)
        with self.assertRaises(SystemExit) as caught:
            with bench_bulk.hostMemoryKept(parameter, buddyinfo):
                self.fail("entered")
        self.assertIn("Permission denied; it needs root", str(caught.exception))

    def test_said(self) -> None:
        """The table's first line says the reporting was held off, and nothing when it was not."""
        self.assertEqual(bench_bulk.keptLine({}), "")
        line = bench_bulk.keptLine({"host_memory_kept": {"order_before": 9, "order_held": 11}})
        self.assertIn("free page reporting was held off for the run (order 9 set to 11, put back after", line)

    def test_option(self) -> None:
        """C{--keep-host-memory} runs the benchmark inside L{bench_bulk.hostMemoryKept} and records it."""
        entered: list[bool] = []

        class Kept:
            def __enter__(self) -> tuple[str, str]:
                entered.append(True)
                return "9", "11"

            def __exit__(self, *exc: object) -> None:
                entered.append(False)

        seen: list[bool] = []
        self.patch(bench_bulk, "hostMemoryKept", Kept)
        self.patch(bench_bulk, "runAll", lambda args: seen.append(entered[-1]) or {"config": {}})
        self.patch(bench_bulk, "table", lambda summary: repr(summary["config"]))
        with tempfile.TemporaryDirectory() as directory:
            bench_bulk.main(["--keep-host-memory", "--cases", "raw", "--json", os.path.join(directory, "out.json")])
            recorded = json.loads(Path(directory, "out.json").read_text())
        self.assertEqual((seen, entered), ([True], [True, False]))
        self.assertEqual(recorded["config"]["host_memory_kept"], {"order_before": 9, "order_held": 11})
