"""atheris target: the compiled and the pure-Python decoder on the same hostile bytes, split alike.

    PYTHONPATH=. python fuzz/fuzz_cores.py fuzz/corpus/decoder -runs=1000000 -rss_limit_mb=2048 -timeout=10

The input layout is L{fuzz.common.cuts_and_body}'s.  Each input is fed to a
decoder on each core, under the default limits and under small ones, with a
registry that builds user types (registered ones, which the compiled reader
runs where they sit, and one it leaves to Python) and RPC messages (records
the compiled reader builds through their builder).  With bit 0x40 of the
first byte set, the body instead picks one of L{TEMPLATES} (streams of
built-ins around and inside registered types) and overwrites bytes of it,
so that mutations reach inside those types at once.  Any difference in what they return or raise
(objects and their types, Violations with their C{where}, the ProtocolError,
what they hold afterwards) is a finding.  atheris instruments the Python
code only, so coverage guides the search through the pure decoder and the
hand-backs; the compiled reader runs on every input.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    import framing  # noqa: F401
    from fuzz.common import cuts_and_body, split

from framing import Encoder, _core
from framing.rpc._wire import Message, MessageSlicer, MessageUnslicer
from framing.slicing._registry import Registry
from framing.wire import PREAMBLE
from tests.framing.test_cores import USER_TYPES, Pair, Point, feed_all
from tests.framing.test_cores_nested import (
    NESTED,
    STRICT,
    Once,
    Tagline,
    Thing,
    named_tokens,
    once_from_wire,
    tagline_from_wire,
)

REGISTRY = Registry(USER_TYPES)
REGISTRY.add_slicer(Message, MessageSlicer())
REGISTRY.add_unslicer("rpc", MessageUnslicer)
REGISTRY.register(Thing, "tests.Thing")
REGISTRY.register(Tagline, "tests.Tagline", lambda t: t.parts, tagline_from_wire)
REGISTRY.register(Once, "tests.Once", lambda o: o.n, once_from_wire)
REGISTRY.add_unslicer("tests.Once", STRICT.unslicer_for("tests.Once"))  # type: ignore[arg-type]  # not rebuildable
for _name in ("tests.Named", "tests.Dropped"):
    REGISTRY.add_unslicer(_name, NESTED.unslicer_for(_name))  # type: ignore[arg-type]
TEMPLATES = [
    Encoder(REGISTRY).encode(value)
    for value in (
        [{"id": i, "name": "n", "thing": Thing(i, {"tags": ["a", i], "n": None})} for i in range(3)],
        Thing(1, [Thing(2, {"x": [1.5, b"b"]}), Tagline([1, "t"])]),
        (Tagline([Point(1, [2])]), {"k": Thing(None, (1, 2))}, Once([3])),
        Pair((1, Thing(2, "s"), [Tagline([])])),
        [Message((1, 7, ["ok", Thing(0, {})]))],
    )
] + [b"\x74list" + named_tokens("n", [1, {"a": 2}]) + b"\x7c\x0dtests.Dropped\x01\x80\x80"]
SMALL = framing.Limits(max_items=6, max_object_items=20, max_object_memory=2000, max_depth=4, max_string_length=30)
COMPILED = _core.speedups


class Finding(AssertionError):
    """The two cores disagreed."""


def from_template(body: bytes) -> bytes:
    """The stream of template C{body[0]}, overwritten at C{(offset, byte)} pairs of the rest, cut short if it is odd."""
    if not body:
        return PREAMBLE
    stream = bytearray(TEMPLATES[body[0] % len(TEMPLATES)])
    edits = body[1:]
    for i in range(0, len(edits) - 1, 2):
        stream[edits[i] % len(stream)] = edits[i + 1]
    if len(edits) % 2:
        del stream[edits[-1] % len(stream) :]
    return PREAMBLE + bytes(stream)


def TestOneInput(data: bytes) -> None:
    cuts, body = cuts_and_body(data)
    if data and data[0] & 0x40:
        body = from_template(body)
    chunks = split(body, cuts)
    limits = SMALL if data and data[0] & 0x80 else None
    pure, compiled = feed_all(None, chunks, limits, REGISTRY), feed_all(COMPILED, chunks, limits, REGISTRY)
    if pure != compiled:
        raise Finding(f"the cores disagree:\n pure     {pure!r}\n compiled {compiled!r}")


def main() -> None:
    if COMPILED is None:
        sys.exit("fuzz_cores: the compiled core is not built (or CHUNKWIRE_PURE is set)")
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
