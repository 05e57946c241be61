"""What logins cost, and refusals of object names: the same error, after the same work, whatever the name.

    PYTHONPATH=. python -m tests.benchmarks.bench_auth --tries 1000

First, one SCRAM-SHA-256 login's CPU time on each side, at the default
iteration count (process time, median of 15): the server's (first message,
proof check, final message; for a known and for an unknown user) and the
client's (which derives the salted password: the iterations are its cost).

One server (in this process, over loopback TCP with TLS pinned to its key)
holds 1,000 registered names, one of them revoked.  The client tries, in
turn, a name never registered, a registered name with its last character
changed, the revoked name, and (as a control) a registered name; each try
is a whole C{rpc.connectURL}: TLS handshake, the name, the answer; the
order of the kinds is shuffled afresh each round.  Printed:
each kind's error, and the median and 90th percentile of its wall time.
The three refusals must raise the same error with medians within noise.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import react


async def measure(reactor: Any, tries: int) -> dict[str, dict[str, Any]]:
    from protocols import rpc
    from protocols.auth._identity import ServerIdentity
    from protocols.auth._names import NameTable
    from protocols.auth._urls import ObjectURL

    class Thing(rpc.Referenceable):
        pass

    with tempfile.TemporaryDirectory() as directory:
        identity = ServerIdentity.loadOrCreate(Path(directory) / "server.pem")
        names = NameTable()
        registered = [names.register(Thing(), f"thing {i}") for i in range(1000)]
        revoked = registered.pop()
        names.revoke(revoked)
        port = await rpc.serve(
            reactor, identity.serverDescription("tcp:0:interface=127.0.0.1"), options=rpc.ServerOptions(names=names)
        )
        hints = [f"127.0.0.1:{port.getHost().port}"]
        unknown = NameTable().register(Thing(), "never served")
        last = registered[0][-1]
        wrong = registered[0][:-1] + ("b" if last != "b" else "c")
        kinds = {"unknown": unknown, "wrong": wrong, "revoked": revoked, "registered (control)": registered[1]}
        times: dict[str, list[float]] = {kind: [] for kind in kinds}
        # The server's own work on the name, timed where it happens.
        lookups: list[float] = []
        lookup = names.lookup

        def timedLookup(name: str) -> Any:
            started = time.perf_counter()
            try:
                return lookup(name)
            finally:
                lookups.append(time.perf_counter() - started)

        names.lookup = timedLookup  # type: ignore[method-assign]
        serverTimes: dict[str, list[float]] = {kind: [] for kind in kinds}
        errors: dict[str, set[str]] = {kind: set() for kind in kinds}
        order = list(kinds.items())
        shuffler = random.Random(1)
        for _ in range(tries):
            # A fresh order each round (a rotation would keep who follows
            # whom): what the try before left behind, such as a connection
            # still closing, falls on every kind alike.
            shuffler.shuffle(order)
            for kind, name in order:
                url = str(ObjectURL(identity.keyHash, tuple(hints), name))
                seen = len(lookups)
                started = time.perf_counter()
                try:
                    reference = await rpc.connectURL(reactor, url)
                except Exception as error:
                    times[kind].append(time.perf_counter() - started)
                    errors[kind].add(type(error).__name__)
                else:
                    times[kind].append(time.perf_counter() - started)
                    errors[kind].add("(connected)")
                    await reference.broker.disconnect()
                serverTimes[kind].extend(lookups[seen:])
        await port.stopListening()
    return {
        kind: {
            "error": ", ".join(sorted(errors[kind])),
            "median_ms": statistics.median(samples) * 1000,
            "p90_ms": statistics.quantiles(samples, n=10)[-1] * 1000,
            "server_us": statistics.median(serverTimes[kind]) * 1e6,
        }
        for kind, samples in times.items()
    }


def scramCosts(logins: int = 15) -> str:
    """The CPU time of one SCRAM login on each side, at DEFAULT_ITERATIONS, as report lines."""
    from framing.login._scram import DEFAULT_ITERATIONS, ScramClient, ScramServer
    from protocols.auth._users import IScramResponse, UserFile, addUser

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "users"
        addUser(path, "ada", b"a password", iterations=DEFAULT_ITERATIONS)
        users = UserFile(path)
        client: list[float] = []
        server: dict[str, list[float]] = {"known user": [], "unknown user": []}
        for _ in range(logins):
            for kind, name in (("known user", "ada"), ("unknown user", "nobody")):
                scram = ScramClient(name, b"a password")
                started = time.process_time()
                first = scram.first()
                clientTime = time.process_time() - started
                side = ScramServer(users.verifier, b"a secret", decoyIterations=users.decoyIterations())
                started = time.process_time()
                serverFirst = side.first(first)
                serverTime = time.process_time() - started
                started = time.process_time()
                final = scram.final(serverFirst)
                clientTime += time.process_time() - started
                started = time.process_time()
                response = side.response(final)
                assert IScramResponse.providedBy(response)
                verifier = users.verifier(name)
                if verifier is not None and response.checkProof(verifier.storedKey):
                    side.final()
                serverTime += time.process_time() - started
                server[kind].append(serverTime)
                if kind == "known user":
                    client.append(clientTime)
    lines = [f"One SCRAM-SHA-256 login at {DEFAULT_ITERATIONS:,} iterations, CPU time (median of {logins}):", ""]
    for kind, samples in server.items():
        lines.append(f"- server, {kind}: {statistics.median(samples) * 1e6:.0f} µs")
    lines.append(f"- client: {statistics.median(client) * 1e3:.1f} ms")
    return "\n".join(lines)


def report(results: dict[str, dict[str, Any]], tries: int) -> str:
    lines = [
        f"Object-name refusals, {tries} tries of each kind, interleaved (one connectURL each):",
        "",
        "| name tried | outcome | median (ms) | 90th percentile (ms) | server's lookup, median (µs) |",
        "|---|---|---:|---:|---:|",
    ]
    for kind, row in results.items():
        cells = f"{row['median_ms']:.3f} | {row['p90_ms']:.3f} | {row['server_us']:.2f}"
        lines.append(f"| {kind} | {row['error']} | {cells} |")
    refusals = [results[kind]["median_ms"] for kind in ("unknown", "wrong", "revoked")]
    spread = (max(refusals) - min(refusals)) / min(refusals)
    server = [results[kind]["server_us"] for kind in ("unknown", "wrong", "revoked")]
    serverSpread = (max(server) - min(server)) / min(server)
    lines += [
        "",
        f"Refusal medians differ by {spread:.1%} at most end to end, {serverSpread:.1%} in the server's lookup.",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tries", type=int, default=1000)
    args = parser.parse_args(argv)

    async def run(reactor: Any) -> None:
        print(scramCosts(), "", sep="\n", flush=True)
        print(report(await measure(reactor, args.tries), args.tries), flush=True)

    react(lambda reactor: Deferred.fromCoroutine(run(reactor)))  # type: ignore[no-untyped-call]


if __name__ == "__main__":
    main(sys.argv[1:])
