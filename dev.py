#!/usr/bin/env python3
"""Set up a virtualenv on demand and run chunkwire's demo, tests, docs or benchmarks.

    python3 dev.py demo [--size 16]   # the main demo
    python3 dev.py test               # the whole suite: pytest (on the compiled core) and trial (on
                                      # the pure-Python core) at once, then ruff, mypy (what CI runs)

One command per tox environment, for when tox is not installed:

    python3 dev.py pytest [ARGS]      # tox -e pytest
    python3 dev.py trial [ARGS]       # tox -e trial
    python3 dev.py lint               # ruff check, ruff format --check, mypy (tox -e lint,type)
    python3 dev.py type               # tox -e type: mypy --strict on framing and protocols
    python3 dev.py bench [ARGS]       # tox -e bench: the benchmarks (slow)
    python3 dev.py docs [--screenshots]
                                      # tox -e docs: the figures, then the site with -W,
                                      # then a check of the built pages (and PNGs of them
                                      # at 1280 px in docs/_build/screenshots with headless Chromium)
    python3 dev.py fuzz               # tox -e fuzz: bounded atheris runs (installs atheris), then
                                      # the fuzz properties at 20,000 examples (100 by default),
                                      # then every other property at its whole count on both cores
                                      # (at most 100 examples by default: tests/properties.py)
    python3 dev.py attack [ARGS]      # tox -e attack: refreshes docs/reliability.md
    python3 dev.py soak               # tox -e soak: the long runs
    python3 dev.py haproxy            # tox -e haproxy: HAProxy in front of two servers, a rolling
                                      # restart of 100,000 calls (installs haproxy if root with apt-get)
    python3 dev.py postgres           # a private PostgreSQL, as the tests start one (tests/postgres.py:
                                      # initdb in a temporary directory, as nobody when root; installs
                                      # Debian's postgresql if root and missing): prints its URL for
                                      # --store, removed on Ctrl-C
    python3 dev.py cluster            # kv on three hosts (network namespaces) sharing PostgreSQL, behind
                                      # HAProxy, under faults; checks every call's history, prints the
                                      # figures (tests/cluster; needs root: fails, saying why, without)
    python3 dev.py asan [ARGS]        # the compiled core built with AddressSanitizer, under
                                      # tests/framing/test_cores.py and test_vectors.py (needs gcc)
    python3 dev.py sizes [--top N]    # a report, never a failure: the N (15) largest classes and
                                      # functions in framing/ and protocols/ (tests/structure.py)

Only python3 (3.10+) and git are needed: the first run makes .venv and
installs the project with its extras there (one line is printed; pip's
output is shown only if it fails); later runs reuse it until pyproject.toml
changes.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / "python"
EXTRAS = "test,lint,bench,docs,fast"
PLUGINS_PTH = "chunkwire-plugins.pth"

# The commands of the tox environments without their own function below, as
# python argument lists (each run with .venv's python from the repository root).
FUZZ_RUNS = os.environ.get("FUZZ_RUNS", "1000000")
FUZZ_UNSLICER_RUNS = os.environ.get("FUZZ_UNSLICER_RUNS", "1000000")
FUZZ_FLAGS = ["-rss_limit_mb=1024", "-timeout=10", "-print_final_stats=1"]
TOX_COMMANDS: dict[str, list[list[str]]] = {
    "fuzz": [
        ["fuzz/fuzz_decoder.py", "fuzz/corpus/decoder", f"-runs={FUZZ_RUNS}", *FUZZ_FLAGS],
        ["fuzz/fuzz_cores.py", "fuzz/corpus/decoder", f"-runs={FUZZ_RUNS}", *FUZZ_FLAGS],
        ["fuzz/fuzz_unslicers.py", "fuzz/corpus/unslicers", f"-runs={FUZZ_UNSLICER_RUNS}", *FUZZ_FLAGS],
        ["-m", "pytest", "-q", "tests/fuzz"],
        [
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/framing/test_fuzz.py",
            "tests/framing/test_recovery.py",
        ],
        ["-m", "tests.properties"],
    ],
    "attack": [
        ["-m", "tests.attack", "--duration", "4", "--json", "attack-results.json", "--report", "docs/reliability.md"]
    ],
    "soak": [
        [
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/protocols/rpc/test_memory.py",
            "tests/protocols/rpc/test_tcp.py",
            "-k",
            "referencesComeAndGo or references_come_and_go",
        ],
        ["-m", "tests.attack", "--duration", "60", "--together", "--no-extras", "--json", "soak-results.json"],
        ["-m", "tests.attack", "--duration", "20", "--json", "soak-each.json"],
        ["-m", "tests.latency.push", "--size-mib", "256", "--delay", "0.05", "--rate-mib", "32"],
    ],
    "haproxy": [["-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "tests/protocols/serving/test_haproxy.py"]],
}
COMMANDS = (
    "demo",
    "test",
    "pytest",
    "trial",
    "lint",
    "type",
    "bench",
    "docs",
    "asan",
    "sizes",
    "postgres",
    "cluster",
    *TOX_COMMANDS,
)
BUILD_INPUTS = ("pyproject.toml", "setup.py", "framing/_speedups.c")
"""What the editable install is made from: a change to any of them reinstalls (and so recompiles)."""


def quietly(command: list[str], runner: Callable[..., Any] = subprocess.run) -> None:
    """
    Run one setup step with its output captured; on failure show the command
    and its output, then exit with its status.
    """
    result = runner(command, cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        print(f"failed: {' '.join(command)}", flush=True)
        sys.stdout.write(result.stdout + result.stderr)
        raise SystemExit(result.returncode)


def ensure_venv(runner: Callable[..., Any] = subprocess.run) -> None:
    """Create .venv and install the project unless it is already up to date; print one line if work is done."""
    stamp = VENV / ".chunkwire-installed"
    inputs = b"".join(hashlib.sha256((ROOT / name).read_bytes()).digest() for name in BUILD_INPUTS)
    digest = hashlib.sha256(inputs + EXTRAS.encode()).hexdigest()
    if stamp.exists() and stamp.read_text() == digest and PYTHON.exists():
        return
    if sys.version_info < (3, 10):  # noqa: UP036 - dev.py runs on whatever python3 the user has
        sys.exit("chunkwire needs Python 3.10 or newer")
    print(f"setting up {VENV} (Twisted and the test, lint, bench, docs and fast extras; a few minutes) ...", flush=True)
    if not PYTHON.exists():
        quietly([sys.executable, "-m", "venv", str(VENV)], runner)
    pip = [str(PYTHON), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    # Upgraded first even when new enough: pip 26 installed the extras in 29 s of wall where the 23.2.1
    # Python 3.11's venv brings took 45 s (the upgrade: 1.7 s).
    quietly([*pip, "--upgrade", "pip"], runner)
    quietly([*pip, "-e", f".[{EXTRAS}]"], runner)
    # An editable install imports framing and protocols from here, but Twisted
    # finds plugins by looking for twisted/plugins/ under each sys.path entry:
    # putting the repository on sys.path is what lets twist see ours.
    find = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    purelib = runner([str(PYTHON), "-c", find], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    (Path(purelib) / PLUGINS_PTH).write_text(f"{ROOT}\n")
    stamp.write_text(digest)


def run(*args: str, pure: bool = False) -> int:
    """Run .venv's python with C{args}; C{pure}: on the pure-Python codec core (C{CHUNKWIRE_PURE=1})."""
    print("$", *(["CHUNKWIRE_PURE=1"] if pure else []), *args, flush=True)
    env = {**os.environ, "CHUNKWIRE_PURE": "1"} if pure else None
    return subprocess.run([str(PYTHON), *args], cwd=ROOT, env=env).returncode


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "help"
    rest = argv[1:]
    if command not in COMMANDS:
        print(__doc__)
        return 0 if command == "help" else 2
    ensure_venv()
    if command == "demo":
        return run("examples/demo.py", *rest)
    if command == "bench":
        return run("-m", "tests.benchmarks", *rest)
    if command == "lint":
        return lint()
    if command == "pytest":
        return run("-m", "pytest", "-q", *rest)
    if command == "trial":
        return run("-m", "twisted.trial", *(rest or ["tests"]))
    if command == "type":
        return run("-m", "mypy", "framing", "protocols")
    if command == "docs":
        return docs(screenshots="--screenshots" in rest)
    if command == "asan":
        return asan(rest)
    if command == "sizes":
        return run("-m", "tests.structure", *rest)
    if command == "postgres":
        return run("-m", "tests.postgres", *rest)
    if command == "cluster":
        return run("-m", "tests.cluster", *rest)
    if command in TOX_COMMANDS:
        return toxCommands(command, rest)
    return test(rest)


PROCESS_TESTS = {
    "compiled": (
        "tests/attack/test_attack.py",
        "tests/attack/test_attacks_bulk.py",
        "tests/attack/test_auth.py",
        "tests/attack/test_round3_kv.py",
        "tests/attack/test_round3_net.py",
        "tests/latency",
        "tests/test_docs_snippets.py",
        "tests/protocols/rpc/test_interfaces_mypy.py",
        "tests/protocols/rpc/test_otel_processes.py",
        "tests/protocols/test_blocking_kv.py",
        "tests/protocols/test_blocking_failover.py",
        "tests/protocols/test_asyncioclient_failover.py",
        "tests/protocols/test_blocking_logins.py",
        "tests/protocols/test_asyncioclient_logins.py",
        "tests/protocols/test_asyncioclient_kv.py",
        "tests/protocols/test_blockingbulk.py",
        "tests/protocols/test_asynciobulk.py",
        "tests/attack/test_catalogue_server.py",
        "tests/framing/test_docs_build.py",
        "tests/attack/test_twisted_drop.py",
        "tests/test_zygote.py",
        "tests/packaging",
    ),
    "pure": (
        "tests/attack/test_round3_auth.py",
        "tests/attack/test_round3_bulk.py",
        "tests/attack/test_catalogue_peer.py",
        "tests/attack/test_slowreader.py",
        "tests/faults",
        "tests/examples",
        "tests/protocols/serving",
        "tests/test_twist_plugins.py",
        "tests/test_benchmark_plots.py",
        "tests/test_demo.py",
        "tests/protocols/kv/test_example.py",
        "tests/protocols/rpc/test_failover.py",
        "tests/protocols/bulk/test_examples.py",
        "tests/protocols/test_examples.py",
        "tests/protocols/test_example_trace.py",
        "tests/test_structure.py",
        "tests/test_design_links.py",
        "tests/test_method_shadows.py",
    ),
}
"""
The tests whose subject is a whole program run as processes (the example
servers under attack, the CLIs, twist and its workers, the docs build,
mypy), and the checks that read the source rather than run it (its
structure, its design links, no method replaced on an instance: 36 CPU-s
of the default run while both halves ran them): the default run gives each
to one of its two runs, not both, since what they prove does not change
with the codec core (the differential and in-process tests prove the cores
alike).  Some go to each core, so that both serve real processes, weighed
so that the two runs end at about the same time (tests/packaging went to
the compiled half when the pure half's hostile-peer catalogue shrank; the
benchmark plots to the pure half at 689d658, when the compiled runners
ended at 378 and 369 s and the pure ones at 349 and 347).  Every other test runs in
both (a new file too, until it is named here), the interop kit's among
them: its cases are what another implementation is held to, so the Python
client and server pass them on both cores.  C{dev.py pytest} and C{dev.py
trial} still run everything.
"""


RUNNERS = 2
"""
How many runners each core's half of L{test} is split into, each taking
whole test modules (so that each module runs in one process, as the
packaging tests' one build and the docs' one site need; L{deal} says
which): a runner's tests also wait (for a child process, a timeout, a
peer), and the four keep the two cores busy meanwhile.  Measured at
c0e4d7f, load 4-5 (another helper's tests beside it): the four runners
ended at 470, 490, 503 and 505 s, each having spent 162 to 222 CPU-seconds
(its own and its children's) in its tests, 784 in all with the lint.  At
827bf3d on an otherwise quiet machine: 424 and 433 s (pytest), 405 and 439
s (trial), 446 s in all; the last trial runner's share alone took 272 s
and 234 CPU-s, so the four need about two cores' worth for the whole run:
the run is bound by CPU, and what shortens it is CPU saved.
"""

SLOW_TEST_MODULES = {
    "tests.framing.test_docs_build": 34,
    "tests.attack.test_catalogue_peer": 33,
    "tests.packaging.test_template": 30,
    "tests.attack.test_round3_bulk": 29,
    "tests.attack.test_slowreader": 28,
    "tests.attack.test_attack": 25,
    "tests.test_docs_snippets": 24,
    "tests.test_benchmark_plots": 18,
    "tests.attack.test_catalogue_server": 17,
    "tests.attack.test_round3_auth": 17,
    "tests.framing.test_costs": 16,
    "tests.protocols.serving.test_kv_workers": 15,
    "tests.protocols.serving.test_workers": 15,
    "tests.attack.test_streams": 14,
    "tests.examples.test_bulk_cli": 14,
    "tests.framing.test_cores": 14,
    "tests.protocols.serving.test_kv_postgresql": 14,
    "tests.protocols.test_interop": 14,
    "tests.attack.test_attacks_bulk": 11,
    "tests.protocols.rpc.test_interfaces_mypy": 11,
    "tests.attack.test_round3_kv": 10,
    "tests.test_twist_plugins": 10,
    "tests.attack.test_round3_net": 9,
    "tests.examples.test_help": 9,
    "tests.attack.test_auth": 8,
    "tests.protocols.test_blockingbulk": 8,
    "tests.framing.test_codec": 7,
    "tests.protocols.rpc.test_failover": 7,
    "tests.protocols.test_asyncioclient_failover": 7,
    "tests.protocols.test_blocking_failover": 7,
    "tests.examples.test_errors": 6,
    "tests.framing.test_cores_frames": 6,
    "tests.framing.test_cores_nested": 6,
    "tests.framing.test_recovery": 6,
    "tests.protocols.rpc.test_wire_cores": 6,
    "tests.protocols.serving.test_haproxy": 6,
    "tests.protocols.test_asyncioclient_flood": 6,
    "tests.protocols.test_blocking": 6,
    "tests.test_demo": 6,
    "tests.test_design_links": 6,
    "tests.examples.test_logins": 5,
    "tests.faults.test_bulk_faults": 5,
    "tests.framing.test_vectors": 5,
    "tests.protocols.kv.test_example": 5,
    "tests.test_structure": 5,
    "tests.protocols.kv.test_stores": 4,
    "tests.protocols.rpc.test_connecting": 4,
    "tests.protocols.rpc.test_drain_process": 4,
    "tests.protocols.test_asyncioclient_streams": 4,
    "tests.test_method_shadows": 4,
    "tests.examples.test_progress": 3,
    "tests.examples.test_template_store": 3,
    "tests.framing.rpc.test_session": 3,
    "tests.framing.test_slicing": 3,
    "tests.protocols.bulk.test_examples": 3,
    "tests.protocols.rpc.test_latency": 3,
    "tests.protocols.rpc.test_streams": 3,
    "tests.protocols.serving.test_own_workers": 3,
    "tests.protocols.test_asyncioclient": 3,
    "tests.protocols.test_asyncioclient_logins": 3,
    "tests.protocols.test_blocking_flood": 3,
    "tests.protocols.test_blocking_streams": 3,
    "tests.protocols.test_faults": 3,
    "tests.test_properties": 3,
    "tests.test_zygote": 3,
}
"""
The test modules that take longest, with about how many seconds of wall
each takes: a hint by which L{deal} balances the runners, every other
module counting 1.  Measured at 901a1c6e (stop 53) by running the whole
suite in one pytest process, once on each core (C{CHUNKWIRE_PURE=1} the
second time), with a plugin timing each module from its first test's
setup to the next module's (load average 1.5-2 from a helper beside it):
the longer of its two walls, rounded, for the modules of 3 s or more.
The hints before were walls in a default run under load, scaled by hand;
with them the first pytest runner ended at 353 s and the second at 294 s
in a quiet C{dev.py test} at 6b60cff2, the trial runners at 311 and 294
(by these, the four shares are 225, 218, 211 and 211 s of single-process
wall).  A stale figure only unbalances them; tests/test_dev.py checks
that each names a test module.
"""


def deal(modules: list[str], runners: int) -> list[list[str]]:
    """
    Deal test C{modules} (dotted names) to C{runners} so that their hinted seconds
    (L{SLOW_TEST_MODULES}) come out even: the slowest first, each to the
    runner with the fewest so far (ties to the first), so the slow ones
    spread out and the many quick ones fill in.  Each runner keeps the
    order it was dealt in.  O(modules x runners).
    """
    hands: list[list[str]] = [[] for _ in range(runners)]
    totals = [0] * runners
    for name in sorted(modules, key=lambda name: -SLOW_TEST_MODULES.get(name, 1)):
        least = totals.index(min(totals))
        hands[least].append(name)
        totals[least] += SLOW_TEST_MODULES.get(name, 1)
    return hands


COMPILED_AHEAD = ("framing", "protocols", "examples", "tests", "twisted")
"""The project's own module folders whose bytecode L{test} writes before it starts the runners."""


def compileAhead(runner: Callable[..., Any] = subprocess.run) -> None:
    """
    Write the bytecode of the project's own modules now (compileall: what
    is up to date is only looked at).  The default run starts hundreds of
    processes (servers, clients, CLIs), each of which otherwise compiles
    every module of the project it imports when C{PYTHONDONTWRITEBYTECODE}
    is set, as in some shells and CI images: importing the rpc, bulk, kv
    and client packages took 0.42 CPU-s so, 0.34 with the bytecode written
    (measured).  A module that does not compile is left to its test to report.
    """
    runner([str(PYTHON), "-m", "compileall", "-q", *COMPILED_AHEAD], cwd=ROOT, capture_output=True)


def runnerOf(shard: int, without: tuple[str, ...]) -> str:
    """How L{test} shows the test files of runner C{shard} (counted from 0) of a half that leaves out C{without}."""
    return f"tests, runner {shard + 1} of {RUNNERS}: its share of the test files (less {', '.join(without)})"


def asFile(module: str) -> str:
    """The path of test module C{module} (dotted) from the root: tests/framing/test_codec.py."""
    return module.replace(".", "/") + ".py"


def testModules(without: tuple[str, ...]) -> list[str]:
    """The dotted names of the test modules under tests/, less those at or under the paths C{without}."""
    found = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if not any(relative == skip or relative.startswith(skip + "/") for skip in without):
            found.append(relative[: -len(".py")].replace("/", "."))
    return found


def test(rest: list[str]) -> int:
    """
    The whole suite on both codec cores, each runner taking one: pytest on
    the compiled core (when it was built), trial on the pure-Python one, each
    split into L{RUNNERS}, and ruff and mypy, all at the same time (the lint
    is short; each one's output is shown whole, in that order, as each is
    done).  Arguments (C{rest}) go to one pytest run of its half, unsplit.
    """
    pytest = ["-m", "pytest", "-q", "-p", "no:cacheprovider"]
    jobs: list[tuple[list[str], bool, str | None]]
    if rest:
        ignored = [f"--ignore={path}" for path in PROCESS_TESTS["pure"]]
        jobs = [([*pytest, *ignored, *rest], False, None)]
    else:
        hands = deal(testModules(PROCESS_TESTS["pure"]), RUNNERS)
        jobs = [
            ([*pytest, *map(asFile, hands[shard])], False, f"-m pytest -q {runnerOf(shard, PROCESS_TESTS['pure'])}")
            for shard in range(RUNNERS)
        ]
    hands = deal(testModules(PROCESS_TESTS["compiled"]), RUNNERS)
    for shard in range(RUNNERS):
        trial = ["-m", "twisted.trial", "--reporter=text", f"--temp-directory=_trial_temp.{shard + 1}"]
        shown = f"-m twisted.trial {runnerOf(shard, PROCESS_TESTS['compiled'])}"
        jobs.append(([*trial, *hands[shard]], True, shown))
    jobs.append((["dev.py", "lint"], False, "dev.py lint (ruff check, ruff format --check, mypy)"))
    compileAhead()
    # The runners may write bytecode (as compileAhead does): pytest then keeps the test modules it
    # rewrites for its asserts (__pycache__/*-pytest-*.pyc) for the next run.  Collecting the whole
    # suite took 8.3 CPU-s with PYTHONDONTWRITEBYTECODE set, 5.1 reusing them (measured, quiet).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    statuses = runTogether(jobs)
    failed = any(status != 0 for status in statuses)
    print("dev.py test:", "FAILED" if failed else "all passed", flush=True)
    return 1 if failed else 0


def runTogether(jobs: list[tuple[list[str], bool, str | None]]) -> list[int]:
    """
    Run .venv's python with each job's arguments at once (C{(args, pure,
    shown)}: C{pure} as in L{run}, C{shown} the command as printed, if not
    the arguments); print each command, then, as each ends in order, its
    whole output; return their exit statuses.
    """
    import tempfile

    started = []
    for args, pure, shown in jobs:
        print("$", *(["CHUNKWIRE_PURE=1"] if pure else []), *([shown] if shown else args), flush=True)
        env = {**os.environ, "CHUNKWIRE_PURE": "1"} if pure else None
        output = tempfile.TemporaryFile()
        process = subprocess.Popen([str(PYTHON), *args], cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT)
        started.append((process, output))
    statuses = []
    for process, output in started:
        statuses.append(process.wait())
        output.seek(0)
        sys.stdout.flush()
        sys.stdout.buffer.write(output.read())
        sys.stdout.buffer.flush()
        output.close()
    return statuses


def lint() -> int:
    status = run("-m", "ruff", "check", ".")
    status |= run("-m", "ruff", "format", "--check", ".")
    status |= run("-m", "mypy", "framing", "protocols")
    return status


def docs(screenshots: bool = False) -> int:
    """The benchmark figures, the site with warnings as errors, then a check of the built pages."""
    html = "docs/_build/html"
    status = run("docs/make_plots.py")
    status = status or run("-m", "sphinx", "-W", "-q", "-b", "html", "docs", html)
    check = ["docs/check_pages.py", html] + (["--screenshots", "docs/_build/screenshots"] if screenshots else [])
    status = status or run(*check)
    if status == 0:
        print(f"dev.py docs: open {ROOT / html / 'index.html'}", flush=True)
    return status


def toxCommands(name: str, rest: list[str]) -> int:
    """Run a tox environment's commands in order, with tox's PYTHONPATH and PYTHONHASHSEED; stop at a failure."""
    os.environ.setdefault("PYTHONHASHSEED", "0")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    if name == "fuzz":
        ensure_atheris()
        os.environ.setdefault("CHUNKWIRE_FUZZ_EXAMPLES", "20000")  # the default run's properties, 200x longer
    if name == "soak":
        os.environ.setdefault("CHUNKWIRE_REFERENCE_BATCHES", "100")  # a hundred thousand references, 10x the default
    if name == "haproxy":
        os.environ.setdefault("CHUNKWIRE_ROLLING_CALLS", "100000")
        os.environ["CHUNKWIRE_FIGURES"] = "1"  # the rolling restart's figure line
    commands = TOX_COMMANDS[name]
    for index, args in enumerate(commands):
        # Extra arguments go to the first command, as tox's {posargs} do.
        status = run(*args, *(rest if index == 0 else []))
        if status != 0:
            return status
    return 0


def asan(rest: list[str]) -> int:
    """
    Build framing._speedups with AddressSanitizer into a copy of framing/ and
    tests/, and run the differential tests and the wire vectors there with
    libasan preloaded and CPython's own allocator off (leak detection off:
    CPython keeps memory at exit).
    """
    import shutil
    import sysconfig
    import tempfile

    query = "import sysconfig; print(sysconfig.get_paths()['include']); print(sysconfig.get_config_var('EXT_SUFFIX'))"
    found = subprocess.run([str(PYTHON), "-c", query], capture_output=True, text=True, check=True)
    include, suffix = found.stdout.split()
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC").split()[0] or "gcc"
    libasan = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="chunkwire-asan-") as work:
        for name in ("framing", "protocols", "tests"):
            shutil.copytree(ROOT / name, Path(work) / name, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
        flags = ["-O1", "-g", "-fsanitize=address", "-fno-omit-frame-pointer", "-shared", "-fPIC"]
        target = Path(work) / "framing" / f"_speedups{suffix}"
        build = [cc, *flags, f"-I{include}", str(ROOT / "framing" / "_speedups.c"), "-o", str(target)]
        print("$", " ".join(build), flush=True)
        if subprocess.run(build).returncode != 0:
            return 1
        # PYTHONMALLOC=malloc: every object gets its own malloc block, so a read
        # past the end of a bytes object is caught (not hidden in a pymalloc pool).
        asan_env = {"LD_PRELOAD": libasan, "ASAN_OPTIONS": "detect_leaks=0", "PYTHONMALLOC": "malloc"}
        env = {**os.environ, **asan_env, "PYTHONPATH": work}
        tests = rest or [
            "tests/framing/test_cores.py",
            "tests/framing/test_cores_nested.py",
            "tests/framing/test_vectors.py",
            "tests/framing/test_whole_body.py",
            "tests/framing/test_recovery.py",
        ]
        check = "import framing; assert framing.implementation == 'compiled', framing.implementation"
        status = subprocess.run([str(PYTHON), "-c", check], cwd=work, env=env).returncode
        print(f"$ LD_PRELOAD={libasan} python -m pytest -q {' '.join(tests)}", flush=True)
        return (
            status
            or subprocess.run(
                [str(PYTHON), "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], cwd=work, env=env
            ).returncode
        )


def ensure_atheris(runner: Callable[..., Any] = subprocess.run) -> None:
    """Install atheris (the fuzz environment's one extra package) into .venv if it is missing."""
    found = runner([str(PYTHON), "-c", "import atheris"], cwd=ROOT, capture_output=True, text=True)
    if found.returncode != 0:
        print("installing atheris into .venv for the fuzz targets ...", flush=True)
        quietly([str(PYTHON), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "atheris"], runner)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
