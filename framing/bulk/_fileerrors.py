# -*- test-case-name: tests.attack.test_round3_bulk,tests.protocols.test_bulkfiles,tests.protocols.bulk.test_files -*-
"""How the file service refuses: each refusal a class, registered to travel on the wire as itself.

Contract: every error the file service (L{protocols.bulk._files.BulkService})
raises to a caller is one of these classes (or an L{IntegrityError} or
L{DigestUnavailable} of the transfer layer), registered with
L{framing.rpc.registerError} under C{chunkwire.bulk.NAME}, so that a
client gets it as itself.  Their messages name only what the client itself
named (a file name, a limit): never where or how the server keeps its
files (L{StorageError} carries an C{errno} name and its text, no path).
L{UploadRefused} and its subclasses are refusals of one upload: the
connection stays up, and each C{code} is logged once per connection.
"""

from __future__ import annotations

import errno as _errno
import os

from ..rpc._errors import registerError


class FileChanged(Exception):
    """The file changed on the server since the transfer started (its version differs)."""


class BadName(Exception):
    """A file name the service refuses (a path, a hidden name, empty or too long)."""


class NoSuchFile(Exception):
    """
    The service has no file of that name.  It says only the name, never
    where the service keeps its files.

    @ivar name: the name asked for.
    """

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return f"no such file: {self.name}"


class StorageError(Exception):
    """
    The server could not read or write its storage (a full disk, no
    descriptors left, a file it may not open): the text of the C{errno},
    never a path.

    @ivar errno: the C{errno} number, or C{None}.
    """

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message, errno)
        self.errno = errno

    def __str__(self) -> str:
        return str(self.args[0])

    @classmethod
    def fromOSError(cls, error: OSError, doing: str) -> StorageError:
        """The L{StorageError} of C{error}, met while C{doing}: its errno's name and text only."""
        code = error.errno
        if code is None:
            return cls(f"the server could not {doing}", None)
        name = _errno.errorcode.get(code, str(code))
        return cls(f"the server could not {doing}: {name} ({os.strerror(code)})", code)


class UploadRefused(Exception):
    """
    The base of the service's refusals of an upload; the connection stays up.

    @cvar code: why, in a word (logged once per connection).
    """

    code = "upload-refused"


class TooManyUploads(UploadRefused):
    """The connection already holds L{BulkService.maxUploads} unfinished uploads."""

    code = "too-many-uploads"


class TooManyOpenFiles(UploadRefused):
    """
    The server already holds as many open files (unfinished uploads, files
    being received or sent) as it allows for the caller's address, or in
    all (L{protocols.bulk._quotas.FileLimits}): try again later.
    """

    code = "too-many-open-files"


class QuotaExceeded(UploadRefused):
    """
    Starting this upload would keep more bytes of unfinished uploads than
    the user's or the server's quota (L{protocols.bulk._quotas.FileLimits}).
    """

    code = "partial-quota"


class UploadBusy(UploadRefused):
    """Another connection (perhaps through another worker process) is uploading the same name."""

    code = "upload-busy"


class TooFragmented(UploadRefused):
    """The upload would hold more disjoint ranges than its cap (C{MAX_FRAGMENTS} by default)."""

    code = "too-fragmented"


registerError(FileChanged, "chunkwire.bulk.FileChanged")
registerError(BadName, "chunkwire.bulk.BadName")
registerError(TooManyUploads, "chunkwire.bulk.TooManyUploads")
registerError(UploadBusy, "chunkwire.bulk.UploadBusy")
registerError(TooFragmented, "chunkwire.bulk.TooFragmented")
registerError(NoSuchFile, "chunkwire.bulk.NoSuchFile")
registerError(StorageError, "chunkwire.bulk.StorageError")
registerError(TooManyOpenFiles, "chunkwire.bulk.TooManyOpenFiles")
registerError(QuotaExceeded, "chunkwire.bulk.QuotaExceeded")
