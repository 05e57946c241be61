# -*- test-case-name: tests.test_exports,tests.framing.test_codec,tests.framing.test_slicing -*-
"""chunkwire's sans-IO core: the wire format, buffers, scanner and codec.

Nothing here imports C{twisted.internet}: it is pure bytes in, objects out,
and tested with plain bytes.  See C{docs/wire-format.md} for the format.
"""

from ._blocks import BlockBuffer
from ._chain import ChunkChain
from ._core import implementation
from ._decoder import Decoder, Ping, Pong, loads
from ._encoder import Encoder, dumps
from ._errors import ChunkwireError, EncodingError, PeerError, ProtocolError, Violation
from ._limits import Limits
from ._scanner import TokenScanner
from .slicing._interfaces import NOTHING, ISlicer, IUnslicer
from .slicing._registry import Registry, register

__all__ = [
    "BlockBuffer",
    "ChunkChain",
    "ChunkwireError",
    "Decoder",
    "Encoder",
    "EncodingError",
    "ISlicer",
    "IUnslicer",
    "Limits",
    "NOTHING",
    "Ping",
    "Pong",
    "ProtocolError",
    "Registry",
    "TokenScanner",
    "Violation",
    "dumps",
    "implementation",
    "loads",
    "register",
    "PeerError",
]
