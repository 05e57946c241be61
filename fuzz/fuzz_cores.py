"""atheris target: the compiled and the pure-Python decoder on the same hostile bytes, split alike.

    PYTHONPATH=. python fuzz/fuzz_cores.py fuzz/corpus/decoder -runs=1000000 -rss_limit_mb=2048 -timeout=10

The input layout is L{fuzz.common.cuts_and_body}'s.  Each input is fed to a
decoder on each core, under the default limits and under small ones, with a
registry that builds user types and RPC messages (records the compiled reader
builds through their builder); any difference in what they return or raise
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

from framing import _core
from framing.slicing.registry import Registry
from protocols.rpc.wire import Message, MessageSlicer, MessageUnslicer
from tests.framing.test_cores import USER_TYPES, feed_all

REGISTRY = Registry(USER_TYPES)
REGISTRY.add_slicer(Message, MessageSlicer())
REGISTRY.add_unslicer("rpc", MessageUnslicer)
SMALL = framing.Limits(max_items=6, max_object_items=20, max_object_memory=2000, max_depth=4, max_string_length=30)
COMPILED = _core.speedups


class Finding(AssertionError):
    """The two cores disagreed."""


def TestOneInput(data: bytes) -> None:
    cuts, body = cuts_and_body(data)
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
