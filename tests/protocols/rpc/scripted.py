# -*- test-case-name: tests.protocols.rpc.test_same_bytes,tests.protocols.rpc.test_same_answers -*-
"""A peer played from a script over a raw socket, recording what the shell under test sends.

Contract: L{ScriptedSide} runs its C{script} on a thread of its own over one
TCP connection on 127.0.0.1 (listening on port 0 for the shell to connect,
L{ScriptedSide.listen}, or connecting to the shell's port,
L{ScriptedSide.connectTo}), speaking the wire format with a plain
L{framing.Encoder} and L{framing.Decoder}.  Each step's bytes are all the
shell sent between two of the script's sends (how the shell cut them into
writes is no difference), kept with what they decoded to.  Every wait is
bounded by L{WAIT}: only a hang misses it.  Used by
C{tests/protocols/rpc/test_same_bytes.py} (the calling side) and
C{tests/protocols/rpc/test_same_answers.py} (the answering side).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

from framing import Decoder, Encoder, Limits, Registry
from framing.rpc._streams import addFlowTypes
from framing.rpc._wire import addMessageTypes
from framing.slicing._registry import DEFAULT_REGISTRY

WAIT = 60.0
"""Seconds the peer waits for a shell's bytes, and a shell for the peer: only a hang misses it."""


def peerRegistry() -> Registry:
    """What the peer decodes: RPC and flow messages (a reference or a stream announcement is refused, as one object)."""
    registry = Registry(DEFAULT_REGISTRY)
    addMessageTypes(registry)
    addFlowTypes(registry)
    return registry


class ScriptedSide:
    """
    One end of a connection played from L{script} on a thread of its own,
    recording the other end's bytes step by step.

    @ivar port: the port listened on (L{listen}), or connected to (L{connectTo}).
    @ivar steps: per step, the name of the step and the bytes the shell
        sent in it, in order.
    @ivar objects: per step, what those bytes decoded to.
    @ivar ended: set once the script is over (or failed).
    @ivar error: why the script failed, or C{None}.
    """

    def __init__(self) -> None:
        self.port = 0
        self.steps: list[tuple[str, bytes]] = []
        self.objects: list[list[Any]] = []
        self.ended = threading.Event()
        self.error: BaseException | None = None
        registry = peerRegistry()
        self.decoder = Decoder(Limits(), registry)
        self.encoder = Encoder(registry)
        self._held: list[Any] = []
        self._sock: socket.socket

    def script(self) -> None:
        """This side's half of the conversation: the subclass's."""
        raise NotImplementedError

    # -- starting and ending ------------------------------------------------

    def listen(self) -> None:
        """Listen on 127.0.0.1 (port 0: L{port} says which) and play the script to the one shell that connects."""
        listener = socket.create_server(("127.0.0.1", 0))
        self.port = listener.getsockname()[1]

        def accept() -> socket.socket:
            try:
                listener.settimeout(WAIT)
                return listener.accept()[0]
            finally:
                listener.close()

        self._start(accept)

    def connectTo(self, port: int) -> None:
        """Connect to the shell listening on 127.0.0.1 C{port} and play the script to it."""
        self.port = port
        self._start(lambda: socket.create_connection(("127.0.0.1", port), WAIT))

    def _start(self, connect: Callable[[], socket.socket]) -> None:
        self._thread = threading.Thread(target=self._run, args=(connect,), name="scripted-peer", daemon=True)
        self._thread.start()

    def _run(self, connect: Callable[[], socket.socket]) -> None:
        try:
            with connect() as connection:
                connection.settimeout(WAIT)
                self._sock = connection
                self.script()
        except BaseException as error:
            self.error = error
        finally:
            self.ended.set()

    def join(self) -> None:
        """Wait for the script's end (a hang fails after L{WAIT}); raise why it failed, if it did."""
        self._thread.join(WAIT * 2)
        if self._thread.is_alive():
            raise AssertionError("the scripted peer did not finish")
        if self.error is not None:
            raise self.error

    # -- what a script is made of -------------------------------------------

    def send(self, *messages: Any) -> None:
        """Send C{messages} (bytes as they are, else encoded) in one write."""
        data = b"".join(m if type(m) is bytes else self.encoder.encode(m) for m in messages)
        self._sock.sendall(data)

    def expect(self, name: str, count: int) -> list[Any]:
        """Read until C{count} more objects (PONGs counted) came: the step C{name}."""
        return self.read(name, lambda got: len(got) >= count)

    def read(self, name: str, done: Callable[[list[Any]], bool]) -> list[Any]:
        """Read until what came in this step is C{done}: the step C{name}, recorded; what came."""
        decoder = self.decoder
        got = self._held
        self._held = []
        data = b""
        while not done(got):
            chunk = self._sock.recv(65536)
            if not chunk:
                raise AssertionError(f"step {name!r}: the shell closed after {data!r}, having sent {got!r}")
            data += chunk
            got.extend(decoder.feed(chunk))
            got.extend(decoder.control_events)
            decoder.control_events.clear()
        self.steps.append((name, data))
        self.objects.append(got)
        return got

    def expectEnd(self) -> None:
        """Read until the shell closes the connection (a reset counts as a close): the last step, C{"end"}."""
        data = b""
        while True:
            try:
                chunk = self._sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
        self.steps.append(("end", data))
        self.objects.append(self.decoder.feed(data) if data else [])
