"""The framing-layer demo: push a large nested object and a 64 MiB byte
string through chunkwire's sans-IO core (no sockets, no reactor), fed to the
decoder in socket-sized chunks, and print sizes, times and ns/byte.

    python examples/framing_demo.py [--size MiB] [--width RECORDS]

The main demo, with services on loopback, is examples/demo.py.
"""

from __future__ import annotations

import argparse
import os
import time

from framing import Decoder, dumps

MiB = 1024 * 1024


def nested_object(width: int) -> dict[str, object]:
    """A record-like structure of the shape an RPC service exchanges."""
    return {
        "users": [
            {
                "id": i,
                "name": f"user-{i}",
                "karma": i * 1.5,
                "active": i % 3 == 0,
                "tags": ("a", "b", str(i)),
                "avatar": bytes(64),
                "big": 2**80 + i,
            }
            for i in range(width)
        ],
        "meta": {"count": width, "next": None},
    }


def round_trip(label: str, obj: object, chunk: int) -> None:
    started = time.perf_counter()
    blob = dumps(obj)
    encoded = time.perf_counter()
    decoder = Decoder()
    view = memoryview(blob)
    results: list[object] = []
    for offset in range(0, len(blob), chunk):
        results += decoder.feed(bytes(view[offset : offset + chunk]))
    decoded = time.perf_counter()
    assert results == [obj], "round trip changed the object"
    enc_s, dec_s = encoded - started, decoded - encoded
    print(
        f"{label:<28} {len(blob) / MiB:8.2f} MiB  encode {enc_s * 1e3:8.1f} ms ({enc_s * 1e9 / len(blob):5.2f} ns/B)"
        f"  decode in {chunk // 1024:>2} KiB chunks {dec_s * 1e3:8.1f} ms ({dec_s * 1e9 / len(blob):5.2f} ns/B)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=64, help="byte-string size in MiB (default 64)")
    parser.add_argument("--width", type=int, default=20000, help="records in the nested object")
    args = parser.parse_args()
    print("chunkwire framing demo: encode, then decode fed in socket-sized chunks")
    round_trip(f"nested object ({args.width} records)", nested_object(args.width), 64 * 1024)
    payload = os.urandom(args.size * MiB)
    for chunk in (4 * 1024, 64 * 1024):
        round_trip(f"{args.size} MiB byte string", payload, chunk)


if __name__ == "__main__":
    main()
