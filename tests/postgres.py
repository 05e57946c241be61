"""A private PostgreSQL for the tests, started by the project itself.

Contract: L{server} returns this test process's one L{PostgresServer},
started on first use and stopped (its directory removed) when the process
exits: a cluster made by C{initdb} in a temporary directory, owned and run
by an unprivileged user when this process is root (C{nobody}, through
C{runuser -u nobody --}), listening on 127.0.0.1 only (no unix socket) with
C{trust} authentication (it is reachable from this machine only, and holds
nothing but test data), on a port tried at random below Linux's ephemeral
range (so that no outgoing connection takes it while the server is stopped
for a test), and tried again while the server's log says it could not bind (PostgreSQL cannot be given port 0, and
a port chosen here and bound later by the server could be taken meanwhile:
the server's own bind is the test).  The binaries are Debian's
(C{/usr/lib/postgresql/N/bin}, the newest N) or C{initdb} on C{PATH}; when
there are none and this process is root with C{apt-get}, Debian's
C{postgresql} package is installed first (C{apt-get update}, then
C{apt-get install -y postgresql}), once per process, as the HAProxy tests'
helper does (L{tests.protocols.serving.haproxy}).  Otherwise
L{postgresOrSkip} raises C{SkipTest} saying why.  Set
C{CHUNKWIRE_NO_INSTALL=1} to never install.

Cost: C{initdb} and the first start take about 2 s once per test process;
a test that only uses the server costs its own queries.  L{PostgresServer.stop}
(C{pg_ctl stop -m immediate} by default: the outage the store's tests make)
and L{PostgresServer.start} again keep the data and the port.
"""

from __future__ import annotations

import atexit
import glob
import os
import random
import shutil
import signal
import subprocess
import tempfile
import unittest
from functools import cache

USER = "nobody"
"""Who runs the server when the tests run as root (PostgreSQL refuses to run as root)."""

DATABASE_USER = "chunkwire"
"""The cluster's superuser, whom the tests' URLs name."""

START_TIMEOUT = 60
"""Seconds C{pg_ctl} waits for the server to accept connections (a loaded machine takes a few)."""


def _binDir() -> str | None:
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda path: int(path.split("/")[-2]), reverse=True)
    for path in dirs:
        if os.path.exists(os.path.join(path, "pg_ctl")):
            return path
    initdb = shutil.which("initdb")
    if initdb is not None:
        return os.path.dirname(os.path.realpath(initdb))
    return None


@cache
def _find() -> tuple[str | None, str]:
    found = _binDir()
    if found:
        return found, ""
    if os.environ.get("CHUNKWIRE_NO_INSTALL"):
        return None, "PostgreSQL is not installed (and CHUNKWIRE_NO_INSTALL is set)"
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return None, "PostgreSQL is not installed and cannot be (needs root and apt-get: apt-get install -y postgresql)"
    try:
        subprocess.run(["apt-get", "update", "-q"], check=True, capture_output=True, timeout=300)
        subprocess.run(["apt-get", "install", "-y", "-q", "postgresql"], check=True, capture_output=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as error:
        return None, f"PostgreSQL is not installed and apt-get install -y postgresql failed: {error}"
    found = _binDir()
    return (found, "") if found else (None, "apt-get installed no PostgreSQL binaries")


def postgresBin() -> str:
    """The directory of PostgreSQL's binaries (installed if need be and possible); SkipTest with the reason if none."""
    path, reason = _find()
    if path is None:
        raise unittest.SkipTest(reason)
    return path


class PostgresServer:
    """
    One private PostgreSQL cluster in C{directory}/data.

    @ivar port: the TCP port it listens on (on C{host}), once started.
    @ivar url: the C{postgresql://} URL of its C{postgres} database.
    @ivar host: the address it listens on (127.0.0.1; the cluster run gives
        its namespace's address).
    @ivar wrapper: what every PostgreSQL command is run under (the cluster
        run: C{ip netns exec NAMESPACE}); nothing by default.
    """

    def __init__(
        self, bindir: str, directory: str, host: str = "127.0.0.1", wrapper: tuple[str, ...] = (), port: int = 0
    ) -> None:
        self.bindir = bindir
        self.directory = directory
        self.data = os.path.join(directory, "data")
        self.logFile = os.path.join(directory, "server.log")
        self.host = host
        self.wrapper = wrapper
        self.port = port
        self.asRoot = os.geteuid() == 0
        if self.asRoot:
            os.chmod(directory, 0o755)
            shutil.chown(directory, USER, None)
        self._run("initdb", "-D", self.data, "-U", DATABASE_USER, "-A", "trust", "-E", "UTF8", "--no-sync")

    @property
    def url(self) -> str:
        return f"postgresql://{DATABASE_USER}@{self.host}:{self.port}/postgres"

    def _run(self, program: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [os.path.join(self.bindir, program), *args]
        if self.asRoot:
            command = ["runuser", "-u", USER, "--", *command]
        command = [*self.wrapper, *command]
        return subprocess.run(command, capture_output=True, text=True, check=check, timeout=START_TIMEOUT + 30)

    def start(self) -> None:
        """
        Start the server on its port (a random free one the first time,
        tried again while it cannot bind); return once it accepts connections.
        """
        for _attempt in range(20):
            port = self.port or random.randrange(10000, 32000)  # (below Linux's ephemeral ports: kept on a restart)
            options = f"-p {port} -c listen_addresses={self.host} -c unix_socket_directories='' -c fsync=off"
            logged = os.path.getsize(self.logFile) if os.path.exists(self.logFile) else 0
            result = self._run(
                "pg_ctl",
                "-D",
                self.data,
                "-l",
                self.logFile,
                "-o",
                options,
                "-w",
                "-t",
                str(START_TIMEOUT),
                "start",
                check=False,
            )
            if result.returncode == 0:
                self.port = port
                return
            with open(self.logFile, errors="replace") as log:
                log.seek(logged)
                said = log.read()
            if "could not bind" not in said and "could not create any TCP/IP sockets" not in said:
                raise RuntimeError(f"PostgreSQL did not start: {result.stdout}{result.stderr}{said}")
        raise RuntimeError("PostgreSQL found no free port in 20 tries")

    def stop(self, mode: str = "immediate") -> None:
        """C{pg_ctl stop -m MODE}: C{immediate} is an outage (no shutdown checkpoint; recovered at the next start)."""
        self._run("pg_ctl", "-D", self.data, "-m", mode, "-w", "stop", check=False)

    def running(self) -> bool:
        return self._run("pg_ctl", "-D", self.data, "status", check=False).returncode == 0

    def remove(self) -> None:
        """Stop the server and remove its directory."""
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


_server: PostgresServer | None = None


def server() -> PostgresServer:
    """This process's one private server, started on first use (and again if a test left it stopped)."""
    global _server
    if _server is None:
        bindir = postgresBin()
        made = PostgresServer(bindir, tempfile.mkdtemp(prefix="chunkwire-pg-"))
        atexit.register(made.remove)
        made.start()
        _server = made
    elif not _server.running():
        _server.start()
    return _server


def postgresOrSkip() -> PostgresServer:
    """L{server}, or C{SkipTest} with the reason there can be none (no binaries, no psycopg)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise unittest.SkipTest("psycopg is not installed (pip install 'chunkwire[postgresql]')") from None
    return server()


def main() -> int:
    """C{python3 dev.py postgres}: start the private server, print its URL, remove it on Ctrl-C or SIGTERM."""
    try:
        running = server()
    except unittest.SkipTest as reason:
        print(f"no PostgreSQL: {reason}", flush=True)
        return 1
    print(f"PostgreSQL {running.directory} listening: --store {running.url}  (Ctrl-C stops and removes it)", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
