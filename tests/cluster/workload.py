"""One client host of the cluster run: many clients (asyncio), each call recorded (L{tests.cluster.history}).

    python -m tests.cluster.workload run HOST HISTORY ADDRESSES POLICY --hosts H1,H2 [--writers N] [--watchers N]
    python -m tests.cluster.workload bench ADDRESSES POLICY --seconds S --tasks N
    python -m tests.cluster.workload dump POSTGRESQL_URL

C{run}: C{--writers} clients, each an L{protocols.asyncioclient.AsyncFailover}
of its own over ADDRESSES (comma-separated C{host:port}; one address: HAProxy)
with POLICY, each putting to its own keys, one call at a time, and getting a
key of any writer of any host (C{--hosts}); and C{--watchers} clients, each
a connection of its own to one address in turn, watching one key of
another host's writer, and getting it every L{KEEPALIVE} seconds (which
also notices a silent server within C{silenceTimeout}); a watch whose
connection ends is made again on the next address.  Every call carries a
deadline of L{DEADLINE} seconds (C{callContext}).  SIGUSR1 stops the
writers (the process prints C{writes stopped} once they have); SIGTERM
then ends the watches and writes the history to HISTORY (a JSON object a
line), and the process prints C{history written}.

C{bench}: C{--tasks} clients putting then getting their own key for
C{--seconds}; prints one JSON line: puts and gets per second, their p50
and p99 in milliseconds.  C{dump}: the kv table of a PostgreSQL store, as
one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from collections.abc import Awaitable
from typing import Any

from framing.rpc._referenceable import Referenceable
from framing.rpc._signatures import remote
from protocols.asyncioclient import AsyncConnection, callContext, connect
from protocols.kv import KeyNotFound
from protocols.options import ClientOptions

from .history import percentile

DEADLINE = 5.0
"""Seconds each call may take (its C{callContext} deadline)."""
SILENCE = 3.0
"""The clients' C{silenceTimeout}: a server silent this long while a call waits is given up."""
KEEPALIVE = 0.5
"""Seconds between a watcher's gets of its key."""
KEYS = 4
"""Keys per writer."""
PACE = 0.02
"""Seconds a writer rests between its rounds (a put and a get), so the machine's two cores serve every host."""


def keysOf(host: str, writer: int) -> list[str]:
    return [f"{host}/w{writer}/k{n}" for n in range(KEYS)]


class Watcher(Referenceable):
    """Told of each change of its key: keeps C{[time, value, skipped]} notes."""

    def __init__(self) -> None:
        self.notes: list[list[Any]] = []

    @remote
    def changed(self, key: str, value: str | None, skipped: int = 0) -> None:
        self.notes.append([time.monotonic(), value, skipped])


class Host:
    """The clients of one host and their history."""

    def __init__(self, options: argparse.Namespace) -> None:
        self.name: str = options.host
        self.addresses: list[str] = options.addresses.split(",")
        self.policy: str = options.policy
        self.hosts: list[str] = options.hosts.split(",")
        self.writers: int = options.writers
        self.watchers: int = options.watchers
        self.history: list[dict[str, Any]] = []
        self.writing = True
        self.watching = True

    async def record(self, client: str, op: str, key: str, value: str | None, call: Awaitable[Any]) -> Any:
        entry: dict[str, Any] = {"client": client, "op": op, "key": key, "value": value, "deadline": DEADLINE}
        entry["start"] = time.monotonic()
        try:
            result = await call
            entry.update(ok=True, result=result)
        except KeyNotFound:
            result = None
            entry.update(ok=True, result=None)
        except Exception as error:
            result = error
            entry.update(ok=False, error=f"{type(error).__name__}: {str(error)[:200]}")
        entry["end"] = time.monotonic()
        self.history.append(entry)
        return result

    async def writer(self, number: int) -> None:
        name = f"{self.name}/writer{number}"
        client: Any = await connect(
            self.addresses,
            options=ClientOptions(policy=self.policy, timeout=SILENCE, silenceTimeout=SILENCE, moveTimeout=DEADLINE),
        )
        own = keysOf(self.name, number)
        everyone = [key for host in self.hosts for writer in range(self.writers) for key in keysOf(host, writer)]
        seq = 0
        rounds = 0
        while self.writing:
            key = own[seq % KEYS]
            value = f"{key}#{seq}"
            with callContext(timeout=DEADLINE):
                await self.record(name, "put", key, value, client.root.callRemote("put", key, value))
            seq += 1
            other = everyone[(rounds * 7 + number) % len(everyone)]
            rounds += 1
            with callContext(timeout=DEADLINE):
                await self.record(name, "get", other, None, client.root.callRemote("get", other))
            await asyncio.sleep(PACE)
        await client.close()

    async def watcher(self, number: int) -> None:
        name = f"{self.name}/watcher{number}"
        others = [host for host in self.hosts if host != self.name] or self.hosts
        key = keysOf(others[number % len(others)], number % self.writers)[0]
        turn = number
        while self.watching:
            address = self.addresses[turn % len(self.addresses)]
            turn += 1
            try:
                connection: AsyncConnection = await asyncio.wait_for(
                    connect(address, options=ClientOptions(timeout=SILENCE, silenceTimeout=SILENCE)), SILENCE * 2
                )
            except Exception:
                await asyncio.sleep(0.2)  # (the next address; a server down refuses at once)
                continue
            watcher = Watcher()
            with callContext(timeout=DEADLINE):
                base = await self.record(name, "watch", key, None, connection.root.callRemote("watch", key, watcher))
            if not isinstance(base, Exception):
                session: dict[str, Any] = {"client": name, "op": "session", "key": key, "base": base}
                session["answered"] = self.history[-1]["end"]
                session["notes"] = watcher.notes
                while self.watching and not connection.ended:
                    with callContext(timeout=DEADLINE):
                        await self.record(name, "get", key, None, connection.root.callRemote("get", key))
                    if self.watching and not connection.ended:
                        await asyncio.sleep(KEEPALIVE)
                session.update(end=time.monotonic(), ended="lost" if connection.ended else "stopped")
                self.history.append(session)
            await connection.close()

    async def run(self, path: str) -> None:
        loop = asyncio.get_running_loop()
        stopWrites = asyncio.Event()
        stopAll = asyncio.Event()
        loop.add_signal_handler(signal.SIGUSR1, stopWrites.set)
        loop.add_signal_handler(signal.SIGTERM, stopAll.set)
        writers = [asyncio.ensure_future(self.writer(n)) for n in range(self.writers)]
        watchers = [asyncio.ensure_future(self.watcher(n)) for n in range(self.watchers)]
        print(f"{self.name} running", flush=True)
        await stopWrites.wait()
        self.writing = False
        await asyncio.gather(*writers, return_exceptions=True)
        print(f"{self.name} writes stopped", flush=True)
        await stopAll.wait()
        self.watching = False
        await asyncio.gather(*watchers, return_exceptions=True)
        with open(path, "w") as out:
            for entry in self.history:
                out.write(json.dumps(entry) + "\n")
        print(f"{self.name} history written", flush=True)


async def bench(addresses: list[str], policy: str, seconds: float, tasks: int) -> dict[str, float]:
    """Puts then gets of each task's own key for C{seconds}: their rates and latencies."""
    latencies: dict[str, list[float]] = {"put": [], "get": []}
    until = time.monotonic() + seconds

    async def task(number: int) -> None:
        client: Any = await connect(
            addresses, options=ClientOptions(policy=policy, timeout=10, silenceTimeout=10, moveTimeout=10)
        )
        key = f"bench/{number}"
        seq = 0
        while time.monotonic() < until:
            for op, args in (("put", (key, f"{key}#{seq}")), ("get", (key,))):
                began = time.monotonic()
                await client.root.callRemote(op, *args)
                latencies[op].append(time.monotonic() - began)
            seq += 1
        await client.close()

    began = time.monotonic()
    await asyncio.gather(*(task(n) for n in range(tasks)))
    took = time.monotonic() - began
    figures: dict[str, float] = {}
    for op, values in latencies.items():
        figures[f"{op}s_per_s"] = len(values) / took
        figures[f"{op}_p50_ms"] = percentile(values, 0.5) * 1000
        figures[f"{op}_p99_ms"] = percentile(values, 0.99) * 1000
    return figures


def dump(url: str) -> dict[str, str]:
    import psycopg

    with psycopg.connect(url, connect_timeout=10) as db:
        return dict(db.execute("SELECT key, value FROM chunkwire_kv").fetchall())


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.cluster.workload")
    commands = parser.add_subparsers(dest="command", required=True)
    running = commands.add_parser("run")
    running.add_argument("host")
    running.add_argument("history")
    running.add_argument("addresses")
    running.add_argument("policy")
    running.add_argument("--hosts", required=True)
    running.add_argument("--writers", type=int, default=4)
    running.add_argument("--watchers", type=int, default=2)
    benching = commands.add_parser("bench")
    benching.add_argument("addresses")
    benching.add_argument("policy")
    benching.add_argument("--seconds", type=float, default=8.0)
    benching.add_argument("--tasks", type=int, default=8)
    dumping = commands.add_parser("dump")
    dumping.add_argument("url")
    options = parser.parse_args(argv)
    if options.command == "run":
        asyncio.run(Host(options).run(options.history))
    elif options.command == "bench":
        figures = asyncio.run(bench(options.addresses.split(","), options.policy, options.seconds, options.tasks))
        print(json.dumps(figures), flush=True)
    else:
        print(json.dumps(dump(options.url)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
