"""Build chunkwire's optional compiled core; everything else is in pyproject.toml.

Contract: C{framing._speedups} is compiled when a C compiler is present; when
it is not (or the build fails), one line says so and the install goes on with
the pure-Python core, which is complete on its own (C{framing._core}).
"""

from __future__ import annotations

import sys
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

FALLBACK = "chunkwire: no C compiler; using the pure-Python core"


class OptionalBuildExt(build_ext):
    """Build the extension if possible; otherwise say so once and carry on."""

    def run(self) -> None:
        try:
            super().run()
        except Exception:  # (distutils' errors are not all one class)
            self._fallback()

    def build_extension(self, ext: Any) -> None:
        try:
            super().build_extension(ext)
        except Exception:
            self._fallback()

    def _fallback(self) -> None:
        if not self._said:
            print(FALLBACK, file=sys.stderr, flush=True)
            self._said = True

    _said = False


setup(
    ext_modules=[Extension("framing._speedups", ["framing/_speedups.c"], optional=True)],
    cmdclass={"build_ext": OptionalBuildExt},
)
