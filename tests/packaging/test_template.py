"""
chunkwire as a package, and the template project of docs/howto/own-project.rst used from it.

The wheel and the sdist are built once per run (C{python -m build}, which
builds the wheel I{from the sdist}, so a wheel holding the compiled core
proves the sdist builds it too) and installed, with the template project
(C{examples/template}) copied out of the tree and its C{dev} extra, into
one fresh virtualenv.  There, away from the repository, the template's own
trial tests and C{mypy --strict} run as its users would run them.  The
packages come from the index through pip's cache.  A process test: it runs
under one runner only (C{PROCESS_TESTS} in C{dev.py}).
"""

from __future__ import annotations

import atexit
import functools
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from tests.processes import figure

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "examples" / "template"
BIN = "Scripts" if os.name == "nt" else "bin"

# The fresh environment must see the installed packages only: nothing of the
# repository's (PYTHONPATH) and whichever core the installed build chose.
CLEAN_ENV = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "CHUNKWIRE_PURE")}
CLEAN_ENV["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"


def isLocal(name: str) -> bool:
    """Whether a file or directory of that name is a tool's by-product in a working tree, not the template's."""
    return (
        name.startswith((".", "_trial_temp")) or name in ("__pycache__", "build", "dist") or name.endswith(".egg-info")
    )


def templateFiles() -> list[Path]:
    """The template's own files (not what tools leave in it: caches, trial's and mypy's directories)."""
    return sorted(
        path
        for path in TEMPLATE.rglob("*")
        if path.is_file() and not any(isLocal(part) for part in path.relative_to(TEMPLATE).parts)
    )


class SetupFailed(Exception):
    """A step of building or installing failed; the message holds its command and output."""


@dataclass(frozen=True)
class Installed:
    """
    What the one set-up of this module made.

    @ivar wheel: the built wheel.
    @ivar sdist: the built sdist.
    @ivar python: the fresh virtualenv's python, with the wheel and the template installed.
    @ivar project: the template's copy, outside the repository.
    @ivar seconds: how long each step took, by name.
    """

    wheel: Path
    sdist: Path
    python: Path
    project: Path
    seconds: dict[str, float]


def run(command: list[str | Path], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run C{command} in C{cwd} with the clean environment; its output is captured."""
    return subprocess.run(
        [str(part) for part in command], cwd=cwd, env=CLEAN_ENV, capture_output=True, text=True, timeout=timeout
    )


def check(command: list[str | Path], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run C{command} as L{run} does; raise L{SetupFailed} with its output if it fails."""
    done = run(command, cwd, timeout)
    if done.returncode != 0:
        shown = " ".join(str(part) for part in command)
        raise SetupFailed(f"{shown} exited with {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


@functools.cache
def installed() -> Installed:
    """Build, make the virtualenv and install, once per process; its directory is removed at exit."""
    work = Path(tempfile.mkdtemp(prefix="chunkwire-packaging-"))
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    seconds: dict[str, float] = {}

    start = time.monotonic()
    dist = work / "dist"
    check([sys.executable, "-m", "build", "--outdir", dist, ROOT], work)
    (wheel,) = dist.glob("chunkwire-*.whl")
    (sdist,) = dist.glob("chunkwire-*.tar.gz")
    seconds["build"] = time.monotonic() - start

    start = time.monotonic()
    project = work / "jobqueue"
    shutil.copytree(TEMPLATE, project, ignore=lambda _, names: [name for name in names if isLocal(name)])
    venv = work / "venv"
    # Without pip of its own (its set-up is most of a venv's making): this
    # process's pip installs into it.  Nothing is byte-compiled ahead (most
    # of an install's time); what the checks import is compiled as it is.
    check([sys.executable, "-m", "venv", "--without-pip", venv], work)
    python = venv / BIN / "python"
    # One resolution: the template's chunkwire requirement is met by the wheel.
    install = [sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-compile"]
    check([*install, wheel, f"{project}[dev]"], work)
    seconds["venv and install"] = time.monotonic() - start
    return Installed(wheel, sdist, python, project, seconds)


class PackageTests(SynchronousTestCase):
    """The wheel and the sdist hold what an installation needs, and install into a fresh virtualenv."""

    def setUp(self) -> None:
        self.installed = installed()

    def test_twineCheck(self) -> None:
        """Both pass twine check --strict (their metadata and README render on an index)."""
        done = run(
            [sys.executable, "-m", "twine", "check", "--strict", self.installed.wheel, self.installed.sdist], ROOT
        )
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertEqual(done.stdout.count("PASSED"), 2, done.stdout)

    def test_wheelContents(self) -> None:
        """The wheel holds the compiled core built for this interpreter, the stub and markers, no C source or tests."""
        names = set(zipfile.ZipFile(self.installed.wheel).namelist())
        extension = "framing/_speedups" + sysconfig.get_config_var("EXT_SUFFIX")
        expected = {extension, "framing/_speedups.pyi", "framing/py.typed", "protocols/py.typed"}
        expected |= {"twisted/plugins/chunkwire_plugins.py", "protocols/rpc/__init__.py", "protocols/bulk/__init__.py"}
        self.assertEqual(expected - names, set())
        self.assertTrue(any(name.endswith("dist-info/licenses/LICENSE") for name in names), names)
        self.assertEqual([name for name in names if name.endswith(".c") or name.startswith("tests/")], [])

    def test_sdistContents(self) -> None:
        """The sdist holds the C source, the stub, the markers, LICENSE and README, and no tests or built files."""
        with tarfile.open(self.installed.sdist) as archive:
            names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
        expected = {"framing/_speedups.c", "framing/_speedups.pyi", "framing/py.typed", "protocols/py.typed"}
        expected |= {"LICENSE", "README.md", "pyproject.toml", "setup.py", "twisted/plugins/chunkwire_plugins.py"}
        self.assertEqual(expected - names, set())
        stray = [name for name in names if name.startswith("tests/") or name.endswith((".so", ".pyc"))]
        self.assertEqual(stray, [])

    def test_installedCompiled(self) -> None:
        """Installed from the wheel, away from the repository, framing runs the compiled core."""
        show = "import framing, protocols; print(framing.implementation, framing.__file__, protocols.__file__)"
        done = check([self.installed.python, "-c", show], self.installed.project.parent)
        implementation, *files = done.stdout.split()
        self.assertEqual(implementation, "compiled")
        for path in files:
            self.assertIn("site-packages", path)
            self.assertNotIn(str(ROOT), path)


class TemplateTests(SynchronousTestCase):
    """The template project, copied out and installed from the wheel, passes its own checks."""

    def setUp(self) -> None:
        self.installed = installed()

    def test_trialTests(self) -> None:
        """Its trial suite passes: the in-memory, login, bulk and SQLite store tests (PostgreSQL's skip there)."""
        start = time.monotonic()
        done = run([self.installed.python, "-m", "twisted.trial", "tests"], self.installed.project, timeout=300)
        self.installed.seconds["trial"] = time.monotonic() - start
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertRegex(done.stdout, r"PASSED \(skips=3, successes=(1[1-9]|[2-9]\d)\)")
        for module in ("test_memory", "test_login", "test_bulk", "test_store"):
            self.assertIn(f"tests.{module}", done.stdout)
        self.report()

    def test_mypyStrict(self) -> None:
        """mypy --strict, with the template's mypy.ini, finds nothing in its package or its tests."""
        start = time.monotonic()
        command = [self.installed.python, "-m", "mypy", "--strict", "jobqueue", "tests"]
        done = run(command, self.installed.project, timeout=300)
        self.installed.seconds["mypy"] = time.monotonic() - start
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertIn("Success: no issues found", done.stdout)
        self.report()

    def test_serverCommand(self) -> None:
        """The installed project's jobqueue-server command runs (its --help)."""
        done = run([self.installed.python.parent / "jobqueue-server", "--help"], self.installed.project)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("--users", done.stdout)

    def report(self) -> None:
        """Print how long each step took, once all have (only in runs that show figures)."""
        seconds = self.installed.seconds
        if {"trial", "mypy"} <= set(seconds):
            figure("packaging: " + ", ".join(f"{step} {value:.1f} s" for step, value in seconds.items()))


class TemplateSourceTests(SynchronousTestCase):
    """The template and the docs about it, read as files (no build needed)."""

    def test_noTypeIgnore(self) -> None:
        """No file of the template silences mypy: it passes --strict as written."""
        found = [
            str(path.relative_to(TEMPLATE)) for path in templateFiles() if "type: ignore" in path.read_text("utf-8")
        ]
        self.assertEqual(found, [])

    def test_pageIncludesEveryFile(self) -> None:
        """docs/howto/own-project.rst includes every file of the template, so it shows them as they are."""
        page = (ROOT / "docs" / "howto" / "own-project.rst").read_text("utf-8")
        included = set(re.findall(r"literalinclude:: \.\./\.\./examples/template/(\S+)", page))
        files = {path.relative_to(TEMPLATE).as_posix() for path in templateFiles() if path.stat().st_size}
        self.assertEqual(files - included, set())
        self.assertEqual(included - files, set())
        self.assertIn(":doc:`typed-interfaces`", page)  # the mypy set-up it follows

    def test_installNotFromIndex(self) -> None:
        """No doc, example or message tells to pip install chunkwire by name, as if it were on the package index."""
        byName = re.compile(r"pip install +'?chunkwire\b")
        places = [ROOT / "README.md", *(ROOT / "docs").rglob("*.rst"), *(ROOT / "docs").rglob("*.md")]
        places += [
            *(ROOT / "examples").rglob("*.py"),
            *(ROOT / "protocols").rglob("*.py"),
            *(ROOT / "framing").rglob("*.py"),
        ]
        found = [
            f"{path.relative_to(ROOT)}: {line.strip()}"
            for path in places
            if "_build" not in path.parts
            for line in path.read_text("utf-8").splitlines()
            if byName.search(line)
        ]
        self.assertEqual(found, [])
