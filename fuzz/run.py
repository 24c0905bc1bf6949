"""Run every fuzz harness for a bounded total time; print executions and findings per harness.

    python fuzz/run.py [--seconds TOTAL] [--per-harness SECONDS] [--jobs N] [--random]
                       [harness ...]

Each harness runs under atheris/libFuzzer with its seeds (fuzz/seeds/<name>), the inputs that
ever found a bug (fuzz/corpus/<name>), a scratch corpus (fuzz/work/<name>, not kept) and,
where there is one, a dictionary of tokens (fuzz/dicts/<name>.dict).
An input that finds a bug is copied into fuzz/corpus/<name>/ so that the tests replay it
until it is fixed, and the run fails. ``--random`` (chosen anyway when atheris is missing)
feeds plain random inputs instead: a smoke test, not coverage-guided fuzzing.
The last line reads "fuzz: N passed, M failed[, K skipped]" (harnesses; skipped: the hot
path it fuzzes is not in this tree).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

FUZZ_DIR = Path(__file__).resolve().parent
WORK_DIR = FUZZ_DIR / "work"
CRASH_DIR = FUZZ_DIR / "crashes"
CORPUS_DIR = FUZZ_DIR / "corpus"
SEEDS_DIR = FUZZ_DIR / "seeds"
DICTS_DIR = FUZZ_DIR / "dicts"
ARTIFACT_PREFIXES = ("crash-", "timeout-", "oom-", "leak-", "slow-unit-")
# (share of the time, libFuzzer -max_len): the stream harnesses run Python state machines
# per input and are ~10x slower an execution, so they get twice the time and shorter inputs
SETTINGS = {"relay": (2, 2048), "events": (2, 2048)}
DEFAULT_SETTINGS = (1, 8192)
EXECUTED = re.compile(r"stat::number_of_executed_units:\s*(\d+)")
PROGRESS = re.compile(r"^#(\d+)\s", re.MULTILINE)


@dataclass
class Result:
    name: str
    seconds: float
    executions: int
    findings: list[Path]
    returncode: int
    log: Path

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.findings


def harnesses() -> list[str]:
    return sorted(p.stem.removeprefix("fuzz_") for p in FUZZ_DIR.glob("fuzz_*.py"))


def missing_hot_paths(name: str) -> list[str]:
    """The hot paths a harness needs whose reference twin is not in this tree (yet)."""
    import _parity

    return _parity.missing_hot_paths(FUZZ_DIR / f"fuzz_{name}.py")


def have_atheris() -> bool:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return False
    return True


def run_one(name: str, seconds: int, random_mode: bool) -> Result:
    work, crashes = WORK_DIR / name, CRASH_DIR / name
    for folder in (work, crashes, CORPUS_DIR / name, SEEDS_DIR / name):
        folder.mkdir(parents=True, exist_ok=True)
    kept_before = kept_findings(name)
    script = str(FUZZ_DIR / f"fuzz_{name}.py")
    if random_mode:
        command = [sys.executable, script, "--random", str(seconds)]
    else:
        command = [sys.executable, script, f"-max_total_time={seconds}", "-print_final_stats=1",
                   "-timeout=30", "-rss_limit_mb=3072",
                   f"-max_len={SETTINGS.get(name, DEFAULT_SETTINGS)[1]}",
                   f"-artifact_prefix={crashes}/"]
        if (DICTS_DIR / f"{name}.dict").exists():  # tokens the mutator splices in
            command.append(f"-dict={DICTS_DIR / name}.dict")
        command += [str(work), str(SEEDS_DIR / name), str(CORPUS_DIR / name)]
    log = WORK_DIR / f"{name}.log"
    started = time.monotonic()
    with open(log, "w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, cwd=FUZZ_DIR,
                              timeout=seconds + 300)
    elapsed = time.monotonic() - started
    text = log.read_text(errors="replace")
    executed = EXECUTED.findall(text)
    progress = PROGRESS.findall(text)
    executions = int(executed[-1]) if executed else int(progress[-1]) if progress else 0
    findings = [keep(name, p) for p in sorted(crashes.iterdir())
                if p.name.startswith(ARTIFACT_PREFIXES)]
    findings += sorted(kept_findings(name) - kept_before - set(findings))
    return Result(name, elapsed, executions, findings, done.returncode, log)


def kept_findings(name: str) -> set[Path]:
    """The kept inputs of a harness (what --random mode and keep() write)."""
    return set((CORPUS_DIR / name).glob("finding-*"))


def keep(name: str, artifact: Path) -> Path:
    """Move a libFuzzer artifact into the kept corpus (named by content, like libFuzzer)."""
    data = artifact.read_bytes()
    kept = CORPUS_DIR / name / f"finding-{hashlib.sha1(data).hexdigest()}"
    kept.write_bytes(data)
    artifact.unlink()
    return kept


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="harnesses to run (default: all)")
    parser.add_argument("--seconds", type=int,
                        default=int(os.environ.get("FUZZ_SECONDS", "600")),
                        help="total wall time for all harnesses (default: $FUZZ_SECONDS or 600)")
    parser.add_argument("--per-harness", type=int, default=None,
                        help="seconds for each harness instead of a share of --seconds")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--random", action="store_true",
                        help="random inputs from Python's random module instead of atheris")
    args = parser.parse_args()

    names = args.names or harnesses()
    unknown = set(names) - set(harnesses())
    if unknown:
        parser.error(f"no such harness: {', '.join(sorted(unknown))}")
    random_mode = args.random
    if not random_mode and not have_atheris():
        print("fuzz: atheris is not installed: falling back on random inputs (a smoke test, "
              "not coverage-guided fuzzing)", flush=True)
        random_mode = True
    absent = {n: missing_hot_paths(n) for n in names}
    for name, missing in absent.items():
        if missing:
            print(f"fuzz: {name} not run: {', '.join(missing)} not in this tree", flush=True)
    names = [n for n in names if not absent[n]]
    skipped = sum(bool(m) for m in absent.values())
    if not names:
        print(f"fuzz: 0 passed, 1 failed, {skipped} skipped (no harness could run)")
        return 1
    jobs = max(1, min(args.jobs, len(names)))
    weights = {n: SETTINGS.get(n, DEFAULT_SETTINGS)[0] for n in names}
    unit = args.seconds * jobs / max(sum(weights.values()), jobs)
    # a few seconds of each slot go to start-up (imports, corpus loading)
    seconds = {n: args.per_harness or max(1, int(unit * weights[n]) - 3) for n in names}
    mode = "random inputs" if random_mode else "atheris/libFuzzer"
    print(f"fuzz: {len(names)} harnesses, {jobs} at a time, {mode}; seconds each: "
          + ", ".join(f"{n} {seconds[n]}" for n in names), flush=True)
    shutil.rmtree(CRASH_DIR, ignore_errors=True)

    longest_first = sorted(names, key=lambda n: -seconds[n])
    with ThreadPoolExecutor(jobs) as pool:
        done = dict(zip(longest_first, pool.map(
            lambda n: run_one(n, seconds[n], random_mode), longest_first)))
    results = [done[n] for n in names]

    print(f"{'harness':<10} {'seconds':>8} {'executions':>12} {'exec/s':>8} {'findings':>9}")
    for r in results:
        rate = r.executions / r.seconds if r.seconds else 0
        print(f"{r.name:<10} {r.seconds:>8.0f} {r.executions:>12,} {rate:>8,.0f} "
              f"{len(r.findings):>9}" + ("" if r.ok else f"   FAILED (log: {r.log})"))
        for path in r.findings:
            print(f"    kept {path.relative_to(FUZZ_DIR.parent)}")
        if r.returncode and not r.findings:
            print(f"    exit status {r.returncode} without an artifact; see {r.log}")
    failed = sum(not r.ok for r in results)
    print(f"fuzz: {len(results) - failed} passed, {failed} failed"
          + (f", {skipped} skipped" if skipped else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
