"""Draw the benchmark figures for docs/benchmarks.rst from bench-results/*.json.

    python docs/make_plots.py [--results bench-results] [--out docs]

Writes PNGs into docs/_static/bench/ and the page body docs/_generated/benchmarks.rst
(figures with the machine and versions under each).  Without results, or
without matplotlib, the page body says how to produce them; the docs build
either way.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NO_RESULTS = """\
No benchmark results were found when this site was built.  Produce them with
``tox -e bench`` (or ``python3 dev.py bench``), then rebuild with
``tox -e docs``.
"""


def machine_line(data: dict[str, Any]) -> str:
    """One line naming the machine and versions that measured C{data}."""
    m = data.get("machine") or data.get("config") or {}
    parts = [m.get("cpu"), f"{m['nproc']} CPUs" if m.get("nproc") else None, m.get("python")]
    parts += [f"{name} {m[name]}" for name in ("twisted", "foolscap", "msgpack") if m.get(name)]
    parts += [m.get("platform"), m.get("date")]
    commit = m.get("chunkwire_commit")
    if commit:
        parts.append(f"chunkwire {commit[:10]}")
    return ", ".join(str(p) for p in parts if p) or "machine not recorded"


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
    ax.set_title(str(data.get("benchmark", name)))
    ax.invert_yaxis()
    fig.tight_layout()
    filename = f"{name}-calls.png"
    fig.savefig(out / filename, dpi=110)
    plt.close(fig)
    return [(filename, f"{data.get('benchmark', name)}: calls per second")]


def figures_for(plt: Any, path: Path, out: Path) -> tuple[list[tuple[str, str]], str]:
    data = json.loads(path.read_text("utf-8"))
    name = path.stem
    if "sizes" in data and isinstance(data.get("cells"), dict):
        figures = plot_ns_per_byte(plt, data, name, out)
    elif "results" in data:
        figures = plot_calls(plt, data, name, out)
    else:
        figures = []
    return figures, machine_line(data)


def render(results: Path, docs: Path) -> str:
    """Draw every figure the results allow; return the page body."""
    files = sorted(results.glob("*.json")) if results.is_dir() else []
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
    body = []
    for path in files:
        try:
            figures, machine = figures_for(plt, path, out)
        except (ValueError, KeyError, TypeError) as error:
            body.append(f"``{path.name}`` could not be plotted ({type(error).__name__}: {error}).\n")
            continue
        for filename, caption in figures:
            figure = f".. figure:: /_static/bench/{filename}\n   :width: 90%\n\n"
            body.append(figure + f"   {caption}.\n   Measured on: {machine}.\n")
    body.append(".. TODO (issue 6): bulk MB/s against the ceiling, once the bulk benchmark writes its JSON.\n")
    return "\n".join(body) if len(body) > 1 else NO_RESULTS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=ROOT / "bench-results")
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    args = parser.parse_args()
    generated = args.out / "_generated"
    generated.mkdir(exist_ok=True)
    (generated / "benchmarks.rst").write_text(render(args.results, args.out), "utf-8")
    print(f"wrote {generated / 'benchmarks.rst'}")


if __name__ == "__main__":
    main()
