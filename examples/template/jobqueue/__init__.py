"""A job queue served over chunkwire RPC: the template of a project of your own.

`jobqueue.interface` is what both ends import (the remote interface and
its error), `jobqueue.service` the server's object behind it, and
`jobqueue.server` the process that serves it to clients who log in.
"""
