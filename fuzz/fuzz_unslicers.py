"""atheris target: each unslicer (built-in, arrays, stream, RPC) fed hostile tokens after its OPEN.

    PYTHONPATH=. python fuzz/fuzz_unslicers.py fuzz/corpus/unslicers -runs=300000 -rss_limit_mb=1024 -timeout=10

Byte 0 picks the open-type (from L{OPEN_NAMES}); the rest is as for
C{fuzz_decoder.py}, fed after the preamble and that open-type's OPEN token.
The RPC names are decoded with an unconnected broker's registry, as a
server's connection would.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    import framing  # noqa: F401
    from fuzz.unslicers import check_unslicer_input


def TestOneInput(data: bytes) -> None:
    check_unslicer_input(data)


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
