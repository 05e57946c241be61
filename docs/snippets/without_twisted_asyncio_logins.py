"""Logging in and calling through a typed interface from an asyncio application: still no Twisted imported."""

from __future__ import annotations  # the interface's hints are read by chunkwire, not evaluated here

import re
import subprocess
import sys
import tempfile
from pathlib import Path

# The service: the key-value example server with a user file and a token file, made here with
# chunkwire-adduser so that the snippet runs as it is.  (In real use they exist already.)
work = Path(tempfile.mkdtemp())
adduser = [sys.executable, "-m", "protocols.auth.adduser"]
subprocess.run(
    [*adduser, "--iterations", "4096", "--password-stdin", str(work / "users"), "ada"],
    input="ada's secret\n",
    text=True,
    check=True,
    capture_output=True,
)
token = subprocess.run(
    [*adduser, "--token", str(work / "tokens"), "build-bot"], text=True, check=True, capture_output=True
).stdout.strip()
server = subprocess.Popen(
    [
        sys.executable,
        "examples/kv_server.py",
        "--listen",
        "tcp:0:interface=127.0.0.1",
        "--users",
        str(work / "users"),
        "--tokens",
        str(work / "tokens"),
    ],
    stdout=subprocess.PIPE,
    text=True,
)
port = None
while port is None:
    line = server.stdout.readline()
    if not line:
        raise SystemExit("the server did not start")
    found = re.search(r"port=(\d+)", line)
    port = found and int(found.group(1))

# -- the interface ---------------------------------------------------------------------------
from typing import TYPE_CHECKING, Annotated, Protocol  # noqa: E402

from framing.rpc.interfaces import RemoteInterface  # noqa: E402
from framing.rpc.signatures import MaxLength  # noqa: E402

if TYPE_CHECKING:
    from twisted.internet.defer import Deferred  # for mypy only: nothing of Twisted is loaded

Key = Annotated[str, MaxLength(1024)]


class IKeyValue(RemoteInterface, Protocol, name="kv.IKeyValue"):
    """The part of the key-value service this script calls, declared as the server declares it."""

    def get(self, key: Key) -> Deferred[str]: ...

    def put(self, key: Key, value: Annotated[str, MaxLength(1 << 20)]) -> Deferred[None]: ...


# -- the client ------------------------------------------------------------------------------
import asyncio  # noqa: E402

from framing import Violation  # noqa: E402
from framing.login import LoginRefused, Password, Token  # noqa: E402
from protocols.asyncioclient import connect  # noqa: E402


async def main() -> None:
    address = f"127.0.0.1:{port}"
    ada = Password("ada", "ada's secret")
    async with await connect(address, credentials=ada, interface=IKeyValue, callTimeout=10) as connection:
        kv = connection.root
        await kv.put("greeting", "hello")
        print("ada reads:", await kv.get("greeting"))
        try:
            await kv.get("k" * 2000)  # refused when called, before anything is sent
        except Violation as error:
            print("refused here, nothing sent:", error.where)
    async with await connect(address, credentials=Token(token), interface=IKeyValue) as connection:
        print("build-bot reads:", await connection.root.get("greeting"))
    try:
        await connect(address, credentials=Password("ada", "a guess"))
    except LoginRefused as error:
        print("wrong password:", error)


try:
    asyncio.run(main())
    print("twisted imported:", "twisted" in sys.modules)
finally:
    server.terminate()
    server.wait()
