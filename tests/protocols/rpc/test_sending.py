"""One send transaction per RPC message: exports kept or taken back with the message, RELEASEs batched."""

from __future__ import annotations

import gc

from twisted.trial.unittest import SynchronousTestCase

from framing import BlockBuffer, EncodingError
from framing._outgoing import Outgoing
from framing.rpc._wire import CALL, Message
from protocols.testing import messagesPerWrite

from .services import Child, RpcPair, Service


class ExportTransactionTests(SynchronousTestCase):
    """An export made while encoding a message belongs to that message's L{Outgoing}."""

    def test_rollbackTakesBackTheExport(self) -> None:
        """Rolling back the Outgoing a reference was encoded with forgets the export it made."""
        pair = RpcPair(Service())
        outgoing = Outgoing()
        pair.client.connection.encoder.encode_into(
            Message((CALL, 99, 0, "echo", None, Child(1))), BlockBuffer(), outgoing
        )
        self.assertEqual(pair.client.exportCount, 1)
        outgoing.rollback()
        self.assertEqual(pair.client.exportCount, 0)

    def test_commitKeepsTheExport(self) -> None:
        """Committing it keeps the export, counted once per sending."""
        pair = RpcPair(Service())
        child = Child(1)
        for _ in range(2):
            outgoing = Outgoing()
            pair.client.connection.encoder.encode_into(
                Message((CALL, 99, 0, "echo", None, child)), BlockBuffer(), outgoing
            )
            outgoing.commit()
        self.assertEqual(pair.client.exportCount, 1)

    def test_failedCallKeepsEarlierSendings(self) -> None:
        """A call that fails to encode takes back only its own sending of a reference sent before."""
        pair = RpcPair(Service())
        child = Child(1)
        kept = pair.root.callRemote("keep", child)
        pair.flush()
        self.successResultOf(kept)
        self.failureResultOf(pair.root.callRemote("echo", [child, object()]), EncodingError)
        self.assertEqual(pair.client.exportCount, 1)


class ReleaseBatchTests(SynchronousTestCase):
    """The RELEASEs queued in one reactor turn leave together."""

    def test_releasesShareOneWrite(self) -> None:
        """Three references dropped in one turn are released in one write, each RELEASE whole."""
        pair = RpcPair(Service())
        refs = [pair.root.callRemote("make", i) for i in range(3)]
        pair.flush()
        children = [self.successResultOf(ref) for ref in refs]
        before = len(pair.clientWrites)
        del refs, children
        gc.collect()
        pair.flush()
        self.assertEqual(messagesPerWrite(pair.clientWrites[before:], preamble=False), [3])
        self.assertEqual(pair.server.exportCount, 1)
