"""Talk to chunkwire's echo service: check a sample of every built-in type, a
streamed body, then time small round trips one at a time and with a window of
requests in flight.

    python examples/echo_client.py --connect tcp:host=127.0.0.1:port=8750
    python examples/echo_client.py --connect unix:path=/tmp/chunkwire-echo.sock
    python examples/echo_client.py --connect \\
        ssl:host=127.0.0.1:port=8751:caCertsDir=/tmp/chunkwire-cert/ca:hostname=localhost
"""

# Only what parsing the command line needs is imported here: --help and a
# mistyped option load neither Twisted nor chunkwire (tests/examples/test_help.py
# HelpImportTests); the command imports them once it runs.

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from _connecting import addTimeoutArgument, warnIfUnverified
from _errors import CommandLineParser, addDebugArgument, runCommand

if TYPE_CHECKING:
    from protocols import echo

SAMPLE: list[Any] = [
    None,
    True,
    42,
    -7,
    2**100,
    3.25,
    b"\x00\xff bytes",
    "text ✓",
    [1, [2, 3]],
    ("a", "tuple"),
    {"key": "value", 1: [b"x"]},
    {1, 2, 3},
    frozenset({"f"}),
]


async def check(client: echo.EchoClient) -> None:
    """Echo one value of each type and a streamed body; stop at the first mismatch."""
    for value in SAMPLE:
        answer = await client.echo(value)
        status = "ok" if answer == value and type(answer) is type(value) else "MISMATCH"
        print(f"  {status:8} {type(value).__name__:10} {value!r:.60}")
        if status != "ok":
            raise SystemExit(1)
    chunks = [bytes([i]) * 65536 for i in range(8)]
    joined = await client.echoStream(chunks)
    status = "ok" if joined == b"".join(chunks) else "MISMATCH"
    print(f"  {status:8} stream     8 chunks of 64 KiB, {len(joined)} bytes back")


async def timeRoundTrips(client: echo.EchoClient, count: int, window: int) -> None:
    """Send C{count} small objects with C{window} in flight; print the rate and mean round trip."""
    from twisted.internet.defer import Deferred, gatherResults

    started = time.perf_counter()
    rtts: list[float] = []
    sent = 0

    async def one() -> None:
        nonlocal sent
        while sent < count:
            sent += 1
            t0 = time.perf_counter()
            await client.echo(sent)
            rtts.append(time.perf_counter() - t0)

    await gatherResults([Deferred.fromCoroutine(one()) for _ in range(window)])
    elapsed = time.perf_counter() - started
    print(
        f"  {count} round trips, {window} in flight: {count / elapsed:,.0f} objects/s,"
        f" mean round trip {sum(rtts) / len(rtts) * 1e6:,.0f} us"
    )


async def run(reactor: Any, description: str, count: int, window: int, timeout: float | None = None) -> None:
    from protocols import echo

    client = await echo.connect(reactor, description, timeout=timeout)
    print(f"connected to {client.transport.getPeer()}")
    await check(client)
    await timeRoundTrips(client, count, 1)
    await timeRoundTrips(client, count, window)
    client.transport.loseConnection()


def main(argv: list[str]) -> None:
    parser = CommandLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--connect",
        default="tcp:host=127.0.0.1:port=8750",
        metavar="ENDPOINT",
        help="a Twisted client endpoint description (default tcp:host=127.0.0.1:port=8750)",
    )
    parser.add_argument("--count", type=int, default=2000, help="round trips to time (default 2000)")
    parser.add_argument("--window", type=int, default=100, help="requests in flight for the second run (default 100)")
    parser.add_argument("--trace", action="store_true", help="log every token sent and received, readably")
    addTimeoutArgument(parser)
    addDebugArgument(parser)
    args = parser.parse_args(argv)
    if args.trace:  # the tokens go to stderr, so that stdout stays the command's answer
        from twisted.logger import globalLogBeginner, textFileLogObserver

        from protocols import TokenProtocol

        TokenProtocol.trace = True
        globalLogBeginner.beginLoggingTo([textFileLogObserver(sys.stderr)], redirectStandardIO=False)
    warnIfUnverified(args.connect)
    runCommand(
        lambda reactor: run(reactor, args.connect, args.count, args.window, args.timeout), args.connect, args.debug
    )


if __name__ == "__main__":
    main(sys.argv[1:])
