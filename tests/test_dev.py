"""dev.py: a quiet first-run setup, and one command for every tox environment."""

from __future__ import annotations

import configparser
import importlib.metadata
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from tests.examples.test_dev_commands import loadDev
from tests.processes import ROOT

PIP_NOISE = "SetuptoolsDeprecationWarning: project.license as a TOML table is deprecated\n" * 20


class FakeRunner:
    """Stands in for subprocess.run: records each command and answers as pip would, noisily."""

    def __init__(self, purelib: Path, failOn: str | None = None) -> None:
        self.purelib = purelib
        self.failOn = failOn
        self.commands: list[list[str]] = []

    def __call__(self, command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.commands.append(command)
        if "sysconfig" in " ".join(command):
            return subprocess.CompletedProcess(command, 0, f"{self.purelib}\n", "")
        failed = self.failOn is not None and self.failOn in command
        return subprocess.CompletedProcess(command, 1 if failed else 0, PIP_NOISE, "ERROR: it broke\n" * failed)


class SetupTests(SynchronousTestCase):
    """dev.py's setup of .venv prints one line, and pip's output only when a step fails."""

    def setUp(self) -> None:
        self.dev = loadDev()
        work = Path(self.mktemp()).resolve()
        self.purelib = work / "site-packages"
        self.purelib.mkdir(parents=True)
        self.dev.VENV = work / ".venv"
        self.dev.PYTHON = work / ".venv" / "bin" / "python"
        self.dev.VENV.mkdir()  # what the venv step would have made
        self.output = io.StringIO()
        self.patch(sys, "stdout", self.output)

    def test_oneLine(self) -> None:
        """A first run prints one line and no pip output, installs editable without compat mode, writes the stamp."""
        runner = FakeRunner(self.purelib)
        self.dev.ensure_venv(runner)
        lines = self.output.getvalue().splitlines()
        self.assertEqual(len(lines), 1, lines)
        self.assertTrue(lines[0].startswith("setting up "), lines)
        install = [command for command in runner.commands if "-e" in command]
        self.assertEqual(len(install), 1)
        self.assertNotIn("editable_mode=compat", " ".join(install[0]))
        self.assertTrue((self.dev.VENV / ".chunkwire-installed").is_file())

    def test_pipUpgradedFirst(self) -> None:
        """pip is upgraded before the install, whatever the version .venv came with (the newer one installs faster)."""
        runner = FakeRunner(self.purelib)
        self.dev.ensure_venv(runner)
        upgrade = runner.commands.index(next(c for c in runner.commands if c[-2:] == ["--upgrade", "pip"]))
        install = runner.commands.index(next(c for c in runner.commands if "-e" in c))
        self.assertLess(upgrade, install)

    def test_upToDate(self) -> None:
        """A second run with the same pyproject.toml prints nothing and runs nothing."""
        self.dev.ensure_venv(FakeRunner(self.purelib))
        self.dev.PYTHON.parent.mkdir(parents=True, exist_ok=True)
        self.dev.PYTHON.touch()
        self.output.seek(0)
        self.output.truncate()
        runner = FakeRunner(self.purelib)
        self.dev.ensure_venv(runner)
        self.assertEqual((self.output.getvalue(), runner.commands), ("", []))

    def test_compiledCoreChanged(self) -> None:
        """A changed framing/_speedups.c (or setup.py) reinstalls, which recompiles the editable install's extension."""
        root = Path(self.mktemp())
        for name in self.dev.BUILD_INPUTS:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes((self.dev.ROOT / name).read_bytes())
        self.patch(self.dev, "ROOT", root)
        self.dev.ensure_venv(FakeRunner(self.purelib))
        self.dev.PYTHON.parent.mkdir(parents=True, exist_ok=True)
        self.dev.PYTHON.touch()
        (root / "framing" / "_speedups.c").write_bytes(b"/* changed */\n")
        runner = FakeRunner(self.purelib)
        self.dev.ensure_venv(runner)
        self.assertEqual(len([command for command in runner.commands if "-e" in command]), 1)

    def test_failureShowsOutput(self) -> None:
        """A failing step shows its command and pip's output, exits with its status, and writes no stamp."""
        runner = FakeRunner(self.purelib, failOn="-e")
        with self.assertRaises(SystemExit) as raised:
            self.dev.ensure_venv(runner)
        self.assertEqual(raised.exception.code, 1)
        output = self.output.getvalue()
        self.assertIn("failed: ", output)
        self.assertIn("ERROR: it broke", output)
        self.assertIn("SetuptoolsDeprecationWarning", output)
        self.assertFalse((self.dev.VENV / ".chunkwire-installed").exists())

    def test_pluginPath(self) -> None:
        """Setup puts the repository on .venv's sys.path with a .pth file, where Twisted looks for twisted/plugins."""
        self.dev.ensure_venv(FakeRunner(self.purelib))
        self.assertEqual((self.purelib / self.dev.PLUGINS_PTH).read_text(), f"{self.dev.ROOT}\n")


class AtherisTests(SynchronousTestCase):
    """dev.py fuzz installs atheris only when .venv lacks it, quietly."""

    def setUp(self) -> None:
        self.dev = loadDev()
        self.output = io.StringIO()
        self.patch(sys, "stdout", self.output)

    def test_installedWhenMissing(self) -> None:
        """A failed import of atheris leads to one line and a quiet pip install of atheris."""
        runner = FakeRunner(Path("unused"), failOn="import atheris")
        self.dev.ensure_atheris(runner)
        self.assertEqual(runner.commands[1][-1], "atheris")
        self.assertEqual(self.output.getvalue(), "installing atheris into .venv for the fuzz targets ...\n")

    def test_presentLeftAlone(self) -> None:
        """With atheris importable nothing is installed and nothing printed."""
        runner = FakeRunner(Path("unused"))
        self.dev.ensure_atheris(runner)
        self.assertEqual((len(runner.commands), self.output.getvalue()), (1, ""))


class TwistFromVenvTests(SynchronousTestCase):
    """The installed project's twist plugins are found from any directory."""

    def test_twistHelp(self) -> None:
        """C{twist chunkwire-echo --help} works from another directory, with no PYTHONPATH."""
        try:
            importlib.metadata.distribution("chunkwire")
        except importlib.metadata.PackageNotFoundError:
            self.skipTest("chunkwire is not installed in this interpreter (python3 dev.py test installs it)")
        env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
        with tempfile.TemporaryDirectory() as elsewhere:
            command = [sys.executable, "-m", "twisted", "chunkwire-echo", "--help"]
            result = subprocess.run(command, cwd=elsewhere, env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("--listen", result.stdout)


class ToxParityTests(SynchronousTestCase):
    """Every tox environment has a dev.py command, named in dev.py's help and the README."""

    def setUp(self) -> None:
        self.dev = loadDev()
        self.calls: list[tuple[str, ...]] = []
        self.dev.ensure_venv = lambda: self.calls.append(("ensure_venv",))
        self.dev.ensure_atheris = lambda: self.calls.append(("ensure_atheris",))
        self.pure: list[bool] = []
        self.dev.run = lambda *args, pure=False: self.calls.append(args) or self.pure.append(pure) or 0
        self.dev.compileAhead = lambda: None
        self.patch(sys, "stdout", io.StringIO())
        self.patch(os, "environ", dict(os.environ))

    def test_testOnBothCores(self) -> None:
        """
        dev.py test runs pytest on the compiled core and trial on the
        pure-Python one, each in RUNNERS runners, and the lint, all at once.
        """
        jobs: list[list[tuple[list[str], bool, str | None]]] = []
        runners = self.dev.RUNNERS
        self.dev.runTogether = lambda given: jobs.append(given) or [0] * len(given)
        self.assertEqual(self.dev.main(["test"]), 0)
        [given] = jobs
        self.assertEqual(len(given), 2 * runners + 1)
        pytests, trials, [(lint, _, _)] = given[:runners], given[runners:-1], given[-1:]
        self.assertEqual({(tuple(args[:2]), pure) for args, pure, _ in pytests}, {(("-m", "pytest"), False)})
        self.assertEqual({(tuple(args[:2]), pure) for args, pure, _ in trials}, {(("-m", "twisted.trial"), True)})
        self.assertEqual(lint, ["dev.py", "lint"])
        temporary = [argument for args, _, _ in trials for argument in args if argument.startswith("--temp-directory=")]
        self.assertEqual(len(set(temporary)), runners)

    def test_slowModulesSpread(self) -> None:
        """
        deal gives each runner about the same hinted seconds: the slow
        modules first, each to the runner with least, the quick ones after;
        every module once.
        """
        slow = self.dev.SLOW_TEST_MODULES
        modules = [f"tests.test_quick{index}" for index in range(40)] + list(slow)
        hands = self.dev.deal(modules, 2)
        self.assertEqual(sorted(hands[0] + hands[1]), sorted(modules))
        seconds = [sum(slow.get(name, 1) for name in hand) for hand in hands]
        self.assertLessEqual(abs(seconds[0] - seconds[1]), 1)
        self.assertIn(max(slow, key=slow.__getitem__), hands[0][:1])
        self.assertEqual(self.dev.deal(["tests.a", "tests.b", "tests.c"], 2), [["tests.a", "tests.c"], ["tests.b"]])

    def test_slowModulesExist(self) -> None:
        """Each module dev.py hints as slow is a test module of the suite (a renamed one would unbalance quietly)."""
        every = set(self.dev.testModules(()))
        self.assertEqual([name for name in self.dev.SLOW_TEST_MODULES if name not in every], [])

    def test_testCompilesAhead(self) -> None:
        """dev.py test writes the bytecode of the project's modules before it starts the runners."""
        order: list[str] = []
        self.dev.compileAhead = lambda: order.append("compileall")
        self.dev.runTogether = lambda given: order.append("runners") or [0] * len(given)
        self.assertEqual(self.dev.main(["test"]), 0)
        self.assertEqual(order, ["compileall", "runners"])

    def test_runnersWriteBytecode(self) -> None:
        """dev.py test's runners are started without PYTHONDONTWRITEBYTECODE, so pytest keeps its rewritten modules."""
        os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
        seen: list[str | None] = []
        self.dev.runTogether = lambda given: seen.append(os.environ.get("PYTHONDONTWRITEBYTECODE")) or [0] * len(given)
        self.assertEqual(self.dev.main(["test"]), 0)
        self.assertEqual(seen, [None])

    def test_compileAhead(self) -> None:
        """compileAhead runs compileall quietly over the project's own module folders, in the project's root."""
        commands: list[tuple[list[str], dict[str, Any]]] = []
        loadDev().compileAhead(lambda command, **options: commands.append((command, options)))
        [(command, options)] = commands
        self.assertEqual(command[1:4], ["-m", "compileall", "-q"])
        self.assertEqual(set(command[4:]), {"framing", "protocols", "examples", "tests", "twisted"})
        self.assertEqual(options["cwd"], loadDev().ROOT)

    def test_testArgumentsToOnePytest(self) -> None:
        """Arguments after dev.py test go to one pytest run of the compiled half, not split."""
        jobs: list[list[tuple[list[str], bool, str | None]]] = []
        self.dev.runTogether = lambda given: jobs.append(given) or [0] * len(given)
        self.assertEqual(self.dev.main(["test", "-k", "codec"]), 0)
        [given] = jobs
        self.assertEqual(given[0][0][-2:], ["-k", "codec"])
        self.assertEqual([args[:2] for args, _, _ in given[1:-1]], [["-m", "twisted.trial"]] * self.dev.RUNNERS)
        self.assertFalse(any("-k" in args for args, _, _ in given[1:]))

    def test_testFailsIfOneRunFails(self) -> None:
        """A failure in any runner, or in lint, fails dev.py test."""
        count = 2 * self.dev.RUNNERS + 1
        for failing in range(count):
            statuses = [1 if index == failing else 0 for index in range(count)]
            self.dev.runTogether = lambda given, statuses=statuses: statuses
            self.assertEqual(self.dev.main(["test"]), 1, statuses)

    def test_everyEnvironment(self) -> None:
        """Each [testenv:NAME] in tox.ini is a dev.py command, shown by dev.py help and in the README."""
        tox = configparser.ConfigParser(interpolation=None)
        tox.read(ROOT / "tox.ini")
        names = [section.split(":", 1)[1] for section in tox.sections() if section.startswith("testenv:")]
        self.assertIn("docs", names)
        readme = (ROOT / "README.md").read_text("utf-8")
        for name in names:
            self.assertIn(name, self.dev.COMMANDS)
            self.assertIn(f"dev.py {name}", self.dev.__doc__)
            self.assertIn(f"dev.py {name}", readme)

    def test_docs(self) -> None:
        """dev.py docs draws the figures, builds with -W, then checks the pages; --screenshots asks for PNGs."""
        self.assertEqual(self.dev.main(["docs", "--screenshots"]), 0)
        self.assertEqual(self.calls[1], ("docs/make_plots.py",))
        self.assertEqual(self.calls[2][:3], ("-m", "sphinx", "-W"))
        self.assertEqual(self.calls[3][0], "docs/check_pages.py")
        self.assertIn("--screenshots", self.calls[3])

    def test_attack(self) -> None:
        """dev.py attack ARGS runs the attack campaign as tox does, refreshing docs/reliability.md, ARGS last."""
        self.assertEqual(self.dev.main(["attack", "--only-extras"]), 0)
        self.assertEqual(self.calls[1][:2], ("-m", "tests.attack"))
        self.assertEqual(self.calls[1][-3:], ("--report", "docs/reliability.md", "--only-extras"))
        self.assertIn(str(ROOT), os.environ["PYTHONPATH"].split(os.pathsep))

    def test_fuzz(self) -> None:
        """dev.py fuzz: atheris is there, the three targets, the findings replayed, then the properties longer."""
        self.assertEqual(self.dev.main(["fuzz"]), 0)
        self.assertEqual(self.calls[1], ("ensure_atheris",))
        self.assertEqual(
            [call[0] for call in self.calls[2:]],
            ["fuzz/fuzz_decoder.py", "fuzz/fuzz_cores.py", "fuzz/fuzz_unslicers.py", "-m", "-m", "-m"],
        )
        self.assertIn("tests/framing/test_fuzz.py", self.calls[-2])
        self.assertEqual(self.calls[-1], ("-m", "tests.properties"))  # every property at its whole count
        self.assertEqual(os.environ["CHUNKWIRE_FUZZ_EXAMPLES"], "20000")

    def test_soak(self) -> None:
        """
        dev.py soak runs the references-come-and-go tests at a hundred
        thousand references (the default run sends ten thousand), then the
        attack campaign's long runs.
        """
        self.assertEqual(self.dev.main(["soak"]), 0)
        self.assertEqual(self.calls[1][:2], ("-m", "pytest"))
        self.assertIn("tests/protocols/rpc/test_memory.py", self.calls[1])
        self.assertIn("tests/protocols/rpc/test_tcp.py", self.calls[1])
        self.assertEqual(os.environ["CHUNKWIRE_REFERENCE_BATCHES"], "100")
        self.assertEqual([call[:2] for call in self.calls[2:4]], [("-m", "tests.attack")] * 2)

    def test_failureStops(self) -> None:
        """A failing command ends the environment's run with its status, as tox does."""
        self.dev.run = lambda *args: self.calls.append(args) or 3
        self.assertEqual(self.dev.main(["soak"]), 3)
        self.assertEqual(len(self.calls), 2)


class PackagingTests(SynchronousTestCase):
    """pyproject.toml declares what a plain install needs for TLS, and its licence in the SPDX form."""

    def setUp(self) -> None:
        try:
            import tomllib
        except ImportError:  # Python 3.10
            self.skipTest("tomllib is Python 3.11+")
        self.project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]

    def test_tlsExtra(self) -> None:
        """The tls extra installs pyOpenSSL and service_identity, and the TLS how-to tells the reader to use it."""
        self.assertEqual(set(self.project["optional-dependencies"]["tls"]), {"pyOpenSSL", "service_identity"})
        self.assertIn("chunkwire[tls]", (ROOT / "docs" / "howto" / "tls.rst").read_text("utf-8"))

    def test_license(self) -> None:
        """The licence is an SPDX string (no deprecated TOML table) with a LICENSE file beside it."""
        self.assertEqual(self.project["license"], "MIT")
        self.assertIn("MIT License", (ROOT / "LICENSE").read_text("utf-8"))
