# -*- test-case-name: tests.framing.test_stream -*-
"""Streamed bodies: a byte string sent as a sequence of chunks.

Wire shape: OPEN "stream", one BYTES token per chunk, CLOSE.  A sender can
start before it knows the total length and write each chunk as it is
produced (one transport write per chunk).  Contract: the default
L{StreamUnslicer} joins the chunks into one C{bytes} with one copy per byte
and refuses, at the chunk's header, a stream whose total would pass
C{Limits.max_bytes_length}; only BYTES tokens are accepted inside.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from typing import Any

from .._errors import BodyTooLarge, KindRefused
from .._limits import Limits
from ..wire import BYTES, CLOSE, KIND_NAMES, OPEN, encode_header
from ._builtin import Unslicer

STREAM_OPEN_TYPE = "stream"


class StreamUnslicer(Unslicer):
    """Collects a stream's chunks into one C{bytes}."""

    open_type = STREAM_OPEN_TYPE

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self._buffer = io.BytesIO()
        self._announced = 0
        self._chunks = 0

    def check_token(self, kind: int, size: int) -> None:
        if kind != BYTES:
            raise KindRefused(f"a stream holds only BYTES chunks, not {KIND_NAMES.get(kind, kind)}")
        self._announced += size
        if self._announced > self.limits.max_bytes_length:
            raise BodyTooLarge(
                f"stream longer than the limit of {self.limits.max_bytes_length} bytes; the receiving side may"
                " raise it with Limits(max_bytes_length=...), or send large data as a protocols.bulk.Stream"
            )

    def receive_child(self, obj: Any) -> None:
        if type(obj) is not bytes:
            # Value tokens carry no body, so check_token never saw them.
            raise KindRefused(f"a stream holds only BYTES chunks, not {type(obj).__name__}")
        self._buffer.write(obj)
        self._chunks += 1

    def finish(self) -> Any:
        return self._buffer.getvalue()

    def child_where(self) -> str:
        return f"<chunk {self._chunks}>"


def stream_open() -> bytes:
    """The token that starts a stream."""
    name = STREAM_OPEN_TYPE.encode("ascii")
    return encode_header(OPEN, len(name)) + name


def stream_chunk_header(length: int) -> bytes:
    """The header that precedes one chunk of C{length} bytes."""
    return encode_header(BYTES, length)


def stream_close() -> bytes:
    """The token that ends a stream."""
    return encode_header(CLOSE, 0)


def stream_tokens(chunks: Iterable[bytes]) -> Iterator[list[bytes]]:
    """
    Yield the pieces to write for a stream, one list per transport write:
    the OPEN with the first chunk, then each chunk with its header, then the
    CLOSE (empty chunks are skipped: a zero-length BYTES would say nothing).
    """
    pending = [stream_open()]
    for chunk in chunks:
        if not chunk:
            continue
        pending += [stream_chunk_header(len(chunk)), chunk]
        yield pending
        pending = []
    pending.append(stream_close())
    yield pending
