"""
Conformance: the keys of dicts and sets, C{tests/vectors/keys.json}
(C{docs/wire-format.md}, section 5.6), on both codec cores.

Each vector is one object: accepted with its value, or refused with its
code.  It is fed to a decoder whole, split in two at every offset and byte
by byte, on whichever core the process chose and on the pure core (the
compiled core hands any key but an int, str or bytes back to the pure
unslicers, so both reach one verdict by one rule).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing import _core

from .test_vectors import FEEDINGS, assert_results, decode, load_vectors

FILENAME = "keys.json"
DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "wire-format.md"


def check(case: SynchronousTestCase, vector: dict[str, Any]) -> None:
    """Fail unless every way of feeding the vector gives its value, or its refusal, and nothing else."""
    data = bytes.fromhex(vector["hex"])
    for feeding in FEEDINGS.values():
        for pieces in feeding(data):
            how = f"{vector['name']} fed as {[len(p) for p in pieces][:4]}"
            results, events, error = decode(pieces)
            case.assertIsNone(error, how)
            case.assertEqual(events, [], how)
            assert_results(case, [vector], results, how)


class KeyVectorTests(SynchronousTestCase):
    """The vectors of C{keys.json}, on the core this process chose."""

    def test_vectors(self) -> None:
        """Every keys.json vector decodes to its value, or is refused with its code, however it is fed."""
        for vector in load_vectors(FILENAME):
            check(self, vector)

    def test_both_verdicts(self) -> None:
        """The file holds keys accepted and keys refused, each with a note, every name once."""
        vectors = load_vectors(FILENAME)
        names = [vector["name"] for vector in vectors]
        self.assertEqual(len(names), len(set(names)))
        self.assertTrue(all(vector.get("note") for vector in vectors))
        self.assertTrue(any("value" in vector for vector in vectors))
        self.assertTrue(any("error" in vector for vector in vectors))

    def test_listed_in_spec(self) -> None:
        """docs/wire-format.md names every keys.json vector, in backticks."""
        document = DOCUMENT.read_text("utf-8")
        missing = [v["name"] for v in load_vectors(FILENAME) if not re.search(rf"`{re.escape(v['name'])}`", document)]
        self.assertEqual(missing, [])


class PureKeyVectorTests(KeyVectorTests):
    """The vectors of C{keys.json}, on the pure core."""

    def setUp(self) -> None:
        self.patch(_core, "speedups", None)
