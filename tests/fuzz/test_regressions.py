"""Every fuzzer finding and every committed corpus input, replayed through the fuzz targets' checks.

The checks are the ones C{fuzz/fuzz_decoder.py} and C{fuzz/fuzz_unslicers.py}
run under atheris (L{fuzz.common.check}): only decoded objects,
L{framing.Violation}s and one L{framing.ProtocolError} may come out, and a
decoder may hold no more than its limits allow.  Findings are kept in
C{fuzz/regressions/<target>/}, named for what they found.
"""

from __future__ import annotations

from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from fuzz.common import Finding, check
from fuzz.unslicers import OPEN_NAMES, check_unslicer_input

FUZZ = Path(__file__).resolve().parents[2] / "fuzz"


def _inputs(kind: str) -> list[Path]:
    return sorted((FUZZ / "regressions" / kind).glob("*")) + sorted((FUZZ / "corpus" / kind).glob("*"))


class RegressionTests(SynchronousTestCase):
    """Fuzzer findings stay fixed and the committed corpus stays clean."""

    def test_decoderInputs(self) -> None:
        """Every decoder regression and corpus input gives only objects, Violations or one ProtocolError."""
        paths = _inputs("decoder")
        self.assertGreater(len(paths), 100)
        for path in paths:
            check(path.read_bytes())

    def test_unslicerInputs(self) -> None:
        """Every unslicer regression and corpus input gives only objects, Violations or one ProtocolError."""
        paths = _inputs("unslicers")
        self.assertGreater(len(paths), 100)
        for path in paths:
            check_unslicer_input(path.read_bytes())

    def test_echoRefusedIsAnObject(self) -> None:
        """An C{echo.refused} decodes to an EchoRefused object (an exception by design), which is no finding."""
        found = check_unslicer_input(
            (FUZZ / "regressions" / "unslicers" / "echo-refused-is-a-registered-exception").read_bytes()
        )
        self.assertEqual([type(obj).__name__ for obj in found], ["EchoRefused"])
        self.assertIn("echo.refused", OPEN_NAMES)

    def test_unregisteredExceptionIsAFinding(self) -> None:
        """The check itself still fails when a decoded exception is of no registered type (so it can fail)."""
        import fuzz.common as common

        class Leaked(Exception):
            pass

        class LeakingDecoder:
            buffered = 0

            def __init__(self, *args: object) -> None:
                pass

            def feed(self, data: bytes) -> list[object]:
                return [Leaked("not a Violation")]

            def close(self) -> None:
                pass

        real = common.Decoder
        common.Decoder = LeakingDecoder  # type: ignore[assignment,misc]
        try:
            self.assertRaises(Finding, check, b"\x00any bytes")
        finally:
            common.Decoder = real  # type: ignore[misc]
