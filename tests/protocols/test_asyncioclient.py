"""The asyncio client (L{protocols.asyncioclient}) against scripted servers on real sockets.

The servers are the blocking client's scripted ones (threads of this process
speaking chunkwire by hand, see C{test_blocking}); the cases against the real
example server are in C{test_asyncioclient_kv}.  Each test is a plain method
that runs its coroutine with C{asyncio.run} under a deadline only a hang
misses, so trial and pytest run it alike, whatever reactor they have.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from twisted.trial.unittest import SynchronousTestCase

import tests.protocols.test_blocking as scripted
from framing import Limits, ProtocolError, Violation
from framing.rpc._errors import CallTimedOut, DeadReferenceError, NoSuchMethod, UnexpectedAnswer, describe, noSuchMethod
from framing.rpc._limits import CallLimits
from framing.rpc._wire import ANSWER, CALL, CANCEL, FAIL, Message
from protocols.asyncioclient import AsyncConnection, ConnectionLost, ServerSilent, connect
from protocols.options import ClientOptions
from tests.processes import ENV, ROOT

HANG = 30.0
"""Seconds within which anything that is not a hang finishes, however loaded the machine."""

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run C{coroutine} on a fresh event loop, failing rather than hanging past L{HANG}."""
    return asyncio.run(asyncio.wait_for(coroutine, HANG))


class NoTwistedTests(SynchronousTestCase):
    """Importing and using the asyncio client loads no Twisted."""

    def test_importLoadsNoTwisted(self) -> None:
        """A fresh interpreter that imports protocols.asyncioclient has no twisted module."""
        probe = (
            "import json, sys\n"
            "import protocols.asyncioclient\n"
            "from protocols.asyncioclient import connect\n"
            "print(json.dumps(sorted(sys.modules)))\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", probe], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=60
        )
        self.assertEqual(result.returncode, 0, result.stderr)
        modules = json.loads(result.stdout)
        self.assertIn("framing.rpc._session", modules)
        self.assertEqual([name for name in modules if name == "twisted" or name.startswith("twisted.")], [])


class CallTests(SynchronousTestCase):
    """Calls are awaited, many at once on one connection, and fail as the Twisted client's do."""

    def test_resultAndArguments(self) -> None:
        """A call returns the server's ANSWER; its arguments and keyword arguments arrived as given."""
        server = scripted.ScriptedServer(self, scripted.answerAll)

        async def main() -> Any:
            async with await connect(server.address, options=ClientOptions(timeout=HANG)) as connection:
                return await connection.root.callRemote("echo", 1, b"two", three=[3.0])

        self.assertEqual(run(main()), ["echo", [1, b"two"], {"three": [3.0]}])

    def test_hundredInFlightOutOfOrder(self) -> None:
        """100 calls in flight at once, all sent before any answer, answered last first: each gets its own answer."""

        def script(peer: scripted.ScriptedPeer) -> None:
            calls = [peer.next() for _ in range(100)]
            for call in reversed(calls):
                peer.send(Message((ANSWER, call[1], call[4][0])))
            peer.next()

        server = scripted.ScriptedServer(self, script)

        async def main() -> list[Any]:
            async with await connect(server.address, options=ClientOptions(timeout=HANG)) as connection:
                return await asyncio.gather(*(connection.root.callRemote("echo", n) for n in range(100)))

        self.assertEqual(run(main()), list(range(100)))

    def test_failRebuilt(self) -> None:
        """A FAIL is raised as the error it describes (a NoSuchMethod here, with its message)."""

        def script(peer: scripted.ScriptedPeer) -> None:
            message = peer.next()
            typeName, text, details = describe(noSuchMethod("gte", ["get", "put"]))
            peer.send(Message((FAIL, message[1], typeName, text, None, details)))
            peer.next()

        server = scripted.ScriptedServer(self, script)

        async def main() -> None:
            async with await connect(server.address, options=ClientOptions(timeout=HANG)) as connection:
                await connection.root.callRemote("gte")

        error = self.assertRaises(NoSuchMethod, run, main())
        self.assertIn("did you mean 'get'", str(error))

    def test_callRemoteOnlyAndServerCalls(self) -> None:
        """callRemoteOnly waits for nothing; the server's call to this side is answered NoSuchObject."""
        seen: list[Any] = []

        def script(peer: scripted.ScriptedPeer) -> None:
            seen.append(peer.next())
            call = peer.next()
            peer.send(Message((CALL, 7, 3, "changed", None, "k")))
            seen.append(peer.next())
            peer.send(Message((ANSWER, call[1], "answered")))
            peer.next()

        server = scripted.ScriptedServer(self, script)

        async def main() -> Any:
            async with await connect(server.address, options=ClientOptions(timeout=HANG)) as connection:
                await connection.root.callRemoteOnly("log", "line")
                return await connection.root.callRemote("get")

        self.assertEqual(run(main()), "answered")
        self.assertTrue(server.done.wait(HANG))
        self.assertEqual(seen[0][:4], (CALL, 0, 0, "log"))
        self.assertEqual(seen[1][:3], (FAIL, 7, "NoSuchObject"))

    def test_refusedAnswer(self) -> None:
        """An answer this side refuses (over its limits) fails that call alone with the violation; the next works."""

        def script(peer: scripted.ScriptedPeer) -> None:
            first = peer.next()
            peer.send(Message((ANSWER, first[1], "x" * 2000)))
            scripted.answerAll(peer)

        server = scripted.ScriptedServer(self, script)
        outcomes: list[Any] = []

        async def main() -> None:
            async with await connect(
                server.address, options=ClientOptions(timeout=HANG, limits=Limits(max_string_length=1000))
            ) as connection:
                try:
                    await connection.root.callRemote("big")
                except Violation as error:
                    outcomes.append(error)
                outcomes.append(await connection.root.callRemote("small"))

        run(main())
        self.assertIsInstance(outcomes[0], Violation)
        self.assertIn("in the answer to 'big'", str(outcomes[0]))
        self.assertEqual(outcomes[1], ["small", [], {}])


class CancelTests(SynchronousTestCase):
    """A call given up on, by its caller or by callTimeout, sends the server a CANCEL; its late answer is ignored."""

    def _cancelScript(self, cancels: list[Any]) -> Any:
        def script(peer: scripted.ScriptedPeer) -> None:
            first = peer.next()
            cancels.append((first[1], peer.next()))
            second = peer.next()
            peer.send(Message((ANSWER, first[1], "late")))  # the one late answer expected: ignored
            peer.send(Message((ANSWER, second[1], "fresh")))
            peer.next()

        return script

    def test_taskCancelled(self) -> None:
        """Cancelling the task awaiting a call sends CANCEL for its request id; the connection goes on."""
        cancels: list[Any] = []
        server = scripted.ScriptedServer(self, self._cancelScript(cancels))

        async def main() -> Any:
            async with await connect(server.address, options=ClientOptions(timeout=HANG)) as connection:
                task = asyncio.create_task(connection.root.callRemote("slow"))
                await asyncio.sleep(0.05)
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
                else:
                    raise AssertionError("the call was not cancelled")
                return await connection.root.callRemote("next")

        self.assertEqual(run(main()), "fresh")
        self.assertTrue(server.done.wait(HANG))
        self.assertEqual(cancels, [(1, Message((CANCEL, 1)))])

    def test_waitForTimeout(self) -> None:
        """asyncio.wait_for's timeout on a call cancels it, and the server gets the CANCEL."""
        cancels: list[Any] = []
        server = scripted.ScriptedServer(self, self._cancelScript(cancels))

        async def main() -> Any:
            async with await connect(server.address, options=ClientOptions(timeout=HANG)) as connection:
                try:
                    await asyncio.wait_for(connection.root.callRemote("slow"), 0.1)
                except asyncio.TimeoutError:
                    pass
                return await connection.root.callRemote("next")

        self.assertEqual(run(main()), "fresh")
        self.assertTrue(server.done.wait(HANG))
        self.assertEqual(cancels, [(1, Message((CANCEL, 1)))])

    def test_callTimedOut(self) -> None:
        """A call unanswered within callTimeout raises CallTimedOut, the server gets a CANCEL, the connection lives."""
        cancels: list[Any] = []
        server = scripted.ScriptedServer(self, self._cancelScript(cancels))
        outcomes: list[Any] = []

        async def main() -> None:
            async with await connect(
                server.address, options=ClientOptions(timeout=HANG, callLimits=CallLimits(callTimeout=0.3))
            ) as connection:
                try:
                    await connection.root.callRemote("slow")
                except CallTimedOut as error:
                    outcomes.append(error)
                connection.callTimeout = HANG
                outcomes.append(await connection.root.callRemote("next"))

        run(main())
        self.assertEqual((outcomes[0].name, outcomes[0].seconds), ("slow", 0.3))
        self.assertEqual(outcomes[1], "fresh")
        self.assertTrue(server.done.wait(HANG))
        self.assertEqual(cancels, [(1, Message((CANCEL, 1)))])


class TimeoutTests(SynchronousTestCase):
    """A silent server is a timely typed error, never a hang."""

    def test_noPreamble(self) -> None:
        """A server that accepts and says nothing fails connect with ServerSilent within its timeout."""
        server = scripted.ScriptedServer(self, lambda peer: peer.next(), preamble=False)
        error = self.assertRaises(ServerSilent, run, connect(server.address, options=ClientOptions(timeout=0.5)))
        self.assertIn("no chunkwire preamble", str(error))

    def test_notChunkwire(self) -> None:
        """A server that speaks something else fails connect with a ProtocolError, not a hang."""

        def script(peer: scripted.ScriptedPeer) -> None:
            peer.connection.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

        server = scripted.ScriptedServer(self, script, preamble=False)
        self.assertRaises(ProtocolError, run, connect(server.address, options=ClientOptions(timeout=HANG)))

    def test_notChunkwireToldWhy(self) -> None:
        """
        A server whose first bytes are no preamble reads this side's
        preamble, then the ERROR naming the rule, then EOF: the preamble is
        written as the connection is made, before anything can be read.
        """
        received: list[bytes] = []

        def script(peer: scripted.ScriptedPeer) -> None:
            peer.connection.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
            received.append(peer.rest())

        server = scripted.ScriptedServer(self, script, preamble=False)
        self.assertRaises(ProtocolError, run, connect(server.address, options=ClientOptions(timeout=HANG)))
        self.assertTrue(server.done.wait(HANG))
        scripted.assertToldWhy(self, received, "bad-preamble")

    def test_silentServer(self) -> None:
        """A server that stops answering (PINGs too) fails the waiting calls with ServerSilent after silenceTimeout."""
        pings: list[Any] = []

        def script(peer: scripted.ScriptedPeer) -> None:
            peer.next()
            peer.next()
            peer.next()  # (the connection's end; meanwhile the client's PING is counted)
            pings.extend(peer.decoder.control_events)

        server = scripted.ScriptedServer(self, script)

        async def main() -> list[Any]:
            async with await connect(
                server.address, options=ClientOptions(timeout=HANG, silenceTimeout=0.6)
            ) as connection:
                calls = [connection.root.callRemote("get", key) for key in ("a", "b")]
                return await asyncio.gather(*calls, return_exceptions=True)

        started = time.monotonic()
        outcomes = run(main())
        self.assertLess(time.monotonic() - started, HANG)
        self.assertEqual([isinstance(outcome, ServerSilent) for outcome in outcomes], [True, True])
        self.assertIn("'get'", str(outcomes[0]))
        self.assertTrue(server.done.wait(HANG))
        self.assertEqual(len(pings), 1)


class LostTests(SynchronousTestCase):
    """The connection's end fails every waiting call with the reason, naming the call."""

    def test_closedMidCall(self) -> None:
        """The server closing while calls wait fails each with ConnectionLost naming it; later calls are dead."""
        server = scripted.ScriptedServer(self, lambda peer: (peer.next(), peer.next()))
        outcomes: list[Any] = []

        async def main() -> None:
            async with await connect(server.address, options=ClientOptions(timeout=HANG)) as connection:
                calls = [connection.root.callRemote("get", "k"), connection.root.callRemote("put", "k", "v")]
                outcomes.extend(await asyncio.gather(*calls, return_exceptions=True))
                try:
                    await connection.root.callRemote("get", "k")
                except DeadReferenceError as error:
                    outcomes.append(error)

        run(main())
        self.assertEqual([isinstance(outcome, ConnectionLost) for outcome in outcomes[:2]], [True, True])
        self.assertIn("'put'", str(outcomes[1]))
        self.assertIn(server.address, str(outcomes[1]))
        self.assertIsInstance(outcomes[2], DeadReferenceError)

    def test_unexpectedAnswer(self) -> None:
        """
        An answer to a call never made ends the connection: the waiting
        call fails with UnexpectedAnswer, and the server is sent the ERROR
        saying why (the Twisted connection's bytes), then the connection is closed.
        """
        received: list[bytes] = []

        def script(peer: scripted.ScriptedPeer) -> None:
            peer.next()
            peer.send(Message((ANSWER, 99, "stray")))
            received.append(peer.rest())

        server = scripted.ScriptedServer(self, script)

        async def main() -> None:
            async with await connect(server.address, options=ClientOptions(timeout=HANG)) as connection:
                await connection.root.callRemote("get")

        error = self.assertRaises(UnexpectedAnswer, run, main())
        self.assertIn("never made", str(error))
        self.assertTrue(server.done.wait(HANG))
        self.assertEqual(received, [scripted.ERROR_UNEXPECTED])


class BackPressureTests(SynchronousTestCase):
    """A server that stops reading makes calls wait for the transport to drain; the client's buffer stays bounded."""

    def test_stalledServer(self) -> None:
        """
        With the server not reading, 400 calls of 64 KiB each: the transport's
        buffer stays within its high-water mark and one message, the rest of
        the calls wait; once the server reads again every call is answered.
        """
        resume = threading.Event()
        payload = bytes(64 * 1024)

        def script(peer: scripted.ScriptedPeer) -> None:
            resume.wait(HANG)
            scripted.answerAll(peer)

        server = scripted.ScriptedServer(self, script)
        seen: dict[str, int] = {}

        async def main() -> list[Any]:
            async with await connect(server.address, options=ClientOptions(timeout=HANG)) as connection:
                calls = [asyncio.ensure_future(connection.root.callRemote("put", n, payload)) for n in range(400)]
                # Let the kernel's buffers fill and the transport pause (given up on after 60 s: the test fails).
                deadline = time.monotonic() + 60.0
                while connection.waitingToSend == 0 and time.monotonic() < deadline:
                    await asyncio.sleep(0.01)
                await asyncio.sleep(0.2)
                seen["buffered"] = connection.bufferedBytes
                seen["waiting"] = connection.waitingToSend
                seen["highWater"] = connection.writeLimits()[1]
                resume.set()
                return [answer[1][0] for answer in await asyncio.gather(*calls)]

        self.assertEqual(run(main()), list(range(400)))
        self.assertGreater(seen["waiting"], 0)
        self.assertLessEqual(seen["buffered"], seen["highWater"] + len(payload) + 1024)


class RecordingTransport(asyncio.WriteTransport):
    """A transport that keeps what is written, one entry per write (never pauses)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def get_write_buffer_size(self) -> int:
        return 0


class WriteTests(SynchronousTestCase):
    """Calls made in one turn of the loop while others wait share one write; a lone call is written at once."""

    def test_gatheredWrites(self) -> None:
        """
        A lone call is written at once; 100 calls started together are
        written in two writes (the first alone, the rest gathered), in order,
        and their CANCEL after them.
        """
        server = scripted.ScriptedPeer.__new__(scripted.ScriptedPeer)
        server.decoder = scripted.Decoder(registry=scripted.REGISTRY)
        transport = RecordingTransport()

        async def main() -> list[Any]:
            connection = AsyncConnection(asyncio.get_running_loop(), "peer:1")
            connection.protocol.connection_made(transport)
            connection.protocol.data_received(scripted.PREAMBLE)
            lone = asyncio.ensure_future(connection.root.callRemote("lone"))
            await asyncio.sleep(0)
            writesForLone = len(transport.writes)
            calls = [asyncio.ensure_future(connection.root.callRemote("echo", n)) for n in range(100)]
            await asyncio.sleep(0)
            calls[-1].cancel()
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            lone.cancel()
            await asyncio.sleep(0)
            written = list(transport.writes)
            for call in calls:
                call.cancel()
            await asyncio.gather(lone, *calls, return_exceptions=True)
            return [writesForLone, written]

        writesForLone, written = run(main())
        self.assertEqual(writesForLone, 2)  # the preamble, then the lone call
        self.assertLessEqual(len(written), 2 + 2 + 2)  # the 100 calls in two writes, each CANCEL in one
        messages = server.decoder.feed(b"".join(written))
        self.assertEqual([m[3] for m in messages if m[0] == CALL], ["lone", *["echo"] * 100])
        self.assertEqual([m[4] for m in messages if m[0] == CALL][1:], [(n,) for n in range(100)])
        self.assertEqual([m for m in messages if m[0] == CANCEL], [Message((CANCEL, 101)), Message((CANCEL, 1))])
