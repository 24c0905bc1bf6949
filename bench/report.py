"""Run every bench/bench_*.py with pyperf and print one table of speed ratios.

Usage: python bench/report.py [-k SUBSTRING] [--out DIR] [pyperf options...]

A script that sets ``RUNNER = "plain"`` is not a pyperf script: it is run as it is and
what it prints goes into the report (and the JSON it writes where ``BENCH_RECORD`` says into
results.json, as its ``figures``). One that sets ``RUNNER = "own"`` has a target of its own
(``OWN_TARGET``, e.g. ``make bench-vllm``) and is not run here (_common.RUNNERS). The
figures of the run go to DIR/results.json (build/bench by default) and bench/plots.py draws
them there, one chart per script. The exit status is 1 when a goal was missed (a ``MISS``
or ``MISSING`` line), after the whole report. ``BENCH_FULL=1`` in the environment runs
every size (bench/_common.py).
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

import pyperf

HERE = Path(__file__).parent
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE))

from _common import FAST, FULL, SEP, Target, runner  # noqa: E402


def load(script: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(script.stem, script)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(script: Path, pyperf_args: list[str]) -> dict[str, float]:
    out = RESULTS / f"{script.stem}.json"
    out.unlink(missing_ok=True)
    inherit = ["--inherit-environ=BENCH_FULL"] if FULL else []  # the workers' cases too
    subprocess.run([sys.executable, str(script), "--quiet", "-o", str(out), *inherit,
                    *pyperf_args], check=True)
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


def check(targets: list[Target], means: dict[str, float],
          record: list[dict[str, object]]) -> list[str]:
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
        record.append({"case": t.case, "impl": t.impl, "baseline": t.baseline,
                       "ratio": ratio, "goal": t.ratio, "ok": ratio >= t.ratio})
    return lines


def rates(module: ModuleType, means: dict[str, float],
          record: list[dict[str, object]]) -> list[str]:
    """The fast twin's GB/s of input in each case a script gives the input size of
    (``input_bytes()``), and its ``RATE_TARGETS`` (case: GB/s) checked."""
    sizes = module.input_bytes() if hasattr(module, "input_bytes") else {}
    goals: dict[str, float] = getattr(module, "RATE_TARGETS", {})
    lines = []
    for case, size in sizes.items():
        fast = means.get(f"{case}{SEP}{FAST}")
        if fast is None:
            continue
        rate = size / fast / 1e9
        goal = goals.get(case)
        verdict = "" if goal is None else ("  ok  " if rate >= goal else "  MISS") + \
            f" (goal {goal:g} GB/s)"
        lines.append(f"  {case:<44} {size / 1e3:9.1f} KB {rate:7.2f} GB/s{verdict}")
        if goal is not None:
            record.append({"case": case, "impl": FAST, "gbps": rate, "goal": goal,
                           "ok": rate >= goal})
    lines += [f"  MISSING {case}: no {FAST} figure" for case in goals if case not in sizes
              or f"{case}{SEP}{FAST}" not in means]
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
    report, missed = [], 0
    started = time.monotonic()
    results: dict[str, object] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine(),
        "full": FULL, "timer": "thread CPU time, mean of pyperf's values", "scripts": {}}
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
            done = subprocess.run([sys.executable, str(script)], check=True,
                                  capture_output=True, text=True,
                                  env={**os.environ, "BENCH_RECORD": str(record)})
            out = done.stdout.rstrip()
            missed += sum(line.lstrip().startswith("MISS") for line in out.splitlines())
            report += [f"\n== {script.stem} ({time.monotonic() - began:.0f} s) ==", out]
            results["scripts"][script.stem] = {"text": out}  # type: ignore[index]
            if record.exists():
                results["scripts"][script.stem]["figures"] = json.loads(  # type: ignore[index]
                    record.read_text())
            continue
        means = run(script, pyperf_args)
        record: list[dict[str, object]] = []
        goals = check(list(getattr(module, "TARGETS", [])), means, record)
        missed += sum(line.lstrip().startswith(("MISS", "MISSING")) for line in goals)
        report += [f"\n== {script.stem} ({time.monotonic() - began:.0f} s) ==", *table(means)]
        if goals:
            report += ["  goals:", *goals]
        throughput = rates(module, means, record)
        missed += sum(line.endswith("GB/s)") and " MISS " in line or
                      line.lstrip().startswith("MISSING") for line in throughput)
        report += throughput
        cases: dict[str, dict[str, float]] = {}
        for full, mean in means.items():
            case, _, impl = full.partition(SEP)
            cases.setdefault(case, {})[impl] = mean
        results["scripts"][script.stem] = {  # type: ignore[index]
            "title": (module.__doc__ or script.stem).strip().splitlines()[0],
            "seconds": cases, "goals": record}
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
    print(f"\n{len(scripts)} scripts, {missed} goal(s) missed, "
          f"{results['wall seconds']} s; figures in {args.out / 'results.json'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
