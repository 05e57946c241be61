"""atheris target: Decoder.feed over hostile bytes, split at fuzzer-chosen points.

    PYTHONPATH=. python fuzz/fuzz_decoder.py fuzz/corpus/decoder -runs=1000000 -rss_limit_mb=1024 -timeout=10

Input layout (see L{fuzz.common.cuts_and_body}): byte 0 = number of cuts
(mod 8), then 2-byte cut offsets, then the stream itself (with or without the
preamble: the fuzzer learns it from the seeds).  Any exception other than
L{framing.ProtocolError} (caught) is a finding: atheris saves the input as
crash-*.  Memory beyond -rss_limit_mb and a run longer than -timeout are
findings too.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    import framing  # noqa: F401
    from fuzz.common import check


def TestOneInput(data: bytes) -> None:
    check(data)


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
