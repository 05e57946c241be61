"""Tests for protocols._logs: peer text escaped in log lines, and refusals logged and counted at a bounded rate."""

from __future__ import annotations

from typing import Any

from twisted.logger import Logger, formatEvent
from twisted.trial.unittest import SynchronousTestCase

from framing.wire import ERROR, PREAMBLE, SIMPLE, encode_header
from protocols import TokenProtocol
from protocols._logs import LogPolicy, NamedLogger, RefusalLog, escape
from protocols.testing import connectedPair


class EscapeTests(SynchronousTestCase):
    """escape() makes any peer text one printable line."""

    def test_plainTextUnchanged(self) -> None:
        """Printable text without backslashes comes back as it is."""
        self.assertEqual(escape("hello, wörld: 42"), "hello, wörld: 42")

    def test_lineBreakersEscaped(self) -> None:
        """Newlines, NEL, U+2028, U+2029, ESC and other controls become visible escapes."""
        escaped = escape("a\nb\x85c\u2028d\u2029e\x1b[31mf\x00g\x7f")
        self.assertEqual(escaped, r"a\nb\x85c\u2028d\u2029e\x1b[31mf\x00g\x7f")

    def test_backslashEscaped(self) -> None:
        """A backslash is doubled, so a peer cannot forge an escape."""
        self.assertEqual(escape("\\u2028"), "\\\\u2028")

    def test_longTextCut(self) -> None:
        """Text past the limit is cut and marked."""
        self.assertEqual(escape("x" * 50, limit=10), "x" * 10 + "...(cut)")

    def test_nonString(self) -> None:
        """Anything else is escaped as its str()."""
        self.assertEqual(escape(ValueError("bad\nthing")), r"bad\nthing")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class RefusalLogTests(SynchronousTestCase):
    """RefusalLog logs the first events of an interval in full, summarises the rest, and says when to drop."""

    def setUp(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.log = Logger(observer=self.events.append)
        self.clock = Clock()

    def lines(self) -> list[str]:
        return [formatEvent(event) for event in self.events]

    def test_firstFewInFullThenSummary(self) -> None:
        """Of 100 refusals in one interval, 3 are logged in full, the rest in one summary line at the next interval."""
        refusals = RefusalLog(LogPolicy(full=3, interval=10, maxRefusals=None), self.clock)
        for n in range(100):
            refusals.refusal(self.log, "peer", "bad-thing", f"number {n}")
        self.assertEqual(len(self.events), 3)
        self.clock.now = 10
        refusals.refusal(self.log, "peer", "bad-thing", "late")
        lines = self.lines()
        self.assertEqual(len(lines), 5)
        self.assertIn("97 more events not logged", lines[3])
        self.assertIn("bad-thing: 97", lines[3])
        self.assertIn(": bad-thing: late", lines[4])

    def test_summaryOnClose(self) -> None:
        """Closing writes the summary of what was not logged."""
        refusals = RefusalLog(LogPolicy(full=1, interval=10, maxRefusals=None), self.clock)
        refusals.refusal(self.log, "peer", "a", "x")
        refusals.failure(self.log, "peer", "b", "{peer}: failed")
        refusals.close(self.log, "peer")
        self.assertEqual(len(self.events), 2)
        self.assertIn("(b: 1)", self.lines()[1])

    def test_dropPastRate(self) -> None:
        """refusal() says to drop once more than maxRefusals came in one interval, and not before."""
        refusals = RefusalLog(LogPolicy(full=1, interval=10, maxRefusals=5), self.clock)
        verdicts = [refusals.refusal(self.log, "peer", "a", "x") for _ in range(6)]
        self.assertEqual(verdicts, [False] * 5 + [True])

    def test_rateIsPerInterval(self) -> None:
        """Refusals spread over intervals never reach the drop."""
        refusals = RefusalLog(LogPolicy(full=1, interval=10, maxRefusals=5), self.clock)
        for n in range(50):
            self.clock.now = n * 2.5
            self.assertFalse(refusals.refusal(self.log, "peer", "a", "x"))

    def test_failuresDoNotCount(self) -> None:
        """Failures are rate-limited in the log but never make a connection dropped."""
        refusals = RefusalLog(LogPolicy(full=1, interval=10, maxRefusals=1), self.clock)
        for _ in range(10):
            refusals.failure(self.log, "peer", "b", "{peer}: failed")
        self.assertFalse(refusals.refusal(self.log, "peer", "a", "x"))
        self.assertEqual(len(self.events), 1)

    def test_textEscaped(self) -> None:
        """The refused object's text is escaped in the log line."""
        refusals = RefusalLog(LogPolicy(), self.clock)
        refusals.refusal(self.log, "peer", "a", "evil\u2028\x1b[2Jline")
        self.assertIn(r"evil\u2028\x1b[2Jline", self.lines()[0])


class ProtocolLoggingTests(SynchronousTestCase):
    """TokenProtocol logs refusals at a bounded rate, drops a flood of them, and escapes a peer's ERROR text."""

    def connect(self, policy: LogPolicy | None = None) -> tuple[Any, Any, list[dict[str, Any]]]:
        events: list[dict[str, Any]] = []
        server, client = TokenProtocol(), TokenProtocol()
        server.log = client.log = Logger(observer=events.append)
        if policy is not None:
            server.logPolicy = policy
        return server, client, events

    def test_refusalFloodDropped(self) -> None:
        """100,000 reserved SIMPLE bytes make at most `full` lines, a summary and one drop coded too-many-refusals."""
        server, client, events = self.connect(LogPolicy(full=5, interval=10, maxRefusals=1000))
        pair = connectedPair(server, client)
        pair.clientTransport.write(encode_header(SIMPLE, 31) * 100_000)
        pair.flush()
        self.assertIsNotNone(server.failure)
        self.assertEqual(server.failure.value.code, "too-many-refusals")
        lines = [formatEvent(event) for event in events]
        self.assertLessEqual(len(lines), 5 + 3, lines)
        self.assertTrue(any(": too-many-refusals:" in line for line in lines), lines)

    def test_peerErrorTextEscaped(self) -> None:
        """A peer's ERROR text with NEL, U+2028 and terminal escapes reaches the log escaped, on one line."""
        server, client, events = self.connect()
        pair = connectedPair(server, client)
        text = "bye\x85fake line\u2028another\x1b[31mred".encode()
        pair.clientTransport.write(encode_header(ERROR, len(text)) + text)
        pair.flush()
        (line,) = [formatEvent(e) for e in events if "Dropping" in e["log_format"]]
        self.assertIn(r"bye\x85fake line\u2028another\x1b[31mred", line)
        for character in "\n\x85\u2028\x1b":
            self.assertNotIn(character, line)

    def test_preambleHeld(self) -> None:
        """(A sanity check for the pair above) the preamble is the first thing each side wrote."""
        server, client, _ = self.connect()
        pair = connectedPair(server, client)
        self.assertTrue(pair.serverTransport.writes[0].startswith(PREAMBLE))


class NamedLoggerTests(SynchronousTestCase):
    """A NamedLogger kept on a class logs in its own namespace, with the instance (or the class) as the source."""

    def test_namespaceKept(self) -> None:
        """Read through an instance or the class, it keeps its namespace; Twisted's Logger would take the class's."""
        events: list[dict[str, Any]] = []

        class Service:
            log = NamedLogger(namespace="chunkwire.test", observer=events.append)
            plain = Logger(namespace="chunkwire.test")

        service = Service()
        service.log.info("hello")
        self.assertEqual((events[0]["log_namespace"], events[0]["log_source"]), ("chunkwire.test", service))
        self.assertEqual((Service.log.namespace, Service.log.source), ("chunkwire.test", Service))
        self.assertEqual(service.plain.namespace, f"{__name__}.Service")

    def test_chunkwireClasses(self) -> None:
        """The classes that log in a namespace of their own (docs/howto/auth.rst names chunkwire.auth) log in it."""
        from protocols.auth._server import Authenticator
        from protocols.auth._throttle import LoginThrottle
        from protocols.kv._state import StateStore
        from protocols.serving._worker import _Served
        from protocols.serving._workers import Supervisor

        loggers = [Authenticator.log, LoginThrottle.log, StateStore._log, _Served._log, Supervisor._log]
        self.assertEqual(
            [logger.namespace for logger in loggers],
            ["chunkwire.auth"] * 2 + ["chunkwire.state"] + ["chunkwire.workers"] * 2,
        )
