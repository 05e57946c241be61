"""Running the project's scripts as processes, as the README shows them: for the tests of examples, plugins and docs."""

from __future__ import annotations

import os
import re
import select
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))

FIGURES = "CHUNKWIRE_FIGURES"
"""Set (to anything) by the long campaigns (C{dev.py attack}'s faults case, C{dev.py haproxy}), which show
the figure lines tests print; unset in the default run, whose log holds the runners' output alone."""


def figure(line: str) -> None:
    """Print one figure line for a long campaign's report; in the default run, print nothing."""
    if os.environ.get(FIGURES):
        print(f"\n{line}", flush=True)


def runPython(*arguments: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run C{python ARGUMENTS} from the project's root to its end; its output is captured as text."""
    return subprocess.run(
        [sys.executable, *arguments], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=timeout
    )


def startPython(*arguments: str) -> subprocess.Popen[bytes]:
    """Start C{python ARGUMENTS} from the project's root (a server); its stdout and stderr on one pipe."""
    return subprocess.Popen(
        [sys.executable, *arguments], cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


EXAMPLE_PRELOAD = ("protocols.serving", "protocols.bulk", "protocols.rpc", "protocols.auth", "twisted.logger")
"""What the example servers' zygote imports: what their modules import, none of it installing the reactor."""


def startExample(script: str, *arguments: str) -> Any:
    """
    Start C{examples/SCRIPT ARGUMENTS} as L{startPython} would: forked from
    a zygote that has imported L{EXAMPLE_PRELOAD} where it can be
    (L{tests.zygote}: milliseconds and a little CPU, where a new interpreter
    imports Twisted, TLS and chunkwire for 0.6-0.8 CPU-s), else a new
    interpreter.  What it gives has C{Popen}'s C{poll}, C{wait}, signals and
    one C{stdout} pipe for both streams, for L{readUntil} and L{stop}.
    """
    from tests import zygote

    if zygote.available():
        return zygote.Zygote.shared(EXAMPLE_PRELOAD).start(f"examples/{script}", *arguments)
    return startPython(f"examples/{script}", *arguments)


def runExample(
    script: str, *arguments: str, cwd: Path | None = None, timeout: float = 60, env: dict[str, str] | None = None
) -> Any:
    """L{runScript} of C{examples/SCRIPT}."""
    return runScript(f"examples/{script}", *arguments, cwd=cwd, timeout=timeout, env=env)


def runScript(
    script: str, *arguments: str, cwd: Path | None = None, timeout: float = 60, env: dict[str, str] | None = None
) -> Any:
    """
    Run C{python SCRIPT ARGUMENTS} (a path from the project's root, or
    absolute) in C{cwd} (the project's root by default) to its end, as
    C{subprocess.run(..., capture_output=True, text=True)} would: its code,
    its stdout and its stderr apart, as text; C{subprocess.TimeoutExpired}
    (the child killed) past C{timeout} s; C{env} its environment (L{ENV} by
    default), its stdin empty; a relative C{cwd} is from this process's own.  Forked from the examples' zygote where it
    can be (L{startExample}): the script's own namespace is fresh, as in a
    new interpreter, but the modules of L{EXAMPLE_PRELOAD} are imported.
    """
    from tests import zygote

    command = [sys.executable, str(ROOT / script), *arguments]
    if not zygote.available():
        return subprocess.run(
            command,
            cwd=cwd or ROOT,
            env=ENV if env is None else env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    child = zygote.Zygote.shared(EXAMPLE_PRELOAD).start(
        str(ROOT / script), *arguments, stderr=True, cwd=None if cwd is None else str(Path(cwd).resolve()), env=env
    )
    deadline = time.monotonic() + timeout
    read: dict[Any, list[bytes]] = {child.stdout: [], child.stderr: []}
    try:
        while read and any(not stream.closed for stream in read):
            open_ = [stream for stream in read if not stream.closed]
            ready = select.select(open_, [], [], max(0.0, deadline - time.monotonic()))[0]
            if not ready:
                child.kill()
                child.wait()
                raise subprocess.TimeoutExpired(command, timeout)
            for stream in ready:
                data = stream.read(65536)
                if data:
                    read[stream].append(data)
                else:
                    stream.close()
        code = child.wait(max(0.0, deadline - time.monotonic()))
    finally:
        for stream in read:
            stream.close()
    out, err = (b"".join(read[stream]).decode(errors="replace") for stream in (child.stdout, child.stderr))
    return subprocess.CompletedProcess(command, code, out, err)


def readUntil(process: subprocess.Popen[bytes], pattern: bytes, timeout: float = 60) -> re.Match[bytes]:
    """
    Read a process's output until C{pattern} matches it; fail if it takes
    longer than C{timeout} (60 s: a bound on a hang, long enough for a process
    to start on a loaded machine) or the process ends.
    """
    assert process.stdout is not None
    fd = process.stdout.fileno()
    output = b""
    deadline = time.monotonic() + timeout
    while True:
        match = re.search(pattern, output)
        if match:
            return match
        remaining = deadline - time.monotonic()
        # Raw reads after select: a buffered readline could hold back a line select would not report.
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            raise AssertionError(f"{pattern!r} not seen in time: {output!r}")
        chunk = os.read(fd, 65536)
        if not chunk:
            raise AssertionError(f"the process ended before {pattern!r}: {output!r}")
        output += chunk


def reservePort(host: str = "127.0.0.1") -> socket.socket:
    """
    A port on C{host} held for servers a test starts, and starts again, on it:
    a socket bound to port 0 with C{SO_REUSEADDR} that never listens (its
    port: C{getsockname()[1]}).  On Linux a listener that sets C{SO_REUSEADDR}
    too (Twisted's, HAProxy's, the workers' supervisor's) may bind that port
    while the reservation holds it, and nothing else takes it meanwhile: the
    kernel's choice of a port for C{connect()} or C{bind(0)} passes over it.
    So a server restarted on the port never finds it taken, as it could once
    a port was picked free, let go, and bound later.  Close it when the last
    server on it has stopped.
    """
    reservation = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    reservation.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    reservation.bind((host, 0))
    return reservation


def stop(process: subprocess.Popen[Any], grace: float = 15) -> None:
    """Terminate a started process (if it still runs), kill it if it is not gone within C{grace} s, close its stdout."""
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.stdout is not None and not process.stdout.closed:
        process.stdout.close()


class ClassProcessesCase(SynchronousTestCase):
    """
    A test case whose processes (servers started by L{startProcesses}) serve
    every test of the class under pytest, which calls C{setUpClass}, and each
    test alone under trial, which does not: one definition, both runners.
    Subclasses define L{startProcesses} and L{stopProcesses} (class methods);
    a subclass's C{setUp} calls this one's first.
    """

    _processesUp = False

    @classmethod
    def startProcesses(cls) -> None:
        """Start the class's processes and keep what the tests need on the class."""
        raise NotImplementedError

    @classmethod
    def stopProcesses(cls) -> None:
        """Stop what L{startProcesses} started."""
        raise NotImplementedError

    @classmethod
    def setUpClass(cls) -> None:
        cls.startProcesses()
        cls._processesUp = True

    @classmethod
    def tearDownClass(cls) -> None:
        cls._processesUp = False
        cls.stopProcesses()

    def setUp(self) -> None:
        if not type(self)._processesUp:  # trial: no setUpClass, so processes for this test alone
            type(self).setUpClass()
            self.addCleanup(type(self).tearDownClass)
