"""How-to: send your own types by registering them (no pickle: only registered names are ever built)."""

from dataclasses import dataclass
from datetime import date

from framing import Registry, Violation, dumps, loads
from framing.slicing import DEFAULT_REGISTRY


@dataclass
class Point:
    x: int
    y: int


registry = Registry(DEFAULT_REGISTRY)  # the built-in types plus ours
registry.register(Point, "example.Point")  # a dataclass: its fields travel as a dict
registry.register(date, "example.date", lambda d: d.toordinal(), date.fromordinal)  # any type: two functions

blob = dumps({"at": date(2024, 5, 17), "where": [Point(1, 2), Point(3, 4)]}, registry=registry)
print(loads(blob, registry=registry))

try:
    loads(blob)  # a receiver without the registrations refuses the object, it never guesses
except Violation as refused:
    print("without the registry:", refused.code)
