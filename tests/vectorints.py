"""
Integers in the vector files (docs/wire-format.md, section 9): one of 16 or
more digits is written as a JSON string of its decimal digits, because
JavaScript's C{JSON.parse} (and any reader that keeps numbers as binary64)
rounds it.  Shorter ones are bare JSON numbers.  The vector tests read such
fields with L{integer} and write them with L{written}.
"""

from __future__ import annotations

from typing import Any

LONGEST_BARE = 15
"""The most digits a bare JSON integer in a vector file may have: every integer of 15 digits is exact in binary64."""


def integer(value: int | str) -> int:
    """
    The integer a vector field holds: a bare JSON number, or a string of
    decimal digits (with an optional minus sign).

    @raise ValueError: a string that is no decimal integer, or a bare
        number the file should have written as a string.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is no integer")
    if isinstance(value, int):
        if len(str(abs(value))) > LONGEST_BARE:
            raise ValueError(f"{value} has more than {LONGEST_BARE} digits: the file must write it as a string")
        return value
    if not value.lstrip("-").isdigit():
        raise ValueError(f"{value!r} is no decimal integer")
    return int(value)


def written(value: int) -> int | str:
    """C{value} as a vector file writes it: a bare number, or a string past L{LONGEST_BARE} digits."""
    return str(value) if len(str(abs(value))) > LONGEST_BARE else value


def longBareIntegers(data: Any, path: str = "") -> list[str]:
    """The paths in a loaded vector file of the bare integers too long to be exact in JavaScript."""
    if isinstance(data, bool):
        return []
    if isinstance(data, int):
        return [path] if len(str(abs(data))) > LONGEST_BARE else []
    if isinstance(data, dict):
        return [found for key, item in data.items() for found in longBareIntegers(item, f"{path}.{key}")]
    if isinstance(data, list):
        return [found for index, item in enumerate(data) for found in longBareIntegers(item, f"{path}[{index}]")]
    return []
