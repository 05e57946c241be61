"""What every fuzz target checks: hostile bytes give objects, Violations or a ProtocolError, nothing else.

Contract: L{feed_split} feeds one input to a fresh L{Decoder}, cut at the
points the fuzzer chose, and raises L{Finding} (or lets any unexpected
exception through) when the outcome is anything but decoded objects,
L{Violation}s and at most one L{ProtocolError}, or when the decoder holds
more than its limits allow.  Importing this module imports nothing from
C{twisted.internet}.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from framing import Decoder, Limits, ProtocolError, Violation
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import MAX_HEADER_LENGTH

LIMITS = Limits(
    max_bytes_length=64 * 1024,
    max_string_length=16 * 1024,
    max_bigint_length=256,
    max_open_name_length=64,
    max_error_length=1024,
    max_buffered_bytes=64 * 1024,
    max_depth=16,
    max_items=4096,
)
"""Small limits, so that a bound that is not kept shows quickly."""

BUFFER_BOUND = 64 * 1024 + MAX_HEADER_LENGTH + 64
"""Most bytes a decoder with L{LIMITS} may hold after a feed returns."""

VECTORS = Path(__file__).resolve().parents[1] / "tests" / "vectors"


class Finding(AssertionError):
    """The decoder broke its contract on this input."""


def cuts_and_body(data: bytes) -> tuple[list[int], bytes]:
    """Split the fuzzer's input: byte 0 is a count N (mod 8), then N 2-byte cut offsets, then the stream."""
    if not data:
        return [], b""
    count = data[0] % 8
    header = data[1 : 1 + 2 * count]
    cuts = sorted(int.from_bytes(header[i : i + 2], "big") for i in range(0, len(header) - 1, 2))
    return cuts, data[1 + 2 * count :]


def encode_input(cuts: list[int], body: bytes) -> bytes:
    """The inverse of L{cuts_and_body}, to write seeds."""
    cuts = cuts[:7]
    return bytes([len(cuts)]) + b"".join(c.to_bytes(2, "big") for c in cuts) + body


def split(body: bytes, cuts: list[int]) -> list[bytes]:
    """C{body} cut at C{cuts} (offsets past the end are ignored)."""
    pieces, start = [], 0
    for cut in cuts:
        if start <= cut <= len(body):
            pieces.append(body[start:cut])
            start = cut
    pieces.append(body[start:])
    return pieces


def feed_split(decoder: Decoder, pieces: list[bytes], registry: Any = None) -> list[Any]:
    """
    Feed C{pieces}; check every outcome and bound; return what was decoded.

    An exception instance among the results must be a L{Violation} or of a
    type C{registry} builds from the wire (C{echo.refused} decodes to an
    C{EchoRefused}, which is an exception by design).
    """
    registry = registry if registry is not None else DEFAULT_REGISTRY
    results: list[Any] = []
    for piece in pieces:
        try:
            got = decoder.feed(piece)
        except ProtocolError:
            return results
        for obj in got:
            if (
                isinstance(obj, BaseException)
                and not isinstance(obj, Violation)
                and registry.slicer_for(type(obj)) is None
            ):
                raise Finding(f"feed returned an exception that is neither a Violation nor a registered type: {obj!r}")
        results.extend(got)
        if decoder.buffered > BUFFER_BOUND:
            raise Finding(f"decoder holds {decoder.buffered} bytes, more than {BUFFER_BOUND}")
    try:
        decoder.close()
    except ProtocolError:
        pass
    return results


def check(data: bytes, prefix: bytes = b"", registry: Any = None) -> list[Any]:
    """Decode C{prefix} + the stream in C{data}, cut where C{data} says."""
    cuts, body = cuts_and_body(data)
    stream = prefix + body
    pieces = split(stream, [cut + len(prefix) for cut in cuts]) if prefix else split(stream, cuts)
    return feed_split(Decoder(LIMITS, registry), pieces, registry)


def vector_streams() -> list[tuple[str, bytes]]:
    """Every test vector's bytes, named."""
    streams = []
    for path in sorted(VECTORS.glob("*.json")):
        for vector in json.loads(path.read_text())["vectors"]:
            streams.append((f"{path.stem}-{vector['name']}", bytes.fromhex(vector["hex"])))
    return streams
