"""The performance guard: instructions executed per event, byte, id or call of each hot path
(bench/hotpaths.py), counted by callgrind and held against budgets checked into the repo
(bench/budgets.json). A noisy machine changes the time a case takes, not the number of
instructions the same binary executes, so this check can run in CI and be believed.

Usage: python bench/guard.py [--update] [-k SUBSTRING] [--budgets FILE] [--tree DIR]

``--tree DIR`` counts another tree's in-place build instead (a commit's, as bench/compare.py
builds it in build/compare/<sha>): the same cases, for an exact before and after.

Counting is bench/instructions.py's: the work runs ``reps`` and ``2 * reps`` times and the
figure is the difference divided by the extra work, so start-up, set-up and the counters'
own calls cancel out. Here all cases run in one Python process (bench/icount/marks.c zeroes
and dumps callgrind's counters around each stretch), not two processes per case: Python's
start-up with tokcore is about 0.3 G instructions, 30 times the work counted.

A case fails when it executes more than ``TOLERANCE`` above its budget, in the whole run and
again counted alone (in a process of its own: the layout the other cases leave moves a case's
count by a few instructions). ``--update`` writes the counts of this run as the budgets, with
the machine they were taken on: a change that makes a case cheaper lowers its budget in the
same commit (docs/contributing/benchmarks.md).
Counts depend on the compiler, the CPU's features (AVX2 or not) and the Python version; on
another machine the guard says so, and its counts are a comparison only where those agree.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

from instructions import BUILD, ROOT_DIR, need, run

HERE = Path(__file__).resolve().parent
BUDGETS = HERE / "budgets.json"
TOLERANCE = 0.03  # the per-case slack: counts move this much only with the code or compiler
OUT = BUILD / "guard"
sys.path.insert(0, str(ROOT_DIR))  # this tree's tokcore, as the counted process has it


def machine(kernels: dict[str, str]) -> dict[str, str]:
    """What the counts depend on besides the code (``kernels``: those the counted process
    ran)."""
    cpu = ""
    try:
        cpu = re.search(r"model name\s*:\s*(.*)", Path("/proc/cpuinfo").read_text()).group(1)
    except (OSError, AttributeError):
        cpu = platform.processor()
    cc = run([need("cc", "gcc"), "--version"]).stdout.splitlines()[0]
    valgrind = run([need("valgrind", "valgrind"), "--version"]).stdout.strip()
    return {"cpu": cpu, "compiler": cc, "python": platform.python_version(),
            "valgrind": valgrind, **{f"{kind} kernels": name for kind, name in kernels.items()}}


def count(cases: list[str], tree: Path = ROOT_DIR) -> tuple[dict[str, tuple[str, float]],
                                                             dict[str, str]]:
    """Instructions per unit of each case, {name: (unit, count)}, and the kernels counted."""
    import hotpaths

    cc = need("cc", "gcc")
    valgrind = need("valgrind", "valgrind")
    OUT.mkdir(parents=True, exist_ok=True)
    lib = OUT / "marks.so"
    run([cc, "-O2", "-shared", "-fPIC", str(HERE / "icount" / "marks.c"), "-o", str(lib)])
    for old in OUT.glob("cg.out*"):
        old.unlink()
    # no threads but the main one: numpy's BLAS starts idle workers whose spinning callgrind
    # would count with the work; a fixed hash seed: the same dict layouts in every run
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=str(tree), OPENBLAS_NUM_THREADS="1",
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               TOKCORE_REQUIRE_EXTENSIONS="1")
    env.pop("TOKCORE_NO_EXTENSIONS", None)
    subprocess.run([valgrind, "--tool=callgrind", f"--callgrind-out-file={OUT / 'cg.out'}",
                    "--dump-instr=no", "--compress-strings=no", sys.executable,
                    str(HERE / "hotpaths.py"), str(lib), f"--kernels={OUT / 'kernels.json'}",
                    *cases],
                   env=env, check=True, stderr=subprocess.DEVNULL)
    stretches: dict[str, dict[int, int]] = {}
    units: dict[str, int] = {}
    for dump in OUT.glob("cg.out.*"):
        text = dump.read_text(errors="replace")
        label = re.search(r"^desc: Trigger: Client Request: (.*)$", text, re.M)
        if label is None:
            continue  # the dump at exit
        name, reps, unit_count = label.group(1).rsplit("|", 2)
        total = re.search(r"^(?:totals|summary): (\d+)", text, re.M)
        assert total, dump
        stretches.setdefault(name, {})[int(reps)] = int(total.group(1))
        units[name] = int(unit_count)
    results = {}
    for case in hotpaths.CASES:
        if case.name not in stretches:
            continue
        counts = stretches[case.name]
        low, high = counts[case.reps], counts[2 * case.reps]
        results[case.name] = (case.per, (high - low) / (case.reps * units[case.name]))
    return results, json.loads((OUT / "kernels.json").read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true", help="write the counts as budgets")
    parser.add_argument("-k", dest="only", default="", help="cases whose name has this")
    parser.add_argument("--budgets", type=Path, default=BUDGETS)
    parser.add_argument("--tree", type=Path, default=ROOT_DIR)
    args = parser.parse_args()
    if args.update and args.tree != ROOT_DIR:
        parser.error("--update writes this tree's budgets: not with --tree")
    import hotpaths

    names = [c.name for c in hotpaths.CASES if args.only in c.name and c.available()]
    started = time.monotonic()
    results, kernels = count(names, args.tree.resolve())
    here = machine(kernels)
    saved = json.loads(args.budgets.read_text()) if args.budgets.exists() else {}
    budgets = saved.get("cases", {})
    if saved.get("machine") and saved["machine"] != here:
        print(f"guard: the budgets were counted on {saved['machine']}\n"
              f"guard: this machine is {here}: counts compare only where these agree")
    # A case over budget in the whole run is counted again in a process of its own: the
    # cases share one process, and a case's count moves a few instructions with the memory
    # layout the cases before it leave (a writer case measured 925 in a whole run and 904
    # alone, the same binary). A change of the code shows in both counts; the lower decides.
    alone: dict[str, float] = {}
    if not args.update:
        for name, (_, value) in results.items():
            budget = budgets.get(name, {}).get("budget")
            if budget is not None and value / budget - 1 > TOLERANCE:
                alone[name] = count([name], args.tree.resolve())[0][name][1]
    failed = 0
    print(f"  {'case':<44} {'per':<6} {'instructions':>13} {'budget':>13}")
    for name, (per, value) in results.items():
        budget = budgets.get(name, {}).get("budget")
        if budget is None:
            verdict = "NEW" if args.update else "NO BUDGET"
            failed += not args.update
        else:
            over = min(value, alone.get(name, value)) / budget - 1
            verdict = f"{over:+6.1%}"
            if name in alone:
                verdict += f" (counted alone: {alone[name]:.4g})"
            if over > TOLERANCE:
                verdict += "  OVER BUDGET"
                failed += 1
        shown = "-" if budget is None else f"{budget:13.4g}"
        print(f"  {name:<44} {per:<6} {value:13.4g} {shown:>13}  {verdict}")
    print(f"guard: {len(results)} cases counted in {time.monotonic() - started:.0f} s")
    if args.update:
        budgets.update({name: {"per": per, "budget": float(f"{value:.5g}")}
                        for name, (per, value) in results.items()})
        args.budgets.write_text(json.dumps(
            {"machine": here, "taken": time.strftime("%Y-%m-%d", time.gmtime()),
             "tolerance": TOLERANCE, "cases": budgets}, indent=1) + "\n")
        print(f"guard: budgets written to {args.budgets}")
        return 0
    if failed:
        print(f"guard: {failed} case(s) over budget by more than {TOLERANCE:.0%} (or without"
              " one); a change that is worth its cost updates the budget: make bench-guard"
              " UPDATE=1")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
