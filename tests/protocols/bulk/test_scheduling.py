"""Which outgoing stream sends next (L{protocols.bulk._scheduling.FrameScheduler}), on a fake transport and clock."""

from __future__ import annotations

from typing import Any

from twisted.internet.interfaces import IPushProducer
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from protocols.bulk._scheduling import FrameScheduler


class FakeTransport:
    """What the scheduler asks of a transport: whether it closes, and its producer."""

    def __init__(self) -> None:
        self.disconnecting = False
        self.producer: Any = None
        self.streaming: bool | None = None

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        self.producer, self.streaming = producer, streaming

    def unregisterProducer(self) -> None:
        self.producer = None


class FakeStream:
    """A stream with C{frames} data frames to send; each C{sendOne} records its name in C{sent}."""

    def __init__(self, name: str, frames: int, sent: list[str], onSend: Any = None) -> None:
        self.name, self.frames, self.sent, self.onSend = name, frames, sent, onSend

    def sendOne(self) -> bool:
        self.frames -= 1
        self.sent.append(self.name)
        if self.onSend is not None:
            self.onSend(self)
        return self.frames > 0


class FrameSchedulerTests(SynchronousTestCase):
    """Round-robin, one frame per ready stream per round, only while running and the transport is not paused."""

    def setUp(self) -> None:
        self.transport = FakeTransport()
        self.clock = Clock()
        self.scheduler = FrameScheduler(lambda: self.transport, self.clock)
        self.sent: list[str] = []

    def stream(self, name: str, frames: int, onSend: Any = None) -> Any:
        return FakeStream(name, frames, self.sent, onSend)

    def test_roundRobin(self) -> None:
        """Ready streams take turns, one frame each per round, until each has nothing more to send."""
        self.scheduler.start()
        a, b = self.stream("a", 3, lambda s: self.scheduler.wake(b) if s.frames == 2 else None), self.stream("b", 2)
        self.scheduler.wake(a)
        self.assertEqual(self.sent, ["a", "b", "a", "b", "a"])

    def test_nothingBeforeStart(self) -> None:
        """Nothing is sent before the connection is up; once up, the streams woken before send."""
        a = self.stream("a", 1)
        self.scheduler.wake(a)
        self.assertEqual(self.sent, [])
        self.scheduler.start()
        self.scheduler.pump()
        self.assertEqual(self.sent, ["a"])

    def test_wakeIsIdempotent(self) -> None:
        """A stream woken twice while queued is queued once: one frame per round still."""
        self.scheduler.start()
        self.scheduler.pauseProducing()
        a, b = self.stream("a", 2), self.stream("b", 2)
        for s in (a, a, b, a):
            self.scheduler.wake(s)
        self.scheduler.resumeProducing()
        self.assertEqual(self.sent, ["a", "b", "a", "b"])

    def test_pausedSendsNothing(self) -> None:
        """While the transport is paused nothing is sent; resuming sends what waited."""
        self.scheduler.start()
        self.scheduler.wake(self.stream("a", 3, lambda s: self.scheduler.pauseProducing()))
        self.assertEqual(self.sent, ["a"])
        self.scheduler.pump()
        self.assertEqual(self.sent, ["a"])
        self.scheduler.resumeProducing()
        self.assertEqual(self.sent, ["a", "a"])

    def test_wakeSoonAtEndOfTurn(self) -> None:
        """C{wakeSoon} sends nothing now; one delayed call at the end of the turn sends for every stream woken so."""
        self.scheduler.start()
        self.scheduler.wakeSoon(self.stream("a", 1))
        self.scheduler.wakeSoon(self.stream("b", 1))
        self.assertEqual((self.sent, len(self.clock.getDelayedCalls())), ([], 1))
        self.clock.advance(0)
        self.assertEqual(self.sent, ["a", "b"])

    def test_stopForgetsEverything(self) -> None:
        """Stopped, it cancels its end-of-turn send and forgets its streams: nothing is sent after."""
        self.scheduler.start()
        self.scheduler.wakeSoon(self.stream("a", 1))
        self.scheduler.stop()
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.scheduler.start()
        self.scheduler.pump()
        self.assertEqual(self.sent, [])

    def test_isTheTransportsProducer(self) -> None:
        """Registered, it is the transport's streaming producer (once); unregistered, it no longer is."""
        self.assertTrue(verifyObject(IPushProducer, self.scheduler))
        self.scheduler.register()
        self.assertIsNone(self.transport.producer)  # not running yet
        self.scheduler.start()
        self.scheduler.register()
        self.assertEqual((self.transport.producer, self.transport.streaming), (self.scheduler, True))
        self.scheduler.unregister()
        self.assertIsNone(self.transport.producer)

    def test_otherProducerKept(self) -> None:
        """A transport with another producer keeps it; unregistering does not remove it."""
        other = object()
        self.transport.producer = other
        self.scheduler.start()
        self.scheduler.register()
        self.scheduler.unregister()
        self.assertIs(self.transport.producer, other)

    def test_closingTransportReleased(self) -> None:
        """A closing transport gets no frames and no producer (a registered one would keep it open)."""
        self.scheduler.start()
        self.scheduler.register()
        self.transport.disconnecting = True
        self.scheduler.wake(self.stream("a", 1))
        self.assertEqual((self.sent, self.transport.producer), ([], None))
        self.scheduler.register()
        self.assertIsNone(self.transport.producer)
        self.transport.disconnecting = False
        self.scheduler.register()
        self.scheduler.pauseProducing()
        self.transport.disconnecting = True
        self.scheduler.resumeProducing()
        self.assertEqual((self.sent, self.transport.producer), ([], None))
