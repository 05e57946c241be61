"""The address policy of clients that know several addresses (L{framing.rpc._addresses}), on a fake clock."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from framing.rpc._addresses import (
    PICK_FIRST,
    ROUND_ROBIN,
    AddressBook,
    AddressState,
    Backoff,
    NoAddressReady,
    Send,
    Wait,
    attemptTimeout,
    retire,
)
from framing.rpc._errors import ConnectionLost, DeadReferenceError

NO_JITTER = Backoff(jitter=0.0)


def book(policy: str, *targets: str) -> AddressBook[str]:
    """A book of C{targets} under C{policy}, whose backoff has no jitter (1 s, 1.6 s, ...)."""
    return AddressBook(targets or ("a", "b", "c"), policy, NO_JITTER)


def connectAll(addresses: AddressBook[str], now: float = 0.0) -> None:
    """Connect every address the book asks for; each connection is named after its address."""
    for entry in addresses.connectNow(now):
        addresses.connected(entry, f"conn-{entry.target}")


class BackoffTests(SynchronousTestCase):
    """Each address's backoff grows from 1 s by 1.6 up to 120 s, spread by the jitter."""

    def test_growth(self) -> None:
        """Without jitter: 1, 1.6, 2.56 s, ..., never past 120 s."""
        self.assertEqual([round(NO_JITTER.delay(n), 3) for n in (1, 2, 3)], [1.0, 1.6, 2.56])
        self.assertEqual(NO_JITTER.delay(50), 120.0)

    def test_jitter(self) -> None:
        """The jitter spreads a delay by 20 % either way."""
        backoff = Backoff()
        self.assertAlmostEqual(backoff.delay(1, lambda: 0.0), 0.8)
        self.assertAlmostEqual(backoff.delay(1, lambda: 0.999999), 1.2, places=5)


class PickFirstTests(SynchronousTestCase):
    """pick_first: one connection, the first address in order that connects."""

    def test_connectsFirstOnly(self) -> None:
        """With nothing connected, only the first address is connected to; calls then all go there."""
        addresses = book(PICK_FIRST)
        route = addresses.route("get", 10.0)
        step = route.step(0.0)
        assert isinstance(step, Wait)
        self.assertEqual([entry.target for entry in step.connect], ["a"])
        self.assertEqual(step.until, 10.0)
        addresses.connected(step.connect[0], "conn-a")
        self.assertEqual([route.step(0.0).connection for _ in range(3)], ["conn-a"] * 3)  # type: ignore[union-attr]

    def test_nextAfterFailure(self) -> None:
        """A refused first address backs off and the second is tried at once."""
        addresses = book(PICK_FIRST)
        (first,) = addresses.connectNow(0.0)
        addresses.connectFailed(first, ConnectionRefusedError("refused"), 0.0)
        self.assertIs(first.state, AddressState.BACKING_OFF)
        self.assertEqual(first.retryAt, 1.0)
        (second,) = addresses.connectNow(0.0)
        self.assertEqual(second.target, "b")

    def test_drainMovesNewCalls(self) -> None:
        """After a GOAWAY new calls wait for the next address in order, not the draining one; in-flight ones stay."""
        addresses = book(PICK_FIRST)
        connectAll(addresses)
        route = addresses.route("put", None)
        step = route.step(0.0)
        assert isinstance(step, Send)
        route.notSent(step.address, DeadReferenceError("going away"))
        self.assertIs(step.address.state, AddressState.DRAINING)
        self.assertEqual(step.address.connection, "conn-a")
        moved = route.step(0.0)
        assert isinstance(moved, Wait)
        self.assertEqual([entry.target for entry in moved.connect], ["b"])
        addresses.connected(moved.connect[0], "conn-b")
        self.assertEqual(route.step(0.0).connection, "conn-b")  # type: ignore[union-attr]

    def test_lostReconnectsAtOnce(self) -> None:
        """A connection lost once made is idle: it is tried again at once, without a backoff."""
        addresses = book(PICK_FIRST, "a")
        connectAll(addresses)
        entry = addresses.addresses[0]
        addresses.lost(entry, ConnectionLost("gone"))
        self.assertEqual([e.target for e in addresses.connectNow(5.0)], ["a"])


class RoundRobinTests(SynchronousTestCase):
    """round_robin: a connection to every address; calls take the ready ones in turn."""

    def test_turns(self) -> None:
        """Every address is connected to at once, and six calls go to each of three twice."""
        addresses = book(ROUND_ROBIN)
        step = addresses.route("get", None).step(0.0)
        assert isinstance(step, Wait)
        self.assertEqual([entry.target for entry in step.connect], ["a", "b", "c"])
        for entry in step.connect:
            addresses.connected(entry, f"conn-{entry.target}")
        sent = [addresses.route("get", None).step(0.0).connection for _ in range(6)]  # type: ignore[union-attr]
        self.assertEqual(sorted(sent), sorted(["conn-a", "conn-b", "conn-c"] * 2))

    def test_lostLeavesTheTurn(self) -> None:
        """A lost address takes no calls until connected again; its failed attempt backs off on its own."""
        addresses = book(ROUND_ROBIN)
        connectAll(addresses)
        b = addresses.addresses[1]
        addresses.lost(b, ConnectionLost("killed"))
        sent = {addresses.route("get", None).step(0.0).connection for _ in range(6)}  # type: ignore[union-attr]
        self.assertEqual(sent, {"conn-a", "conn-c"})
        (again,) = addresses.connectNow(0.0)
        self.assertIs(again, b)
        addresses.connectFailed(b, ConnectionRefusedError(), 0.0)
        self.assertEqual(addresses.connectNow(0.5), ())
        self.assertEqual(addresses.wakeAt(), 1.0)
        self.assertEqual(addresses.connectNow(1.0), (b,))


class CallRouteTests(SynchronousTestCase):
    """A call is sent at most once; one not sent moves on within its deadline."""

    def test_sentNeverResent(self) -> None:
        """Once written, the route refuses another step: the call is never sent twice."""
        addresses = book(ROUND_ROBIN)
        connectAll(addresses)
        route = addresses.route("put", None)
        step = route.step(0.0)
        assert isinstance(step, Send)
        route.sent()
        self.assertRaises(RuntimeError, route.step, 0.0)

    def test_otherErrorNotMoved(self) -> None:
        """An error that is no DeadReferenceError (the call may have been written) is raised, not moved."""
        addresses = book(ROUND_ROBIN)
        connectAll(addresses)
        route = addresses.route("put", None)
        step = route.step(0.0)
        assert isinstance(step, Send)
        lost = ConnectionLost("died mid-call")
        self.assertIs(self.assertRaises(ConnectionLost, route.notSent, step.address, lost), lost)
        self.assertRaises(RuntimeError, route.step, 0.0)

    def test_overMarksLost(self) -> None:
        """A connection found over when the call was refused leaves its address idle, to connect again."""
        addresses = book(PICK_FIRST, "a", "b")
        connectAll(addresses)
        route = addresses.route("get", None)
        step = route.step(0.0)
        assert isinstance(step, Send)
        route.notSent(step.address, DeadReferenceError("ended"), over=True)
        self.assertIs(step.address.state, AddressState.IDLE)

    def test_deadline(self) -> None:
        """With every address backing off, the call waits until the soonest retry, then fails at its deadline."""
        addresses = book(PICK_FIRST, "a", "b")
        route = addresses.route("get", 3.0)
        for now in (0.0, 0.0):
            step = route.step(now)
            assert isinstance(step, Wait)
            addresses.connectFailed(step.connect[0], ConnectionRefusedError("refused"), now)
        step = route.step(0.5)
        assert isinstance(step, Wait)
        self.assertEqual((step.connect, step.until), ((), 1.0))
        error = self.assertRaises(NoAddressReady, route.step, 3.0)
        self.assertIsInstance(error, DeadReferenceError)
        self.assertEqual([target for target, _ in error.errors], ["a", "b"])
        self.assertIn("refused", str(error))


class TargetsTests(SynchronousTestCase):
    """Addresses given again (a name resolved again) keep their state."""

    def test_keptAndNew(self) -> None:
        """An address still there keeps its connection; a new one is idle; duplicates count once."""
        addresses = book(ROUND_ROBIN, "a", "b")
        connectAll(addresses)
        addresses.setTargets(["b", "c", "c"])
        self.assertEqual(
            [(e.target, e.state) for e in addresses.addresses], [("b", AddressState.READY), ("c", AddressState.IDLE)]
        )
        self.assertEqual([e.target for e in addresses.removed], ["a"])

    def test_unknownPolicy(self) -> None:
        """A policy other than the two is refused at once."""
        self.assertRaises(ValueError, AddressBook, ["a"], "random")
        self.assertRaises(ValueError, AddressBook, [], PICK_FIRST)


class SuspectTests(SynchronousTestCase):
    """pick_first tries an address whose server died or went silent after the others."""

    def test_lostWithErrorLast(self) -> None:
        """The first address lost with an error: the next attempt goes to the second, not back to it."""
        addresses = book(PICK_FIRST, "a", "b")
        connectAll(addresses)
        addresses.lost(addresses.addresses[0], ConnectionLost("silent"))
        self.assertEqual([e.target for e in addresses.connectNow(0.0)], ["b"])

    def test_lostAfterDrainNotSuspect(self) -> None:
        """A connection closed after its drain is not held against its address."""
        addresses = book(PICK_FIRST, "a", "b")
        connectAll(addresses)
        first = addresses.addresses[0]
        addresses.drained(first)
        addresses.lost(first, ConnectionLost("closed after the drain"))
        self.assertFalse(first.suspect)


class FakeConnection:
    """What L{retire} reads of a client's connection."""

    def __init__(self, peer: str, ended: bool = False, idle: bool = False) -> None:
        self.peer = peer
        self.ended = ended
        self.idle = idle


class RetireTests(SynchronousTestCase):
    """
    The clients' one rule of which connections are done (both clients
    without Twisted ask L{retire}; they only close what it returns).
    """

    def test_drainedAndIdleClosed(self) -> None:
        """A draining address's connection that is idle or ended is returned to close, its address idle again."""
        addresses: AddressBook[FakeConnection] = AddressBook(("a", "b", "c"), ROUND_ROBIN, NO_JITTER)
        busy, idle, ended = FakeConnection("a"), FakeConnection("b", idle=True), FakeConnection("c", ended=True)
        for entry, connection in zip(addresses.connectNow(0.0), (busy, idle, ended), strict=True):
            addresses.connected(entry, connection)
        for entry in addresses.addresses:
            addresses.drained(entry)
        self.assertEqual(retire(addresses), [idle, ended])
        states = [entry.state for entry in addresses.addresses]
        self.assertEqual(states, [AddressState.DRAINING, AddressState.IDLE, AddressState.IDLE])
        self.assertFalse(any(entry.suspect for entry in addresses.addresses))

    def test_readyEndedLost(self) -> None:
        """A ready address whose connection ended is lost with ConnectionLost (suspect), nothing to close."""
        addresses: AddressBook[FakeConnection] = AddressBook(("a", "b"), ROUND_ROBIN, NO_JITTER)
        live, gone = FakeConnection("a", idle=True), FakeConnection("b:1", ended=True)
        for entry, connection in zip(addresses.connectNow(0.0), (live, gone), strict=True):
            addresses.connected(entry, connection)
        self.assertEqual(retire(addresses), [])
        first, second = addresses.addresses
        self.assertIs(first.state, AddressState.READY)
        self.assertIs(second.state, AddressState.IDLE)
        self.assertIsInstance(second.error, ConnectionLost)
        self.assertIn("b:1", str(second.error))
        self.assertTrue(second.suspect)

    def test_attemptTimeout(self) -> None:
        """An attempt takes the connect timeout, within what is left of the wait (at least 1 ms)."""
        self.assertEqual(attemptTimeout(5.0, None, 10.0), 5.0)
        self.assertIsNone(attemptTimeout(None, None, 10.0))
        self.assertEqual(attemptTimeout(None, 12.0, 10.0), 2.0)
        self.assertEqual(attemptTimeout(1.0, 12.0, 10.0), 1.0)
        self.assertEqual(attemptTimeout(5.0, 9.0, 10.0), 0.001)

    def test_clientsAskTheRule(self) -> None:
        """Neither client without Twisted judges its addresses' connections itself."""
        import inspect

        from protocols import asyncioclient, blocking

        for module in (asyncioclient, blocking):
            source = inspect.getsource(module)
            self.assertIn("retire(self.book)", source, module.__name__)
            self.assertNotIn("AddressState.DRAINING", source, module.__name__)
            self.assertNotIn("0.001", source.replace("max(min(given) / 8, 0.001)", ""), module.__name__)
