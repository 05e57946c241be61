"""How-to: typed remote interfaces: type hints as constraints, one interface for both ends, typed proxies."""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

from twisted.internet.defer import Deferred, succeed
from twisted.internet.task import react

import framing
from framing import Violation
from framing.slicing import Text
from protocols import rpc
from protocols.rpc import MaxLength, MinLength, Pattern, Range

Coordinate = Annotated[int, Range(-1000, 1000)]
Name = Annotated[str, MinLength(1), MaxLength(40), Pattern(r"[a-z][a-z0-9_]*")]


@dataclass
class Point:
    x: Coordinate
    y: Coordinate


framing.register(Point, "howto.Point")  # how it travels; its fields' hints are checked too


# Each method returns a Deferred of its result: what a typed proxy's call returns.
class IShape(rpc.RemoteInterface, Protocol, name="howto.IShape"):
    def area(self) -> Deferred[float]: ...


class IDrawing(rpc.RemoteInterface, Protocol, name="howto.IDrawing"):
    def add(self, name: Name, points: list[Point], style: Literal["solid", "dashed"] = "solid") -> Deferred[int]: ...

    def shape(self, name: Name) -> Deferred[IShape | None]: ...

    def scale(self, factor: Annotated[float, Range(0.1, 10.0)]) -> Deferred[None]: ...


class Shape(rpc.Referenceable, IShape):
    def __init__(self, points: list[Point]) -> None:
        self.points = points

    @rpc.deferred  # an async def, returning the Deferred the interface declares
    async def area(self) -> float:
        pairs = zip(self.points, self.points[1:] + self.points[:1], strict=True)
        return abs(sum(a.x * b.y - b.x * a.y for a, b in pairs)) / 2


class Drawing(rpc.Referenceable, IDrawing):
    def __init__(self) -> None:
        self.shapes: dict[str, Shape] = {}

    @rpc.deferred
    async def add(self, name: str, points: list[Point], style: str = "solid") -> int:
        self.shapes[name] = Shape(points)
        return len(self.shapes)

    def shape(self, name: str) -> Deferred[IShape | None]:  # or a plain method returning a Deferred
        return succeed(self.shapes.get(name))  # sent by reference, naming IShape

    @rpc.deferred
    async def scale(self, factor: float) -> None:
        for shape in self.shapes.values():
            shape.points = [Point(round(p.x * factor), round(p.y * factor)) for p in shape.points]

    # Not in the interface: remote by @rpc.remote, an explicit constraint overriding the hint's.
    @rpc.remote(args={"prefix": Text(10)})
    def names(self, prefix: str = "") -> list[str]:
        return sorted(name for name in self.shapes if name.startswith(prefix))


try:

    class Files(rpc.Referenceable):
        @rpc.remote
        def open(self, path: Path) -> bytes:  # no constraint describes a Path
            return path.read_bytes()

except rpc.UnsupportedHint as error:
    print("at decoration:", error)


async def main(reactor: Any) -> None:
    port = await rpc.serve(reactor, "tcp:0:interface=127.0.0.1", Drawing())
    address = f"tcp:host=127.0.0.1:port={port.getHost().port}"

    drawing = await rpc.connect(reactor, address, interface=IDrawing)
    print("shapes:", await drawing.add("square", [Point(0, 0), Point(2, 0), Point(2, 2), Point(0, 2)]))
    square = await drawing.shape("square")  # an IShape proxy: the reference arrived naming it
    assert square is not None
    print("area:", await square.area(), rpc.referenceOf(square).interfaceNames)

    calls: list[Callable[[], Deferred[Any]]] = [
        lambda: drawing.add("Square!", []),  # the Pattern
        lambda: drawing.add("p", [Point(0, 5000)]),  # a dataclass field's Range
        lambda: drawing.add("p", [], style="dotted"),  # the Literal  # error: Argument "style" to "add" of "IDrawing"
        lambda: drawing.scale(0.0),  # the float's Range
    ]
    for call in calls:
        try:
            await call()
        except Violation as refused:  # refused here: nothing was sent
            print("refused here:", refused.code, refused.where)
    try:
        getattr(drawing, "erase")  # noqa: B009 (mypy would refuse drawing.erase: IDrawing has no erase)
    except AttributeError:
        print("IDrawing has no erase")

    root = rpc.referenceOf(drawing)  # untyped: any remote method by name, checked by the server
    print("names:", await root.callRemote("names"))
    try:
        await root.callRemote("names", "a prefix too long")
    except rpc.RemoteViolation as refused:
        print("refused by the server:", refused.where)

    root.broker.disconnect()
    await port.stopListening()


if __name__ == "__main__":
    react(lambda reactor: Deferred.fromCoroutine(main(reactor)))
