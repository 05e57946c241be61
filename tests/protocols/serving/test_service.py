"""DrainingService: listening, and on stop a drain that lets the calls in flight finish."""

from __future__ import annotations

from typing import Any

from twisted.internet.endpoints import serverFromString
from twisted.trial.unittest import TestCase

from protocols import rpc
from protocols.serving import DrainingService

from ..helpers import pytestTest, trialTest
from .workerprocess import PidService


async def stopDrains(reactor: Any) -> None:
    """Stopping the service stops accepting, answers the call in flight, and fires once the connection is closed."""
    factory = rpc.serverFactory(PidService(reactor), clock=reactor)
    service = DrainingService(serverFromString(reactor, "tcp:0:interface=127.0.0.1"), factory, grace=5.0)
    service.startService()
    assert service.port is not None
    port = service.port.getHost().port
    root = await rpc.connect(reactor, f"tcp:host=127.0.0.1:port={port}")
    call = root.callRemote("slowPid", 0.2)
    lost = root.broker.whenDisconnected()
    await service.stopService()
    assert lost.called
    assert isinstance(await call, int)
    try:
        await rpc.connect(reactor, f"tcp:host=127.0.0.1:port={port}")
    except Exception:
        pass
    else:
        raise AssertionError("still accepting after the drain")


class DrainingServiceTests(TestCase):
    """DrainingService, under trial."""

    test_stop_drains = trialTest(stopDrains)


test_stop_drains = pytestTest(stopDrains)
