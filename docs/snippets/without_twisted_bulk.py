"""Uploading and downloading files without Twisted: the blocking and the asyncio bulk clients, resumable and checked."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from protocols.options import ClientOptions

# The service: the bulk example server on a directory of its own, started so that the snippet runs as it is
# (in real use it already runs somewhere: python examples/bulk_server.py --listen tcp:8770 --dir /srv/files).
work = Path(tempfile.mkdtemp())
server = subprocess.Popen(
    [sys.executable, "examples/bulk_server.py", "--listen", "tcp:0:interface=127.0.0.1", "--dir", str(work / "served")],
    stdout=subprocess.PIPE,
    text=True,
)
assert server.stdout is not None
port = next(int(found.group(1)) for line in server.stdout if (found := re.search(r"port=(\d+)", line)))
report = work / "report.bin"
report.write_bytes(os.urandom(3_000_000))

# -- the client ------------------------------------------------------------------------------
import asyncio  # noqa: E402

from framing.bulk import NoSuchFile  # noqa: E402
from protocols import asynciobulk, blockingbulk  # noqa: E402

with blockingbulk.connect(f"127.0.0.1:{port}", options=ClientOptions(timeout=10)) as connection:
    # Resumable: openUpload says what the service holds, only the rest is sent, finishUpload checks the digest.
    sent = connection.upload(report, "report.bin")
    print("uploaded:", sent.size, "bytes,", sent.algorithm, "checked by the service")
    # Into .copy.bin.part first; copy.bin appears only once the whole file has the service's digest.
    fetched = connection.download("report.bin", work / "copy.bin")
    print("downloaded; same digest:", fetched.digest == sent.digest)
    try:
        connection.download("absent.bin", work / "absent.bin")
    except NoSuchFile as error:
        print("no such file:", error.name)
    # A file as an argument of one's own method: fileStream(path) is a SendStream of it (here, the service's put).
    hexdigest = connection.root.callRemote("put", "own.bin", blockingbulk.fileStream(report))
    print("own method got the file; same digest:", bytes.fromhex(hexdigest) == sent.digest)

# After a cut, the same call resumes from what the receiver holds; sendFile and fetchFile reconnect by themselves.
again = blockingbulk.sendFile(lambda: blockingbulk.connect(f"127.0.0.1:{port}"), report, "report.bin")
print("sent again, resumed from:", again.resumedFrom, "bytes")


async def main() -> None:
    async with await asynciobulk.connect(f"127.0.0.1:{port}", options=ClientOptions(timeout=10)) as connection:
        # Transfers run at once on one connection, as calls do; a file is hashed off the event loop.
        up, down = await asyncio.gather(
            connection.upload(report, "report2.bin", resume=False),  # put: one stream, its digest checked end to end
            connection.download("report.bin", work / "copy2.bin"),
        )
        print("asyncio: same digests:", up.digest == down.digest == sent.digest)
        hexdigest = await connection.root.callRemote("put", "own2.bin", asynciobulk.fileStream(report))
        print("asyncio: own method, same digest:", bytes.fromhex(hexdigest) == sent.digest)


try:
    asyncio.run(main())
    print("twisted imported:", "twisted" in sys.modules)
finally:
    server.terminate()
    server.wait()
    shutil.rmtree(work)
