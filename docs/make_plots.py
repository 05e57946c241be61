"""Draw the benchmark figures for docs/benchmarks.rst from bench-results/*.json.

    python docs/make_plots.py [--results bench-results] [--reference docs/bench-reference] [--out docs]

Writes PNGs into docs/_static/bench/ and the page body docs/_generated/benchmarks.rst
(figures with the machine, versions and date under each).  Without results
of this machine's own, the reference run shipped in docs/bench-reference/ is
drawn, and the page says so.  Without matplotlib the page body says how to
produce the figures; the docs build either way.

An axis is logarithmic where the values on it differ by 10x or more, so the
small bars stay readable.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path
from typing import Any

from protocols.bulk import BLAKE3, DEFAULT_DIGEST

ROOT = Path(__file__).resolve().parent.parent
NO_RESULTS = """\
No benchmark results were found when this site was built.  Produce them with
``python3 dev.py bench`` (or ``tox -e bench``), then rebuild with
``python3 dev.py docs``.
"""
REFERENCE_NOTE = """\
These figures are from the reference run shipped in ``docs/bench-reference/``
(the machine and date are under each figure; a ``--quick`` run, so fewer sizes
and repeats).  To draw this machine's, run ``python3 dev.py bench`` and then
``python3 dev.py docs``: results in ``bench-results/`` take their place.

"""
SPREAD = 10.0
"""Values that differ by this factor or more are drawn on a log axis."""
RAW_LABEL = "raw Twisted producer, 64 KiB writes: a reference point, not a ceiling"
DIGEST_NAMES = {BLAKE3: "BLAKE3", DEFAULT_DIGEST: "SHA-256"}
"""How the figures name the digests."""
_DEFAULT_CLAIM = re.compile(r" ?\(default[^)]*\)")
"""What a bulk case's label says when it measured the default digest: "(default)", "(default: negotiated)"..."""


EXPECTED = {
    "rpc.json": "the RPC calls/s bars (``python3 dev.py bench rpc``)",
    "bulk.json": "the bulk MB/s bars (``python3 dev.py bench bulk``)",
}
"""Result files the page always speaks of: when one is missing, the page says so."""

RPC_LABELS = {
    "chunkwire": "chunkwire",
    "amp": "Twisted AMP",
    "pb": "Twisted PB",
    "foolscap": "Foolscap (TLS)",
    "handrolled": "Int32StringReceiver + msgpack",
}


def machine_line(data: dict[str, Any]) -> str:
    """One line naming the machine and versions that measured C{data}."""
    m = data.get("machine") or data.get("config") or {}
    cpus = m.get("nproc") or m.get("cpus")
    python = m.get("python")
    if python and not str(python).startswith(("CPython", "PyPy")):
        python = f"Python {python}"
    parts = [m.get("cpu"), f"{cpus} CPUs" if cpus else None, python]
    parts += [f"{name} {m[name]}" for name in ("twisted", "foolscap", "msgpack") if m.get(name)]
    if not m.get("twisted"):
        parts.append("Twisted and peer versions not recorded")
    parts += [m.get("platform"), m.get("date") or "date not recorded"]
    commit = m.get("chunkwire_commit")
    if commit:
        parts.append(f"chunkwire {commit[:10]}")
    return ", ".join(str(p) for p in parts if p) or "machine not recorded"


def spread(values: list[float]) -> bool:
    """True when the positive C{values} differ by L{SPREAD}x or more: draw them on a log axis."""
    positive = [v for v in values if v and v > 0]
    return bool(positive) and max(positive) >= SPREAD * min(positive)


def median_seconds(entry: dict[str, Any]) -> float | None:
    runs = [run["seconds"] for run in entry.get("runs", []) if run.get("seconds")]
    return statistics.median(runs) if runs else None


def plot_ns_per_byte(plt: Any, data: dict[str, Any], name: str, out: Path) -> list[tuple[str, str]]:
    """Log-log ns/byte against size, one line per implementation, one figure per chunk/piece size."""
    figures = []
    labels = data.get("labels", {})
    for group, impls in data.get("cells", {}).items():
        if not all(isinstance(entries, list) for entries in impls.values()):
            continue
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for impl, entries in impls.items():
            points = [(e["size"], median_seconds(e)) for e in entries if isinstance(e, dict)]
            points = [(size, s * 1e9 / size) for size, s in points if s]
            if points:
                style = "-o" if impl == "chunkwire" else "--."
                sizes, costs = [p[0] for p in points], [p[1] for p in points]
                width = 2 if impl == "chunkwire" else 1
                ax.plot(sizes, costs, style, label=labels.get(impl, impl), linewidth=width)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("ns per byte")
        ax.set_title(f"{data.get('benchmark', name)}: {group}-byte pieces")
        ax.legend(fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
        filename = f"{name}-{group}.png"
        fig.tight_layout()
        fig.savefig(out / filename, dpi=110)
        plt.close(fig)
        figures.append((filename, f"{data.get('benchmark', name)}, {group}-byte pieces: ns/byte against size"))
    return figures


def plot_calls(plt: Any, data: dict[str, Any], name: str, out: Path) -> list[tuple[str, str]]:
    """Bars of objects (calls) per second, per implementation and mode."""
    results = data.get("results", {})
    rows = [(impl, mode, r["objects_per_s"]) for impl, modes in results.items() for mode, r in modes.items()]
    if not rows:
        return []
    fig, ax = plt.subplots(figsize=(7, 0.4 * len(rows) + 1.2))
    ax.barh([f"{impl} ({mode})" for impl, mode, _ in rows], [rate for _, _, rate in rows])
    ax.set_xlabel("objects per second (higher is better)")
    if spread([rate for _, _, rate in rows]):
        ax.set_xscale("log")
        ax.set_xlabel("objects per second, log scale (higher is better)")
    ax.set_title(str(data.get("benchmark", name)))
    ax.invert_yaxis()
    fig.tight_layout()
    filename = f"{name}-calls.png"
    fig.savefig(out / filename, dpi=110)
    plt.close(fig)
    return [(filename, f"{data.get('benchmark', name)}: calls per second")]


def plot_rpc(plt: Any, data: dict[str, Any], name: str, out: Path) -> list[tuple[str, str]]:
    """
    Grouped bars of RPC calls per second (bench_rpc.py): one group per column
    (one call in flight or 100, an int or 1 KiB echoed), one bar per peer,
    the median over runs with the lowest and highest run as whiskers.
    """
    cells = data["summary"]["cells"]
    columns = data["columns"]  # [key, payload, window, label]
    peers = [peer for peer in data.get("peers", list(cells)) if peer in cells]
    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    width = 0.8 / max(len(peers), 1)
    for index, peer in enumerate(peers):
        rates, low, high = [], [], []
        for key, *_ in columns:
            cell = cells[peer].get(key) or {}
            rate = cell.get("calls_per_s") or 0.0
            rates.append(rate)
            low.append(rate - cell.get("min", rate))
            high.append(cell.get("max", rate) - rate)
        positions = [column + (index - (len(peers) - 1) / 2) * width for column in range(len(columns))]
        hatch = None if peer == "chunkwire" else "//"
        ax.bar(positions, rates, width, yerr=[low, high], capsize=2, label=RPC_LABELS.get(peer, peer), hatch=hatch)
    ax.set_xticks(range(len(columns)))
    ax.set_xticklabels([column[3] for column in columns], fontsize=8)
    ax.set_ylabel("calls per second (higher is better)")
    rates = [(cells[peer].get(key) or {}).get("calls_per_s") or 0.0 for peer in peers for key, *_ in columns]
    if spread(rates):
        ax.set_yscale("log")
        ax.set_ylabel("calls per second, log scale (higher is better)")
    ax.set_title("RPC: echo(value) calls per second, client and server in two processes")
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    filename = f"{name}-calls.png"
    fig.savefig(out / filename, dpi=110)
    plt.close(fig)
    config = data.get("config", {})
    runs = f"{median_of(config['runs'])} of {config['duration']} s" if "runs" in config else "median of runs"
    quick = ", a ``--quick`` run" if data.get("options", {}).get("quick") else ""
    return [(filename, f"RPC calls per second over loopback TCP ({runs}{quick}; whiskers: lowest and highest run)")]


def plot_bulk(plt: Any, data: dict[str, Any], name: str, out: Path) -> list[tuple[str, str]]:
    """
    Horizontal bars of bulk MB/s (bench_bulk.py) per case, the median over
    runs with the lowest and highest as whiskers, beside the raw Twisted
    producer drawn as a dashed line: a reference point, not a ceiling
    (chunkwire with C{digest=None} can pass it).
    """
    cases = data["cases"]
    names = list(cases)
    rates = [cases[case]["mb_s"] for case in names]
    low = [cases[case]["mb_s"] - cases[case].get("mb_s_min", cases[case]["mb_s"]) for case in names]
    high = [cases[case].get("mb_s_max", cases[case]["mb_s"]) - cases[case]["mb_s"] for case in names]
    fig, ax = plt.subplots(figsize=(8.5, 0.5 * len(names) + 1.6))
    colours = ["tab:blue" if case.startswith("chunkwire") else "tab:gray" for case in names]
    ax.barh(names, rates, xerr=[low, high], capsize=2, color=colours)
    for row, case in enumerate(names):
        ratio = cases[case].get("vs_raw")
        note = f"  {rates[row]:.0f} MB/s" + (f" ({ratio:.2f}x raw)" if ratio is not None else "")
        ax.text(rates[row] + high[row], row, note, va="center", fontsize=7)
    if "raw" in cases:
        ax.axvline(cases["raw"]["mb_s"], linestyle="--", color="black", linewidth=1, label=RAW_LABEL)
        ax.legend(fontsize=7, loc="lower right")
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels([bulk_label(case, cases[case]) for case in names], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("MB/s, 10^6 bytes per second (higher is better)")
    if spread(rates):
        ax.set_xscale("log")
        ax.set_xlim(min(r for r in rates if r > 0) / 2, max(rates) * 6)
        ax.set_xlabel("MB/s, 10^6 bytes per second, log scale (higher is better)")
    else:
        ax.set_xlim(0, max(rates + [1.0]) * 1.5)
    size = data.get("config", {}).get("size")
    ax.set_title(f"Bulk transfer over loopback TCP{f', {size / 2**30:g} GiB' if size else ''}")
    fig.tight_layout()
    filename = f"{name}-mbs.png"
    fig.savefig(out / filename, dpi=110)
    plt.close(fig)
    runs = data.get("config", {}).get("runs")
    caption = (
        f"Bulk MB/s beside a raw Twisted producer, a reference point and not a ceiling"
        f" ({f'{median_of(runs)}; ' if runs else ''}whiskers: lowest and highest)"
    )
    return [(filename, caption)]


def bulk_label(case: str, entry: dict[str, Any]) -> str:
    """
    A bulk case's label: the raw producers' without the word "ceiling"
    older results carry, and a case that says it measured the default
    digest names the digest it measured (its C{algorithm}, or the one its
    label names) and calls it the default only if it is: BLAKE3, the
    first preference wherever it is installed (C{chunkwire[fast]}), not
    whatever one run used (an older run without blake3 labelled SHA-256
    "(default)").
    """
    label = str(entry.get("label", case)).replace(" (ceiling)", " (reference)")
    claim = _DEFAULT_CLAIM.search(label)
    if claim is None:
        return label
    label = label[: claim.start()] + label[claim.end() :]
    algorithm = entry.get("algorithm") or next((key for key, name in DIGEST_NAMES.items() if name in label), None)
    if algorithm is None:
        return f"{label} (the negotiated digest)"
    shown = DIGEST_NAMES.get(algorithm, algorithm)
    if "digest checked" in label:
        label = label.replace("digest checked", f"{shown} checked")
    elif shown not in label:
        label = f"{label}, {shown} checked"
    if algorithm == BLAKE3:
        return f"{label} (the default)"
    return f"{label} (not the default: {DIGEST_NAMES[BLAKE3]} is, with chunkwire[fast])"


def median_of(runs: int) -> str:
    """C{"median of 1 run"}, C{"median of 3 runs"}."""
    return f"median of {runs} run{'' if runs == 1 else 's'}"


def figures_for(plt: Any, path: Path, out: Path) -> tuple[list[tuple[str, str]], str]:
    data = json.loads(path.read_text("utf-8"))
    name = path.stem
    if "sizes" in data and isinstance(data.get("cells"), dict):
        figures = plot_ns_per_byte(plt, data, name, out)
    elif "columns" in data and isinstance(data.get("summary", {}).get("cells"), dict):
        figures = plot_rpc(plt, data, name, out)
    elif isinstance(data.get("cases"), dict) and all("mb_s" in case for case in data["cases"].values()):
        figures = plot_bulk(plt, data, name, out)
    elif "results" in data:
        figures = plot_calls(plt, data, name, out)
    else:
        figures = []
    return figures, machine_line(data)


TITLES = {
    "rpc.json": "RPC calls per second",
    "bulk.json": "Bulk transfer",
    "receive.json": "Receiving: cost per byte",
    "output.json": "Sending: cost per byte",
    "echo.json": "Echo round trips",
}
"""Section titles, in the page's order; other result files follow under their own names."""


def section(title: str, text: str) -> str:
    return f"{title}\n{'-' * len(title)}\n\n{text}"


def render(results: Path, docs: Path, reference: Path | None = None) -> str:
    """
    Draw every figure the results allow; return the page body, a section per
    result file.  Without results in C{results}, those in C{reference} (the
    shipped reference run) are drawn, under a note saying so.
    """
    files = sorted(results.glob("*.json")) if results.is_dir() else []
    if not files and reference is not None and reference.is_dir() and any(reference.glob("*.json")):
        return REFERENCE_NOTE + render(reference, docs)
    if not files:
        return NO_RESULTS
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (the ``docs`` extra has it): no figures were drawn.\n"
    out = docs / "_static" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    order = {name: index for index, name in enumerate(TITLES)}
    files.sort(key=lambda path: (order.get(path.name, len(order)), path.name))
    body, unplotted = [], []
    for name, what in EXPECTED.items():
        if not (results / name).is_file():
            body.append(
                section(
                    TITLES[name],
                    f"``{results.name}/{name}`` was not found when this site was built,"
                    f" so {what} are not shown; ``python3 dev.py bench`` writes it.\n",
                )
            )
    for path in files:
        try:
            figures, machine = figures_for(plt, path, out)
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as error:
            # A result file of another shape (an older benchmark, a hand edit) must not fail the docs build.
            plt.close("all")
            text = f"``{path.name}`` could not be plotted ({type(error).__name__}: {error}).\n"
            body.append(section(TITLES.get(path.name, path.stem), text))
            continue
        if not figures:
            unplotted.append(f"``{path.name}``")
            continue
        blocks = [
            f".. figure:: /_static/bench/{filename}\n   :width: 90%\n\n   {caption}.\n   Measured on: {machine}.\n"
            for filename, caption in figures
        ]
        body.append(section(TITLES.get(path.name, path.stem), "\n".join(blocks)))
    if unplotted:
        text = f"{', '.join(unplotted)}: tables only (the benchmark prints them); see the JSON for every run.\n"
        body.append(section("Other results", text))
    return "\n".join(body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=ROOT / "bench-results")
    parser.add_argument("--reference", type=Path, default=ROOT / "docs" / "bench-reference")
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    args = parser.parse_args()
    generated = args.out / "_generated"
    generated.mkdir(parents=True, exist_ok=True)
    (generated / "benchmarks.rst").write_text(render(args.results, args.out, args.reference), "utf-8")
    print(f"wrote {generated / 'benchmarks.rst'}")


if __name__ == "__main__":
    main()
