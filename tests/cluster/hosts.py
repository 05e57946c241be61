"""Hosts on one machine: Linux network namespaces on one bridge, their processes, and the faults made to them.

Contract: a L{Network} named after this process's id makes one bridge
(C{cwPIDbr}) and, per L{Network.add}, one namespace (C{cwPID-NAME}) with
its loopback up and a veth pair, one end (C{cwPIDhN}) on the bridge, the
other (C{cwPIDnN}) inside with the host's address in 10.41.0.0/24.  The
names hold the pid, so two runs never share one; the root namespace gets
no address (the hosts reach each other only).  L{Network.close} kills
every process left in each namespace (by its pid, as C{ip netns pids}
lists them: all of them this run's), deletes the namespaces (which
deletes their veth pairs) and the bridge; it is safe to call twice and
after a partial setup, and the run calls it on every way out (its end, an
error, Ctrl-C, SIGTERM).

The faults (each undone by its pair): L{Host.killAll} (C{kill -9} of every
process of the host), L{Host.linkDown} / L{Host.linkUp} (its bridge port,
C{ip link set down}), L{Host.impair} / L{Host.repair} (C{tc netem} delay
and loss on both ends of its link), L{Host.cutFrom} / L{Host.reconnect}
(C{tc} filters in this host's namespace dropping every packet to and from
one other host's address: a silent cut of that pair alone).

Cost: each step is one or a few C{ip}/C{tc} commands (milliseconds).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[2]
HANG = 60.0
"""Seconds within which anything that is not a hang happens, however loaded the machine."""
SUBNET = "10.41.0"
"""The hosts' /24 (inside the namespaces only: each run has its own bridge)."""


def sh(*command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run one command; raise with its output if it fails and C{check}."""
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}): {result.stdout}{result.stderr}")
    return result


def unavailable() -> str | None:
    """Why this machine cannot run the cluster (no root, no ip, no netns, no tc), or None."""
    if os.geteuid() != 0:
        return "it needs root (network namespaces, veth pairs, a bridge, tc)"
    for tool in ("ip", "tc"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            return f"{tool} is missing (apt-get install -y iproute2)"
    probe = f"cw{os.getpid()}-probe"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


class Host:
    """One namespace: its name, address, bridge port, and the processes started in it."""

    def __init__(self, network: Network, name: str, number: int) -> None:
        self.network = network
        self.name = name
        self.namespace = f"cw{network.pid}-{name}"
        self.address = f"{SUBNET}.{number}"
        self.outside = f"cw{network.pid}h{number}"
        self.inside = f"cw{network.pid}n{number}"
        self.processes: list[subprocess.Popen[bytes]] = []
        self.tapLink: subprocess.Popen[bytes] | None = None
        self.tapLog = network.directory / f"{name}-link.log"

    @property
    def prefix(self) -> tuple[str, ...]:
        """What runs a command in this host's namespace."""
        return ("ip", "netns", "exec", self.namespace)

    def run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return sh(*self.prefix, *command, check=check)

    def start(self, log: Path, *command: str, env: dict[str, str] | None = None, cwd: str | None = None) -> Any:
        """Start C{command} in this namespace, its output (both streams) appended to C{log}."""
        out: IO[bytes] = open(log, "ab")  # noqa: SIM115 - the process holds it
        process = subprocess.Popen(
            [*self.prefix, *command], stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True
        )
        out.close()
        self.processes.append(process)
        return process

    def pids(self) -> list[int]:
        listed = sh("ip", "netns", "pids", self.namespace, check=False).stdout.split()
        return [int(pid) for pid in listed]

    def killAll(self) -> None:
        """C{kill -9} every process in the namespace, and reap the ones this run started."""
        for _ in range(50):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for process in self.processes:
                if process.poll() is None:
                    try:
                        process.wait(1)
                    except subprocess.TimeoutExpired:
                        pass
            time.sleep(0.02)  # (until the kernel has them gone; looked at again)
        self.processes = [process for process in self.processes if process.poll() is None]

    def linkDown(self) -> None:
        sh("ip", "link", "set", self.outside, "down")

    def linkUp(self) -> None:
        sh("ip", "link", "set", self.outside, "up")

    def impair(self) -> None:
        """Delay and loss on this host's link, each way (a link made with C{tap}: see L{tests.cluster.taplink})."""
        assert self.tapLink is not None, f"{self.name}'s link is a veth pair: only a TAP link can be impaired here"
        before = self.network.countIn(self.tapLog, "link impaired")  # (counted first: the line may come at once)
        self.tapLink.send_signal(signal.SIGUSR1)
        self.network.waitLog(self.tapLog, "link impaired", before + 1)

    def repair(self) -> None:
        assert self.tapLink is not None
        before = self.network.countIn(self.tapLog, "link repaired")
        self.tapLink.send_signal(signal.SIGUSR2)
        self.network.waitLog(self.tapLog, "link repaired", before + 1)

    def cutFrom(self, other: Host) -> None:
        """Drop every packet between this host and C{other}, silently: blackhole routes, in both namespaces."""
        self.run("ip", "route", "add", "blackhole", f"{other.address}/32")
        other.run("ip", "route", "add", "blackhole", f"{self.address}/32")

    def reconnect(self, other: Host) -> None:
        self.run("ip", "route", "del", "blackhole", f"{other.address}/32", check=False)
        other.run("ip", "route", "del", "blackhole", f"{self.address}/32", check=False)


class Network:
    """The bridge and the hosts of one run (see the module's contract)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.pid = os.getpid()
        self.bridge = f"cw{self.pid}br"
        self.hosts: dict[str, Host] = {}
        self.made = False

    def open(self) -> None:
        self.made = True
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "link", "set", self.bridge, "up")

    def add(self, name: str, number: int, tap: bool = False) -> Host:
        """
        A host: a namespace, and its link to the bridge, a veth pair, or
        with C{tap} two TAP devices with L{tests.cluster.taplink} between
        them (which L{Host.impair} can delay and drop).
        """
        host = Host(self, name, number)
        self.hosts[name] = host
        sh("ip", "netns", "add", host.namespace)
        host.run("ip", "link", "set", "lo", "up")
        if tap:
            link = [sys.executable, "-m", "tests.cluster.taplink", host.inside, host.outside, "0.1", "0.05"]
            with open(host.tapLog, "ab") as out:
                host.tapLink = subprocess.Popen(link, stdout=out, stderr=subprocess.STDOUT, cwd=str(ROOT))
            self.waitLog(host.tapLog, "link ready")
        else:
            sh("ip", "link", "add", host.outside, "type", "veth", "peer", "name", host.inside)
        sh("ip", "link", "set", host.inside, "netns", host.namespace)
        sh("ip", "link", "set", host.outside, "master", self.bridge)
        sh("ip", "link", "set", host.outside, "up")
        host.run("ip", "addr", "add", f"{host.address}/24", "dev", host.inside)
        host.run("ip", "link", "set", host.inside, "up")
        return host

    def countIn(self, path: Path, pattern: str) -> int:
        text = path.read_bytes().decode(errors="replace") if path.exists() else ""
        return len(re.findall(pattern, text))

    def waitLog(self, path: Path, pattern: str, count: int = 1, since: int = 0) -> None:
        """Until C{path} (from byte C{since}) holds C{pattern} C{count} times; fail after L{HANG} seconds."""
        deadline = time.monotonic() + HANG
        while True:
            text = path.read_bytes()[since:].decode(errors="replace") if path.exists() else ""
            if len(re.findall(pattern, text)) >= count:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{path.name} did not say {pattern!r} {count} times in {HANG} s:\n{text[-3000:]}")
            time.sleep(0.05)  # (the log is looked at again: waiting for the line, not for a time)

    def close(self) -> None:
        """Kill what runs in the namespaces, delete them and the bridge (also what a partial setup left)."""
        if not self.made:
            return
        for host in self.hosts.values():
            host.killAll()
            if host.tapLink is not None and host.tapLink.poll() is None:
                host.tapLink.kill()
                host.tapLink.wait()
        mine = re.compile(rf"^cw{self.pid}-\S+")
        for line in sh("ip", "netns", "list", check=False).stdout.splitlines():
            found = mine.match(line)
            if found:
                sh("ip", "netns", "del", found.group(0), check=False)
        for host in self.hosts.values():
            sh("ip", "link", "del", host.outside, check=False)  # (gone with its namespace, unless it never moved)
        sh("ip", "link", "del", self.bridge, check=False)
        self.made = False
