"""Logging in and calling through a typed interface from an asyncio application: still no Twisted imported."""

import sys

# The service and the part of its interface these snippets call (docs/snippets/_kv_service.py).
from _kv_service import IKeyValue, startKeyValueServer

from framing.rpc import CallLimits
from protocols.options import ClientOptions

server, port, token = startKeyValueServer(logins=True)

# -- the client ------------------------------------------------------------------------------
import asyncio  # noqa: E402

from framing import Violation  # noqa: E402
from framing.login import LoginRefused, Password, Token  # noqa: E402
from protocols.asyncioclient import connect  # noqa: E402


async def main() -> None:
    address = f"127.0.0.1:{port}"
    ada = Password("ada", "ada's secret")
    async with await connect(
        address, interface=IKeyValue, options=ClientOptions(credentials=ada, callLimits=CallLimits(callTimeout=10))
    ) as connection:
        kv = connection.root
        await kv.put("greeting", "hello")
        print("ada reads:", await kv.get("greeting"))
        try:
            await kv.get("k" * 2000)  # refused when called, before anything is sent
        except Violation as error:
            print("refused here, nothing sent:", error.where)
    async with await connect(
        address, interface=IKeyValue, options=ClientOptions(credentials=Token(token))
    ) as connection:
        print("build-bot reads:", await connection.root.get("greeting"))
    try:
        await connect(address, options=ClientOptions(credentials=Password("ada", "a guess")))
    except LoginRefused as error:
        print("wrong password:", error)


try:
    asyncio.run(main())
    print("twisted imported:", "twisted" in sys.modules)
finally:
    server.terminate()
    server.wait()
