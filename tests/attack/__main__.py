"""Run the full attack campaign, print a table and write JSON (see tests/attack/__init__.py)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from .attacks import ATTACKS
from .harness import runCampaign, table


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--servers", default="kv,echo", help="comma-separated: kv, echo")
    parser.add_argument("--attacks", default=",".join(ATTACKS), help="comma-separated attack names")
    parser.add_argument("--duration", type=float, default=4.0, help="seconds of honest calls per case")
    parser.add_argument("--together", action="store_true", help="run the attacks all at once")
    parser.add_argument("--json", default="attack-results.json", help="where to write the rows")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as logs:
        rows = runCampaign(args.servers.split(","), args.attacks.split(","), args.duration, Path(logs), args.together)
    print(table(rows))
    Path(args.json).write_text(json.dumps(rows, indent=1))
    failed = [row for row in rows if row["failures"]]
    print(f"{len(rows) - len(failed)}/{len(rows)} cases passed; rows in {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
