"""Charts of a bench/report.py run: one per hot path (per bench script), tokcore against the
baselines of each case, all from the same run (results.json).

Usage: python bench/plots.py [RESULTS_JSON] [--docs]

``--docs`` also copies the charts into docs/_static/bench/ with the run's results.json and
rewrites the table of docs/benchmarks.md and the README's figures from it (bench/figures.py),
so that the page's, the README's and the charts' numbers are the same run's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import figures  # noqa: E402
from figures import NAMES, fmt_time, rows  # noqa: E402

STATIC = figures.RECORDED.parent
TOKCORE_COLOUR, BASELINE_COLOUR = "#1f6fb4", "#b0b0b0"


def draw(results: dict[str, Any], out: Path) -> list[Path]:
    charts = []
    machine = results["machine"]
    for stem, script in results["scripts"].items():
        if "seconds" not in script:
            continue  # a plain script's text
        data = rows(script)
        labels, values, colours, notes, groups = [], [], [], [], []
        y = 0.0
        positions = []
        for case in script["seconds"]:
            groups.append((y, case))
            y += 1
            for row_case, impl, seconds, ratio in data:
                if row_case != case:
                    continue
                positions.append(y)
                labels.append(impl)
                values.append(seconds * 1e6)
                colours.append(TOKCORE_COLOUR if "tokcore" in impl else BASELINE_COLOUR)
                notes.append(fmt_time(seconds) + ratio_note(ratio))
                y += 1
            y += 0.4
        fig, ax = plt.subplots(figsize=(9, 0.32 * y + 1.4))
        ax.barh(positions, values, color=colours, height=0.75)
        ax.set_xscale("log")
        ax.set_yticks(positions, labels, fontsize=8)
        ax.set_ylim(y - 0.2, -0.8)  # top to bottom, room above the first case's name
        for pos, value, note in zip(positions, values, notes):
            ax.text(value * 1.05, pos, note, va="center", fontsize=7)
        for pos, case in groups:
            ax.text(0.0, pos, case, transform=ax.get_yaxis_transform(), fontsize=9,
                    fontweight="bold", va="center", ha="left")
        ax.set_xlim(min(values) / 2, max(values) * 8)
        ax.set_xlabel("microseconds per call (log scale; shorter is faster). "
                      "(Nx): how many times faster tokcore-c is", fontsize=8)
        ax.set_title(f"{NAMES.get(stem, stem)}: tokcore (blue) and baselines, one run\n"
                     f"{machine['cpu']}, {machine['cores']} cores, Python {machine['python']},"
                     f" {results['date']}", fontsize=9)
        ax.grid(axis="x", which="both", alpha=0.25)
        fig.tight_layout()
        path = out / f"{stem}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        charts.append(path)
    return charts


def ratio_note(ratio: float | None) -> str:
    if not ratio:
        return ""
    return f"  ({ratio:.1f}x)" if ratio >= 1 else f"  ({ratio:.2f}x: tokcore-c slower)"


def to_docs(results_path: Path, charts: list[Path]) -> None:
    STATIC.mkdir(parents=True, exist_ok=True)
    for chart in charts:
        shutil.copy(chart, STATIC / chart.name)
    shutil.copy(results_path, figures.RECORDED)
    for path, text in figures.pages(figures.load()).items():
        path.write_text(text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, nargs="?",
                        default=HERE.parent / "build" / "bench" / "results.json")
    parser.add_argument("--docs", action="store_true")
    args = parser.parse_args()
    results = json.loads(args.results.read_text())
    charts = draw(results, args.results.parent)
    for chart in charts:
        print(chart)
    if args.docs:
        to_docs(args.results, charts)
        print(f"docs: {STATIC}, the table of {figures.PAGE} and the README's figures")


if __name__ == "__main__":
    main()
