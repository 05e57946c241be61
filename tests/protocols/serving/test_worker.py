"""
The generic worker process's parts (L{protocols.serving._worker}): what can be checked in this process.

Loading the operator's function, the ports a C{--serve} function listened on
and their draining, and the command line's errors.  A worker serving on
adopted sockets is L{tests.protocols.serving.test_workers}' business.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.logger import globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from protocols.serving._worker import _Served, loadFactory, loadFunction, main

from ...processes import ROOT


def makeFactory(reactor: Any, *arguments: str) -> tuple[Any, tuple[str, ...]]:
    """A stand-in for an operator's factory function: gives back what it was called with."""
    return (reactor, arguments)


class FakePort:
    """A listening port that records the grace it was drained with."""

    def __init__(self) -> None:
        self.drained: list[float] = []
        self.done: Deferred[None] = Deferred()

    def drain(self, grace: float) -> Deferred[None]:
        self.drained.append(grace)
        return self.done


class LoadTests(SynchronousTestCase):
    """C{package.module:function} is imported; anything else is a ValueError naming it."""

    def test_loadFunction(self) -> None:
        """The function named is imported and given."""
        self.assertIs(loadFunction(f"{__name__}:makeFactory"), makeFactory)

    def test_badForm(self) -> None:
        """A path without a module or a function is refused, quoted in the message."""
        for path in ["tests.protocols.serving.test_worker", ":makeFactory", "tests.protocols:", ""]:
            error = self.assertRaises(ValueError, loadFunction, path)
            self.assertIn(repr(path), str(error))

    def test_missing(self) -> None:
        """A module or a function that does not exist fails to load (nothing is called)."""
        self.assertRaises(ImportError, loadFunction, "tests.no_such_module:f")
        self.assertRaises(AttributeError, loadFunction, f"{__name__}:noSuchFunction")

    def test_loadFactory(self) -> None:
        """The factory function is called once, with the reactor then the C{--argument} values in order."""
        reactor = object()
        self.assertEqual(loadFactory(f"{__name__}:makeFactory", reactor, "a", "b"), (reactor, ("a", "b")))


class ServedTests(SynchronousTestCase):
    """The ports a C{--serve} function gave: kept whether given now or later, each drained with the grace."""

    def test_drainsEveryPort(self) -> None:
        """A port, a Deferred of one and a coroutine of one are each drained with the grace, once all listen."""
        served = _Served(2.5)
        now, later, viaCoroutine = FakePort(), FakePort(), FakePort()
        listening: Deferred[Any] = Deferred()

        async def listen() -> FakePort:
            return viaCoroutine

        served.add(now)
        served.add(listening)
        served.add(listen())
        drained = served.drain()
        self.assertEqual(now.drained, [])  # waits for the port still being listened on
        listening.callback(later)
        self.assertEqual([p.drained for p in (now, later, viaCoroutine)], [[2.5], [2.5], [2.5]])
        self.assertNoResult(drained)
        for port in (now, later, viaCoroutine):
            port.done.callback(None)
        self.successResultOf(drained)

    def test_failureToListenLogged(self) -> None:
        """A function that failed to listen is logged; the other ports still drain."""
        events: list[dict[str, Any]] = []
        globalLogPublisher.addObserver(events.append)
        self.addCleanup(globalLogPublisher.removeObserver, events.append)
        served = _Served(1.0)
        port = FakePort()
        port.done = succeed(None)
        served.add(fail(OSError("address in use")))
        served.add(port)
        self.successResultOf(served.drain())
        self.assertEqual(port.drained, [1.0])
        self.assertEqual(len(self.flushLoggedErrors(OSError)), 1)
        self.assertIn("Could not listen", [e.get("log_format") for e in events])


class CommandLineTests(SynchronousTestCase):
    """The command line's errors stop the worker before it adopts or serves anything (exit status 2)."""

    def assertRefused(self, argv: list[str]) -> None:
        error = self.assertRaises(SystemExit, main, argv)
        self.assertEqual(error.code, 2)

    def test_refused(self) -> None:
        """Neither or both of C{--factory} and C{--serve}, no C{--adopt}, a grace that is no number: refused."""
        function = f"{__name__}:makeFactory"
        self.assertRefused(["--adopt", "3:INET"])
        self.assertRefused(["--factory", function, "--serve", function, "--adopt", "3:INET"])
        self.assertRefused(["--factory", function])
        self.assertRefused(["--factory", function, "--adopt", "3:INET", "--grace", "soon"])

    def test_asAProcess(self) -> None:
        """C{python -m protocols.serving._worker} with no socket to adopt exits 2, saying what is missing."""
        result = subprocess.run(
            [sys.executable, "-m", "protocols.serving._worker", "--factory", "x:y"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        self.assertEqual(result.returncode, 2)
        self.assertIn("--adopt", result.stderr)
