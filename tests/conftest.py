"""pytest settings shared by every test package.

Contract: under pytest, classes derived from C{twisted.trial.unittest.TestCase}
(the reactor-spinning kind) are not collected.  trial runs each such test by
spinning the global reactor itself; under pytest, pytest-twisted already runs
that reactor in a greenlet, and a trial TestCase spinning it a second time
fails (ReactorAlreadyRunning) or hangs.  Every such test therefore has a
pytest-twisted twin function with the same body (see
C{tests/protocols/helpers.py}), which trial in turn ignores because it only
collects TestCase classes.  C{SynchronousTestCase} classes need no reactor and
are collected by both runners.
"""

from __future__ import annotations

from typing import Any

import pytest
from twisted.trial.unittest import TestCase


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: Any, name: str, obj: Any) -> list[Any] | None:
    if isinstance(obj, type) and issubclass(obj, TestCase):
        return []
    return None
