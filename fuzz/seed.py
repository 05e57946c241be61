"""Write the seed corpus from tests/vectors/ (run once; the corpus is committed).

PYTHONPATH=. python -m fuzz.seed
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from framing.wire import PREAMBLE
from fuzz.common import encode_input, vector_streams
from fuzz.unslicers import OPEN_NAMES

CORPUS = Path(__file__).resolve().parent / "corpus"


def write(directory: Path, data: bytes) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / hashlib.sha1(data).hexdigest()).write_bytes(data)


def main() -> None:
    streams = vector_streams()
    for _, stream in streams:
        if len(stream) > 16 * 1024:
            continue  # the large vector would dominate the corpus; its shape is in the smaller ones
        write(CORPUS / "decoder", encode_input([], stream))
        write(CORPUS / "decoder", encode_input([len(stream) // 3, len(stream) // 2], stream))
        tokens = stream[len(PREAMBLE) :] if stream.startswith(PREAMBLE) else stream
        for index in range(len(OPEN_NAMES)):
            if len(tokens) < 200:
                write(CORPUS / "unslicers", bytes([index]) + encode_input([], tokens))
    print(
        f"{len(list((CORPUS / 'decoder').iterdir()))} decoder seeds, "
        f"{len(list((CORPUS / 'unslicers').iterdir()))} unslicer seeds"
    )


if __name__ == "__main__":
    main()
