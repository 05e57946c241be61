"""A latent link made by the kernel: two network namespaces joined by a veth pair, netem delaying both ends.

    sudo PYTHONPATH=. python -m tests.latency.netem            # set up, measure, tear down; prints figures

Contract: L{NetemLink.create} either returns a working link (namespaces,
addresses, C{netem delay} on each end, so one round trip is C{2 * delay})
or raises L{Unavailable} saying exactly which step failed and why (not
root, no C{ip}/C{tc}, namespaces refused, no C{sch_netem} in the kernel),
having removed whatever it made.  L{NetemLink.destroy} removes the
namespaces (and with them the veth pair).  L{measure} runs the RPC server
in one namespace and a client in the other (C{python -m
tests.latency.netem serve|call}) and returns the client's figures.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any

from tests.processes import readUntil, stop

from ..faults.support import ENV, ROOT

SERVER_ADDRESS = "10.231.77.2"
CLIENT_ADDRESS = "10.231.77.1"


class Unavailable(Exception):
    """This machine cannot make the link; the message says why (it is the skip reason)."""


def explain(command: list[str], stderr: str) -> str:
    """Why C{command} failed, in words a skip message can carry."""
    said = " ".join(stderr.split())[:200]
    shown = " ".join(command)
    if "netem" in command and ("qdisc kind is unknown" in stderr or "No such file or directory" in stderr):
        return f"this kernel lacks sch_netem: `{shown}` said: {said}"
    if "Operation not permitted" in stderr or "Permission denied" in stderr:
        return f"not permitted to make network namespaces here: `{shown}` said: {said}"
    return f"`{shown}` failed: {said}"


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=20)
    if done.returncode != 0:
        raise Unavailable(explain(command, done.stderr or done.stdout))


class NetemLink:
    """
    Namespaces C{client} and C{server} joined by a veth pair, each end
    delayed C{delay} seconds by netem.
    """

    def __init__(self, delay: float) -> None:
        tag = f"{os.getpid()}"
        self.delay = delay
        self.client, self.server = f"cwnetem-c{tag}", f"cwnetem-s{tag}"
        self.made: list[str] = []

    @classmethod
    def create(cls, delay: float = 0.05) -> NetemLink:
        """Make the link, or raise L{Unavailable} with the reason (and leave nothing behind)."""
        if not sys.platform.startswith("linux"):
            raise Unavailable(f"network namespaces and netem are Linux features; this is {sys.platform}")
        missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
        if missing:
            raise Unavailable(f"iproute2 is not installed (no {' or '.join(missing)} on PATH)")
        if os.geteuid() != 0:
            raise Unavailable("making network namespaces and netem qdiscs needs root (CAP_NET_ADMIN)")
        link = cls(delay)
        try:
            link._build()
        except BaseException:
            link.destroy()
            raise
        return link

    def _build(self) -> None:
        milliseconds = f"{self.delay * 1000:g}ms"
        for namespace in (self.client, self.server):
            _run(["ip", "netns", "add", namespace])
            self.made.append(namespace)
        _run(
            [
                "ip",
                "link",
                "add",
                "cwc",
                "netns",
                self.client,
                "type",
                "veth",
                "peer",
                "name",
                "cws",
                "netns",
                self.server,
            ]
        )
        for namespace, device, address in ((self.client, "cwc", CLIENT_ADDRESS), (self.server, "cws", SERVER_ADDRESS)):
            inside = ["ip", "netns", "exec", namespace]
            _run([*inside, "ip", "addr", "add", f"{address}/24", "dev", device])
            _run([*inside, "ip", "link", "set", device, "up"])
            _run([*inside, "ip", "link", "set", "lo", "up"])
            _run([*inside, "tc", "qdisc", "add", "dev", device, "root", "netem", "delay", milliseconds])

    def destroy(self) -> None:
        """Remove the namespaces made (the veth pair goes with them)."""
        for namespace in self.made:
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, timeout=20)
        self.made = []

    def inside(self, namespace: str, *command: str) -> list[str]:
        return ["ip", "netns", "exec", namespace, *command]


def measure(link: NetemLink, calls: int = 20) -> dict[str, Any]:
    """Serve in one namespace, call from the other; return the client's figures (seconds)."""
    server = subprocess.Popen(
        link.inside(link.server, sys.executable, "-m", "tests.latency.netem", "serve"),
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.PIPE,
    )
    try:
        port = readUntil(server, rb'"port": (\d+)').group(1).decode()
        done = subprocess.run(
            link.inside(link.client, sys.executable, "-m", "tests.latency.netem", "call", port, str(calls)),
            cwd=ROOT,
            env=ENV,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode != 0:
            raise AssertionError(f"the client failed: {done.stderr[-2000:]}")
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result
    finally:
        stop(server)


def _serve() -> None:
    from twisted.internet.defer import Deferred
    from twisted.internet.task import react

    from protocols import rpc

    from ..protocols.rpc.services import Service

    async def body(reactor: Any) -> None:
        port = await rpc.serve(reactor, f"tcp:0:interface={SERVER_ADDRESS}", Service())
        print(json.dumps({"port": port.getHost().port}), flush=True)
        await Deferred()

    react(lambda reactor: Deferred.fromCoroutine(body(reactor)))


def _call(port: int, calls: int) -> None:
    from twisted.internet.defer import Deferred
    from twisted.internet.task import react

    from protocols import rpc

    async def body(reactor: Any) -> None:
        started = time.perf_counter()
        ref = await rpc.connect(reactor, f"tcp:host={SERVER_ADDRESS}:port={port}")
        connected = time.perf_counter()  # the TCP handshake: one RTT, before chunkwire sends anything
        assert await ref.callRemote("echo", 42) == 42
        first = time.perf_counter()
        for index in range(calls):
            assert await ref.callRemote("echo", index) == index
        done = time.perf_counter()
        print(
            json.dumps(
                {
                    "handshake_s": connected - started,
                    "first_answer_s": first - connected,
                    "sequential_s": (done - first) / calls,
                }
            ),
            flush=True,
        )
        await ref.broker.disconnect()

    react(lambda reactor: Deferred.fromCoroutine(body(reactor)))


FIRST_ANSWER_TARGET = 1.1
"""Connect to first answer, in RTTs, that C{dev.py attack} holds this link to."""
SEQUENTIAL_TARGET = 1.02
"""Each sequential call, in RTTs, that C{dev.py attack} holds this link to."""


def main(argv: list[str]) -> None:
    if argv[:1] == ["serve"]:
        _serve()
    elif argv[:1] == ["call"]:
        _call(int(argv[1]), int(argv[2]))
    else:
        try:
            link = NetemLink.create()
        except Unavailable as reason:
            print(f"netem: skipped: {reason}")
            return
        try:
            result = measure(link)
        finally:
            link.destroy()
        rtt = 2 * link.delay
        first, sequential = result["first_answer_s"] / rtt, result["sequential_s"] / rtt
        met = first <= FIRST_ANSWER_TARGET and sequential <= SEQUENTIAL_TARGET
        print(
            f"netem, {rtt * 1e3:.0f} ms RTT: handshake {result['handshake_s'] / rtt:.3f} RTT, first answer"
            f" {first:.3f} RTT after connecting (target <= {FIRST_ANSWER_TARGET}),"
            f" sequential {sequential:.4f} RTT (target <= {SEQUENTIAL_TARGET}): {'met' if met else 'MISSED'}"
        )
        if not met:
            raise SystemExit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
