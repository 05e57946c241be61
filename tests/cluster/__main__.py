"""C{python3 dev.py cluster}: chunkwire-kv on three hosts sharing PostgreSQL, behind HAProxy, under faults.

What it builds (L{tests.cluster.hosts}: network namespaces on one bridge,
all removed at the end, also on an error or Ctrl-C): a PostgreSQL host
(the project's private server, L{tests.postgres}, listening on its
namespace's address); three server hosts, each running
C{twist chunkwire-kv --workers 2 --store postgresql://...} with a plain
listener (for the clients given the address list) and a C{haproxy:} one;
an HAProxy host running the configuration of C{docs/howto/scaling.rst}
(with a third server line); a fourth server host on SQLite for the
comparison; and three client hosts (L{tests.cluster.workload}): C{c1}
through HAProxy, C{c2} with the three addresses and C{round_robin}, C{c3}
with them and C{pick_first}.

What it does, in order: the comparison (the same bench workload against
the three PostgreSQL hosts, then against the one SQLite host); then the
recorded workload, during which it makes each fault in turn and undoes
it: C{kill -9} of a server host's processes (then started again), a
server host's link cut (C{ip link set down}) and restored, 100 ms delay
and 5 % loss each way on a server host's link (C{tc netem}), PostgreSQL
stopped (C{-m immediate}) and started, two client hosts cut off from one
server host (C{tc} filters dropping that pair's packets).  Then it reads
the table, checks the history (L{tests.cluster.history.check}) and prints,
per fault, the calls, failures, the longest stretch a client went without
a successful call and the p99 of the successful calls; the comparison's
puts/s and gets/s with their p50 and p99; and the delay from a put to a
watcher's notification on another host.  Exit status 1 on any violation,
or if the machine cannot run it (no root, no netns: said, not skipped).
The whole run takes about two minutes (119 to 125 s on a shared 2-core virtual machine).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import time
import unittest
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.processes import ENV, ROOT

from .history import NOTIFY_BOUND, check, lateEffects, percentile, watchDelays, window
from .hosts import SUBNET, Host, Network, unavailable

HANG = 60.0
"""Seconds within which anything that is not a hang happens, however loaded the machine."""
HOLD = 6.0
"""Seconds each fault lasts."""
SETTLE = 6.0
"""Seconds after a fault is undone that still count as its window (the recovery)."""
BASELINE = 6.0
"""Seconds of the workload before the first fault."""
BENCH_SECONDS = 8.0
BENCH_TASKS = 12
KV_PORT = 8760
"""Each server host's plain listener (and HAProxy's frontend): a namespace has ports of its own."""
PROXIED_PORT = 8761
"""Each server host's C{haproxy:} listener, for HAProxy's PROXY protocol header."""
PG_PORT = 5432


class Run:
    """One cluster run: its directory, network, processes, phases and history."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="chunkwire-cluster-"))
        os.chmod(self.directory, 0o755)
        self.network = Network(self.directory)
        self.postgres: Any = None
        self.phases: list[tuple[str, float, float]] = []
        self.clients: dict[str, Any] = {}

    def say(self, line: str) -> None:
        print(f"cluster: {line}", flush=True)

    def waitLog(self, path: Path, pattern: str, count: int = 1, since: int = 0) -> None:
        self.network.waitLog(path, pattern, count, since)

    # --- the hosts -----------------------------------------------------------------

    def build(self) -> None:
        from tests.postgres import PostgresServer, postgresBin
        from tests.protocols.serving.haproxy import haproxyPath

        bindir = postgresBin()
        haproxy = haproxyPath()
        try:
            import psycopg  # noqa: F401 - the servers' store and the final read need it
        except ImportError:
            raise unittest.SkipTest("psycopg is not installed (pip install 'chunkwire[postgresql]')") from None
        net = self.network
        net.open()
        self.pg = net.add("pg", 2)
        self.proxy = net.add("haproxy", 5)
        self.servers = [net.add(f"s{n}", 10 + n, tap=n == 3) for n in (1, 2, 3)]
        self.lite = net.add("lite", 14)
        self.clientHosts = [net.add(f"c{n}", 20 + n) for n in (1, 2, 3)]
        self.say(f"network {net.bridge}: {', '.join(f'{h.name} {h.address}' for h in net.hosts.values())}")
        pgDirectory = tempfile.mkdtemp(prefix="chunkwire-pg-", dir=self.directory)
        self.postgres = PostgresServer(bindir, pgDirectory, host=self.pg.address, wrapper=self.pg.prefix, port=PG_PORT)
        with open(os.path.join(self.postgres.data, "pg_hba.conf"), "a") as hba:
            hba.write(f"host all all {SUBNET}.0/24 trust\n")  # (initdb trusts 127.0.0.1 only: the hosts' subnet too)
        self.postgres.start()
        self.url = self.postgres.url
        self.say(f"PostgreSQL on {self.pg.name}: {self.url}")
        for server in self.servers:
            self.startServer(server)
        self.startServer(self.lite, store=str(self.directory / "kv.sqlite"))
        config = self.directory / "haproxy.cfg"
        config.write_text(haproxyConfig(self.proxy, self.servers))
        self.proxy.start(self.directory / "haproxy.log", haproxy, "-db", "-f", str(config))
        self.say(f"HAProxy on {self.proxy.name}: {self.proxy.address}:{KV_PORT} ({config})")

    def serverCommand(self, host: Host, store: str) -> list[str]:
        return [
            sys.executable, "-m", "twisted", "--log-format", "text", "chunkwire-kv",
            "--listen", f"tcp:{KV_PORT}:interface={host.address}",
            "--listen", f"haproxy:tcp:{PROXIED_PORT}:interface={host.address}",
            "--workers", "2", "--grace", "2", "--store", store,
        ]  # fmt: skip

    def startServer(self, host: Host, store: str | None = None) -> None:
        """Start C{twist chunkwire-kv --workers 2} on C{host}; return once both workers listen."""
        log = self.directory / f"{host.name}.log"
        since = log.stat().st_size if log.exists() else 0
        host.start(log, *self.serverCommand(host, store or self.url), env=ENV, cwd=str(ROOT))
        self.waitLog(log, r"worker \d started", 2, since)
        self.waitLog(log, r"starting on", 4, since)
        self.say(f"{host.name} {host.address}: twist chunkwire-kv --workers 2 --store {store or self.url}")

    # --- the comparison --------------------------------------------------------------

    def bench(self) -> dict[str, dict[str, float]]:
        results = {}
        plain = [f"{server.address}:{KV_PORT}" for server in self.servers]
        for name, addresses, policy in (
            ("3 hosts x 2 workers, PostgreSQL", plain, "round_robin"),
            ("1 host x 2 workers, SQLite", [f"{self.lite.address}:{KV_PORT}"], "pick_first"),
        ):
            command = ["-m", "tests.cluster.workload", "bench", ",".join(addresses), policy]
            command += ["--seconds", str(BENCH_SECONDS), "--tasks", str(BENCH_TASKS)]
            host = self.clientHosts[0]
            result = host.run("env", f"PYTHONPATH={ROOT}", sys.executable, *command)
            results[name] = json.loads(result.stdout.strip().splitlines()[-1])
            self.say(f"bench {name}: {results[name]}")
        return results

    # --- the workload and the faults ----------------------------------------------------

    def startClients(self) -> None:
        plain = [f"{server.address}:{KV_PORT}" for server in self.servers]
        modes = {
            "c1": ([f"{self.proxy.address}:{KV_PORT}"], "pick_first"),
            "c2": (plain, "round_robin"),
            "c3": (plain, "pick_first"),
        }
        names = ",".join(modes)
        for host in self.clientHosts:
            addresses, policy = modes[host.name]
            history = self.directory / f"{host.name}.history"
            command = ["-m", "tests.cluster.workload", "run", host.name, str(history), ",".join(addresses), policy]
            command += ["--hosts", names, "--writers", "4", "--watchers", "2"]
            self.clients[host.name] = host.start(
                self.directory / f"{host.name}.log", sys.executable, *command, env=ENV, cwd=str(ROOT)
            )
            self.say(f"client host {host.name}: {policy} over {', '.join(addresses)}")
        for host in self.clientHosts:
            self.waitLog(self.directory / f"{host.name}.log", f"{host.name} running")

    def fault(self, name: str, what: str, make: Callable[[], None], undo: Callable[[], None]) -> None:
        """Make a fault, hold it L{HOLD} s, undo it, let L{SETTLE} s pass: its window in L{phases} as C{name}."""
        began = time.monotonic()
        self.say(f"fault {name}: {what}")
        make()
        time.sleep(HOLD)  # (the fault's length: the workload runs meanwhile; nothing is waited for)
        undo()
        self.say(f"  undone after {time.monotonic() - began:.1f} s")
        time.sleep(SETTLE)  # (the recovery's window)
        self.phases.append((name, began, time.monotonic()))

    def faults(self) -> None:
        s1, s2, s3 = self.servers
        c1, c2, c3 = self.clientHosts
        began = time.monotonic()
        time.sleep(BASELINE)
        self.phases.append(("no fault", began, time.monotonic()))
        self.fault(
            "kill -9 s1",
            "kill -9 of s1's supervisor and workers; started again",
            s1.killAll,
            lambda: self.startServer(s1),
        )
        self.fault(
            "s2 link down", f"ip link set {s2.outside} down (s2's bridge port); up again", s2.linkDown, s2.linkUp
        )
        self.fault(
            "s3 link netem", "100 ms delay, 5% loss each way on s3's link (tests.cluster.taplink)", s3.impair, s3.repair
        )
        self.fault(
            "postgresql restart", "pg_ctl stop -m immediate, then start", self.postgres.stop, self.postgres.start
        )
        self.fault(
            "c2,c3 cut from s1",
            "blackhole routes between c2 and s1 and between c3 and s1; removed",
            lambda: cutOff([c2, c3], s1),
            lambda: reconnect([c2, c3], s1),
        )

    def stopClients(self) -> list[dict[str, Any]]:
        for process in self.clients.values():
            process.send_signal(signal.SIGUSR1)
        for name in self.clients:
            self.waitLog(self.directory / f"{name}.log", f"{name} writes stopped")
        time.sleep(NOTIFY_BOUND + 0.5)  # (the watches' bound to be told of the last puts: the check's own)
        for process in self.clients.values():
            process.send_signal(signal.SIGTERM)
        history: list[dict[str, Any]] = []
        for name, process in self.clients.items():
            self.waitLog(self.directory / f"{name}.log", f"{name} history written")
            process.wait(HANG)
            with open(self.directory / f"{name}.history") as lines:
                history.extend(json.loads(line) for line in lines)
        return history

    def table(self) -> dict[str, str]:
        command = [sys.executable, "-m", "tests.cluster.workload", "dump", self.url]
        result = self.clientHosts[0].run("env", f"PYTHONPATH={ROOT}", *command)
        found: dict[str, str] = json.loads(result.stdout.strip().splitlines()[-1])
        return found

    def close(self) -> None:
        self.network.close()
        if self.postgres is not None:
            shutil.rmtree(self.postgres.directory, ignore_errors=True)
        if os.environ.get("CHUNKWIRE_CLUSTER_KEEP"):
            self.say(f"logs kept in {self.directory}")
        else:
            shutil.rmtree(self.directory, ignore_errors=True)


def cutOff(clients: list[Host], server: Host) -> None:
    for client in clients:
        client.cutFrom(server)


def reconnect(clients: list[Host], server: Host) -> None:
    for client in clients:
        client.reconnect(server)


def haproxyConfig(proxy: Host, servers: list[Host]) -> str:
    """The how-to's configuration: its frontend on C{proxy}'s address, its servers on C{servers}' C{haproxy:} ports."""
    from tests.protocols.serving.haproxy import scalingConfig

    config = scalingConfig(KV_PORT, PROXIED_PORT, PROXIED_PORT + 1)
    config = config.replace(f"bind 127.0.0.1:{KV_PORT}", f"bind {proxy.address}:{KV_PORT}")
    lines = []
    for line in config.splitlines():
        if line.strip().startswith("server kv"):
            continue
        lines.append(line)
    lines += [f"    server kv{n} {server.address}:{PROXIED_PORT}" for n, server in enumerate(servers, 1)]
    return "\n".join(lines) + "\n"


def report(run: Run, history: list[dict[str, Any]], bench: dict[str, dict[str, float]]) -> None:
    calls = [r for r in history if r["op"] != "session"]
    print(f"\ncluster: {len(calls)} calls recorded ({sum(r['ok'] for r in calls)} answered), "
          f"{sum(r['op'] == 'session' for r in history)} watch sessions")  # fmt: skip
    print(f"{'phase':<20} {'calls':>6} {'failed':>6} {'longest gap':>12} {'p99':>9}")
    for name, start, end in run.phases:
        shown = window(history, name, start, end)
        gap = f"{shown.longestGap:.2f} s"
        print(
            f"{name:<20} {shown.calls:>6} {shown.failed:>6} {gap:>12} {shown.p99 * 1000:>6.1f} ms  ({shown.gapClient})"
        )
    print("\nthe same bench workload (puts then gets of each task's key, "
          f"{BENCH_TASKS} clients on c1, {BENCH_SECONDS:.0f} s each):")  # fmt: skip
    for name, figures in bench.items():
        print(
            f"  {name:<34} puts/s {figures['puts_per_s']:7.0f} (p50 {figures['put_p50_ms']:.1f} ms, "
            f"p99 {figures['put_p99_ms']:.1f} ms)   gets/s {figures['gets_per_s']:7.0f} "
            f"(p50 {figures['get_p50_ms']:.1f} ms, p99 {figures['get_p99_ms']:.1f} ms)"
        )
    late = lateEffects(history)
    print(
        f"\nfailed puts that ran late (allowed: a failed call may have run, and may take effect after later calls):"
        f" {len(late)} gets saw one after a later put of its writer was answered"
    )
    for line in late[:3]:
        print(f"  {line}")
    start, end = run.phases[0][1], run.phases[0][2]
    whole = watchDelays(history)
    quiet = watchDelays([r for r in history if r["op"] == "session" or start <= r["start"] < end])
    print(
        "\nwatch delay, from a put's start to its notification on another host:"
        f" no fault p50 {percentile(quiet, 0.5) * 1000:.1f} ms, p99 {percentile(quiet, 0.99) * 1000:.1f} ms"
        f" ({len(quiet)} notes); whole run p50 {percentile(whole, 0.5) * 1000:.1f} ms,"
        f" p99 {percentile(whole, 0.99) * 1000:.1f} ms ({len(whole)} notes)"
    )


def main() -> int:
    why = unavailable()
    if why:
        print(f"dev.py cluster cannot run on this machine: {why}. FAILED (not skipped).", flush=True)
        return 1
    began = time.monotonic()
    run = Run()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        try:
            run.build()
        except unittest.SkipTest as reason:
            print(f"dev.py cluster cannot run on this machine: {reason}. FAILED (not skipped).", flush=True)
            return 1
        bench = run.bench()
        run.startClients()
        run.faults()
        history = run.stopClients()
        final = run.table()
        violations = check(history, final)
        report(run, history, bench)
    finally:
        run.close()
    print(f"\ncluster: run took {time.monotonic() - began:.0f} s", flush=True)
    if violations:
        print(f"\ncluster: {len(violations)} VIOLATIONS:", flush=True)
        for line in violations[:50]:
            print(f"  {line}", flush=True)
        return 1
    print("cluster: every check passed (no lost put, no stale get, no missed change, no overrun)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
