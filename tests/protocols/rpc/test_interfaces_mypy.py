"""
mypy --strict, with the mypy.ini the typed-interfaces how-to gives, accepts a typed service and reports its mistakes.

One mypy run checks every file (mypy takes seconds to start): a service that
uses what chunkwire documents for typed code, a file of mistakes, and each
Python block of docs/howto/typed-interfaces.rst as copied out of the page.
In each file, mypy must report exactly the lines marked C{# error}.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from twisted.trial.unittest import SkipTest, SynchronousTestCase

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "howto" / "typed-interfaces.rst"
SNIPPET = ROOT / "docs" / "snippets" / "typed_interfaces.py"

# What a typed service touches: an interface with a stream, its server
# (instantiated), serving, connecting, a typed proxy's calls, logins.
SERVICE = """\
from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any, Protocol

from twisted.cred.credentials import UsernamePassword
from twisted.cred.portal import IRealm
from twisted.internet.defer import Deferred, succeed
from zope.interface import implementer

from protocols import auth, bulk, rpc
from protocols.auth._tokens import TokenChecker
from protocols.auth._users import UserFile

Key = Annotated[str, rpc.MaxLength(100)]


class IKeyValue(rpc.RemoteInterface, Protocol, name="example.IKeyValue"):
    def get(self, key: Key) -> Deferred[str | None]: ...

    def upload(self, key: Key, data: bulk.StreamArg) -> Deferred[int]: ...

    def download(self, key: Key) -> Deferred[bulk.StreamArg]: ...

    def watch(self, count: int) -> Deferred[AsyncIterator[str]]: ...

    def total(self, numbers: AsyncIterator[int]) -> Deferred[int]: ...


class KeyValue(rpc.Referenceable, IKeyValue):
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    @rpc.deferred
    async def get(self, key: str) -> str | None:
        return self.values.get(key)

    @rpc.deferred
    async def upload(self, key: str, data: bulk.StreamArg) -> int:
        result = await bulk.asIncoming(data).receive(f"/tmp/{key}")
        return result.size

    def download(self, key: str) -> Deferred[bulk.StreamArg]:
        stream: bulk.StreamArg = bulk.Stream(f"/tmp/{key}")
        return succeed(stream)

    @rpc.deferred
    async def watch(self, count: int) -> AsyncIterator[str]:
        async def events() -> AsyncIterator[str]:
            for index in range(count):
                yield f"event {index}"

        return events()

    @rpc.deferred
    async def total(self, numbers: AsyncIterator[int]) -> int:
        return sum([number async for number in numbers])


async def someNumbers() -> AsyncIterator[int]:
    yield 1


@implementer(IRealm)
class Realm:
    def requestAvatar(self, avatarId: bytes, mind: object, *interfaces: Any) -> tuple[Any, KeyValue, Any]:
        return auth.IRemoteRoot, KeyValue(), lambda: None


async def main(reactor: Any) -> None:
    port = await rpc.serve(reactor, "tcp:0:interface=127.0.0.1", KeyValue())
    address = f"tcp:host=127.0.0.1:port={port.getHost().port}"
    kv = await rpc.connect(reactor, address, interface=IKeyValue)
    value: str | None = await kv.get("key")
    call = kv.get("key")
    call.addTimeout(5, reactor)
    call.cancel()
    again = (await rpc.connect(reactor, address)).typed(IKeyValue)
    other: str | None = await again.get("key")
    events: list[str] = [event async for event in await kv.watch(3)]
    total: int = await kv.total(someNumbers())
    rpc.referenceOf(kv).broker.disconnect()
    await port.stopListening()

    portal = auth.portal(Realm(), [UserFile("users"), TokenChecker({})])
    streams = bulk.BulkOptions(steadyAllocator=False)
    serving = rpc.ServerOptions(portal=portal, bulk=streams)
    guarded = await rpc.serve(reactor, "tcp:0:interface=127.0.0.1", options=serving)
    login = rpc.ClientOptions(credentials=UsernamePassword(b"ada", b"pw"), bulk=streams)
    root = await rpc.connect(reactor, address, options=login)
    size: int = await root.typed(IKeyValue).upload("file", bulk.Stream(b"data"))
    copy = bulk.asIncoming(await root.typed(IKeyValue).download("file"))
    await copy.receive("copy")
    plain = await rpc.login(reactor, address, UsernamePassword(b"ada", b"pw"))
    await plain.broker.disconnect()
    await guarded.stopListening()
    print(value, other, size, events, total)
"""

MISTAKES = """\
from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from twisted.internet.defer import Deferred

from protocols import bulk, rpc


class IKeyValue(rpc.RemoteInterface, Protocol, name="example.mistakes.IKeyValue"):
    def get(self, key: str) -> Deferred[str]: ...

    def watch(self) -> Deferred[AsyncIterator[str]]: ...

    def upload(self, key: str, data: bulk.StreamArg) -> Deferred[int]: ...


class WrongResult(rpc.Referenceable, IKeyValue):
    @rpc.deferred
    async def get(self, key: str) -> int:  # error: its result is not the interface's
        return 1

    @rpc.deferred
    async def upload(self, key: str, data: bulk.IncomingStream) -> int:  # error: narrower than the interface's
        return 0


async def client(kv: IKeyValue) -> None:
    await kv.get(42)  # error: an int where a str is declared
    Deferred.fromCoroutine(kv.get("key"))  # error: a call is a Deferred, not a coroutine
    kv.upload("key", b"data")  # error: bytes are not a stream
    async for event in await kv.watch():
        count: int = event  # error: a stream of str, not of int
"""

# The same service, with mypy-zope: Twisted's interfaces as types, and Portal itself.
ZOPE_SERVICE = (
    SERVICE.replace("from twisted.cred.portal import IRealm", "from twisted.cred.portal import IRealm, Portal")
    .replace("auth.portal(Realm(), ", "Portal(Realm(), ")
    .replace("avatarId: bytes,", "avatarId: bytes | tuple[()],")
    .replace(
        "async def main(reactor: Any) -> None:", "async def main(reactor: IReactorTime) -> None:\n    reactor.seconds()"
    )
    .replace("from zope.interface", "from twisted.internet.interfaces import IReactorTime\nfrom zope.interface")
)


def codeBlocks(text: str, language: str) -> list[str]:
    """The bodies of a reST page's C{code-block} directives of C{language}, dedented, in order."""
    blocks: list[str] = []
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.strip() != f".. code-block:: {language}":
            continue
        body: list[str] = []
        for following in lines[index + 1 :]:
            if following.strip() and not following.startswith(" "):
                break
            body.append(following)
        blocks.append(textwrap.dedent("\n".join(body)).strip("\n") + "\n")
    return blocks


def marked(source: str) -> list[int]:
    """The 1-based numbers of the lines of C{source} marked C{# error}."""
    return [number for number, line in enumerate(source.splitlines(), 1) if "# error" in line]


@functools.cache
def checked(plugin: bool = False) -> tuple[dict[str, str], dict[str, list[int]], str]:
    """
    Run mypy once over every file with the page's mypy.ini (and the mypy-zope
    plugin if C{plugin}): the files, the lines mypy reported an error on in
    each, and mypy's whole output.
    """
    page = PAGE.read_text("utf-8")
    (config,) = codeBlocks(page, "ini")
    files = {"typed_interfaces.py": SNIPPET.read_text("utf-8")}
    if plugin:
        config = config.replace("[mypy]\n", "[mypy]\nplugins = mypy_zope:plugin\n")
        files["zope_service.py"] = ZOPE_SERVICE
    else:
        files["service.py"] = SERVICE
        files["mistakes.py"] = MISTAKES
        files.update({f"page_{n}.py": block for n, block in enumerate(codeBlocks(page, "python"), 1)})
    command = [sys.executable, "-m", "mypy", "--follow-imports=silent", "--no-incremental", "--python-version", "3.10"]
    command += ["--config-file", "mypy.ini", *files]
    environment = {**os.environ, "MYPYPATH": str(ROOT)}
    with tempfile.TemporaryDirectory(prefix="chunkwire-mypy-") as directory:
        for name, source in files.items():
            Path(directory, name).write_text(source)
        Path(directory, "mypy.ini").write_text(config)
        done = subprocess.run(command, capture_output=True, text=True, cwd=directory, env=environment, timeout=300)
    output = done.stdout + done.stderr
    if done.returncode not in (0, 1):
        raise AssertionError(f"mypy failed to run: {output}")
    reported: dict[str, list[int]] = {name: [] for name in files}
    for match in re.finditer(r"^([\w.]+\.py):(\d+): error:", done.stdout, re.MULTILINE):
        reported.setdefault(match.group(1), []).append(int(match.group(2)))
    return files, reported, output


class MypyTests(SynchronousTestCase):
    """mypy --strict with the documented mypy.ini: each file's errors are exactly its marked lines."""

    def setUp(self) -> None:
        if importlib.util.find_spec("mypy") is None:
            raise SkipTest("mypy is not installed (the lint extra)")

    def assertReported(self, name: str, plugin: bool = False) -> None:
        files, reported, output = checked(plugin)
        self.assertEqual(sorted(set(reported[name])), marked(files[name]), output)

    def test_service(self) -> None:
        """A service using interfaces, bulk and object streams, serve's port, typed calls and logins type-checks."""
        self.assertReported("service.py")
        self.assertEqual(marked(SERVICE), [])

    def test_mistakes(self) -> None:
        """A wrong result, a narrowed stream parameter, a wrong argument, fromCoroutine, a stream item: reported."""
        self.assertReported("mistakes.py")
        self.assertEqual(len(marked(MISTAKES)), 6)

    def test_snippet(self) -> None:
        """The how-to's snippet, its classes instantiated, type-checks but for the line it marks."""
        self.assertReported("typed_interfaces.py")
        self.assertIn("Drawing()", SNIPPET.read_text("utf-8"))

    def test_page_blocks(self) -> None:
        """Each Python block of the how-to type-checks as copied out, but for the lines it marks."""
        files, _, _ = checked()
        blocks = sorted(name for name in files if name.startswith("page_"))
        self.assertGreaterEqual(len(blocks), 3)
        for name in blocks:
            self.assertReported(name)

    def test_with_mypy_zope(self) -> None:
        """With the mypy-zope plugin the page mentions, Portal(realm, [UserFile(...)]) and IReactorTime pass too."""
        if importlib.util.find_spec("mypy_zope") is None:
            raise SkipTest("mypy-zope is not installed (an option the how-to mentions, not a dependency)")
        self.assertReported("zope_service.py", plugin=True)
        self.assertReported("typed_interfaces.py", plugin=True)
