"""Draws docs/_static/readiness.svg from the readiness tables in docs/benchmarks.md: each cell's
predicted map time against the measured one, with the ±20% target band. The figures are the
recorded ones (nothing is measured here); rerun after updating the tables:

    python docs/plot_benchmarks.py
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after the backend is chosen

HERE = Path(__file__).resolve().parent


def cells() -> dict[str, list[tuple[str, float, float]]]:
    """``{"one node, 2 CPUs": [(cell, predicted_s, measured_s), ...], ...}`` from the page."""
    text = (HERE / "benchmarks.md").read_text()
    section = text[text.index("(bench-readiness)=") : text.index("(bench-slurm)=")]
    tables: dict[str, list[tuple[str, float, float]]] = {}
    current = None
    for line in section.splitlines():
        if line.endswith(":") and not line.startswith("|"):
            current = line.rstrip(":")
            tables[current] = []
        row = re.match(r"\| ([^|]+) \| \d+ \| \d+ \| [\d.]+ \| ([\d.]+) \| ([\d.]+) \|", line)
        if row and current:
            tables[current].append((row[1].strip(), float(row[2]), float(row[3])))
    return tables


def main() -> None:
    fig, ax = plt.subplots(figsize=(6, 4.5))
    top = 0.0
    for (label, rows), marker in zip(cells().items(), ("o", "s"), strict=False):
        ax.scatter([r[2] for r in rows], [r[1] for r in rows], marker=marker, label=label)
        top = max(top, *(max(r[1], r[2]) for r in rows))
    line = [0.04, top * 1.2]
    ax.plot(line, line, color="black", linewidth=0.8)
    ax.fill_between(line, [x * 0.8 for x in line], [x * 1.2 for x in line], alpha=0.15)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured map time (s)")
    ax.set_ylabel("predicted by readiness (s)")
    ax.set_title("readiness: prediction against the map it predicts")
    ax.legend()
    fig.tight_layout()
    fig.savefig(HERE / "_static" / "readiness.svg", metadata={"Date": None})


if __name__ == "__main__":
    main()
