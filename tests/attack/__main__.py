"""Run the full attack campaign and the fault and latent-link cases; print tables, write JSON, refresh the report.

    PYTHONPATH=. python -m tests.attack --duration 4 --json attack-results.json --report docs/reliability.md

(see tests/attack/__init__.py and tests/attack/extras.py).  C{--sections} runs
some of the campaign's tables only (and refreshes only their sections of the
report), e.g. C{--sections attack --no-extras} for the attack table alone.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from . import attacks_bulk, catalogue, peercatalogue, slowreader
from .attacks import ATTACKS
from .extras import refreshReport, runExtras, sections
from .harness import runCampaign, table

SECTIONS = ("attack", "slowreader", "bulk-attack", "hostile-server", "catalogue")
"""The campaign's tables, each a generated section of the report, in the order they run."""


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--servers", default="kv,echo", help="comma-separated: kv, echo")
    parser.add_argument("--attacks", default=",".join(ATTACKS), help="comma-separated attack names")
    parser.add_argument("--duration", type=float, default=4.0, help="seconds of honest calls per case")
    parser.add_argument("--together", action="store_true", help="run the attacks all at once")
    parser.add_argument("--json", default="attack-results.json", help="where to write the rows")
    parser.add_argument("--report", type=Path, help="refresh the generated sections of this report (reliability.md)")
    parser.add_argument("--no-extras", action="store_true", help="only the attacks: no faults, latency or segments")
    parser.add_argument("--only-extras", action="store_true", help="only the faults, latency and segment cases")
    parser.add_argument(
        "--hostile-scale",
        choices=("full", "short"),
        default="full",
        help="the hostile-server catalogue's sizes: the clients' default limits (256 MiB answers), or the short form's",
    )
    parser.add_argument(
        "--sections",
        default=",".join(SECTIONS),
        help=f"comma-separated tables to run (and refresh in the report): {', '.join(SECTIONS)}",
    )
    args = parser.parse_args(argv)
    chosen = set(args.sections.split(","))
    unknown = chosen - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    rows: list[dict] = []  # type: ignore[type-arg]
    generated: dict[str, str] = {}
    if not args.only_extras and "attack" in chosen:
        with tempfile.TemporaryDirectory() as logs:
            rows = runCampaign(
                args.servers.split(","), args.attacks.split(","), args.duration, Path(logs), args.together
            )
        print(table(rows))
        passed = sum(1 for row in rows if not row["failures"])
        generated["attack"] = (
            f"{table(rows)}\n\n{passed}/{len(rows)} cases passed.  "
            f"Reproduce: `PYTHONPATH=. python -m tests.attack --duration {args.duration:g} --sections attack "
            "--no-extras --report docs/reliability.md`"
        )
    if not args.only_extras and "slowreader" in chosen:
        with tempfile.TemporaryDirectory() as logs:
            slow = slowreader.runCampaign(args.servers.split(","), args.duration, Path(logs))
        print(slowreader.table(slow))
        passed = sum(1 for row in slow if not row["failures"])
        generated["slowreader"] = (
            f"{slowreader.table(slow)}\n\n{passed}/{len(slow)} cases passed.  "
            f"Reproduce: `PYTHONPATH=. python -m tests.attack.slowreader --duration {args.duration:g}`"
        )
        rows += [dict(row, attack=f"slow reader, {row['case']}") for row in slow]
    if not args.only_extras and "bulk-attack" in chosen:
        bulkRows = attacks_bulk.runBulkCampaign()
        print(attacks_bulk.table(bulkRows))
        passed = sum(1 for row in bulkRows if not row["failures"])
        generated["bulk-attack"] = (
            f"{attacks_bulk.table(bulkRows)}\n\n{passed}/{len(bulkRows)} cases passed.  "
            "Reproduce: `PYTHONPATH=. python -m tests.attack.attacks_bulk`"
        )
        rows += bulkRows
    if not args.only_extras and "hostile-server" in chosen:
        hostile = catalogue.runCatalogue(catalogue.BEHAVIOURS, catalogue.CLIENTS, args.hostile_scale)
        print(catalogue.table(hostile))
        passed = sum(1 for row in hostile if not row["failures"])
        full = " --full" if args.hostile_scale == "full" else ""
        generated["hostile-server"] = (
            f"{catalogue.table(hostile)}\n\n{passed}/{len(hostile)} cases passed.  "
            f"Reproduce: `PYTHONPATH=. python -m tests.attack.catalogue{full}`"
        )
        rows += [dict(row, attack=f"hostile server, {row['behaviour']}, {row['client']}") for row in hostile]
    if not args.only_extras and "catalogue" in chosen:
        with tempfile.TemporaryDirectory(prefix="chunkwire-catalogue-") as scratch:
            peerRows = []
            for kind in peercatalogue.SERVERS:
                peerRows += peercatalogue.runServer(
                    kind,
                    list(peercatalogue.BEHAVIOURS),
                    max(args.duration, 4.0),
                    Path(scratch),
                    full=True,
                    rounds=peercatalogue.RSS_GROWTH_ROUNDS,
                )
        print(peercatalogue.table(peerRows))
        passed = sum(1 for row in peerRows if not row["failures"])
        generated["catalogue"] = (
            f"{peercatalogue.table(peerRows)}\n\n{passed}/{len(peerRows)} cases passed.  "
            "Reproduce: `PYTHONPATH=. python -m tests.attack.peercatalogue "
            f"--duration {max(args.duration, 4.0):g} --full`"
        )
        rows += [dict(row, attack=f"hostile peer, {row['behaviour']}") for row in peerRows]
    cases = [] if args.no_extras else runExtras()
    for case in cases:
        print(f"\n## {case.name}: {'pass' if case.ok else 'FAIL'}\n{case.text}\nReproduce: {case.command}", flush=True)
    generated.update(sections(cases))
    Path(args.json).write_text(json.dumps({"attacks": rows, "cases": [asdict(case) for case in cases]}, indent=1))
    if args.report is not None:
        written = refreshReport(args.report, generated)
        print(f"\nrefreshed {args.report}: {', '.join(written) or 'no marked sections'}")
    failed = [row for row in rows if row["failures"]] + [case for case in cases if not case.ok]
    print(f"{len(rows) + len(cases) - len(failed)}/{len(rows) + len(cases)} cases passed; rows in {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
