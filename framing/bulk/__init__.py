# -*- test-case-name: tests.test_exports,tests.protocols.test_blockingbulk,tests.protocols.test_asynciobulk -*-
"""The sans-IO core of chunkwire's bulk streams: what the Twisted bulk layer and the clients without Twisted share.

C{framing/bulk/_wire.py} is the layer's three open types; C{framing/bulk/_hello.py}
each side's HELLO; C{framing/bulk/_credit.py} the sender's flow control;
C{framing/bulk/_digests.py} which digests this process computes and how two
peers settle one; C{framing/bulk/_ranges.py} the byte ranges a transfer holds;
C{framing/bulk/_errors.py} and C{framing/bulk/_fileerrors.py} how a transfer and the
file service fail; C{framing/bulk/_states.py} the streams' one state table and
C{framing/bulk/_connection.py} the rules both sides apply, which every shell
follows.  On these, C{framing/bulk/_streams.py} is a client's side of one
connection's streams and L{framing.bulk.filesteps} the file service's upload
and download as steps, driven by L{protocols.blockingbulk} and
L{protocols.asynciobulk}; the Twisted layer (L{protocols.bulk}) keeps its
own channel, scheduler and hashing pool on the same wire, states, rules and
errors.

Like the rest of L{framing}, nothing here imports Twisted, sockets,
selectors or asyncio, or touches a clock; names are camelCase, as in
L{framing.rpc}: these modules came out of L{protocols.bulk}, whose public
names they keep.
"""

from __future__ import annotations

# DigestUnavailable, IntegrityError, RangeSet, StreamReset and availableDigests are importable from here too;
# they are documented as protocols.bulk's public names, where the Twisted layer has always exported them.
from ._digests import DigestUnavailable, IntegrityError, availableDigests  # noqa: F401
from ._errors import StreamReset  # noqa: F401
from ._fileerrors import BadName, FileChanged, NoSuchFile, StorageError, UploadRefused
from ._ranges import RangeSet  # noqa: F401
from ._streams import ClientStreams, IncomingTransfer, SendStream

__all__ = [
    "BadName",
    "ClientStreams",
    "FileChanged",
    "IncomingTransfer",
    "NoSuchFile",
    "SendStream",
    "StorageError",
    "UploadRefused",
    "availableDigests",
]
