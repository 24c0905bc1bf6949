"""Run every bench/bench_*.py with pyperf and print one table of speed ratios.

Usage: python bench/report.py [-k SUBSTRING] [pyperf options...]

A script that sets ``RUNNER = "plain"`` is not a pyperf script: it is run as it is and
what it prints goes into the report.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pyperf

HERE = Path(__file__).parent
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE))

from _common import FAST, SEP, Target  # noqa: E402


def load(script: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(script.stem, script)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(script: Path, pyperf_args: list[str]) -> dict[str, float]:
    out = RESULTS / f"{script.stem}.json"
    out.unlink(missing_ok=True)
    subprocess.run([sys.executable, str(script), "--quiet", "-o", str(out), *pyperf_args],
                   check=True)
    suite = pyperf.BenchmarkSuite.load(str(out))
    return {bench.get_name(): bench.mean() for bench in suite.get_benchmarks()}


def fmt_time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if seconds >= scale:
            return f"{seconds / scale:8.2f} {unit}"
    return f"{seconds * 1e9:8.2f} ns"


def table(means: dict[str, float]) -> list[str]:
    cases: dict[str, dict[str, float]] = {}
    for full, mean in means.items():
        case, _, impl = full.partition(SEP)
        cases.setdefault(case, {})[impl] = mean
    lines = [f"  {'case':<44} {'impl':<34} {'mean':>11}  {FAST} is"]
    for case, impls in cases.items():
        fast = impls.get(FAST)
        for impl, mean in impls.items():
            ratio = f"{mean / fast:7.2f}x faster" if fast and impl != FAST else ""
            lines.append(f"  {case:<44} {impl:<34} {fmt_time(mean)}  {ratio}")
    return lines


def check(targets: list[Target], means: dict[str, float]) -> list[str]:
    lines = []
    for t in targets:
        fast = means.get(f"{t.case}{SEP}{t.impl}")
        base = means.get(f"{t.case}{SEP}{t.baseline}")
        if fast is None or base is None:
            lines.append(f"  MISSING {t.case}: {t.impl} vs {t.baseline}")
            continue
        ratio = base / fast
        verdict = "ok  " if ratio >= t.ratio else "MISS"
        lines.append(f"  {verdict} {t.case}: {t.impl} {ratio:6.2f}x faster than {t.baseline}"
                     f" (goal {t.ratio:g}x)")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-k", dest="only", default="", help="run scripts whose name has this")
    args, pyperf_args = parser.parse_known_args()
    RESULTS.mkdir(exist_ok=True)
    scripts = [s for s in sorted(HERE.glob("bench_*.py")) if args.only in s.stem]
    report, missed = [], 0
    for script in scripts:
        print(f"running {script.name} ...", flush=True)
        module = load(script)
        if getattr(module, "RUNNER", "pyperf") == "plain":  # prints its own figures
            done = subprocess.run([sys.executable, str(script)], check=True,
                                  capture_output=True, text=True)
            report += [f"\n== {script.stem} ==", done.stdout.rstrip()]
            continue
        means = run(script, pyperf_args)
        goals = check(list(getattr(module, "TARGETS", [])), means)
        missed += sum(line.lstrip().startswith(("MISS", "MISSING")) for line in goals)
        report += [f"\n== {script.stem} ==", *table(means)]
        if goals:
            report += ["  goals:", *goals]
    print("\n".join(report))
    print(f"\n{len(scripts)} scripts, {missed} goal(s) missed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
