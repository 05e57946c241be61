"""Remote interfaces (protocols/rpc/_interfaces.py): declared once, checked on the server and on the client's proxy."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any, Protocol

from twisted.internet.defer import CancelledError, Deferred
from twisted.trial.unittest import SynchronousTestCase, TestCase

from framing import Decoder, Violation, dumps
from framing._errors import BodyTooLarge, InvalidValue, KindRefused, TooManyItems
from framing.slicing._registry import DEFAULT_REGISTRY, Registry
from framing.wire import CLOSE, OPEN, PREAMBLE, STRING, encode_header
from protocols.rpc import (
    MaxLength,
    NoSuchMethod,
    Range,
    Referenceable,
    RefOf,
    RemoteInterface,
    RemoteReference,
    RemoteViolation,
    TypedReference,
    UnsupportedHint,
    connect,
    deferred,
    interfaceNamed,
    referenceOf,
    remote,
)
from protocols.rpc._refs import MAX_INTERFACE_NAME, MAX_INTERFACE_NAMES, ReferenceUnslicer

from ..helpers import pytestTest, trialTest
from .services import RpcPair
from .test_tcp import listen


class ICounter(RemoteInterface, Protocol, name="test.ICounter"):
    async def increment(self, by: Annotated[int, Range(0, 100)] = 1) -> int: ...


class ICounterWithName(ICounter, Protocol, name="test.ICounterWithName"):
    async def label(self) -> str: ...


class IStore(RemoteInterface, Protocol, name="test.IStore"):
    async def put(self, key: Annotated[str, MaxLength(8)], value: bytes) -> bool: ...

    async def counter(self) -> ICounter: ...

    async def maybeCounter(self, give: bool) -> ICounter | None: ...

    async def adopt(self, counter: ICounter) -> int: ...

    async def count(self) -> int: ...


class Counter(Referenceable, ICounterWithName):
    def __init__(self) -> None:
        self.value = 0

    async def increment(self, by: int = 1) -> int:
        self.value += by
        return self.value

    async def label(self) -> str:
        return "counter"


class NotACounter(Referenceable):
    @remote
    def increment(self, by: int = 1) -> int:
        return by


class Store(Referenceable, IStore):
    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.made = Counter()
        self.calls = 0

    async def put(self, key: str, value: bytes) -> bool:
        self.calls += 1
        self.data[key] = value
        return True

    async def counter(self) -> ICounter:
        return self.made

    async def maybeCounter(self, give: bool) -> ICounter | None:
        return self.made if give else None

    async def adopt(self, counter: ICounter) -> int:
        return await counter.increment(2)  # a RemoteReference's proxy... or the object itself, coming home

    async def count(self) -> int:
        return self.calls


class LyingStore(Referenceable):
    """Claims nothing, and answers count with text: only the client's proxy catches it."""

    @remote
    def count(self) -> Any:
        return "many"


class DeclarationTests(SynchronousTestCase):
    """What declaring and implementing an interface records."""

    def test_interface_table(self) -> None:
        """An interface's methods become RemoteMethods with constraints from their hints; extensions add theirs."""
        self.assertEqual(ICounter.remoteName, "test.ICounter")
        self.assertEqual(sorted(ICounterWithName.remoteInterfaceMethods), ["increment", "label"])
        check = IStore.remoteInterfaceMethods["put"].checkArguments
        assert check is not None
        self.assertRaises(BodyTooLarge, check, ("x" * 9, b""), {})
        self.assertIs(interfaceNamed("test.IStore"), IStore)

    def test_implementation_is_remote(self) -> None:
        """A Referenceable subclassing an interface has its methods as remote methods, with the interface's checks."""
        self.assertEqual(sorted(Store.remoteMethods), ["adopt", "count", "counter", "maybeCounter", "put"])
        method = Store.remoteMethods["put"]
        self.assertIs(method.function, Store.put)
        assert method.checkArguments is not None
        self.assertRaises(KindRefused, method.checkArguments, ("k", "not bytes"), {})

    def test_interface_names(self) -> None:
        """An implementation's class records every interface it implements, extended ones included."""
        self.assertEqual(Store.remoteInterfaceNames, ("test.IStore",))
        self.assertEqual(set(Counter.remoteInterfaceNames), {"test.ICounter", "test.ICounterWithName"})
        self.assertEqual(NotACounter.remoteInterfaceNames, ())

    def test_implementation_may_mark_its_own(self) -> None:
        """An implementation's method marked with remote(args=...) keeps its own constraints, not the interface's."""
        from framing.slicing._constraints import Integer

        class Strict(Referenceable, ICounter):
            @remote(args={"by": Integer(0, 1)})
            async def increment(self, by: int = 1) -> int:
                return by

        check = Strict.remoteMethods["increment"].checkArguments
        assert check is not None
        self.assertRaises(InvalidValue, check, (2,), {})

    def test_missing_implementation(self) -> None:
        """A class that does not implement one of its interface's methods is a TypeError when it is created."""
        with self.assertRaises(TypeError) as caught:

            class Half(Referenceable, ICounterWithName):
                async def increment(self, by: int = 1) -> int:
                    return by

        self.assertIn("label", str(caught.exception))

    def test_reserved_names(self) -> None:
        """An interface method named like the proxy's own attributes is a TypeError."""
        with self.assertRaises(TypeError):

            class IBad(RemoteInterface, Protocol):
                async def callRemote(self) -> None: ...

    def test_explicit_remote_in_interface(self) -> None:
        """remote(args=..., result=...) on an interface's stub gives its constraints."""
        from framing.slicing._constraints import Integer

        class IExplicit(RemoteInterface, Protocol):
            @remote(args={"n": Integer(0, 1)})
            async def flip(self, n: int) -> int: ...

        check = IExplicit.remoteInterfaceMethods["flip"].checkArguments
        assert check is not None
        self.assertRaises(InvalidValue, check, (2,), {})

    def test_unsupported_hint_names_the_parameter(self) -> None:
        """A stub hint no constraint describes fails the interface's creation, naming the method and the parameter."""
        with self.assertRaises(UnsupportedHint) as caught:

            class IUnsupported(RemoteInterface, Protocol, name="test.IUnsupported"):
                async def save(self, name: str, where: Path) -> None: ...

        self.assertIn("IUnsupported.save", str(caught.exception))
        self.assertIn("parameter 'where'", str(caught.exception))
        self.assertIsNone(interfaceNamed("test.IUnsupported"))


class ProxyTests(SynchronousTestCase):
    """The client's typed proxy checks calls locally, and results when they arrive."""

    def setUp(self) -> None:
        self.store = Store()
        self.pair = RpcPair(self.store)
        self.pair.flush()
        self.proxy = self.pair.root.typed(IStore)

    def settle(self, called: Deferred[Any]) -> Deferred[Any]:
        self.pair.flush()
        return called

    def test_good_call(self) -> None:
        """A call the interface accepts reaches the server and its result comes back."""
        self.assertIsInstance(self.proxy, TypedReference)
        self.assertTrue(self.successResultOf(self.settle(self.proxy.put("k", b"v"))))
        self.assertEqual(self.store.data, {"k": b"v"})

    def test_bad_arguments_fail_locally(self) -> None:
        """Arguments the constraints refuse fail the call at once, and nothing is written."""
        writes = len(self.pair.clientWrites)
        failure = self.failureResultOf(self.proxy.put("much too long", b"v"), BodyTooLarge)
        self.assertEqual(failure.value.where, "args[0]")
        self.failureResultOf(self.proxy.put("k", "not bytes"), KindRefused)
        self.failureResultOf(self.proxy.callRemote("put", "k"), Violation)
        self.pair.flush()
        self.assertEqual(len(self.pair.clientWrites), writes)
        self.assertEqual(self.store.calls, 0)

    def test_missing_method_fails_locally(self) -> None:
        """A method the interface lacks is an AttributeError, or NoSuchMethod by name; nothing is written."""
        writes = len(self.pair.clientWrites)
        with self.assertRaises(AttributeError):
            self.proxy.delete  # noqa: B018
        self.failureResultOf(self.proxy.callRemote("delete", "k"), NoSuchMethod)
        self.assertRaises(NoSuchMethod, self.proxy.callRemoteOnly, "delete")
        self.pair.flush()
        self.assertEqual(len(self.pair.clientWrites), writes)

    def test_call_only_checked(self) -> None:
        """callRemoteOnly on the proxy checks the arguments before sending, then sends."""
        self.assertRaises(BodyTooLarge, self.proxy.callRemoteOnly, "put", "much too long", b"")
        self.proxy.callRemoteOnly("put", "k", b"v")
        self.pair.flush()
        self.assertEqual(self.store.data, {"k": b"v"})

    def test_result_checked(self) -> None:
        """A result the interface's result constraint refuses fails the call with a Violation at result,
        naming the method and the peer."""
        pair = RpcPair(LyingStore())
        called = pair.root.typed(IStore).count()
        pair.flush()
        failure = self.failureResultOf(called, KindRefused)
        self.assertEqual(failure.value.where, "result")
        self.assertIn(f"in the answer to 'count' from {pair.client.connection.peerName()}", str(failure.value))

    def test_returned_reference_is_typed(self) -> None:
        """A result hinted as an interface arrives as that interface's proxy, already knowing its names."""
        counter = self.successResultOf(self.settle(self.proxy.counter()))
        self.assertIsInstance(counter, TypedReference)
        self.assertEqual(set(counter.remoteReference.interfaceNames), {"test.ICounter", "test.ICounterWithName"})
        self.assertEqual(self.successResultOf(self.settle(counter.increment(5))), 5)
        self.assertIsNone(self.successResultOf(self.settle(self.proxy.maybeCounter(False))))
        self.assertIsInstance(self.successResultOf(self.settle(self.proxy.maybeCounter(True))), TypedReference)

    def test_reference_argument_checked(self) -> None:
        """An argument hinted as an interface takes an implementation, not another Referenceable, on both ends."""
        self.assertEqual(self.successResultOf(self.settle(self.proxy.adopt(Counter()))), 2)
        self.failureResultOf(self.proxy.adopt(NotACounter()), KindRefused)
        refused = self.settle(self.pair.root.callRemote("adopt", NotACounter()))
        self.failureResultOf(refused, RemoteViolation)

    def test_proxy_as_argument(self) -> None:
        """A typed proxy passed as an argument is sent as its reference (and comes home as the object)."""
        counter = self.successResultOf(self.settle(self.proxy.counter()))
        self.assertEqual(self.successResultOf(self.settle(self.proxy.adopt(counter))), 2)
        self.assertEqual(self.store.made.value, 2)

    def test_typed_checks_known_names(self) -> None:
        """typed() refuses an interface a reference arrived without naming; one naming none is taken at its word."""
        named = RemoteReference(self.pair.client, 7, ("test.ICounter",))
        self.assertIsInstance(named.typed(ICounter), TypedReference)
        self.assertRaises(TypeError, named.typed, IStore)
        self.assertIsInstance(RemoteReference(self.pair.client, 8).typed(IStore), TypedReference)

    def test_reference_of(self) -> None:
        """referenceOf gives the reference under a proxy, a reference itself, and refuses anything else."""
        self.assertIs(referenceOf(self.proxy), self.pair.root)
        self.assertIs(referenceOf(self.pair.root), self.pair.root)
        self.assertRaises(TypeError, referenceOf, Store())

    def test_reference_check_when_it_arrives(self) -> None:
        """RefOf(ICounter) accepts a reference that arrived naming ICounter, and refuses one naming nothing."""
        named = RemoteReference(self.pair.client, 7, ("test.ICounter",))
        RefOf(ICounter).validate(named)
        self.assertRaises(KindRefused, RefOf(ICounter).validate, RemoteReference(self.pair.client, 8))
        self.assertRaises(KindRefused, RefOf(ICounter).validate, "not a reference")
        RefOf(None).validate(RemoteReference(self.pair.client, 8))


class FakeTables:
    """Records the names the reference unslicer hands on."""

    def __init__(self) -> None:
        self.imported: list[tuple[int, tuple[str, ...]]] = []

    def importReference(self, exportId: int, interfaceNames: tuple[str, ...] = ()) -> Any:
        self.imported.append((exportId, interfaceNames))
        return ("ref", exportId, interfaceNames)


class References:
    """Makes real RemoteReferences (on no connection) for the ids received."""

    def __init__(self) -> None:
        self.made: list[int] = []
        self.kept: list[RemoteReference] = []

    def importReference(self, exportId: int, interfaceNames: tuple[str, ...] = ()) -> RemoteReference:
        self.made.append(exportId)
        ref = RemoteReference(None, exportId, interfaceNames)  # type: ignore[arg-type]
        self.kept.append(ref)
        return ref


def refDecoder(tables: FakeTables) -> Decoder:
    registry = Registry(DEFAULT_REGISTRY)
    registry.add_unslicer("rpc.ref", lambda limits: ReferenceUnslicer(limits, tables))  # type: ignore[arg-type]
    return Decoder(registry=registry)


def token(kind: int, body: bytes) -> bytes:
    return encode_header(kind, len(body)) + body


class ReferenceWireTests(SynchronousTestCase):
    """The rpc.ref open type: an export id, then interface names (none from older peers)."""

    def test_old_form(self) -> None:
        """A reference with only its id (as older peers send it) decodes, naming no interface."""
        tables = FakeTables()
        data = PREAMBLE + token(OPEN, b"rpc.ref") + dumps(5)[len(PREAMBLE) :] + encode_header(CLOSE, 0)
        self.assertEqual(refDecoder(tables).feed(data), [("ref", 5, ())])

    def test_names(self) -> None:
        """A reference with names hands them to the tables."""
        tables = FakeTables()
        body = dumps(5)[len(PREAMBLE) :] + token(STRING, b"a.IA") + token(STRING, b"b.IB")
        data = PREAMBLE + token(OPEN, b"rpc.ref") + body + encode_header(CLOSE, 0)
        self.assertEqual(refDecoder(tables).feed(data), [("ref", 5, ("a.IA", "b.IB"))])

    def test_long_name_refused_at_header(self) -> None:
        """A name over MAX_INTERFACE_NAME bytes is refused at its header; the stream stays in step."""
        tables = FakeTables()
        body = dumps(5)[len(PREAMBLE) :] + token(STRING, b"x" * (MAX_INTERFACE_NAME + 1))
        data = PREAMBLE + token(OPEN, b"rpc.ref") + body + encode_header(CLOSE, 0) + dumps(1)[len(PREAMBLE) :]
        results = refDecoder(tables).feed(data)
        self.assertIsInstance(results[0], BodyTooLarge)
        self.assertEqual(results[1:], [1])
        self.assertEqual(tables.imported, [])

    def test_too_many_names(self) -> None:
        """More than MAX_INTERFACE_NAMES names is refused."""
        tables = FakeTables()
        body = dumps(5)[len(PREAMBLE) :] + token(STRING, b"n") * (MAX_INTERFACE_NAMES + 1)
        results = refDecoder(tables).feed(PREAMBLE + token(OPEN, b"rpc.ref") + body + encode_header(CLOSE, 0))
        self.assertIsInstance(results[0], TooManyItems)

    def test_ref_of_in_a_decoder(self) -> None:
        """RefOf(ICounter) as a decoder's constraint takes a reference naming ICounter, refuses one naming nothing
        (once built) and a string (at its header)."""
        tables = References()
        registry = Registry(DEFAULT_REGISTRY)
        registry.add_unslicer("rpc.ref", lambda limits: ReferenceUnslicer(limits, tables))  # type: ignore[arg-type]
        decoder = Decoder(constraint=RefOf(ICounter), registry=registry)
        opened, closed = token(OPEN, b"rpc.ref"), token(CLOSE, b"")
        named = opened + dumps(5)[len(PREAMBLE) :] + token(STRING, b"test.ICounter") + closed
        plain = opened + dumps(6)[len(PREAMBLE) :] + closed
        accepted, refusedPlain, refusedText = decoder.feed(PREAMBLE + named + plain + dumps("x")[len(PREAMBLE) :])
        self.assertEqual((accepted.exportId, accepted.interfaceNames), (5, ("test.ICounter",)))
        self.assertIsInstance(refusedPlain, KindRefused)
        self.assertIsInstance(refusedText, KindRefused)
        self.assertEqual(tables.made, [5, 6])

    def test_names_sent(self) -> None:
        """An implementation is sent with its interface names; a plain Referenceable exactly as before."""
        pair = RpcPair(Store())
        pair.flush()
        before = len(b"".join(pair.serverWrites))
        pair.root.callRemote("counter")
        pair.flush()
        self.assertIn(b"test.ICounterWithName", b"".join(pair.serverWrites)[before:])


# -- over TCP: connect(interface=...) -------------------------------------------------------


async def connectTyped(reactor: Any) -> None:
    """rpc.connect(..., interface=IStore) fires with a typed proxy whose calls reach the server."""
    server = await listen(reactor, Store())
    try:
        store = await connect(reactor, server.address, interface=IStore)
        assert isinstance(store, TypedReference)
        assert await store.put("k", b"v") is True
        counter = await store.counter()
        assert await counter.increment() == 1
        store.remoteReference.broker.disconnect()
    finally:
        await server.stop()


class IClock(RemoteInterface, Protocol, name="test.IClock"):
    def now(self) -> Deferred[Annotated[int, Range(0, 100)]]: ...

    def wait(self) -> Deferred[str]: ...


class Clock(Referenceable, IClock):
    """Implements IClock's Deferred stubs with async def methods under deferred."""

    def __init__(self) -> None:
        self.value = 7
        self.waiting: list[Deferred[str]] = []
        self.cancelled: list[Deferred[str]] = []

    @deferred
    async def now(self) -> int:
        return self.value

    @deferred
    async def wait(self) -> str:
        waited: Deferred[str] = Deferred(self.cancelled.append)
        self.waiting.append(waited)
        return await waited


class DeferredStubTests(SynchronousTestCase):
    """An interface's stubs return Deferreds, and deferred lets an async def implement them."""

    def setUp(self) -> None:
        self.clock = Clock()
        self.pair = RpcPair(self.clock)
        self.proxy = self.pair.root.typed(IClock)

    def test_deferred_keeps_the_method(self) -> None:
        """deferred keeps the method's name and signature, and a local call returns a Deferred of its result."""
        self.assertEqual(Clock.now.__name__, "now")
        self.assertEqual(list(inspect.signature(Clock.now).parameters), ["self"])
        called = self.clock.now()
        self.assertIsInstance(called, Deferred)
        self.assertEqual(self.successResultOf(called), 7)

    def test_deferred_under_remote(self) -> None:
        """A method both remote and deferred has the constraints of its own hints, and answers with its result."""

        class Doubler(Referenceable):
            @remote
            @deferred
            async def double(self, n: Annotated[int, Range(0, 10)]) -> int:
                return 2 * n

        pair = RpcPair(Doubler())
        good, bad = pair.root.callRemote("double", 4), pair.root.callRemote("double", 11)
        pair.flush()
        self.assertEqual(self.successResultOf(good), 8)
        self.assertEqual(self.failureResultOf(bad, RemoteViolation).value.where, "args[0]")

    def test_proxy_call_is_a_deferred(self) -> None:
        """A proxy's call is the Deferred the stub declares, answered with the coroutine's result."""
        called = self.proxy.now()
        self.assertIsInstance(called, Deferred)
        self.pair.flush()
        self.assertEqual(self.successResultOf(called), 7)

    def test_result_constraint_from_deferred_hint(self) -> None:
        """The constraint inside Deferred[...] checks the result: one out of its Range is refused by the server."""
        self.clock.value = 1000
        called = self.proxy.now()
        self.pair.flush()
        self.assertEqual(self.failureResultOf(called, RemoteViolation).value.where, "result")

    def test_cancel_reaches_the_coroutine(self) -> None:
        """Cancelling a proxy's call cancels what the server's coroutine awaits."""
        called = self.proxy.wait()
        self.pair.flush()
        self.assertEqual(len(self.clock.waiting), 1)
        called.cancel()
        self.pair.flush()
        self.failureResultOf(called, CancelledError)
        self.assertEqual(self.clock.cancelled, self.clock.waiting)


class ConnectTypedTests(TestCase):
    """connect(interface=...) over loopback TCP (trial; pytest runs the twin below)."""

    timeout = 30
    test_connect_typed = trialTest(connectTyped)


test_connect_typed = pytestTest(connectTyped)
