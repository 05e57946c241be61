"""tests/vectors/rpc_refs.json: the rpc.ref and rpc.yourref open types (docs/wire-format.md, section 5.4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

import framing._errors
from framing import Decoder, Encoder
from framing.slicing._registry import DEFAULT_REGISTRY, Registry
from framing.wire import PREAMBLE
from protocols.rpc._refs import (
    REF_OPEN_TYPE,
    YOURREF_OPEN_TYPE,
    ReferenceableSlicer,
    ReferenceUnslicer,
    YourReferenceUnslicer,
)
from tests.vectorints import integer

VECTORS = json.loads((Path(__file__).resolve().parents[2] / "vectors" / "rpc_refs.json").read_text())


class Tables:
    """Stands for a connection's reference tables: records what the unslicers build, exports under a fixed id."""

    def __init__(self, exportId: int = 0) -> None:
        self.exportId = exportId

    def importReference(self, exportId: int, interfaceNames: tuple[str, ...] = ()) -> Any:
        return (REF_OPEN_TYPE, exportId, list(interfaceNames))

    def localObject(self, exportId: int) -> Any:
        return (YOURREF_OPEN_TYPE, exportId, [])

    def exportFor(self, obj: Any) -> int:
        return self.exportId

    def releaseExport(self, exportId: int, count: int) -> bool:
        return True


def decoder() -> Decoder:
    tables = Tables()
    registry = Registry(DEFAULT_REGISTRY)
    registry.add_unslicer(REF_OPEN_TYPE, lambda limits: ReferenceUnslicer(limits, tables))  # type: ignore[arg-type]
    registry.add_unslicer(YOURREF_OPEN_TYPE, lambda limits: YourReferenceUnslicer(limits, tables))  # type: ignore[arg-type]
    return Decoder(registry=registry)


def decoded(data: bytes, how: str) -> list[Any]:
    """What a fresh decoder gives for C{data} fed whole, split in two at every offset (all alike), or bytewise."""
    if how == "split":
        outcomes = []
        for cut in range(1, len(data)):
            one = decoder()
            outcomes.append(one.feed(data[:cut]) + one.feed(data[cut:]))
        assert all(repr(outcome) == repr(outcomes[0]) for outcome in outcomes), outcomes
        return outcomes[0]
    one = decoder()
    if how == "whole":
        return one.feed(data)
    results: list[Any] = []
    for index in range(len(data)):
        results += one.feed(data[index : index + 1])
    return results


class Exported:
    """A stand-in for a Referenceable implementing the vector's interfaces."""

    remoteInterfaceNames: tuple[str, ...] = ()


class ReferenceVectorTests(SynchronousTestCase):
    """Each vector decodes, whole, split at every offset and byte by byte, to what the file says."""

    def test_valid(self) -> None:
        """A valid vector gives its open type, export id and interface names."""
        for vector in VECTORS["vectors"]:
            expected = [(vector["openType"], integer(vector["exportId"]), vector["interfaces"])]
            for how in ("whole", "split", "bytewise"):
                self.assertEqual(decoded(bytes.fromhex(vector["hex"]), how), expected, (vector["name"], how))

    def test_invalid(self) -> None:
        """An invalid vector is refused with its error class and code, however it is fed."""
        for vector in VECTORS["invalid"]:
            for how in ("whole", "split", "bytewise"):
                [refused] = decoded(bytes.fromhex(vector["hex"]), how)
                self.assertIsInstance(refused, getattr(framing._errors, vector["error"]), (vector["name"], how))
                self.assertEqual(refused.code, vector["code"], vector["name"])

    def test_encoded(self) -> None:
        """The sender's slicer writes each rpc.ref vector's bytes from its export id and interface names."""
        for vector in VECTORS["vectors"]:
            if vector["openType"] != REF_OPEN_TYPE:
                continue
            cls = type("Exported", (Exported,), {"remoteInterfaceNames": tuple(vector["interfaces"])})
            registry = Registry(DEFAULT_REGISTRY)
            registry.add_slicer(cls, ReferenceableSlicer(Tables(integer(vector["exportId"]))))  # type: ignore[arg-type]
            self.assertEqual(PREAMBLE + Encoder(registry=registry).encode(cls()), bytes.fromhex(vector["hex"]))
