"""Logging in and calling through a typed interface from a plain script: still no Twisted imported."""

import sys

# The service and the part of its interface these snippets call (docs/snippets/_kv_service.py).
from _kv_service import IKeyValue, startKeyValueServer

from protocols.options import ClientOptions

server, port, token = startKeyValueServer(logins=True)

# -- the client ------------------------------------------------------------------------------
from framing import Violation  # noqa: E402
from framing.login import LoginRefused, Password, Token  # noqa: E402
from protocols.blocking import connect  # noqa: E402

try:
    address = f"127.0.0.1:{port}"
    with connect(
        address, interface=IKeyValue, options=ClientOptions(credentials=Password("ada", "ada's secret"))
    ) as connection:
        kv = connection.root
        kv.put("greeting", "hello")
        print("ada reads:", kv.get("greeting"))
        try:
            kv.get("k" * 2000)
        except Violation as error:
            print("refused here, nothing sent:", error.where)
    with connect(address, interface=IKeyValue, options=ClientOptions(credentials=Token(token))) as connection:
        print("build-bot reads:", connection.root.get("greeting"))
    try:
        connect(address, options=ClientOptions(credentials=Password("ada", "a guess")))
    except LoginRefused as error:
        print("wrong password:", error)
    print("twisted imported:", "twisted" in sys.modules)
finally:
    server.terminate()
    server.wait()
