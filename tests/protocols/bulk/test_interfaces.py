"""
The seams inside one bulk connection (L{protocols.bulk._interfaces}): each is provided by the class that claims it.

The interfaces are C{typing.Protocol}s, not zope interfaces, so mypy checks
them where they are used; this checks, at run time and as
C{zope.interface.verify.verifyObject} would, that the objects the channel and
the streams really are have every member each interface names: the methods,
taking the same arguments, the properties, and the attributes, set on a
fresh instance.
"""

from __future__ import annotations

import inspect
from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from protocols.bulk._channel import BulkChannel
from protocols.bulk._interfaces import IReceivingStream, ISendingStream, IStreamHost
from protocols.bulk._options import BulkOptions
from protocols.bulk._receiving import Receiver
from protocols.bulk._sending import Stream
from protocols.bulk._sinks import CallbackSink


def members(interface: type) -> dict[str, Any]:
    """The members C{interface} names: its methods and properties, and its annotated attributes (as C{None})."""
    named: dict[str, Any] = {name: None for name in interface.__annotations__}
    named.update((name, value) for name, value in vars(interface).items() if not name.startswith("_"))
    return named


def _parameters(function: Any) -> list[inspect.Parameter]:
    return list(inspect.signature(function).parameters.values())[1:]  # (self)


def protocolProblems(interface: type, obj: object) -> list[str]:
    """
    What C{obj} lacks of C{interface}: a member missing, a method that is
    not one or does not take the interface's arguments (by name, in order;
    more only with defaults), a property that is a plain method.
    """
    found = []
    for name, member in sorted(members(interface).items()):
        try:
            provided = inspect.getattr_static(obj, name)
        except AttributeError:
            found.append(f"{name}: missing")
            continue
        if inspect.isfunction(member):
            if not inspect.isfunction(provided):
                found.append(f"{name}: not a method")
                continue
            wanted, given = _parameters(member), _parameters(provided)
            extra = given[len(wanted) :]
            if [p.name for p in given[: len(wanted)]] != [p.name for p in wanted] or any(
                p.default is inspect.Parameter.empty and p.kind is not p.VAR_POSITIONAL for p in extra
            ):
                found.append(f"{name}: takes {inspect.signature(provided)}, not {inspect.signature(member)}")
        elif isinstance(member, property) and inspect.isfunction(provided):
            found.append(f"{name}: a method, not a property")
    return found


class SeamTests(SynchronousTestCase):
    """The channel is an L{IStreamHost}; a L{Stream} an L{ISendingStream}; a L{Receiver} an L{IReceivingStream}."""

    def setUp(self) -> None:
        self.channel = BulkChannel(BulkOptions(), Clock())

    def test_channelIsAStreamHost(self) -> None:
        """A bulk channel has everything a stream may ask of its host."""
        self.assertEqual(protocolProblems(IStreamHost, self.channel), [])

    def test_streamIsASendingStream(self) -> None:
        """An outgoing stream has everything the channel asks of one."""
        self.assertEqual(protocolProblems(ISendingStream, Stream(b"data")), [])

    def test_receiverIsAReceivingStream(self) -> None:
        """A receiver has everything the channel asks of an incoming stream being received."""
        receiver = Receiver(self.channel, 1, None, None, CallbackSink(lambda data: None), False, None)
        self.assertEqual(protocolProblems(IReceivingStream, receiver), [])

    def test_interfacesNameTheSeams(self) -> None:
        """Each interface names what the channel and the streams call (so the checks above check something)."""
        self.assertTrue({"sendOne", "attach", "grantReceived", "waitingForCredit"} <= set(members(ISendingStream)))
        self.assertTrue({"frameStarting", "endReceived", "heldHere", "streamId"} <= set(members(IReceivingStream)))
        self.assertTrue({"sendData", "wake", "earlyData", "options", "up"} <= set(members(IStreamHost)))

    def test_problemsFound(self) -> None:
        """A made-up stream missing a method, taking other arguments, or with a method for a property is reported."""

        class Broken:
            streamId = 1

            def frameStarting(self, offset: int) -> None: ...

            def endReceived(self, size: int, digest: bytes, extra: int, more: int = 0) -> None: ...

            def abortReceived(self, error: BaseException, *rest: Any) -> None: ...

            def heldHere(self) -> bool: ...

        self.assertEqual(
            protocolProblems(IReceivingStream, Broken()),
            [
                "connectionLost: missing",
                "endReceived: takes (self, size: 'int', digest: 'bytes', extra: 'int', more: 'int' = 0) -> 'None',"
                " not (self, size: 'int | None', digest: 'bytes | None') -> 'None'",
                "frameStarting: takes (self, offset: 'int') -> 'None',"
                " not (self, offset: 'int', length: 'int') -> 'Callable[[int, bytes | memoryview], None] | None'",
                "heldHere: a method, not a property",
            ],
        )
