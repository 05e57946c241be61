"""
A warm Python process that forks test servers on request: each costs a fork (milliseconds) instead of a
new interpreter importing Twisted (about 0.6 s of CPU on a quiet machine, seconds on a loaded one).

    zygote = Zygote.shared(("tests.protocols.failoverserver",))
    process = zygote.start("-m", "tests.protocols.failoverserver", "s0")   # as startPython(...) would

The zygote is C{python -m tests.zygote MODULE...} started from the project's root with
L{tests.processes.ENV} (so with the runner's codec core): it imports the modules, which must not install
the reactor (each child installs its own after the fork, so no two share an epoll set), then waits on a
Unix socket for requests.  A request is the child's C{-m MODULE ARGS} (or C{SCRIPT.py ARGS}) and two
descriptors (SCM_RIGHTS): the write ends of the child's output pipe (its stdout and stderr, as
L{startPython}'s one pipe) and of its status pipe.  The zygote forks; the child closes every other
descriptor, runs the module or script as C{__main__} (C{runpy}, as C{python -m} or C{python SCRIPT.py}
would) and exits; the zygote answers with the child's pid and a pidfd
(SCM_RIGHTS), and once it reaps the child writes its wait status to the status pipe.

L{ForkedProcess} is what the test holds: C{Popen}'s methods that servers' tests use (C{poll}, C{wait},
C{send_signal}, C{terminate}, C{kill}, C{stdout}, C{pid}), signals sent through the pidfd (never to a
pid the kernel gave to another process since), the end seen on the status pipe.  When the test process
ends, the zygote reads the end of its socket and kills its children still running.

Linux only (pidfds, kernel 5.3); L{available} says so, and callers start processes as before elsewhere.
"""

from __future__ import annotations

import array
import atexit
import importlib
import json
import os
import runpy
import select
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, ClassVar

HANG = 60.0
"""Seconds within which anything that is not a hang finishes, however loaded the machine."""


def available() -> bool:
    """Whether children can be forked from a zygote here (Linux with pidfds)."""
    return sys.platform.startswith("linux") and hasattr(os, "pidfd_open") and hasattr(signal, "pidfd_send_signal")


def _sendFds(sock: socket.socket, data: bytes, fds: list[int]) -> None:
    sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])


def _receiveFds(sock: socket.socket, count: int) -> tuple[bytes, list[int]]:
    """One message and the descriptors it carries (at most C{count}); C{b""} at the end of the socket."""
    data, ancillary, _flags, _address = sock.recvmsg(65536, socket.CMSG_LEN(count * 4))
    fds: list[int] = []
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.extend(array.array("i", payload[: len(payload) - len(payload) % 4]))
    return data, fds


class ForkedProcess:
    """A child of the zygote, as the test sees it: the parts of C{subprocess.Popen} the servers' tests use."""

    def __init__(
        self, pid: int, pidfd: int, stdout: int, status: int, args: tuple[str, ...], stderr: int | None = None
    ) -> None:
        self.pid = pid
        self.args = args
        self.returncode: int | None = None
        self.stdout = open(stdout, "rb", buffering=0)  # noqa: SIM115 - closed by stop() as Popen's is
        self.stderr = None if stderr is None else open(stderr, "rb", buffering=0)  # noqa: SIM115 - as stdout
        self._pidfd = pidfd
        self._status = status

    def poll(self) -> int | None:
        """The exit code (negative: the signal) once the zygote reaped the child; C{None} while it runs."""
        if self.returncode is None and select.select([self._status], [], [], 0)[0]:
            self._reap()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the child's end (C{subprocess.TimeoutExpired} after C{timeout} s) and return its code."""
        if self.returncode is None:
            if not select.select([self._status], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(list(self.args), timeout or 0)
            self._reap()
        assert self.returncode is not None
        return self.returncode

    def _reap(self) -> None:
        data = os.read(self._status, 64)
        os.close(self._status)
        os.close(self._pidfd)
        status = int(data) if data else 0
        self.returncode = os.waitstatus_to_exitcode(status) if data else -signal.SIGKILL

    def send_signal(self, number: int) -> None:  # noqa: N802 - Popen's name
        """Signal the child through its pidfd, unless it was reaped already (as Popen does)."""
        if self.poll() is None:
            try:
                signal.pidfd_send_signal(self._pidfd, number)
            except ProcessLookupError:
                pass  # ended, not reaped yet: as Popen, nothing to signal

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """A warm process that has imported some modules and forks children that run a module as C{__main__}."""

    _shared: ClassVar[dict[tuple[str, ...], Zygote]] = {}
    _sharedLock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, preload: tuple[str, ...]) -> None:
        from tests.processes import ENV, ROOT

        self.preload = preload
        self._lock = threading.Lock()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._socket = ours
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.zygote", str(theirs.fileno()), *preload],
            cwd=ROOT,
            env=ENV,
            stdin=subprocess.DEVNULL,
            pass_fds=[theirs.fileno()],
        )
        theirs.close()
        ready, _fds = self._read()
        if ready.get("ready") is not True:
            raise AssertionError(f"the zygote did not start: {ready!r}")

    @classmethod
    def shared(cls, preload: tuple[str, ...]) -> Zygote:
        """The zygote of C{preload} for this test process, started by the first caller and kept to its end."""
        with cls._sharedLock:
            zygote = cls._shared.get(preload)
            if zygote is None or zygote.process.poll() is not None:
                zygote = cls._shared[preload] = cls(preload)
                atexit.register(zygote.close)
            return zygote

    def _read(self) -> tuple[dict[str, Any], list[int]]:
        """The zygote's next answer and the descriptors it carries."""
        if not select.select([self._socket], [], [], HANG)[0]:
            raise AssertionError("the zygote did not answer in time")
        data, fds = _receiveFds(self._socket, 1)
        if not data:
            raise AssertionError("the zygote ended")
        return json.loads(data), fds

    def close(self) -> None:
        """End the zygote: it kills its children still running, then exits."""
        self._socket.close()
        try:
            self.process.wait(HANG)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def start(
        self, *arguments: str, stderr: bool = False, cwd: str | None = None, env: dict[str, str] | None = None
    ) -> ForkedProcess:
        """
        A child running C{python ARGUMENTS}: C{-m MODULE ...}, or C{SCRIPT.py ...}
        (a path from the project's root, its folder first on C{sys.path} as
        C{python SCRIPT.py} puts it); its output on one pipe, or its stderr
        on a second (C{stderr}); in C{cwd} (the project's root by default);
        with C{env} as its whole environment (the zygote's by default: what
        the child reads after the fork, not what its imports read before it).
        """
        if arguments[:1] == ("-m",) and len(arguments) >= 2:
            request: dict[str, Any] = {"module": arguments[1], "argv": list(arguments[2:])}
        elif arguments[:1] and arguments[0].endswith(".py"):
            request = {"path": arguments[0], "argv": list(arguments[1:])}
        else:
            raise ValueError(f"the zygote runs modules (-m MODULE ...) or scripts (SCRIPT.py ...), not {arguments!r}")
        request["cwd"] = cwd
        request["env"] = env
        outputRead, outputWrite = os.pipe()
        statusRead, statusWrite = os.pipe()
        errorRead, errorWrite = os.pipe() if stderr else (None, None)
        sent = [outputWrite, statusWrite] + ([] if errorWrite is None else [errorWrite])
        try:
            with self._lock:
                _sendFds(self._socket, json.dumps(request).encode(), sent)
                answer, (pidfd,) = self._read()
        finally:
            for fd in sent:
                os.close(fd)
        return ForkedProcess(answer["pid"], pidfd, outputRead, statusRead, arguments, errorRead)


def _child(control: socket.socket, request: dict[str, Any], output: int, error: int) -> None:
    """
    In the forked child: its stdout on C{output}, its stderr on C{error},
    every other descriptor closed, in the request's C{cwd} if any, the
    request's module or script run as C{__main__}.
    """
    control.detach()
    os.dup2(output, 1)
    os.dup2(error, 2)
    for name in os.listdir("/proc/self/fd"):
        if int(name) > 2:
            try:
                os.close(int(name))
            except OSError:
                pass  # the listing's own descriptor, closed already
    path = str(Path(request.get("path") or ".").resolve())  # from the project's root, before any chdir
    if request.get("cwd"):
        os.chdir(request["cwd"])
    if request.get("env") is not None:
        os.environ.clear()
        os.environ.update(request["env"])
    if "path" in request:
        sys.path.insert(0, str(Path(path).parent))
        sys.argv = [path, *request["argv"]]
        runpy.run_path(path, run_name="__main__")
    else:
        sys.argv = [request["module"], *request["argv"]]
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)


def _serve(control: socket.socket) -> None:
    """
    The zygote's loop: fork a child per request, and write each child's wait
    status to its status pipe once its pidfd says it ended; at the end of
    the socket (the test process gone), kill the children still running.
    """
    children: dict[int, tuple[int, int]] = {}  # pidfd: (pid, the status pipe's write end)
    control.sendall(json.dumps({"ready": True}).encode())
    while True:
        ready = select.select([control.fileno(), *children], [], [])[0]
        for pidfd in ready:
            if pidfd != control.fileno():
                pid, statusWrite = children.pop(pidfd)
                _pid, status = os.waitpid(pid, 0)
                os.write(statusWrite, str(status).encode())
                os.close(statusWrite)
                os.close(pidfd)
        if control.fileno() not in ready:
            continue
        data, fds = _receiveFds(control, 3)
        if not data:
            break
        request = json.loads(data)
        output, statusWrite, *rest = fds
        error = rest[0] if rest else output
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code: Any = 0
            try:
                _child(control, request, output, error)
            except SystemExit as end:
                code = end.code
            raise SystemExit(code)  # through the interpreter's own exit: atexit handlers, flushed streams
        os.close(output)
        if error != output:
            os.close(error)
        pidfd = os.pidfd_open(pid)
        children[pidfd] = (pid, statusWrite)
        _sendFds(control, json.dumps({"pid": pid}).encode(), [pidfd])
    for pidfd, (pid, _statusWrite) in children.items():
        try:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        except ProcessLookupError:
            pass  # ended already
        os.waitpid(pid, 0)


def main(argv: list[str]) -> None:
    control = socket.socket(fileno=int(argv[0]))
    for module in argv[1:]:
        importlib.import_module(module)
    if "twisted.internet.reactor" in sys.modules:
        raise SystemExit("the zygote's modules installed the reactor: its children would share one epoll set")
    _serve(control)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main(sys.argv[1:])
