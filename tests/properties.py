"""How many examples a hypothesis property of the suite tries: at most 100 in the default run, all in the fuzz campaign.

A property is written with the examples it is worth (C{max_examples=examples(300)}).
The default run tries at most L{DEFAULT_CAP} of them, hypothesis' own
default: each property still runs, on a hundred examples, on both cores.
C{python3 dev.py fuzz} runs this module, which runs L{MODULES} (every test
module that uses L{examples}) with the counts as written
(C{CHUNKWIRE_PROPERTY_EXAMPLES=full}), with pytest on the compiled core and
trial on the pure-Python one, as the default run does:

    PYTHONPATH=. python -m tests.properties

Why: the properties written for 150 to 400 examples spent 61 CPU-s of a
default run (both cores), 28 of them past their first hundred examples.
The fuzz properties (L{tests.framing.test_fuzz}) and the differential ones
(L{tests.framing.test_cores}) have counts of their own, set by their own
variables.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

DEFAULT_CAP = 100
"""The most examples a property tries in the default run."""

FULL = os.environ.get("CHUNKWIRE_PROPERTY_EXAMPLES") == "full"
"""Whether this run tries every property's whole count (C{CHUNKWIRE_PROPERTY_EXAMPLES=full}: C{dev.py fuzz})."""

MODULES = (
    "tests/framing/test_blocks.py",
    "tests/framing/test_chain.py",
    "tests/framing/test_codec.py",
    "tests/framing/test_costs.py",
    "tests/framing/test_scanner.py",
    "tests/framing/test_slicing.py",
    "tests/protocols/auth/test_scram.py",
    "tests/protocols/bulk/test_ranges.py",
)
"""The test modules whose properties use L{examples} (tests/test_properties.py checks that it is every one)."""


def examples(written: int, full: bool | None = None) -> int:
    """
    The examples a property written for C{written} tries in this run:
    C{written} when C{full} (L{FULL} by default), else at most
    L{DEFAULT_CAP}.  O(1).
    """
    return written if (FULL if full is None else full) else min(written, DEFAULT_CAP)


def main() -> int:
    """Run L{MODULES} with every property's whole count: pytest on the compiled core, then trial on the pure one."""
    env = {**os.environ, "CHUNKWIRE_PROPERTY_EXAMPLES": "full"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *MODULES]
    print("$ CHUNKWIRE_PROPERTY_EXAMPLES=full", *pytest[1:], flush=True)
    status = subprocess.run(pytest, cwd=ROOT, env=env).returncode
    dotted = [module[: -len(".py")].replace("/", ".") for module in MODULES]
    trial = [sys.executable, "-m", "twisted.trial", "--temp-directory=_trial_temp.properties", *dotted]
    print("$ CHUNKWIRE_PROPERTY_EXAMPLES=full CHUNKWIRE_PURE=1", *trial[1:], flush=True)
    return status or subprocess.run(trial, cwd=ROOT, env={**env, "CHUNKWIRE_PURE": "1"}).returncode


if __name__ == "__main__":
    sys.exit(main())
