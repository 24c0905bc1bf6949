"""Charts of a bench/report.py run: one per hot path (per bench script), tokcore against the
baselines of each case, all from the same run (results.json).

Usage: python bench/plots.py [RESULTS_JSON] [--docs]

``--docs`` also copies the charts into docs/_static/bench/ with the run's results.json and
rewrites the table of docs/benchmarks.md (between its ``bench-table`` markers) from the same
figures, so that the page's numbers are the charts' numbers.
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
from _common import FAST, REFERENCE  # noqa: E402

DOCS = HERE.parent / "docs"
STATIC = DOCS / "_static" / "bench"
PAGE = DOCS / "benchmarks.md"
BEGIN, END = "<!-- bench-table: begin (bench/plots.py --docs) -->", "<!-- bench-table: end -->"
TOKCORE_COLOUR, BASELINE_COLOUR = "#1f6fb4", "#b0b0b0"
NAMES = {"bench_ids": "Token ids", "bench_b64": "Base64", "bench_sse": "Usage relay",
         "bench_json": "JSON members", "bench_pickle": "Pickling"}


def shown(impls: dict[str, float]) -> list[tuple[str, float]]:
    """The implementations a chart shows: tokcore's fast twin and every baseline (the Python
    reference twins are for checking, not for comparing), fastest first."""
    rows = [(impl, t) for impl, t in impls.items() if not impl.startswith(REFERENCE)]
    return sorted(rows, key=lambda row: row[1])


def fmt_time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def rows(script: dict[str, Any]) -> list[tuple[str, str, float, float | None]]:
    """(case, impl, seconds, how many times faster tokcore-c is) of one script."""
    out = []
    for case, impls in script["seconds"].items():
        fast = impls.get(FAST)
        for impl, seconds in shown(impls):
            ratio = fast and seconds / fast if "tokcore" not in impl else None
            out.append((case, impl, seconds, ratio))
    return out


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


def verdict(ratio: float | None) -> str:
    if not ratio:
        return ""
    return f"{ratio:.1f}x faster" if ratio >= 1 else f"{1 / ratio:.1f}x slower"


def ratio_note(ratio: float | None) -> str:
    if not ratio:
        return ""
    return f"  ({ratio:.1f}x)" if ratio >= 1 else f"  ({ratio:.2f}x: tokcore-c slower)"


def table(results: dict[str, Any]) -> str:
    machine = results["machine"]
    lines = [f"Run of {results['date']} on {machine['cpu']} ({machine['cores']} cores, "
             f"{machine['system']}, Python {machine['python']}, base64 kernels "
             f"{machine['b64 kernels']}); {results['timer']}.", "",
             "| hot path | case | implementation | time per call | tokcore-c is |",
             "| --- | --- | --- | --- | --- |"]
    for stem, script in results["scripts"].items():
        if "seconds" not in script:
            continue
        for case, impl, seconds, ratio in rows(script):
            lines.append(f"| {NAMES.get(stem, stem)} | {case} | {impl.replace('|', '/')} | "
                         f"{fmt_time(seconds)} | {verdict(ratio)} |")
    return "\n".join(lines)


def to_docs(results_path: Path, charts: list[Path]) -> None:
    STATIC.mkdir(parents=True, exist_ok=True)
    for chart in charts:
        shutil.copy(chart, STATIC / chart.name)
    shutil.copy(results_path, STATIC / "results.json")
    page = PAGE.read_text()
    head, _, rest = page.partition(BEGIN)
    _, _, tail = rest.partition(END)
    results = json.loads(results_path.read_text())
    PAGE.write_text(f"{head}{BEGIN}\n{table(results)}\n{END}{tail}")


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
        print(f"docs: {STATIC} and the table of {PAGE}")


if __name__ == "__main__":
    main()
