"""The pyperf script of bench/compare.py: the hot-path cases on one tree's build.

Usage: python bench/_timed.py --tree DIR (--list | --cases JSON [--baselines] [pyperf opts])

``--tree`` is put first on ``sys.path`` before tokcore is imported, so the cases (this
tree's bench/hotpaths.py) run on that tree's build; ``--list`` prints the names of the
cases it has. ``--baselines`` adds the baselines the goals name.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

TREE = Path(sys.argv[sys.argv.index("--tree") + 1]).resolve()
sys.path.insert(0, str(TREE))

import hotpaths  # noqa: E402
from _common import cpu_timed  # noqa: E402

import tokcore  # noqa: E402

assert Path(tokcore.__file__).resolve().parent == TREE / "tokcore", tokcore.__file__
assert tokcore.BACKEND == "cython", f"{TREE}: tokcore's backend is {tokcore.BACKEND}"


def main() -> None:
    if "--list" in sys.argv:
        print(json.dumps([case.name for case in hotpaths.CASES
                          if case.available() and not case.consumes]))
        return
    import pyperf

    def forward(cmd: list[str], args: object) -> None:
        cmd.extend(["--tree", str(TREE), "--cases", args.cases])  # type: ignore[attr-defined]
        if args.baselines:  # type: ignore[attr-defined]
            cmd.append("--baselines")

    # many short values, timed in thread CPU time (bench/_common.py: cpu_timed): on a shared
    # machine some values run undisturbed, and the best of them is what compare.py takes
    runner = pyperf.Runner(processes=2, values=15, warmups=1, min_time=0.005,
                           add_cmdline_args=forward)
    runner.argparser.add_argument("--tree")
    runner.argparser.add_argument("--cases")
    runner.argparser.add_argument("--baselines", action="store_true")
    args = runner.parse_args()
    chosen = [hotpaths.BY_NAME[name] for name in json.loads(args.cases)]
    if args.baselines:
        chosen += hotpaths.BASELINES
    for case in chosen:
        # a case's work is made when it is timed, not before: pybase64's path is a process
        # setting, and a worker times one case
        runner.bench_time_func(case.name, made_then_timed, case)


#: each case's work, made on its first timing (calibration and values reuse it)
MADE: dict[str, hotpaths.Work] = {}


def made_then_timed(loops: int, case: hotpaths.Case) -> float:
    if case.name not in MADE:
        MADE[case.name] = case.make(1)
    func, call_args, _ = MADE[case.name]
    return cpu_timed(loops, func, call_args)


if __name__ == "__main__":
    main()
