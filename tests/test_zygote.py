"""The zygote that forks test servers (tests/zygote.py): a child's output, signals and end; its end with the zygote."""

from __future__ import annotations

import signal
from pathlib import Path

from twisted.trial.unittest import SkipTest, SynchronousTestCase

from framing.rpc._limits import CallLimits
from protocols.blocking import connect
from protocols.options import ClientOptions
from tests import zygote
from tests.processes import readUntil, runExample, runScript, stop
from tests.protocols.failover import PRELOAD

SERVER = ("-m", "tests.protocols.failoverserver")


class ZygoteTests(SynchronousTestCase):
    def setUp(self) -> None:
        if not zygote.available():
            raise SkipTest("the zygote needs Linux's pidfds")
        self.zygote = zygote.Zygote.shared(PRELOAD)  # the failover tests' own

    def test_childServesAndExits(self) -> None:
        """A child serves as the module would as a process (its output on its pipe); it ends with its own code (0)."""
        child = self.zygote.start(*SERVER, "s0")
        self.addCleanup(stop, child)
        port = int(readUntil(child, rb"port=(\d+)").group(1))
        self.assertIsNone(child.poll())
        with connect(
            f"127.0.0.1:{port}",
            options=ClientOptions(timeout=zygote.HANG, callLimits=CallLimits(callTimeout=zygote.HANG)),
        ) as client:
            self.assertEqual(client.root.callRemote("whoami"), "s0")  # served: its SIGTERM handler is set
        child.terminate()
        self.assertEqual(child.wait(zygote.HANG), 0)

    def test_childFails(self) -> None:
        """A child whose module raises: the traceback on its pipe, its code 1, as C{python -m} gives."""
        child = self.zygote.start(*SERVER)  # no name: sys.argv[1] fails
        self.addCleanup(stop, child)
        self.assertEqual(child.wait(zygote.HANG), 1)
        assert child.stdout is not None
        self.assertIn(b"IndexError", child.stdout.read())

    def test_killedChild(self) -> None:
        """SIGKILL through the pidfd: the child's code is -9, its pipe ends, a later signal is ignored."""
        child = self.zygote.start(*SERVER, "s0")
        self.addCleanup(stop, child)
        readUntil(child, rb"port=\d+")
        child.kill()
        self.assertEqual(child.wait(zygote.HANG), -signal.SIGKILL)
        assert child.stdout is not None
        self.assertEqual(child.stdout.read(), b"")
        child.send_signal(signal.SIGTERM)

    def test_childrenEndWithTheZygote(self) -> None:
        """The zygote closed (as when the test process ends): its children still running are killed."""
        self.zygote = zygote.Zygote(PRELOAD)
        self.addCleanup(self.zygote.close)
        children = [self.zygote.start(*SERVER, f"s{n}") for n in range(2)]
        for child in children:
            self.addCleanup(stop, child)
            readUntil(child, rb"port=\d+")
        self.zygote.close()
        self.assertEqual([child.wait(zygote.HANG) for child in children], [-signal.SIGKILL] * 2)

    def test_scriptChild(self) -> None:
        """
        A script runs as C{python SCRIPT.py} would: its folder first on
        C{sys.path} (echo_server.py imports its helpers from examples/), its
        path as C{argv[0]} (argparse's program name), its code as its end.
        """
        child = self.zygote.start("examples/echo_server.py", "--help")
        self.addCleanup(stop, child)
        self.assertEqual(child.wait(zygote.HANG), 0)
        assert child.stdout is not None
        self.assertIn(b"usage: echo_server.py", child.stdout.read())
        bad = self.zygote.start("examples/echo_server.py", "--no-such-option")
        self.addCleanup(stop, bad)
        self.assertEqual(bad.wait(zygote.HANG), 2)

    def test_neitherModuleNorScript(self) -> None:
        """A request that is neither C{-m MODULE} nor a C{.py} script is refused before anything is forked."""
        self.assertRaises(ValueError, self.zygote.start, "-c", "print(1)")

    def test_stderrApartInItsFolder(self) -> None:
        """
        With C{stderr}, the child's stderr has its own pipe; with C{cwd}, it
        runs there; with C{env}, that is its whole environment.
        """
        folder = Path(self.mktemp()).resolve()
        folder.mkdir(parents=True)
        script = folder / "where.py"
        script.write_text(
            "import os, sys\nprint(os.getcwd(), sorted(os.environ))\nprint('to stderr', file=sys.stderr)\nsys.exit(3)\n"
        )
        child = self.zygote.start(str(script), stderr=True, cwd=str(folder), env={"ONLY": "this"})
        self.addCleanup(stop, child)
        self.assertEqual(child.wait(zygote.HANG), 3)
        assert child.stdout is not None and child.stderr is not None
        self.assertEqual((child.stdout.read(), child.stderr.read()), (f"{folder} ['ONLY']\n".encode(), b"to stderr\n"))
        child.stderr.close()


class RunExampleTests(SynchronousTestCase):
    """tests.processes.runExample gives what subprocess.run would: the code, stdout and stderr apart."""

    def test_asSubprocessRun(self) -> None:
        """A mistyped option: status 2, nothing on stdout, argparse's two lines on stderr; --help on stdout."""
        done = runExample("echo_server.py", "--no-such-option")
        self.assertEqual((done.returncode, done.stdout), (2, ""))
        self.assertIn("error: unrecognized arguments: --no-such-option", done.stderr)
        helped = runExample("echo_server.py", "--help")
        self.assertEqual((helped.returncode, helped.stderr), (0, ""))
        self.assertIn("usage: echo_server.py", helped.stdout)

    def test_relativeFolder(self) -> None:
        """A relative C{cwd} is from the test process's own folder (trial's temporary one), as Popen's is."""
        folder = Path(self.mktemp())
        folder.mkdir(parents=True)
        (folder / "where.py").write_text("import os\nprint(os.getcwd())\n")
        done = runScript(str((folder / "where.py").resolve()), cwd=folder)
        self.assertEqual((done.returncode, done.stdout), (0, f"{folder.resolve()}\n"), done.stderr)
