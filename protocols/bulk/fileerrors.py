"""How the file service refuses: the names as the Twisted layer has always imported them.

The errors, registered to travel as themselves, live in the sans-IO bulk
core, L{framing.bulk.fileerrors}, so that the clients without Twisted get
them as themselves too; this module re-exports them unchanged.
"""

from __future__ import annotations

from framing.bulk.fileerrors import (
    BadName,
    FileChanged,
    NoSuchFile,
    QuotaExceeded,
    StorageError,
    TooFragmented,
    TooManyOpenFiles,
    TooManyUploads,
    UploadBusy,
    UploadRefused,
)

__all__ = [
    "BadName",
    "FileChanged",
    "NoSuchFile",
    "QuotaExceeded",
    "StorageError",
    "TooFragmented",
    "TooManyOpenFiles",
    "TooManyUploads",
    "UploadBusy",
    "UploadRefused",
]
