"""TCP segments per small call on loopback: chunkwire, a token-by-token writer, and AMP, in one run.

    PYTHONPATH=. python -m tests.latency.segments [--calls 20] [--tcpdump]

Three peers, each a server and a client in this process over loopback TCP,
each making C{calls} sequential small calls (an echo of the int 42):

  - C{chunkwire}: C{protocols.rpc} as it is (one write per message, TCP_NODELAY);
  - C{token-by-token}: the same brokers, but both ends hand each token to
    the socket with its own C{send} (L{TokenByTokenTransport}; TCP_NODELAY),
    as an implementation without a coalescing transport would;
  - C{amp}: C{twisted.protocols.amp} with one C{Echo} command (Twisted's
    defaults: Nagle on).

Two ways of counting:

  - L{tcpInfo} (every Linux since 4.6; the default test): the client
    socket's C{tcpi_data_segs_out} / C{tcpi_data_segs_in} (segments that
    carried data) and C{tcpi_segs_out} / C{tcpi_segs_in} (all, pure ACKs
    included) from C{getsockopt(TCP_INFO)}, before and after the calls;
  - L{Capture} (the attack campaign, where C{tcpdump} is installed): a
    capture on C{lo} filtered on the server's port, counting the segments
    with a payload each way.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP4ServerEndpoint, connectProtocol
from twisted.internet.protocol import Factory
from twisted.internet.task import deferLater, react
from twisted.protocols import amp
from zope.interface import directlyProvides, providedBy

from framing.wire import BODY_KINDS, PREAMBLE, decode_header
from protocols.rpc._broker import Broker, BrokerFactory
from protocols.rpc._endpoints import connectWith

from ..protocols.rpc.services import Service

PEERS = ("chunkwire", "token-by-token", "amp")

# Offsets in struct tcp_info (include/uapi/linux/tcp.h): tcpi_segs_out and
# tcpi_segs_in follow tcpi_bytes_received (Linux 4.2); tcpi_data_segs_in and
# tcpi_data_segs_out follow tcpi_min_rtt (Linux 4.6).
_SEGS = struct.Struct("=II")
_SEGS_OFFSET = 136
_BYTES = struct.Struct("=QQ")  # tcpi_bytes_acked, tcpi_bytes_received (Linux 4.1, 4.2)
_BYTES_OFFSET = 120
_DATA_SEGS_OFFSET = 152


class Unsupported(Exception):
    """This system's TCP_INFO does not count segments (not Linux, or a kernel before 4.6)."""


def tcpInfo(sock: socket.socket) -> dict[str, int]:
    """
    The segment counters of C{sock}: C{segs_out}, C{segs_in} (all
    segments), C{data_segs_out}, C{data_segs_in} (segments with payload).

    @raise Unsupported: no C{TCP_INFO}, or one too short to hold them.
    """
    option = getattr(socket, "TCP_INFO", None)
    if option is None or not sys.platform.startswith("linux"):
        raise Unsupported(f"TCP_INFO segment counters are Linux's; this is {sys.platform}")
    info = sock.getsockopt(socket.IPPROTO_TCP, option, 256)
    if len(info) < _DATA_SEGS_OFFSET + _SEGS.size:
        raise Unsupported(f"struct tcp_info is {len(info)} bytes here: no tcpi_data_segs_* (Linux >= 4.6 has them)")
    segs_out, segs_in = _SEGS.unpack_from(info, _SEGS_OFFSET)
    data_in, data_out = _SEGS.unpack_from(info, _DATA_SEGS_OFFSET)
    acked, received = _BYTES.unpack_from(info, _BYTES_OFFSET)
    return {
        "segs_out": segs_out,
        "segs_in": segs_in,
        "data_segs_out": data_out,
        "data_segs_in": data_in,
        "bytes_acked": acked,
        "bytes_received": received,
    }


# -- the token-by-token variant ----------------------------------------------------------------


def splitTokens(data: bytes) -> list[bytes]:
    """C{data} (whole tokens, perhaps after the preamble) cut at every token boundary."""
    pieces, pos = [], 0
    if data.startswith(PREAMBLE):
        pieces.append(PREAMBLE)
        pos = len(PREAMBLE)
    while pos < len(data):
        decoded = decode_header(data, pos, len(data))
        assert decoded is not None, "a write ended inside a header"
        kind, value, length = decoded
        end = pos + length + (value if kind in BODY_KINDS else 0)
        pieces.append(data[pos:end])
        pos = end
    return pieces


class TokenByTokenTransport:
    """
    Wraps a Twisted TCP transport: every write is cut into tokens and each
    token goes to the socket with its own C{send} (TCP_NODELAY on), so each
    can leave as its own segment, as with a writer that sends every token
    as it encodes it.  Test-only.
    """

    def __init__(self, transport: Any) -> None:
        self.transport = transport
        directlyProvides(self, providedBy(transport))
        transport.setTcpNoDelay(True)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)

    def write(self, data: bytes) -> None:
        sock = self.transport.getHandle()
        for token in splitTokens(bytes(data)):
            view = memoryview(token)
            while view:
                try:
                    view = view[sock.send(view) :]
                except BlockingIOError:
                    select_wait(sock)

    def writeSequence(self, data: Any) -> None:
        self.write(b"".join(data))


def select_wait(sock: socket.socket) -> None:
    import select

    select.select([], [sock], [], 1.0)


class TokenByTokenFactory(BrokerFactory):
    """Brokers whose transport is a L{TokenByTokenTransport} under the usual coalescing transport."""

    def buildProtocol(self, addr: Any) -> Broker:
        broker = super().buildProtocol(addr)
        makeConnection = broker.makeConnection
        broker.makeConnection = lambda transport: makeConnection(TokenByTokenTransport(transport))  # type: ignore[method-assign]
        return broker


# -- AMP --------------------------------------------------------------------------------------


class Echo(amp.Command):
    arguments = [(b"value", amp.Integer())]
    response = [(b"value", amp.Integer())]


class EchoAMP(amp.AMP):
    @Echo.responder
    def echo(self, value: int) -> dict[str, int]:
        return {"value": value}


# -- one peer ------------------------------------------------------------------------------------


class _Peer:
    """A server and a connected client of one peer; L{call} makes one echo; L{socket} is the client's."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.port: Any = None
        self.client: Any = None

    async def start(self, reactor: Any) -> _Peer:
        endpoint = TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1")
        if self.name == "amp":
            self.port = await endpoint.listen(Factory.forProtocol(EchoAMP))
            self.client = await connectProtocol(
                TCP4ClientEndpoint(reactor, "127.0.0.1", self.port.getHost().port), EchoAMP()
            )
            self.socket = self.client.transport.getHandle()
            return self
        factoryClass = TokenByTokenFactory if self.name == "token-by-token" else BrokerFactory
        self.port = await endpoint.listen(factoryClass(Service(), clock=reactor))
        description = f"tcp:host=127.0.0.1:port={self.port.getHost().port}"
        self.client = await connectWith(reactor, description, factoryClass(clock=reactor))
        self.socket = self.client.broker.transport.getHandle()
        return self

    @property
    def serverPort(self) -> int:
        return int(self.port.getHost().port)

    async def call(self) -> None:
        if self.name == "amp":
            answer = (await self.client.callRemote(Echo, value=42))["value"]
        else:
            answer = await self.client.callRemote("echo", 42)
        assert answer == 42, answer

    async def stop(self) -> None:
        if self.name == "amp":
            self.client.transport.loseConnection()
        else:
            await self.client.broker.disconnect()
        await self.port.stopListening()


SETTLE = 0.25
"""Seconds to wait before and after counting: delayed ACKs (40 ms and up) go out meanwhile."""


async def countPeer(reactor: Any, name: str, calls: int, capture: bool = False) -> dict[str, Any]:
    """C{calls} sequential echoes on a warmed connection of C{name}; their segment counts per call."""
    peer = await _Peer(name).start(reactor)
    try:
        await peer.call()  # connection set-up and the preamble are not counted
        recorder = Capture(peer.serverPort) if capture else None
        await deferLater(reactor, SETTLE, lambda: None)
        before = tcpInfo(peer.socket)
        for _ in range(calls):
            await peer.call()
        await deferLater(reactor, SETTLE, lambda: None)
        after = tcpInfo(peer.socket)
        result: dict[str, Any] = {key: (after[key] - before[key]) / calls for key in after}
        result["nodelay"] = bool(peer.socket.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        if recorder is not None:
            dump = result["tcpdump"] = recorder.stop(peer.serverPort, calls)
            moved = (after["bytes_acked"] - before["bytes_acked"], after["bytes_received"] - before["bytes_received"])
            if (dump["bytes_up"], dump["bytes_down"]) != moved:
                # The capture must account for every byte TCP_INFO says moved, or its counts are short.
                raise Unsupported(
                    f"tcpdump missed packets: it saw {dump['bytes_up']}/{dump['bytes_down']} bytes, TCP moved {moved}"
                )
        return result
    finally:
        await peer.stop()


async def countAll(reactor: Any, calls: int, capture: bool = False) -> dict[str, dict[str, Any]]:
    """L{countPeer} for every peer, in one run."""
    return {name: await countPeer(reactor, name, calls, capture) for name in PEERS}


# -- tcpdump -------------------------------------------------------------------------------------


def captureTool() -> str | None:
    """The path of tcpdump, if installed."""
    return shutil.which("tcpdump")


class Capture:
    """
    C{tcpdump -i lo} filtered on one server port, running until L{stop};
    counts the segments with a payload each way.
    """

    LINE = re.compile(rb"127\.0\.0\.1\.(\d+) > 127\.0\.0\.1\.(\d+): .* length (\d+)")

    def __init__(self, port: int) -> None:
        tool = captureTool()
        if tool is None:
            raise Unsupported("tcpdump is not installed")
        # To a file, not a pipe: a pipe nobody reads until the end fills up
        # (64 KiB, about 400 lines) and then tcpdump stops taking packets.
        self.output = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [tool, "-i", "lo", "-nn", "-l", f"tcp port {port}"],
            stdout=self.output,
            stderr=subprocess.PIPE,
        )
        self._waitListening()

    def _waitListening(self) -> None:
        # tcpdump says "listening on lo" on stderr once the capture is armed.
        import select

        assert self.process.stderr is not None
        fd, seen, deadline = self.process.stderr.fileno(), b"", time.monotonic() + 10
        while b"listening on" not in seen:
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise Unsupported(f"tcpdump did not start: {seen.decode(errors='replace')[-300:]}")
            if select.select([fd], [], [], 0.2)[0]:
                seen += __import__("os").read(fd, 4096)

    def stop(self, serverPort: int, calls: int) -> dict[str, float]:
        """
        Stop the capture; return data segments per call up (to the server) and down.

        @raise Unsupported: tcpdump did not process every packet its filter
            matched (its own count says so), so the figures would be short.
        """
        time.sleep(0.2)  # the last packets reach tcpdump's output
        self.process.send_signal(signal.SIGINT)
        self.process.communicate(timeout=10)
        self.output.seek(0)
        out = self.output.read()
        self.output.close()
        up = down = upBytes = downBytes = 0
        for match in self.LINE.finditer(out):
            source, length = int(match.group(1)), int(match.group(3))
            if length == 0:
                continue  # a pure ACK
            if source == serverPort:
                down, downBytes = down + 1, downBytes + length
            else:
                up, upBytes = up + 1, upBytes + length
        return {
            "data_segs_up": up / calls,
            "data_segs_down": down / calls,
            "bytes_up": upBytes,
            "bytes_down": downBytes,
        }


# -- the report ----------------------------------------------------------------------------------


def table(results: dict[str, dict[str, Any]]) -> str:
    """The counts as a Markdown table (per call)."""
    rows = [
        "| peer | TCP_NODELAY | data segments up | data segments down | all segments out | all segments in "
        "| tcpdump: data up | tcpdump: data down |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        dump = r.get("tcpdump", {})
        rows.append(
            f"| {name} | {'on' if r['nodelay'] else 'off'} | {r['data_segs_out']:.2f} | {r['data_segs_in']:.2f} "
            f"| {r['segs_out']:.2f} | {r['segs_in']:.2f} "
            f"| {dump.get('data_segs_up', '-') if not dump else format(dump['data_segs_up'], '.2f')} "
            f"| {dump.get('data_segs_down', '-') if not dump else format(dump['data_segs_down'], '.2f')} |"
        )
    return "\n".join(rows)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.latency.segments", description=__doc__)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--tcpdump", action="store_true", help="also count with a tcpdump capture (needs root)")
    parser.add_argument("--json", help="write the counts here")
    args = parser.parse_args(argv)

    async def body(reactor: Any) -> None:
        results = await countAll(reactor, args.calls, args.tcpdump)
        print(table(results), flush=True)
        if args.json:
            with open(args.json, "w") as out:
                json.dump(results, out, indent=1)

    react(lambda reactor: Deferred.fromCoroutine(body(reactor)))


if __name__ == "__main__":
    main(sys.argv[1:])
