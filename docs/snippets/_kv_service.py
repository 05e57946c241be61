"""What the snippets of the without-Twisted how-to share: the service they call, and its interface.

The service is the key-value example server, started here on a free loopback
port so that each snippet runs as it is.  (In real use it already runs
somewhere: python examples/kv_server.py --listen tcp:8760.)
"""

from __future__ import annotations  # the interface's hints are read by chunkwire, not evaluated here

import atexit
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _serving import startService

PASSWORD = "ada's secret"
"""The password of the user ada, on a server started with logins."""


def startKeyValueServer(*, logins: bool = False) -> tuple[subprocess.Popen[str], int, str | None]:
    """
    Start examples/kv_server.py: the process, its port, and, with C{logins},
    the bearer token of the user build-bot (the user ada logs in with
    L{PASSWORD}); the user and token files are made with chunkwire-adduser.
    """
    arguments = ["--listen", "tcp:0:interface=127.0.0.1"]
    token = None
    if logins:
        work = Path(tempfile.mkdtemp())
        atexit.register(shutil.rmtree, work, True)  # the files go with the snippet's process
        adduser = [sys.executable, "-m", "protocols.auth._adduser"]
        subprocess.run(
            [*adduser, "--iterations", "4096", "--password-stdin", str(work / "users"), "ada"],
            input=PASSWORD + "\n",
            text=True,
            check=True,
            capture_output=True,
        )
        token = subprocess.run(
            [*adduser, "--token", str(work / "tokens"), "build-bot"], text=True, check=True, capture_output=True
        ).stdout.strip()
        arguments += ["--users", str(work / "users"), "--tokens", str(work / "tokens")]
    server, port = startService("examples/kv_server.py", *arguments)
    return server, port, token


# -- the interface ---------------------------------------------------------------------------
from typing import TYPE_CHECKING, Annotated, Protocol  # noqa: E402

from framing.rpc import MaxLength, RemoteInterface  # noqa: E402

if TYPE_CHECKING:
    from twisted.internet.defer import Deferred  # for mypy only: nothing of Twisted is loaded

Key = Annotated[str, MaxLength(1024)]


class IKeyValue(RemoteInterface, Protocol, name="kv.IKeyValue"):
    """The part of the key-value service the snippets call, declared as the server declares it."""

    def get(self, key: Key) -> Deferred[str]: ...

    def put(self, key: Key, value: Annotated[str, MaxLength(1 << 20)]) -> Deferred[None]: ...
