"""Running the example servers and clients as processes, for the tests of what a user of the CLIs sees."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tests.processes import ENV, ROOT, readUntil, reservePort, runExample, startExample, startPython, stop


def clientRun(
    script: str, *arguments: str, cwd: Path | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run C{examples/SCRIPT ARGUMENTS} in C{cwd} (the project's root by default) to its end, output as text."""
    return runExample(script, *arguments, cwd=cwd, timeout=timeout)  # forked from a zygote where it can be


def clientStart(script: str, *arguments: str, cwd: Path) -> subprocess.Popen[bytes]:
    """Start C{examples/SCRIPT ARGUMENTS} in C{cwd}; its stdout and stderr on separate pipes."""
    command = [sys.executable, str(ROOT / "examples" / script), *arguments]
    return subprocess.Popen(command, cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def bulkServer(test: Any, directory: Path) -> int:
    """Start examples/bulk_server.py serving C{directory} on 127.0.0.1 for the test's length; give its port."""
    server = startExample("bulk_server.py", "--listen", "tcp:0:interface=127.0.0.1", "--dir", str(directory))
    test.addCleanup(stop, server)
    return int(readUntil(server, rb"bulk server listening on .* port=(\d+)\)").group(1))


def slowLink(test: Any, port: int, rate: float) -> int:
    """Start a delay proxy to C{port} that carries C{rate} bytes a second each way; give its port."""
    proxy = startPython("-m", "tests.delayproxy", str(port), "0.001", str(rate))
    test.addCleanup(stop, proxy)
    return int(readUntil(proxy, rb'"port": (\d+)').group(1))


def address(port: int) -> str:
    """The client endpoint description of a port of 127.0.0.1."""
    return f"tcp:host=127.0.0.1:port={port}"


def closedPort(test: Any) -> int:
    """
    A port of 127.0.0.1 where nothing listens, for as long as C{test} runs:
    reserved (L{reservePort}: bound, never listening, so a connection to it
    is refused), not bound and let go, when another process could listen on it.
    """
    reservation = reservePort()
    test.addCleanup(reservation.close)
    return int(reservation.getsockname()[1])


def foreignServer(test: Any, answer: bytes = b"HTTP/1.1 400 Bad Request\r\n\r\n") -> int:
    """A server on 127.0.0.1 that answers every connection with C{answer} (not chunkwire) and closes it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    test.addCleanup(listener.close)

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                connection.settimeout(5)
                try:
                    connection.recv(1024)
                    connection.sendall(answer)
                except OSError:
                    pass

    threading.Thread(target=serve, daemon=True).start()
    return int(listener.getsockname()[1])
