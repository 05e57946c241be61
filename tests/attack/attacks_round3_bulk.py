"""Issue 28's hostile peers and local users of the bulk file service, run as processes, and what they leave behind.

Contract: L{BulkProcess} runs C{examples/bulk_server.py} (or C{twist
chunkwire-bulk --workers N}) on a loopback port over a fresh directory,
with extra options and, if asked, a lower C{RLIMIT_NOFILE}; it reads the
RSS, open descriptors (of every worker) and partial files of the service.
The clients of each case are async functions in this module, run in a
subprocess of their own (L{runClient}: C{python -m
tests.attack.attacks_round3_bulk CASE JSON}) that prints one JSON line of
what it saw, so the test process keeps no reactor.  Every wait is bounded.
"""

from __future__ import annotations

import json
import os
import re
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred

from framing.wire import PREAMBLE

from .attacks_bulk import call
from .harness import ENV, ROOT, serverEndInode

PRIVATE = ".chunkwire-private"
"""The service's private directory (L{protocols.bulk._files.PRIVATE_DIRECTORY})."""

CLIENT_TIMEOUT = 60.0
"""The most a case's client process may run: only a hang reaches it."""


class BulkProcess:
    """
    The bulk service as a process (the example server, or C{twist
    chunkwire-bulk} with workers) on a loopback port, serving C{directory}.

    @ivar port: the port it listens on.
    @ivar pids: the processes serving (the workers, with C{--workers}).
    """

    def __init__(
        self,
        scratch: Path,
        extra: list[str] | None = None,
        nofile: int | None = None,
        workers: int = 1,
    ) -> None:
        self.directory = scratch / "served"
        self.logPath = scratch / "server.log"
        self._log = open(self.logPath, "wb")  # noqa: SIM115 (closed in stop)
        extra = extra or []
        if workers > 1:
            command = [sys.executable, "-m", "twisted", "--log-format", "text", "chunkwire-bulk"]
            command += ["--listen", "tcp:0:interface=127.0.0.1:backlog=1024", "--dir", str(self.directory)]
            command += ["--workers", str(workers), "--reuse-port", "--grace", "1", *extra]
        else:
            command = [sys.executable, "examples/bulk_server.py", "--listen", "tcp:0:interface=127.0.0.1:backlog=1024"]
            command += ["--dir", str(self.directory), "--log", "--grace", "1", *extra]

        def limit() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.process = subprocess.Popen(
            command, cwd=ROOT, env=ENV, stdout=self._log, stderr=subprocess.STDOUT, preexec_fn=limit
        )
        if workers > 1:
            # Port 0: the supervisor's first socket gets a port, the others join it; each worker logs
            # "starting on PORT" once it listens (no port is picked here for it to bind later).
            started = rb"worker 0 started: pid (\d+)[\s\S]*worker 1 started: pid (\d+)"
            found = self._waitFor(started + rb"[\s\S]*starting on (\d+)[\s\S]*starting on (\d+)")
            self.pids = [int(found.group(1)), int(found.group(2))]
            self.port = int(found.group(3))
        else:
            self.port = int(self._waitFor(rb"server listening on .* port=(\d+)\)").group(1))
            self.pids = [self.process.pid]

    def _waitFor(self, pattern: bytes, timeout: float = 60) -> re.Match[bytes]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = re.search(pattern, self.logPath.read_bytes())
            if match:
                return match
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"the bulk service did not start: {self.log()}")

    def log(self) -> str:
        """Everything the service logged so far."""
        return self.logPath.read_text(errors="replace")

    def figures(self) -> dict[str, int]:
        """RSS and peak RSS (the largest of the processes), open fds (all of them) and partial files, now."""
        rss = peak = fds = 0
        for pid in self.pids:
            status = Path(f"/proc/{pid}/status").read_text()
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            rss = max(rss, int(fields["VmRSS"].split()[0]) * 1024)
            peak = max(peak, int(fields["VmHWM"].split()[0]) * 1024)
            fds += len(os.listdir(f"/proc/{pid}/fd"))
        return {"rss": rss, "peak": peak, "fds": fds, "parts": len(partialFiles(self.directory))}

    def idle(self, timeout: float = 60) -> dict[str, int]:
        """The figures once every process has made its service (it holds the private directory open) and settled."""
        deadline = time.monotonic() + timeout
        private = str(self.directory / PRIVATE)
        while time.monotonic() < deadline:
            if all(private in _links(pid) for pid in self.pids):
                break
            time.sleep(0.1)
        last = self.figures()
        while time.monotonic() < deadline:
            time.sleep(0.5)
            now = self.figures()
            if now["fds"] == last["fds"]:
                return now
            last = now
        return last

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self._log.close()


def partialFiles(directory: Path) -> list[str]:
    """The partial files of a served directory: in its private directory, and any left beside the files."""
    names = [name for name in _names(directory) if ".part" in name and name != PRIVATE]
    names += [name for name in _names(directory / PRIVATE) if name.endswith((".part", ".part.json", ".tmp"))]
    return sorted(names)


def _links(pid: int) -> list[str]:
    """What the open descriptors of process C{pid} point at."""
    links = []
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
            except OSError:
                continue
    except OSError:
        pass
    return links


def _names(directory: Path) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return []


def settled(server: BulkProcess, idle: dict[str, int], keys: tuple[str, ...], deadline: float) -> dict[str, int]:
    """Poll until the C{keys} figures are back to C{idle}, or the deadline passes."""
    while True:
        now = server.figures()
        if all(now[key] <= idle[key] for key in keys) or time.monotonic() > deadline:
            return now
        time.sleep(0.1)


def runClient(case: str, **arguments: Any) -> dict[str, Any]:
    """Run client C{case} of this module in its own process; what it printed (its last line, as JSON)."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.attack.attacks_round3_bulk", case, json.dumps(arguments)],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise AssertionError(f"client {case} failed ({done.returncode}): {done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


# -- raw attackers (blocking sockets, in the test process) ---------------------------------------


def holdUploads(port: int, addresses: list[str], perAddress: int, uploads: int) -> list[socket.socket]:
    """
    C{perAddress} connections from each of C{addresses}, each opening
    C{uploads} uploads (of 1 MiB, never sent: the descriptors are the
    point here, not the partial-upload quota); the sockets are returned open.
    """
    sockets = []
    for address in addresses:
        for index in range(perAddress):
            sock = socket.socket()
            sock.bind((address, 0))
            sock.settimeout(10)
            try:
                sock.connect(("127.0.0.1", port))
            except OSError:
                sock.close()
                continue
            calls = [call(n + 1, "openUpload", f"{address}-{index}-{n}.bin", 1 << 20, "v1") for n in range(uploads)]
            try:
                sock.sendall(PREAMBLE + b"".join(calls))
            except OSError:
                pass
            sockets.append(sock)
    return sockets


def drain(sockets: list[socket.socket], seconds: float) -> bytes:
    """Read what the server sent to C{sockets} for about C{seconds} (answers and refusals)."""
    received = []
    deadline = time.monotonic() + seconds
    for sock in sockets:
        sock.settimeout(max(0.05, min(0.5, deadline - time.monotonic())))
        try:
            while chunk := sock.recv(1 << 20):
                received.append(chunk)
        except OSError:
            pass
    return b"".join(received)


# -- the clients (each run in a process of its own) ------------------------------------------


async def _connect(reactor: Any, port: int, bind: str | None = None) -> Any:
    """A bulk connection to the service on C{port}, from address C{bind} if given."""
    from protocols import bulk, rpc

    description = f"tcp:host=127.0.0.1:port={port}"
    if bind is not None:
        description += f":bindAddress={bind}"
    return await rpc.connect(reactor, description, options=rpc.ClientOptions(bulk=bulk.BulkOptions()))


def _error(error: BaseException) -> dict[str, str]:
    return {"type": type(error).__name__, "message": str(error)}


async def _outcome(deferred: Any) -> dict[str, Any]:
    """C{{"ok": result}} or C{{"error": {type, message}}}."""
    try:
        result = await deferred
    except Exception as error:
        return {"error": _error(error)}
    if callable(getattr(result, "cancel", None)):
        result.cancel("not wanted")  # a stream: what it would bring does not matter here
        return {"ok": "a stream"}
    return {"ok": result}


async def symlinksClient(reactor: Any, port: int, work: str) -> dict[str, Any]:
    """
    As an honest client, next to a local user's links and FIFO: list,
    stat/get/download the links, upload C{up.bin} and C{dest.bin}.
    """
    from protocols.bulk._files import sendFile

    root = await _connect(reactor, port)
    seen: dict[str, Any] = {"list": await root.callRemote("list")}
    for name in ("link.bin", "fifo.bin"):
        seen[f"stat {name}"] = await _outcome(root.callRemote("stat", name))
        seen[f"get {name}"] = await _outcome(root.callRemote("get", name))
        seen[f"download {name}"] = await _outcome(root.callRemote("download", name, "1-1", [[0, 1]]))
    await root.broker.disconnect()
    source = Path(work, "source.bin")
    source.write_bytes(os.urandom(300_000))

    def connect() -> Any:
        return _connect(reactor, port)

    for name in ("up.bin", "dest.bin"):
        try:
            result = await sendFile(connect, source, name, clock=reactor, retries=0)
            seen[f"send {name}"] = {"ok": result.hexdigest}
        except Exception as error:
            seen[f"send {name}"] = {"error": _error(error)}
    root = await _connect(reactor, port)
    seen["list after"] = await root.callRemote("list")
    await root.broker.disconnect()
    return seen


def workerOf(serverPort: int, clientPort: int, pids: list[int]) -> int | None:
    """The pid of the worker holding the server end of the loopback connection from C{clientPort}."""
    inode = serverEndInode(serverPort, clientPort)
    if inode is None:
        return None
    for pid in pids:
        try:
            links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue
        if f"socket:[{inode}]" in links:
            return pid
    return None


async def _worker(reactor: Any, root: Any, port: int, pids: list[int]) -> int | None:
    from twisted.internet.task import deferLater

    local = root.broker.transport.getHost().port
    deadline = time.monotonic() + 60  # only a hang takes that long
    while time.monotonic() < deadline:
        found = workerOf(port, local, pids)
        if found is not None:
            return found
        await deferLater(reactor, 0.05, lambda: None)
    return None


async def workersClient(reactor: Any, port: int, pids: list[int], work: str) -> dict[str, Any]:
    """
    Client A uploads half of C{shared.bin} through one worker; client B, on
    the other worker (and on A's), starts another version of the same name;
    then A sends the rest and finishes.
    """
    import hashlib

    from protocols.bulk import Stream

    data = os.urandom(2_000_000)
    source = Path(work, "a.bin")
    source.write_bytes(data)
    half = len(data) // 2
    a = await _connect(reactor, port)
    workerA = await _worker(reactor, a, port, pids)
    seen: dict[str, Any] = {"workerA": workerA}
    seen["openA"] = await a.callRemote("openUpload", "shared.bin", len(data), "vA", ["sha256"])
    await a.callRemote("upload", "shared.bin", Stream(str(source), ranges=[(0, half)], digest=None))
    attempts: dict[str, Any] = {}
    for _ in range(60):
        b = await _connect(reactor, port)
        workerB = await _worker(reactor, b, port, pids)
        where = "same" if workerB == workerA else "other"
        if where not in attempts:
            attempts[where] = await _outcome(b.callRemote("openUpload", "shared.bin", 12345, "vB", ["sha256"]))
        await b.broker.disconnect()
        if len(attempts) == 2:
            break
    seen["b"] = attempts
    await a.callRemote("upload", "shared.bin", Stream(str(source), ranges=[(half, len(data))], digest=None))
    seen["finishA"] = await _outcome(a.callRemote("finishUpload", "shared.bin", hashlib.sha256(data).digest()))
    seen["digest"] = hashlib.sha256(data).hexdigest()
    await a.broker.disconnect()
    return seen


async def freshClient(reactor: Any, port: int, bind: str, work: str) -> dict[str, Any]:
    """A new client from C{bind}: five C{list()} calls, then an upload and a whole-file put, each within 10 s."""
    from protocols.bulk import Stream
    from protocols.bulk._files import sendFile

    def deadline(d: Any) -> Any:
        if not isinstance(d, Deferred):
            d = Deferred.fromCoroutine(d)
        return d.addTimeout(10, reactor)

    seen: dict[str, Any] = {}
    root = await deadline(_connect(reactor, port, bind))
    seen["lists"] = [await _outcome(deadline(root.callRemote("list"))) for _ in range(5)]
    source = Path(work, "fresh.bin")
    source.write_bytes(os.urandom(100_000))
    seen["put"] = await _outcome(deadline(root.callRemote("put", "fresh-put.bin", Stream(str(source)))))
    await root.broker.disconnect()

    def connect() -> Any:
        return _connect(reactor, port, bind)

    try:
        result = await deadline(
            Deferred.fromCoroutine(sendFile(connect, source, "fresh.bin", clock=reactor, retries=0))
        )
        seen["send"] = {"ok": result.hexdigest}
    except Exception as error:
        seen["send"] = {"error": _error(error)}
    return seen


async def quotaClient(reactor: Any, port: int, work: str, size: int) -> dict[str, Any]:
    """
    Start an upload of C{size} bytes, send 1 MB of it and leave; then start
    another of the same size, and resume the first.
    """
    from protocols.bulk import Stream

    source = Path(work, "q.bin")
    source.write_bytes(os.urandom(size))
    seen: dict[str, Any] = {}
    root = await _connect(reactor, port)
    seen["open first"] = await _outcome(root.callRemote("openUpload", "first.bin", size, "v1", ["sha256"]))
    part = Stream(str(source), ranges=[(0, 1_000_000)], digest=None)
    seen["upload first"] = await _outcome(root.callRemote("upload", "first.bin", part))
    await root.broker.disconnect()
    root = await _connect(reactor, port)
    seen["open second"] = await _outcome(root.callRemote("openUpload", "second.bin", size, "v1", ["sha256"]))
    seen["resume first"] = await _outcome(root.callRemote("openUpload", "first.bin", size, "v1", ["sha256"]))
    seen["small"] = await _outcome(root.callRemote("openUpload", "small.bin", 1000, "v1", ["sha256"]))
    await root.broker.disconnect()
    return seen


async def halfClient(reactor: Any, port: int, work: str, size: int) -> dict[str, Any]:
    """
    Start uploading C{t.bin} (C{size} random bytes, kept in C{work}), send
    its second half (so the partial file has the whole size), and leave.
    """
    from protocols.bulk import Stream
    from protocols.bulk._files import fileVersion

    source = Path(work, "t.bin")
    source.write_bytes(os.urandom(size))
    root = await _connect(reactor, port)
    version = fileVersion(source)
    seen = {"open": await _outcome(root.callRemote("openUpload", "t.bin", size, version, ["sha256"]))}
    half = Stream(str(source), ranges=[(size // 2, size)], digest=None)
    seen["upload"] = await _outcome(root.callRemote("upload", "t.bin", half))
    await root.broker.disconnect()
    return seen


async def resumeClient(reactor: Any, port: int, work: str) -> dict[str, Any]:
    """Resume uploading C{t.bin} with L{sendFile}: what it sent and the digest, or the error."""
    from protocols.bulk._files import sendFile

    def connect() -> Any:
        return _connect(reactor, port)

    try:
        result = await sendFile(connect, Path(work, "t.bin"), "t.bin", clock=reactor, retries=0, digests=["sha256"])
    except Exception as error:
        return {"error": _error(error)}
    return {"ok": result.hexdigest, "payload": result.payload}


CLIENTS: dict[str, Callable[..., Any]] = {
    "half": halfClient,
    "resume": resumeClient,
    "quota": quotaClient,
    "fresh": freshClient,
    "symlinks": symlinksClient,
    "workers": workersClient,
}


def main(argv: list[str]) -> None:
    from twisted.internet.defer import Deferred
    from twisted.internet.task import react

    import protocols.bulk._files  # noqa: F401 (the service's errors arrive as themselves)

    case, arguments = argv[0], json.loads(argv[1])

    async def body(reactor: Any) -> None:
        result = await CLIENTS[case](reactor, **arguments)
        print(json.dumps(result), flush=True)

    react(lambda reactor: Deferred.fromCoroutine(body(reactor)))


if __name__ == "__main__":
    main(sys.argv[1:])
