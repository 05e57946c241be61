"""Finding (or installing) HAProxy for the tests, and running it with the how-to's configuration.

Contract: L{haproxyPath} returns the C{haproxy} executable, installing
Debian's package first when it is missing and this process is root with
C{apt-get} (once per process); otherwise it raises C{SkipTest} saying why.
L{scalingConfig} is the configuration shown in C{docs/howto/scaling.rst},
with its ports replaced, so the test runs exactly what the docs show.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import unittest
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCALING = ROOT / "docs" / "howto" / "scaling.rst"
DOC_PORTS = (8760, 8761, 8762)
"""The frontend's and the two backends' ports in the how-to's configuration."""


@cache
def _find() -> tuple[str | None, str]:
    found = shutil.which("haproxy") or ("/usr/sbin/haproxy" if os.path.exists("/usr/sbin/haproxy") else None)
    if found:
        return found, ""
    if os.environ.get("CHUNKWIRE_NO_INSTALL"):
        return None, "haproxy is not installed (and CHUNKWIRE_NO_INSTALL is set)"
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return None, "haproxy is not installed and cannot be (needs root and apt-get: apt-get install -y haproxy)"
    try:
        subprocess.run(["apt-get", "install", "-y", "-q", "haproxy"], check=True, capture_output=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as error:
        return None, f"haproxy is not installed and apt-get install -y haproxy failed: {error}"
    found = shutil.which("haproxy") or "/usr/sbin/haproxy"
    return (found, "") if os.path.exists(found) else (None, "apt-get installed no haproxy")


def haproxyPath() -> str:
    """The haproxy executable (installed if need be and possible); SkipTest with the reason if there is none."""
    path, reason = _find()
    if path is None:
        raise unittest.SkipTest(reason)
    return path


def scalingConfig(front: int, first: int, second: int) -> str:
    """The how-to's HAProxy configuration, listening on C{front} and balancing over C{first} and C{second}."""
    text = SCALING.read_text("utf-8")
    marker = text.index(".. haproxy.cfg:")
    block = text.index(".. code-block:: text", marker)
    lines = []
    for line in text[block:].splitlines()[2:]:
        if line and not line.startswith("   "):
            break
        lines.append(line[3:])
    config = "\n".join(lines).strip() + "\n"
    for old, new in zip(DOC_PORTS, (front, first, second), strict=True):
        config, count = re.subn(rf":{old}\b", f":{new}", config)
        assert count == 1, f"port {old} appears {count} times in the how-to's configuration"
    return config
