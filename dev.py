#!/usr/bin/env python3
"""Set up a virtualenv on demand and run chunkwire's demo, tests or benchmarks.

    python3 dev.py demo     # the main demo
    python3 dev.py test     # the whole suite: pytest, trial, ruff, mypy
    python3 dev.py bench    # the benchmarks (slow; also `tox -e bench`)

Only python3 (3.10+) and git are needed: the first run makes .venv and
installs the project with its extras there; later runs reuse it until
pyproject.toml changes.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / "python"
EXTRAS = "test,lint,bench,docs"


def ensure_venv() -> None:
    """Create .venv and install the project unless it is already up to date."""
    stamp = VENV / ".chunkwire-installed"
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + EXTRAS.encode()).hexdigest()
    if stamp.exists() and stamp.read_text() == digest and PYTHON.exists():
        return
    if sys.version_info < (3, 10):  # noqa: UP036 - dev.py runs on whatever python3 the user has
        sys.exit("chunkwire needs Python 3.10 or newer")
    print(f"setting up {VENV} ...", flush=True)
    if not PYTHON.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    pip = [str(PYTHON), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    # compat mode: twist finds the plugins in twisted/plugins only this way.
    editable = ["--config-settings", "editable_mode=compat"]
    subprocess.run([*pip, *editable, "-e", f".[{EXTRAS}]"], check=True, cwd=ROOT)
    stamp.write_text(digest)


def run(*args: str) -> int:
    print("$", " ".join(args), flush=True)
    return subprocess.run([str(PYTHON), *args], cwd=ROOT).returncode


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "help"
    rest = argv[1:]
    if command not in ("demo", "test", "bench", "lint"):
        print(__doc__)
        return 0 if command == "help" else 2
    ensure_venv()
    if command == "demo":
        return run("examples/demo.py", *rest)
    if command == "bench":
        return run("-m", "tests.benchmarks", *rest)
    if command == "lint":
        return lint()
    failed = run("-m", "pytest", "-q", *rest) != 0
    failed |= run("-m", "twisted.trial", "--reporter=text", "tests") != 0
    failed |= lint() != 0
    print("dev.py test:", "FAILED" if failed else "all passed", flush=True)
    return 1 if failed else 0


def lint() -> int:
    status = run("-m", "ruff", "check", ".")
    status |= run("-m", "ruff", "format", "--check", ".")
    status |= run("-m", "mypy", "framing", "protocols")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
