"""Run every bench/bench_*.py with pyperf and print one table of speed ratios.

Usage: python bench/report.py [-k SUBSTRING] [--out DIR] [pyperf options...]

A script that sets ``RUNNER = "plain"`` is not a pyperf script: it is run as it is and
what it prints goes into the report (and the JSON it writes where ``BENCH_RECORD`` says into
results.json, as its ``figures``). One that sets ``RUNNER = "own"`` has a target of its own
(``OWN_TARGET``, e.g. ``make bench-vllm``) and is not run here (_common.RUNNERS). The
figures of the run go to DIR/results.json (build/bench by default) and bench/plots.py draws
them there, one chart per script. A figure is the best of pyperf's values (``Figure`` says
why), printed with their mean and spread (standard deviation) and its repeats (how many
values, and how many calls each value timed). The exit status is 1 when a goal was missed
(a ``MISS`` or ``MISSING`` line), after the whole report, whose last line names every
missed goal with its figure. ``BENCH_FULL=1`` in the environment runs every size
(bench/_common.py).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

import pyperf

HERE = Path(__file__).parent
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE))

from _common import FAST, FULL, PASSES, PROCESSES, SEP, Target, runner  # noqa: E402


def load(script: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(script.stem, script)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Figure(NamedTuple):
    """One implementation in a case: the best of pyperf's values (the figure: the ratios and
    goals compare these), their mean and standard deviation, how many values (``processes``
    worker processes, each giving its share) and how many calls each value timed
    (``loops``).

    Each value is the thread CPU time of a call (bench/_common.py: cpu_timed), averaged over
    ``loops`` calls. On a machine shared with other work, what disturbs a value (another job
    evicting the caches, a burst of memory traffic on the other core, a worker whose buffers
    landed badly) only ever adds time, and it falls on one implementation's worker and not
    the other's: the least disturbed value is the code's, and a ratio of the best values
    moves much less between runs than one of the means (issue 52: 1 to 7 % against up to
    27 % in four runs under load 7 to 11). The mean and spread are printed beside it."""

    best: float
    mean: float
    stdev: float
    values: int
    processes: int
    loops: tuple[int, ...]  # each worker's, the passes' calibrations may differ


def run(script: Path, pyperf_args: list[str]) -> dict[str, Figure]:
    """The script's figures: ``PASSES`` runs of it, one after the other, into one result."""
    out = RESULTS / f"{script.stem}.json"
    out.unlink(missing_ok=True)
    inherit = ["--inherit-environ=BENCH_FULL"] if FULL else []  # the workers' cases too
    for _ in range(PASSES):
        subprocess.run([sys.executable, str(script), "--quiet", "--append", str(out),
                        *inherit, *pyperf_args], check=True)
    suite = pyperf.BenchmarkSuite.load(str(out))
    figures = {}
    for bench in suite.get_benchmarks():
        values = bench.get_values()
        timed = [run for run in bench.get_runs() if run.values]  # not the calibrations
        figures[bench.get_name()] = Figure(
            min(values), bench.mean(), bench.stdev() if len(values) > 1 else 0.0, len(values),
            len(timed), tuple(sorted({run.get_loops() for run in timed})))
    return figures


def fmt_time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if seconds >= scale:
            return f"{seconds / scale:8.2f} {unit}"
    return f"{seconds * 1e9:8.2f} ns"


def table(figures: dict[str, Figure]) -> list[str]:
    cases: dict[str, dict[str, Figure]] = {}
    for full, figure in figures.items():
        case, _, impl = full.partition(SEP)
        cases.setdefault(case, {})[impl] = figure
    width = max([34, *(len(impl) for impls in cases.values() for impl in impls)])
    lines = [f"  {'case':<44} {'impl':<{width}} {'best':>11} {'mean':>11} {'+- std':>7} "
             f"{'repeats':>10}  {FAST} is"]
    for case, impls in cases.items():
        fast = impls.get(FAST)
        for impl, figure in impls.items():
            ratio = (f"{figure.best / fast.best:7.2f}x faster" if fast and impl != FAST
                     else "")
            spread = f"{100 * figure.stdev / figure.mean:5.1f} %" if figure.mean else ""
            lines.append(f"  {case:<44} {impl:<{width}} {fmt_time(figure.best)} "
                         f"{fmt_time(figure.mean)} {spread:>7} {repeats(figure):>10}  {ratio}")
    return lines


def repeats(figure: Figure) -> str:
    """``values x calls``: how many values there were, and how many calls each timed (the
    passes' calibrations may give different counts: ``6 x 2048/4096``)."""
    return f"{figure.values} x {'/'.join(map(str, figure.loops))}"


def check(targets: list[Target], figures: dict[str, Figure],
          record: list[dict[str, object]], missed: list[str]) -> list[str]:
    """Each goal's line; a missed one's figure is also added to ``missed``."""
    lines = []
    for t in targets:
        fast = figures.get(f"{t.case}{SEP}{t.impl}")
        base = figures.get(f"{t.case}{SEP}{t.baseline}")
        if fast is None or base is None:
            lines.append(f"  MISSING {t.case}: {t.impl} vs {t.baseline}")
            missed.append(f"{t.case}: no figure of {t.impl if fast is None else t.baseline}")
            continue
        ratio = base.best / fast.best
        ok = ratio >= t.ratio
        lines.append(f"  {'ok  ' if ok else 'MISS'} {t.case}: {t.impl} {ratio:6.2f}x faster "
                     f"than {t.baseline} (goal {t.ratio:.3g}x)")
        if not ok:
            impl = "" if t.impl == FAST else f"{t.impl} "
            missed.append(f"{t.case}: {impl}{ratio:.2f}x {t.baseline}, goal {t.ratio:.3g}x")
        record.append({"case": t.case, "impl": t.impl, "baseline": t.baseline,
                       "ratio": ratio, "goal": t.ratio, "ok": ok})
    return lines


def rates(module: ModuleType, figures: dict[str, Figure],
          record: list[dict[str, object]], missed: list[str]) -> list[str]:
    """The fast twin's GB/s of input in each case a script gives the input size of
    (``input_bytes()``), and its ``RATE_TARGETS`` (case: GB/s) checked."""
    sizes = module.input_bytes() if hasattr(module, "input_bytes") else {}
    goals: dict[str, float] = getattr(module, "RATE_TARGETS", {})
    lines = []
    for case, size in sizes.items():
        fast = figures.get(f"{case}{SEP}{FAST}")
        if fast is None:
            continue
        rate = size / fast.best / 1e9
        goal = goals.get(case)
        verdict = "" if goal is None else ("  ok  " if rate >= goal else "  MISS") + \
            f" (goal {goal:g} GB/s)"
        lines.append(f"  {case:<44} {size / 1e3:9.1f} KB {rate:7.2f} GB/s{verdict}")
        if goal is not None:
            record.append({"case": case, "impl": FAST, "gbps": rate, "goal": goal,
                           "ok": rate >= goal})
            if rate < goal:
                missed.append(f"{case}: {rate:.2f} GB/s, goal {goal:g} GB/s")
    for case in goals:
        if case not in sizes or f"{case}{SEP}{FAST}" not in figures:
            lines.append(f"  MISSING {case}: no {FAST} figure")
            missed.append(f"{case}: no {FAST} figure")
    return ["  throughput of the input:", *lines] if lines else []


def machine() -> dict[str, str]:
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    from tokcore._kernels import kernels_in_use
    return {"cpu": cpu, "cores": str(os.cpu_count()), "python": platform.python_version(),
            "system": f"{platform.system()} {platform.release()}",
            "b64 kernels": kernels_in_use().get("b64", ("?", ()))[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-k", dest="only", default="", help="run scripts whose name has this")
    parser.add_argument("--out", type=Path, default=HERE.parent / "build" / "bench",
                        help="where results.json and the charts go")
    args, pyperf_args = parser.parse_known_args()
    RESULTS.mkdir(exist_ok=True)
    scripts = [s for s in sorted(HERE.glob("bench_*.py")) if args.only in s.stem]
    report: list[str] = []
    missed: list[str] = []  # each missed goal with its figure, for the last line
    started = time.monotonic()
    results: dict[str, object] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine(),
        "full": FULL, "timer": "thread CPU time, the best of pyperf's values", "scripts": {}}
    for script in scripts:
        print(f"running {script.name} ...", flush=True)
        began = time.monotonic()
        module = load(script)
        kind = runner(module)
        if kind == "own":  # its own target and set-up (make bench-vllm: vLLM's venv)
            report += [f"\n== {script.stem}: not run here: {module.OWN_TARGET} =="]
            continue
        if kind == "plain":  # prints its own figures
            # and may write them as JSON where BENCH_RECORD says (bench_e2e.py does)
            record = RESULTS / f"{script.stem}.json"
            record.unlink(missing_ok=True)
            done = subprocess.run([sys.executable, str(script)], capture_output=True,
                                  text=True, env={**os.environ, "BENCH_RECORD": str(record)})
            if done.returncode:  # what it said, not only its exit status
                sys.exit(f"{done.stdout}{done.stderr}\n{script.name} failed "
                         f"(exit status {done.returncode})")
            out = done.stdout.rstrip()
            missed += [line.strip().removeprefix("MISSING").removeprefix("MISS").strip()
                       for line in out.splitlines() if line.lstrip().startswith("MISS")]
            report += [f"\n== {script.stem} ({time.monotonic() - began:.0f} s) ==", out]
            results["scripts"][script.stem] = {"text": out}  # type: ignore[index]
            if record.exists():
                results["scripts"][script.stem]["figures"] = json.loads(  # type: ignore[index]
                    record.read_text())
            continue
        figures = run(script, pyperf_args)
        record: list[dict[str, object]] = []
        goals = check(list(getattr(module, "TARGETS", [])), figures, record, missed)
        report += [f"\n== {script.stem} ({time.monotonic() - began:.0f} s) ==",
                   *table(figures)]
        if goals:
            report += ["  goals:", *goals]
        report += rates(module, figures, record, missed)
        cases: dict[str, dict[str, float]] = {}
        means: dict[str, dict[str, float]] = {}
        spread: dict[str, dict[str, float]] = {}
        counts: dict[str, dict[str, list[int]]] = {}
        for full, figure in figures.items():
            case, _, impl = full.partition(SEP)
            cases.setdefault(case, {})[impl] = figure.best
            means.setdefault(case, {})[impl] = figure.mean
            spread.setdefault(case, {})[impl] = figure.stdev
            counts.setdefault(case, {})[impl] = [figure.values, *figure.loops]
        results["scripts"][script.stem] = {  # type: ignore[index]
            "title": (module.__doc__ or script.stem).strip().splitlines()[0],
            "seconds": cases, "mean": means, "stdev": spread, "repeats": counts,
            "goals": record}
    print(f"each value: the thread CPU time of one call, averaged over the value's calls; "
          f"best: the least of a case's values (the ratios and goals compare these), mean "
          f"+- their standard deviation; repeats: how many values (from {PASSES} runs of "
          f"each script, {PROCESSES} worker process(es) a case in each, unless pyperf's "
          f"options say otherwise) x how many calls each value timed")
    print("\n".join(report))
    results["wall seconds"] = round(time.monotonic() - started)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    try:
        import plots
    except ImportError as exc:  # matplotlib is in the bench extra; say so, do not fail
        print(f"\nno charts: {exc}")
    else:
        for chart in plots.draw(results, args.out):
            print(f"chart: {chart}")
    names = f": {'; '.join(missed)};" if missed else ","
    print(f"\n{len(scripts)} scripts, {len(missed)} goal(s) missed{names} "
          f"{results['wall seconds']} s; figures in {args.out / 'results.json'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
