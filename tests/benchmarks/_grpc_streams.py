"""grpc.aio's figures that chunkwire's object streams are compared with (issue 33).

    from tests.benchmarks._grpc_streams import grpcStreamItemsPerSecond, grpcUnaryCallsPerSecond

    grpcStreamItemsPerSecond(100_000)   # one server-streaming call of 100,000 small ints: items/s
    grpcUnaryCallsPerSecond(100)        # unary echo(42) calls/s, 100 in flight

    python -m tests.benchmarks._grpc_streams [ITEMS]    # both, and the CPU they cost, as JSON

Each function starts the C{grpc-aio} peer of L{tests.benchmarks._rpc_peers}
(L{GRPC}): a fresh C{grpc.aio} server process and a fresh C{grpc.aio} client
process on 127.0.0.1, measures in the client, and ends both by their process
ids.  The server's C{Count(n)} is a server-streaming method whose handler is
an async generator yielding the ints 0..n-1, one message each; the client
iterates the call with C{async for} and checks every item.  Messages are
msgpack values (no protoc; see L{GRPC}).  A stream is timed from the call to
its last item, after a warm-up stream of 1,000 items on the same channel.

Needs grpcio (the C{bench} extra); without it the server process fails and
the functions raise L{PeerFailed}, as they do when a peer misses a deadline
or answers wrongly.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from ._rpc_peers import GRPC, PeerFailed, PeerPair

WARMUP_ITEMS = 1000
"""Items streamed once, untimed, before a measured stream."""


def _stream(pair: PeerPair, items: int) -> dict[str, Any]:
    """One measured stream of C{items} on C{pair}, after the warm-up one; L{PeerFailed} if an item was wrong."""
    timeout = 60.0 + items / 1000
    pair.command({"op": "stream", "items": WARMUP_ITEMS}, timeout)
    result = pair.command({"op": "stream", "items": items}, timeout)
    if result["errors"] or result["items"] != items:
        raise PeerFailed(f"grpc stream of {items}: {result['items']} items came, {result['errors']} wrong or missing")
    return result


def _unary(pair: PeerPair, window: int, duration: float) -> dict[str, Any]:
    """Unary C{echo(42)} calls with C{window} in flight for C{duration} seconds, after 300 sequential ones."""
    command = {"op": "measure", "payload": "int", "window": window, "duration": duration, "warmup": 300}
    result = pair.command(command, duration + 60.0)
    if result["errors"]:
        raise PeerFailed(f"grpc unary calls: {result['errors']} answered wrongly or failed")
    return result


def grpcStreamFigures(items: int) -> dict[str, Any]:
    """
    One server-streaming call of C{items} small ints, on a fresh server and client: C{items_per_s}, C{seconds},
    C{client_cpu_us} and C{server_cpu_us} (CPU time per item), C{others_cpu} (see L{_rpc_peers.OthersCpu}).
    """
    with PeerPair(GRPC) as pair:
        return _stream(pair, items)


def grpcStreamItemsPerSecond(n: int) -> float:
    """Items per second of one C{grpc.aio} server-streaming call of C{n} small ints (fresh processes)."""
    itemsPerSecond: float = grpcStreamFigures(n)["items_per_s"]
    return itemsPerSecond


def grpcUnaryCallsPerSecond(window: int = 100, duration: float = 1.5) -> float:
    """C{grpc.aio} unary calls per second with C{window} in flight on one channel, for C{duration} seconds."""
    with PeerPair(GRPC) as pair:
        callsPerSecond: float = _unary(pair, window, duration)["calls_per_s"]
        return callsPerSecond


def grpcFigures(items: int, window: int = 100, duration: float = 1.5) -> dict[str, Any]:
    """Both figures on one server and client, seconds apart: C{{"stream": ..., "unary": ...}} (see above)."""
    with PeerPair(GRPC) as pair:
        return {"stream": _stream(pair, items), "unary": _unary(pair, window, duration)}


def main(argv: list[str]) -> int:
    items = int(argv[0]) if argv else 100_000
    print(json.dumps(grpcFigures(items), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
