"""How the snippets' helper services start: a Python program in a process of its own, its port read from its output."""

from __future__ import annotations

import re
import subprocess
import sys


def startService(*command: str) -> tuple[subprocess.Popen[str], int]:
    """
    Run C{python COMMAND...}, which prints C{port=N} once it listens: the
    process, and that port.  The snippet's process stays free of Twisted.
    """
    server = subprocess.Popen([sys.executable, *command], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    for line in server.stdout:
        found = re.search(r"port=(\d+)", line)
        if found:
            return server, int(found.group(1))
    raise SystemExit(f"{command[0]} did not start")
