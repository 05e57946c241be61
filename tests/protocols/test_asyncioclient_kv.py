"""The asyncio client (L{protocols.asyncioclient}) against the real key-value example server, run as a process.

One server (examples/kv_server.py) serves the whole class; each case uses
keys of its own and its own event loop (C{asyncio.run}), so trial and pytest
run it alike.  Listed in dev.py's PROCESS_TESTS (compiled core only).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from framing.rpc._errors import DeadReferenceError, NoSuchMethod, RemoteViolation
from framing.rpc._limits import CallLimits
from framing.rpc._referenceable import Referenceable
from framing.rpc._signatures import remote
from protocols.asyncioclient import AsyncReference, connect
from protocols.kv import KeyNotFound
from protocols.options import ClientOptions
from tests.processes import ClassProcessesCase, readUntil, startExample, stop

HANG = 30.0
"""Seconds within which anything that is not a hang finishes, however loaded the machine."""


class Watcher(Referenceable):
    """A watcher whose C{changed} is a coroutine, run on the client's loop."""

    def __init__(self) -> None:
        self.changes: asyncio.Queue[tuple[str, str | None]] = asyncio.Queue()

    @remote
    async def changed(self, key: str, value: str | None) -> None:
        await self.changes.put((key, value))


class KeyValueTests(ClassProcessesCase):
    """Calls of every outcome against examples/kv_server.py, as the Twisted client makes them."""

    server: Any  # a zygote child or a Popen (tests.processes.startExample)
    address: str

    @classmethod
    def startProcesses(cls) -> None:
        cls.server = startExample("kv_server.py", "--listen", "tcp:0:interface=127.0.0.1")
        port = int(readUntil(cls.server, rb"port=(\d+)").group(1))
        cls.address = f"127.0.0.1:{port}"

    @classmethod
    def stopProcesses(cls) -> None:
        stop(cls.server)

    def withRoot(self, use: Callable[[AsyncReference], Awaitable[Any]]) -> Any:
        """Run C{use(root)} on a fresh loop and connection, within L{HANG}."""

        async def main() -> Any:
            async with await connect(
                self.address, options=ClientOptions(timeout=HANG, callLimits=CallLimits(callTimeout=HANG))
            ) as connection:
                return await use(connection.root)

        return asyncio.run(asyncio.wait_for(main(), HANG))

    def test_putGetListDelete(self) -> None:
        """put, get, list and delete return the server's results."""

        async def use(root: AsyncReference) -> list[Any]:
            return [
                await root.callRemote("put", "basic/a", "one"),
                await root.callRemote("put", "basic/b", "two"),
                await root.callRemote("get", "basic/a"),
                await root.callRemote("list", prefix="basic/"),
                await root.callRemote("delete", "basic/a"),
                await root.callRemote("list", "basic/"),
            ]

        self.assertEqual(self.withRoot(use), [None, None, "one", ["basic/a", "basic/b"], True, ["basic/b"]])

    def test_hundredInFlight(self) -> None:
        """100 puts then 100 gets in flight at once on one connection each get their own values back."""

        async def use(root: AsyncReference) -> list[Any]:
            await asyncio.gather(*(root.callRemote("put", f"flight/{n}", f"v{n}") for n in range(100)))
            return list(await asyncio.gather(*(root.callRemote("get", f"flight/{n}") for n in range(100))))

        self.assertEqual(self.withRoot(use), [f"v{n}" for n in range(100)])

    def test_errors(self) -> None:
        """KeyNotFound arrives as itself, a misspelt method as NoSuchMethod, a too-long key as RemoteViolation."""

        async def use(root: AsyncReference) -> list[Any]:
            calls = [
                root.callRemote("get", "missing/key"),
                root.callRemote("gett", "k"),
                root.callRemote("put", "k" * 2000, "v"),
            ]
            outcomes = list(await asyncio.gather(*calls, return_exceptions=True))
            await root.callRemote("put", "errors/ok", "still up")
            outcomes.append(await root.callRemote("get", "errors/ok"))
            return outcomes

        missing, misspelt, tooLong, after = self.withRoot(use)
        self.assertIsInstance(missing, KeyNotFound)
        self.assertEqual(missing.args, ("missing/key",))
        self.assertIsInstance(misspelt, NoSuchMethod)
        self.assertIn("did you mean 'get'", str(misspelt))
        self.assertIsInstance(tooLong, RemoteViolation)
        self.assertEqual((tooLong.code, tooLong.where), ("body-too-large", "args[0]"))
        self.assertEqual(after, "still up")

    def test_closed(self) -> None:
        """After the context manager closes the connection, a call raises DeadReferenceError."""

        async def main() -> None:
            async with await connect(self.address, options=ClientOptions(timeout=HANG)) as connection:
                await connection.root.callRemote("put", "closed/k", "v")
            await connection.root.callRemote("get", "closed/k")

        self.assertRaises(DeadReferenceError, asyncio.run, asyncio.wait_for(main(), HANG))

    def test_watch(self) -> None:
        """A watcher passed to watch() is called back on every change of its key, until unwatch()."""

        async def use(root: AsyncReference) -> list[Any]:
            watcher = Watcher()
            seen: list[Any] = [await root.callRemote("watch", "watch/k", watcher)]
            await root.callRemote("put", "watch/k", "one")
            seen.append(await asyncio.wait_for(watcher.changes.get(), HANG))
            seen.append(await root.callRemote("unwatch", "watch/k", watcher))
            await root.callRemote("put", "watch/k", "two")
            seen.append(watcher.changes.qsize())
            return seen

        self.assertEqual(self.withRoot(use), [None, ("watch/k", "one"), True, 0])
