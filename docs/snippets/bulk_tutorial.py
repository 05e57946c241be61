"""Tutorial, part 3: streams as call arguments and results, then the ready-made file service."""

import tempfile
from pathlib import Path

from twisted.internet.defer import Deferred
from twisted.internet.task import react

from framing.slicing import Text
from protocols import bulk, rpc
from protocols.bulk import BulkService, fetchFile, newHash, sendFile

LOCAL = "tcp:0:interface=127.0.0.1"
STREAMS = bulk.BulkOptions()  # windows, chunk size, digests: the defaults
SERVING = rpc.ServerOptions(bulk=STREAMS)  # every connection carries streams as well as calls
CONNECTING = rpc.ClientOptions(bulk=STREAMS)  # both ends must


class Store(rpc.Referenceable):
    """Keeps uploaded files in one directory."""

    def __init__(self, directory):
        self.directory = Path(directory)

    def path(self, name):
        if Path(name).name != name or name.startswith("."):
            raise ValueError(f"not a plain file name: {name!r}")  # never let a caller pick ../../etc
        return self.directory / name

    @rpc.remote(args={"name": Text(100)})
    async def upload(self, name, stream):
        # stream is a bulk.IncomingStream: no byte moves until receive() says where to put them.
        result = await stream.receive(self.path(name))  # the file appears once its digest checked out
        return [result.algorithm, result.hexdigest]  # blake3 with chunkwire[fast], else sha256

    @rpc.remote(args={"name": Text(100)})
    def download(self, name):
        return bulk.Stream(self.path(name))  # a path, bytes, a file, an iterator of bytes, a producer


async def main(reactor):
    data = bytes(range(256)) * 40_000  # 10 MB
    with tempfile.TemporaryDirectory() as directory:
        port = await rpc.serve(reactor, LOCAL, Store(directory), options=SERVING)
        root = await rpc.connect(reactor, f"tcp:host=127.0.0.1:port={port.getHost().port}", options=CONNECTING)

        algorithm, digest = await root.callRemote("upload", "data.bin", bulk.Stream(data))
        check = newHash(algorithm)  # the digest both ends chose: the first of each side's list they share
        check.update(data)
        print("uploaded; digest matches:", digest == check.hexdigest())

        incoming = await root.callRemote("download", "data.bin")
        pieces = []
        result = await incoming.receive(pieces.append)  # or a path, a file, an IConsumer
        print(f"downloaded {result.size} bytes; same bytes:", b"".join(pieces) == data)

        await root.broker.disconnect()
        await port.stopListening()

        # The ready-made service: resumable, striped file transfer (what twist chunkwire-bulk runs).
        served, source = Path(directory) / "served", Path(directory) / "data.bin"
        port = await rpc.serve(reactor, LOCAL, BulkService(served, reactor=reactor), options=SERVING)
        address = f"tcp:host=127.0.0.1:port={port.getHost().port}"

        def connect():
            return rpc.connect(reactor, address, options=CONNECTING)

        sent = await sendFile(connect, source, "copy.bin", streams=2)  # 2 connections at once
        print(f"sendFile: {sent.size} bytes over 2 connections, {sent.algorithm} verified")
        fetched = await fetchFile(connect, "copy.bin", Path(directory) / "back.bin")
        print("fetchFile: same digest:", fetched.digest == sent.digest == check.digest())
        await port.stopListening()


if __name__ == "__main__":
    react(lambda reactor: Deferred.fromCoroutine(main(reactor)))
