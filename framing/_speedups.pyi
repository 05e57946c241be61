# The compiled fast path (framing/_speedups.c); see framing/_core.py.
from typing import Any

class Reader:
    def __init__(
        self,
        limits: tuple[int, ...],
        builds: tuple[bool, ...],
        costs: tuple[int, ...],
        plain_keys: bool,
        results: list[Any] | None = None,
        stack: list[Any] | None = None,
        records: tuple[tuple[bytes, Any, int, int, int], ...] = (),
        nested: tuple[Any, Any, int, tuple[tuple[bytes, Any, int, bool], ...]] | None = None,
    ) -> None: ...
    cut: int
    def read(self, buf: bytes, pos: int) -> int: ...
    def one(self, buf: bytes, pos: int) -> tuple[Any, int] | None: ...

def encode(obj: Any, max_depth: int, prefix: bytes = b"") -> bytes | None: ...
def encode_parts(parts: Any, max_depth: int, opening: bytes) -> bytes | None: ...
