"""A server that floods its one client with PINGs (and calls) and reads nothing (the clients' flood tests)."""

from __future__ import annotations

import socket
import threading
from typing import Any

from framing import Encoder, Registry
from framing.rpc._wire import CALL, Message, addMessageTypes
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import PING, PREAMBLE, encode_header

HANG = 60.0
"""Seconds within which anything that is not a hang finishes."""

REGISTRY = Registry(DEFAULT_REGISTRY)
addMessageTypes(REGISTRY)


class FloodingServer:
    """
    A listening socket whose one connection gets the preamble, then
    batches of PINGs, and with C{calls} of CALLs too (to export 77, which
    the client does not have), as fast as the socket takes them; nothing is
    ever read from it.  Each PING earns a PONG: the client holds its
    replies until its ledger's budget.  Each CALL earns a FAIL and is a
    refusal: the client drops the connection past the refusal rate
    (L{framing._refusals}), within the first thousand.
    """

    def __init__(self, test: Any, calls: bool = False) -> None:
        self.calls = calls
        self.listener = socket.socket()
        # (inherited by the accepted socket: the client's replies fill it at once)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.sent = 0
        self._stopped = threading.Event()
        self._connection: socket.socket | None = None
        self._thread = threading.Thread(target=self._flood, daemon=True)
        self._thread.start()
        test.addCleanup(self.stop)

    def _flood(self) -> None:
        encoder = Encoder(REGISTRY)
        try:
            connection, _ = self.listener.accept()
        except OSError:
            return
        self._connection = connection
        requestId = 1
        try:
            connection.sendall(PREAMBLE)
            while not self._stopped.is_set():
                pieces = []
                for _ in range(500):
                    if self.calls:
                        pieces.append(encoder.encode(Message((CALL, requestId, 77, "poke", (), {}))))
                    pieces.append(encode_header(PING, requestId))
                    requestId += 1
                batch = b"".join(pieces)
                connection.sendall(batch)
                self.sent += len(batch)
        except OSError:
            pass  # (the client closed: the flood is over)

    def stop(self) -> None:
        self._stopped.set()
        self.listener.close()
        if self._connection is not None:
            try:
                self._connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(HANG)
        if self._connection is not None:
            self._connection.close()
